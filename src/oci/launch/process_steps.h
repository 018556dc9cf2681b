// Steps the container's process (container_init.cc) and exec's process
// (join.cc) both take between clone and execve. Child code: raw system
// calls on the plan's data, no allocation. A failed step is reported
// through `fail` and the process exits with runtime::kSetupFailed.
#pragma once

#include "linux/clone.h"
#include "linux/syscalls.h"
#include "oci/launch/container_plan.h"
#include "runtime/child_steps.h"

namespace pulsebox::oci::launch {

// Fails `stage` with the errno of `result` when it is negative.
PULSEBOX_CHILD_CODE inline void check(const runtime::Failure& fail, const char* stage, long result,
                                      const char* detail = "") noexcept {
  if (result < 0) fail(stage, linux_api::raw_error(result), detail);
}

// The plan's stdio on fds 0-2; a descriptor already in place loses
// close-on-exec.
void connect_stdio(const ContainerPlan& plan, const runtime::Failure& fail) noexcept;

// Writes `value` in decimal to /proc/self/oom_score_adj: 0 or -errno.
long write_oom_score_adj(int value) noexcept;

// The stage names a terminal's steps fail with.
struct TerminalStages {
  const char* session;
  const char* opening;
  const char* naming;
  const char* binding;  // only with a console root
  const char* connecting;
  const char* sending;
};

// A pty of the caller's devpts (its /dev/ptmx) as the controlling terminal
// of a new session and as fds 0-2, its master sent on the plan's console
// socket (closed after). With `console_root_fd` >= 0 the slave is bound on
// /dev/console in that root too.
void set_up_terminal(const ContainerPlan& plan, const TerminalStages& stages, int console_root_fd,
                     const runtime::Failure& fail) noexcept;

// Moves this (single-threaded) process into the v1 cgroup leaves by writing
// "0" to each of plan.cgroup_task_fds, then closes them.
void join_cgroups(const ContainerPlan& plan, const runtime::Failure& fail) noexcept;

// Appends plan.cgroup_task_fds to `keep` (for close_all_except); returns the
// new count.
int keep_cgroup_task_fds(const ContainerPlan& plan, int* keep, int kept) noexcept;

// process.rlimits, each in turn.
void set_rlimits(const ContainerPlan& plan, const runtime::Failure& fail) noexcept;

// Ready, then waits for Detach (the parent-death signal is dropped then):
// exits if create is gone.
void report_ready_and_detach(int channel) noexcept;

// Closes all but stdio, the preserved fds, the channel and the exec fifo's
// read end (both close-on-exec: their closing tells execve), and execs the
// planner's candidates in turn, keeping the most telling error (as execvp:
// EACCES beats ENOENT); a failure is sent on the channel. With
// plan.stop_before_exec (only exec sets it) the process stops itself just
// before execve.
[[noreturn]] void exec_program(const ContainerPlan& plan, int channel) noexcept;

}  // namespace pulsebox::oci::launch
