#include "runtime/child_steps.h"

#include <signal.h>
#include <sys/syscall.h>

#include <cstdint>

#include "linux/syscalls.h"

namespace pulsebox::runtime {
namespace {

using linux_api::kKernelSigsetBytes;
using linux_api::raw;

// The kernel's struct sigaction (no restorer is needed for SIG_DFL).
struct KernelSigaction {
  void (*handler)(int);
  unsigned long flags;
  void (*restorer)();
  std::uint64_t mask;
};

}  // namespace

[[noreturn]] PULSEBOX_CHILD_CODE void exit_now(int code) noexcept {
  for (;;)
    raw(SYS_exit_group, code);
}

PULSEBOX_CHILD_CODE void close_all_except(unsigned first, const int* keep, int count) noexcept {
  int sorted[kMaxKeptFds];
  int n = 0;
  for (int i = 0; i < count && n < kMaxKeptFds; ++i) {
    if (keep[i] < 0 || static_cast<unsigned>(keep[i]) < first) continue;
    int j = n++;
    while (j > 0 && sorted[j - 1] > keep[i]) {
      sorted[j] = sorted[j - 1];
      --j;
    }
    sorted[j] = keep[i];
  }
  unsigned next = first;
  for (int i = 0; i < n; ++i) {
    const auto fd = static_cast<unsigned>(sorted[i]);
    if (fd > next) raw(SYS_close_range, next, fd - 1, 0);
    next = fd + 1;
  }
  raw(SYS_close_range, next, ~0U, 0);
}

PULSEBOX_CHILD_CODE void reset_signals() noexcept {
  const KernelSigaction default_action{SIG_DFL, 0, nullptr, 0};
  for (int signal = 1; signal <= 64; ++signal) {
    if (signal == SIGKILL || signal == SIGSTOP) continue;
    raw(SYS_rt_sigaction, signal, &default_action, nullptr, kKernelSigsetBytes);
  }
  const std::uint64_t none = 0;
  raw(SYS_rt_sigprocmask, SIG_SETMASK, &none, nullptr, kKernelSigsetBytes);
}

}  // namespace pulsebox::runtime
