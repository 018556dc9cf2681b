#include "runtime/launch_syscalls.h"

#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>

#include "core/fs.h"
#include "linux/clone.h"
#include "linux/syscalls.h"
#include "runtime/child.h"
#include "runtime/sync_channel.h"

namespace pulsebox::runtime {

namespace {

PULSEBOX_CHILD_CODE int init_entry(void* argument) {
  run_sandbox_init(*static_cast<const InitClone*>(argument)->plan);
}

class KernelLaunchSyscalls final : public LaunchSyscalls {
 public:
  long clone3_init(InitClone& init) override {
    return linux_api::clone3_on_stack(&init.args, init_entry, &init);
  }

  long clone_init(InitClone& init) override {
    return linux_api::clone_on_stack(init.clone_flags, init.stack_top, &init.pidfd, init_entry,
                                     &init);
  }

  // /proc fdinfo's "Pid:" line.
  long pid_of_pidfd(int pidfd) override {
    auto read = core::read_regular_file("/proc/self/fdinfo/" + std::to_string(pidfd), 4096,
                                        "the pidfd's fdinfo");
    const std::string text = read ? std::move(read).value() : "";
    const auto at = text.find("\nPid:");
    return at == std::string::npos ? -ESRCH : std::strtol(text.c_str() + at + 5, nullptr, 10);
  }

  core::Status write_id_maps(pid_t pid, const linux_api::IdMaps& maps) override {
    return linux_api::write_id_maps(pid, maps);
  }

  core::Status send_go(int channel, const int* fds, int count) override {
    if (!runtime::send_go(channel, fds, count)) {
      return core::Error::from_errno("launch", "starting the sandbox's setup");
    }
    return core::ok_status();
  }

  void kill_init(pid_t pid) override { ::kill(pid, SIGKILL); }

  int reap_init(pid_t pid, rusage* usage) override {
    int status = 0;
    while (::wait4(pid, &status, __WALL, usage) < 0 && errno == EINTR) {
    }
    return status;
  }

  void kill_and_reap_pidfd(int pidfd) override {
    linux_api::sys_pidfd_send_signal(pidfd, SIGKILL);
    siginfo_t reaped{};
    ::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd), &reaped, WEXITED);
  }
};

}  // namespace

LaunchSyscalls& kernel_launch_syscalls() {
  static KernelLaunchSyscalls kernel;
  return kernel;
}

}  // namespace pulsebox::runtime
