#include "runtime/launcher.h"

#include <signal.h>
#include <sys/wait.h>

#include <cerrno>
#include <utility>

#include "linux/syscalls.h"
#include "runtime/child.h"
#include "runtime/sync_channel.h"

namespace pulsebox::runtime {

using core::Error;
using core::UniqueFd;

namespace {

// init's stack: its setup is a flat list of calls, a few kB deep.
constexpr std::size_t kInitStackSize = 256 * 1024;

PULSEBOX_CHILD_CODE int init_entry(void* plan) {
  run_sandbox_init(*static_cast<const LaunchPlan*>(plan));
}

}  // namespace

LaunchedSandbox::LaunchedSandbox(LaunchedSandbox&& other) noexcept
    : pid(std::exchange(other.pid, -1)),
      pidfd(std::move(other.pidfd)),
      channel(std::move(other.channel)),
      init_stack(std::move(other.init_stack)),
      reaped_(std::exchange(other.reaped_, true)) {}

LaunchedSandbox& LaunchedSandbox::operator=(LaunchedSandbox&& other) noexcept {
  if (this == &other) return *this;
  if (pid > 0 && !reaped_) {
    ::kill(pid, SIGKILL);
    wait();
  }
  pid = std::exchange(other.pid, -1);
  pidfd = std::move(other.pidfd);
  channel = std::move(other.channel);
  init_stack = std::move(other.init_stack);
  reaped_ = std::exchange(other.reaped_, true);
  return *this;
}

LaunchedSandbox::~LaunchedSandbox() {
  // Never unmap the stack of a running init (nor let the plan go).
  if (pid > 0 && !reaped_) {
    ::kill(pid, SIGKILL);
    wait();
  }
}

int LaunchedSandbox::wait(rusage* usage) {
  int status = 0;
  if (pid <= 0 || reaped_) return status;
  while (::wait4(pid, &status, __WALL, usage) < 0 && errno == EINTR) {
  }
  reaped_ = true;
  return status;
}

core::Result<LaunchedSandbox> launch_sandbox(LaunchPlan& plan, UniqueFd supervisor_end,
                                             const BeforeGo& before_go) {
  if (plan.command_stack.base() == nullptr) {
    return Error(core::ErrorKind::kInternal, "launch", "the plan has no stack for the command");
  }
  LaunchedSandbox sandbox;
  PB_TRY(stack, linux_api::ChildStack::allocate(kInitStackSize));
  sandbox.init_stack = std::move(stack);
  int pidfd = -1;
  clone_args args{};
  // CLONE_VM: no copy of this process's page tables (see linux/clone.h).
  // The user and pid namespaces at birth (init is pid 1); init unshares the
  // others itself after "go", while this process prepares the rest of the
  // plan (LaunchPlan::kNamespacesAtClone).
  const std::uint64_t at_clone = plan.namespaces & LaunchPlan::kNamespacesAtClone;
  args.flags = at_clone | CLONE_PIDFD | CLONE_VM;
  args.pidfd = reinterpret_cast<std::uint64_t>(&pidfd);
  args.exit_signal = SIGCHLD;
  args.stack = reinterpret_cast<std::uint64_t>(sandbox.init_stack.base());
  args.stack_size = sandbox.init_stack.size();
  if (plan.cgroup_fd >= 0) {
    // Born in its cgroup: limits hold from the first instruction.
    args.flags |= CLONE_INTO_CGROUP;
    args.cgroup = static_cast<std::uint64_t>(plan.cgroup_fd);
  }
  bool in_cgroup = plan.cgroup_fd >= 0;
  long pid = linux_api::clone3_on_stack(&args, init_entry, &plan);
  if (pid == -ENOSYS || pid == -E2BIG) {
    in_cgroup = false;
    // Kernels before 5.3: clone() does the same without clone3's extras.
    pid = linux_api::clone_on_stack(at_clone | CLONE_PIDFD | CLONE_VM | SIGCHLD,
                                    sandbox.init_stack.top(), &pidfd, init_entry, &plan);
  }
  if (pid < 0) {
    return Error(core::ErrorKind::kUnavailable, "launch",
                 "creating the sandbox's namespaces (clone3)", static_cast<int>(-pid));
  }

  sandbox.pid = static_cast<pid_t>(pid);
  sandbox.pidfd.reset(pidfd);
  sandbox.channel = std::move(supervisor_end);
  auto abandon = [&](Error error) -> core::Result<LaunchedSandbox> {
    ::kill(sandbox.pid, SIGKILL);
    sandbox.wait();
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
