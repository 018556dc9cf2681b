#include "runtime/launcher.h"

#include <signal.h>
#include <sys/wait.h>

#include <cerrno>

#include "linux/syscalls.h"
#include "runtime/child.h"
#include "runtime/sync_channel.h"

namespace pulsebox::runtime {

using core::Error;
using core::UniqueFd;

core::Result<LaunchedSandbox> launch_sandbox(LaunchPlan& plan, UniqueFd supervisor_end,
                                             const BeforeGo& before_go) {
  int pidfd = -1;
  clone_args args{};
  args.flags = plan.namespaces | CLONE_PIDFD;
  args.pidfd = reinterpret_cast<std::uint64_t>(&pidfd);
  args.exit_signal = SIGCHLD;
  if (plan.cgroup_fd >= 0) {
    // Born in its cgroup: limits hold from the first instruction.
    args.flags |= CLONE_INTO_CGROUP;
    args.cgroup = static_cast<std::uint64_t>(plan.cgroup_fd);
  }
  bool in_cgroup = plan.cgroup_fd >= 0;
  long pid = linux_api::sys_clone3(&args);
  if (pid < 0 && (errno == ENOSYS || errno == E2BIG)) {
    in_cgroup = false;
    // Kernels before 5.3: clone() does the same without clone3's extras.
    pid = linux_api::sys_clone_fork(plan.namespaces | CLONE_PIDFD | SIGCHLD, &pidfd);
  }
  if (pid < 0) {
    return Error::from_errno("launch", "creating the sandbox's namespaces (clone3)")
        .with_kind(core::ErrorKind::kUnavailable);
  }
  if (pid == 0) run_sandbox_init(plan);

  LaunchedSandbox sandbox;
  sandbox.pid = static_cast<pid_t>(pid);
  sandbox.pidfd.reset(pidfd);
  sandbox.channel = std::move(supervisor_end);
  auto abandon = [&](Error error) -> core::Result<LaunchedSandbox> {
    ::kill(sandbox.pid, SIGKILL);
    int status = 0;
    ::waitpid(sandbox.pid, &status, 0);
    return error;
  };
  if (auto written = linux_api::write_id_maps(sandbox.pid, plan.id_maps); !written) {
    return abandon(std::move(written).error().with_context("writing the sandbox's id maps"));
  }
  if (before_go) {
    if (auto placed = before_go(sandbox.pid, in_cgroup); !placed) {
      return abandon(std::move(placed).error().with_context("placing the sandbox in its cgroups"));
    }
  }
  if (!send_go(sandbox.channel.get())) {
    return abandon(Error::from_errno("launch", "starting the sandbox's setup"));
  }
  return sandbox;
}

}  // namespace pulsebox::runtime
