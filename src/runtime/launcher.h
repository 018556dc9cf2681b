// Starting a sandbox from a LaunchPlan: clone3 (or clone) into new user and
// pid namespaces with a pidfd (init makes the plan's other namespaces
// itself), id maps written from here, then "go" (init makes the plan's base
// mounts). The caller then writes the rest of the plan and
// sends PlanReady (runtime/sync_channel.h) for init to finish the setup.
//
// init shares this process's memory (CLONE_VM) on a stack of its own (see
// linux/clone.h): the LaunchPlan and the LaunchedSandbox must both outlive
// it. LaunchedSandbox makes sure of its part: if it is destroyed before
// wait() reaped init, it kills and reaps init first.
//
// init is the vfork child (CLONE_VFORK) of a thread of its own, which waits
// in clone3 until init has exited. The kernel's OOM killer never chooses a
// task in the middle of a vfork (oom_badness()), so a sandbox that exhausts
// its memory cgroup can never make it choose init, and with init every
// process that shares its memory: this one. Only the sandbox's own
// processes, each with memory of its own after its execve, can be chosen.
// (The command is init's vfork child until its execve, for the same reason.)
//
// Every step that asks the kernel goes through a LaunchSyscalls
// (runtime/launch_syscalls.h): the kernel's by default, a recording fake in
// the unit tests (tests/unit/launcher_test.cc).
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <functional>
#include <thread>

#include "core/result.h"
#include "core/unique_fd.h"
#include "linux/clone.h"
#include "runtime/launch_plan.h"
#include "runtime/launch_syscalls.h"

namespace pulsebox::runtime {

class LaunchedSandbox {
 public:
  LaunchedSandbox() = default;
  // Kills and reaps its init through `syscalls`, which must outlive it.
  explicit LaunchedSandbox(LaunchSyscalls& syscalls) : syscalls_(&syscalls) {}
  LaunchedSandbox(LaunchedSandbox&& other) noexcept;
  // Ends (kills and reaps) the init this one holds first, if any.
  LaunchedSandbox& operator=(LaunchedSandbox&& other) noexcept;
  LaunchedSandbox(const LaunchedSandbox&) = delete;
  LaunchedSandbox& operator=(const LaunchedSandbox&) = delete;
  ~LaunchedSandbox();

  // Waits for init to exit and reaps it (wait4). Returns its wait status.
  int wait(rusage* usage = nullptr);

  pid_t pid = -1;        // init, as seen from here
  core::UniqueFd pidfd;  // init's pidfd
  core::UniqueFd channel;
  linux_api::ChildStack init_stack;  // destroyed last: init runs on it
  // The thread init is the vfork child of; it ends once init has exited.
  std::thread init_parent;

 private:
  void end_init();
  bool reaped_ = false;
  // What launched init, and kills and reaps it.
  LaunchSyscalls* syscalls_ = &kernel_launch_syscalls();
};

// plan.channel_fd, stdout_fd, stderr_fd are the child's ends; the caller
// closes its copies of the pipe write ends after this returns. On error the
// child (if any) has been killed and reaped.
// `before_go` runs after the id maps are written, while the child makes its
// namespaces and then waits for "go": the place to make the cgroups it
// joins (their `tasks` files, plan.cgroup_task_fds, travel with "go"), to
// move it into the others by pid, and to write what it reads after "go"
// (the plan's base mounts).
// `in_cgroup` says clone3 already created it in plan.cgroup_fd.
// The steps, in order, each through `syscalls` (which must outlive the
// result): clone3 (clone when clone3 is missing: ENOSYS, E2BIG), the pid
// from the pidfd (after clone), the id maps, `before_go`, Go. A failure
// after init exists kills and reaps it and sends nothing more.
using BeforeGo = std::function<core::Status(pid_t pid, bool in_cgroup)>;
core::Result<LaunchedSandbox> launch_sandbox(LaunchPlan& plan, core::UniqueFd supervisor_end,
                                             const BeforeGo& before_go = {},
                                             LaunchSyscalls& syscalls = kernel_launch_syscalls());

}  // namespace pulsebox::runtime
