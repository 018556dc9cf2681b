// The launcher's kernel-facing steps behind one narrow interface (the model
// is youki's Syscall trait), so that the order of a launch and what happens
// when a step fails are tested as data, without privileges: the launcher
// (runtime/launcher.cc) decides, LaunchSyscalls does.
//
// Usage:
//   launch_sandbox(plan, supervisor_end, before_go);     // the kernel's steps
//   launch_sandbox(plan, supervisor_end, before_go, fake);
// where `fake` (tests/helpers/recording_launch_syscalls.h) starts nothing,
// logs each call with its arguments and can fail any step. The object passed
// must outlive the LaunchedSandbox it launched: that object kills and reaps
// init through it.
//
// What stays outside: the launcher's own memory (init's stack, the thread
// init is the vfork child of). They need no privileges, and a test's fake
// runs on that very thread as init's parent.
//
// The kernel's implementation is the launcher's code as it was; the seam
// adds one virtual call per step and no allocation.
#pragma once

#include <linux/sched.h>
#include <sys/resource.h>
#include <sys/types.h>

#include <atomic>

#include "core/result.h"
#include "linux/userns.h"
#include "runtime/launch_plan.h"

namespace pulsebox::runtime {

// How init is started, filled by the launcher: clone3's arguments (the
// namespaces at birth, the stack, CLONE_INTO_CGROUP), clone()'s for when
// clone3 is missing, and where the kernel stores init's pid and pidfd. The
// kernel stores them before init runs, while the parent thread is still in
// the call: the launching thread reads them with std::atomic_ref as soon as
// they are there. Lives as long as the thread init is the child of.
struct InitClone {
  clone_args args{};
  // clone() without clone3 (before Linux 5.3, or a container's seccomp
  // profile says ENOSYS): no CLONE_INTO_CGROUP, and the pid comes from the
  // pidfd. The stack is args.stack's, given by its top.
  unsigned long clone_flags = 0;
  char* stack_top = nullptr;
  const LaunchPlan* plan = nullptr;
  int pid = 0;  // clone3's CLONE_PARENT_SETTID
  int pidfd = -1;
  std::atomic<long> error{0};  // the system call's -errno, when it failed
  std::atomic<bool> without_clone3{false};
};

class LaunchSyscalls {
 public:
  virtual ~LaunchSyscalls() = default;

  // clone3(init.args), init running the plan (runtime/child.h). Called from
  // the thread init is the vfork child of: returns when init has exited, or
  // at once when the call failed. init's pid, or -errno.
  virtual long clone3_init(InitClone& init) = 0;
  // The same with clone(init.clone_flags) on init.stack_top; the pidfd goes
  // to init.pidfd, the pid nowhere.
  virtual long clone_init(InitClone& init) = 0;
  // The pid of a pidfd's process in this pid namespace, or -errno.
  virtual long pid_of_pidfd(int pidfd) = 0;
  // /proc/PID/{setgroups,uid_map,gid_map}, or the setuid helpers.
  virtual core::Status write_id_maps(pid_t pid, const linux_api::IdMaps& maps) = 0;
  // Go on the supervisor's end of the channel (runtime/sync_channel.h),
  // passing fds[0..count) (the v1 cgroups' `tasks` files init joins).
  virtual core::Status send_go(int channel, const int* fds, int count) = 0;
  // SIGKILL to init.
  virtual void kill_init(pid_t pid) = 0;
  // Waits for init to exit and reaps it; its wait status.
  virtual int reap_init(pid_t pid, rusage* usage) = 0;
  // Kills and reaps init known only by its pidfd.
  virtual void kill_and_reap_pidfd(int pidfd) = 0;
};

// The kernel's steps (what the launcher always did).
LaunchSyscalls& kernel_launch_syscalls();

}  // namespace pulsebox::runtime
