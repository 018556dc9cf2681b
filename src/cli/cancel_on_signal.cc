#include "cli/cancel_on_signal.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

namespace pulsebox::cli {
namespace {

constexpr int kSignals[] = {SIGTERM, SIGINT, SIGHUP};

std::atomic<int> write_fd{-1};
std::atomic<bool> signalled{false};

// Async-signal-safe: a write and, the second time, the default action.
void on_signal(int signal) {
  const int saved_errno = errno;
  if (signalled.exchange(true)) {
    ::signal(signal, SIG_DFL);
    ::raise(signal);
    return;
  }
  const int fd = write_fd.load();
  if (fd >= 0) {
    const char byte = 1;
    (void)!::write(fd, &byte, 1);
  }
  errno = saved_errno;
}

}  // namespace

CancelOnSignal::CancelOnSignal() {
  int ends[2];
  if (::pipe2(ends, O_CLOEXEC | O_NONBLOCK) != 0) return;
  read_end_ = core::UniqueFd(ends[0]);
  write_end_ = core::UniqueFd(ends[1]);
  write_fd = write_end_.get();
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  for (int i = 0; i < 3; ++i)
    ::sigaction(kSignals[i], &action, &previous_[i]);
}

CancelOnSignal::~CancelOnSignal() {
  if (!read_end_) return;
  for (int i = 0; i < 3; ++i)
    ::sigaction(kSignals[i], &previous_[i], nullptr);
  write_fd = -1;
}

}  // namespace pulsebox::cli
