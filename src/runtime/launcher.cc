#include "runtime/launcher.h"

#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <memory>
#include <utility>

#include "core/trace.h"
#include "runtime/sync_channel.h"

namespace pulsebox::runtime {

using core::Error;
using core::UniqueFd;

namespace {

// init's stack: its setup is a flat list of calls, a few kB deep (the stack
// is populated up front: linux/clone.h).
constexpr std::size_t kInitStackSize = 32 * 1024;

// Go carries every `tasks` file init joins.
static_assert(LaunchPlan::kMaxCgroupTaskFiles <= kMaxGoFds);

}  // namespace

LaunchedSandbox::LaunchedSandbox(LaunchedSandbox&& other) noexcept
    : pid(std::exchange(other.pid, -1)),
      pidfd(std::move(other.pidfd)),
      channel(std::move(other.channel)),
      init_stack(std::move(other.init_stack)),
      init_parent(std::move(other.init_parent)),
      reaped_(std::exchange(other.reaped_, true)),
      syscalls_(other.syscalls_) {}

LaunchedSandbox& LaunchedSandbox::operator=(LaunchedSandbox&& other) noexcept {
  if (this == &other) return *this;
  end_init();
  pid = std::exchange(other.pid, -1);
  pidfd = std::move(other.pidfd);
  channel = std::move(other.channel);
  init_stack = std::move(other.init_stack);
  init_parent = std::move(other.init_parent);
  reaped_ = std::exchange(other.reaped_, true);
  syscalls_ = other.syscalls_;
  return *this;
}

LaunchedSandbox::~LaunchedSandbox() {
  end_init();
}

// Never unmap the stack of a running init (nor let the plan go).
void LaunchedSandbox::end_init() {
  if (pid > 0 && !reaped_) syscalls_->kill_init(pid);
  wait();
}

int LaunchedSandbox::wait(rusage* usage) {
  int status = 0;
  if (pid > 0 && !reaped_) {
    status = syscalls_->reap_init(pid, usage);
    reaped_ = true;
  }
  // init has exited: its parent thread's clone3 has returned, or does now.
  if (init_parent.joinable()) init_parent.join();
  return status;
}

core::Result<LaunchedSandbox> launch_sandbox(LaunchPlan& plan, UniqueFd supervisor_end,
                                             const BeforeGo& before_go, LaunchSyscalls& syscalls) {
  if (plan.command_stack.base() == nullptr) {
    return Error(core::ErrorKind::kInternal, "launch", "the plan has no stack for the command");
  }
  LaunchedSandbox sandbox(syscalls);
  // Pooled for the init of a new pid namespace: reaped (wait()) before its
  // stack goes back, it is the last of the namespace's processes.
  const auto reuse = (plan.namespaces & CLONE_NEWPID) != 0 ? linux_api::StackReuse::kPooled
                                                           : linux_api::StackReuse::kUnmap;
  PB_TRY(stack, linux_api::ChildStack::allocate(kInitStackSize, reuse));
  sandbox.init_stack = std::move(stack);
  core::trace_phase("launch: init's stack made");
  auto clone = std::make_shared<InitClone>();
  clone->plan = &plan;
  clone_args& args = clone->args;
  // CLONE_VM: no copy of this process's page tables (see linux/clone.h);
  // CLONE_VFORK: see launcher.h. The user and pid namespaces at birth (init
  // is pid 1); init unshares the others itself after "go", while this
  // process prepares the rest of the plan (LaunchPlan::kNamespacesAtClone).
  const std::uint64_t at_clone = plan.namespaces & LaunchPlan::kNamespacesAtClone;
  args.flags = at_clone | CLONE_PIDFD | CLONE_PARENT_SETTID | CLONE_VM | CLONE_VFORK;
  args.pidfd = reinterpret_cast<std::uint64_t>(&clone->pidfd);
  args.parent_tid = reinterpret_cast<std::uint64_t>(&clone->pid);
  args.exit_signal = SIGCHLD;
  args.stack = reinterpret_cast<std::uint64_t>(sandbox.init_stack.base());
  args.stack_size = sandbox.init_stack.size();
  if (plan.cgroup_fd >= 0) {
    // Born in its cgroup: limits hold from the first instruction.
    args.flags |= CLONE_INTO_CGROUP;
    args.cgroup = static_cast<std::uint64_t>(plan.cgroup_fd);
  }
  clone->clone_flags = at_clone | CLONE_PIDFD | CLONE_VM | CLONE_VFORK | SIGCHLD;
  clone->stack_top = sandbox.init_stack.top();
  // The thread stays in clone3 until init exits; only a failed clone3
  // returns at once.
  sandbox.init_parent = std::thread([clone, &syscalls] {
    // init starts with this thread's signal mask, on this process's memory:
    // with every signal blocked, no handler of pulsebox's (a run's
    // cancel-on-signal) runs there before init resets them all to the
    // defaults and unblocks them (run_sandbox_init). This thread needs none.
    sigset_t all;
    ::sigfillset(&all);
    ::pthread_sigmask(SIG_SETMASK, &all, nullptr);
    long result = syscalls.clone3_init(*clone);
    if (result == -ENOSYS || result == -E2BIG) {
      clone->without_clone3 = true;
      result = syscalls.clone_init(*clone);
    }
    if (result < 0) clone->error = result;
  });
  // The kernel stores init's pid and pidfd before init runs, while its
  // parent thread is still in the call: this thread waits for them on its
  // CPU, as if it had made the call itself. (Waiting in a read until init
  // signalled left it queued behind init's first time slice: the scheduler
  // often runs a woken thread on its waker's CPU.)
  auto stored = [&clone] {
    if (std::atomic_ref<int>(clone->pidfd).load(std::memory_order_acquire) < 0) return false;
    return clone->without_clone3 ||
           std::atomic_ref<int>(clone->pid).load(std::memory_order_acquire) != 0;
  };
  while (clone->error == 0 && !stored())
    ::sched_yield();
  core::trace_phase("launch: init started");
  if (clone->error < 0) {
    sandbox.init_parent.join();
    return Error(core::ErrorKind::kUnavailable, "launch",
                 "creating the sandbox's namespaces (clone3)", static_cast<int>(-clone->error));
  }
  const bool in_cgroup = plan.cgroup_fd >= 0 && !clone->without_clone3;
  const long pid = clone->without_clone3 ? syscalls.pid_of_pidfd(clone->pidfd) : clone->pid;

  sandbox.pidfd.reset(clone->pidfd);
  if (pid <= 0) {
    syscalls.kill_and_reap_pidfd(sandbox.pidfd.get());
    sandbox.init_parent.join();  // init has exited: clone() returned
    return Error(core::ErrorKind::kUnavailable, "launch", "finding the sandbox's init (pidfd)",
                 static_cast<int>(-pid));
  }
  sandbox.pid = static_cast<pid_t>(pid);
  sandbox.channel = std::move(supervisor_end);
  auto abandon = [&](Error error) -> core::Result<LaunchedSandbox> {
    syscalls.kill_init(sandbox.pid);
    sandbox.wait();
    return error;
  };
  if (auto written = syscalls.write_id_maps(sandbox.pid, plan.id_maps); !written) {
    return abandon(std::move(written).error().with_context("writing the sandbox's id maps"));
  }
  core::trace_phase("launch: id maps written");
  core::trace_phase("launch: before go");
  if (before_go) {
    if (auto placed = before_go(sandbox.pid, in_cgroup); !placed) {
      return abandon(std::move(placed).error().with_context("placing the sandbox in its cgroups"));
    }
  }
  core::trace_phase("launch: placed in cgroups");
  if (auto sent =
          syscalls.send_go(sandbox.channel.get(), plan.cgroup_task_fds, plan.cgroup_task_fd_count);
      !sent) {
    return abandon(std::move(sent).error());
  }
  return sandbox;
}

}  // namespace pulsebox::runtime
