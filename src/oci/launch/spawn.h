// Starting an OCI container's process (design §1.2 fast path, §1.3 steps
// 6-8). spawn_container clones it with clone3 (no CLONE_VM: it outlives
// create and owns its memory; CLONE_PIDFD; the plan's user and pid
// namespaces; CLONE_INTO_CGROUP when the plan has a cgroup fd) and writes
// its id maps. The caller then drives the handshake:
//
//   auto process = spawn_container(plan);     // cloned, maps written
//   // write the pid into v1 cgroup leaves, record pid + start time
//   process->go();                             // the setup list runs
//   process->wait_ready(timeout);              // set up, waiting for Detach
//   process->detach(timeout);                  // PDEATHSIG cleared; create may exit
//   process->wait_exec(timeout);               // exec only: the program runs
//
// A failed setup step comes back from wait_ready (or detach) as a
// core::Error: stage() is the child's stage, error_number() its errno and
// message() "stage detail" ("changing to the working directory /x").
// Nothing is killed on failure: kill() does it.
//
// A plan with namespaces to join (join_namespaces, or exec's join_pidfd)
// takes the join path (join.h): a first stage joins and clones the
// process, which is still this process's child; the handshake is the same.
// With join_pidfd the process runs exec's setup list instead of the
// container's.
#pragma once

#include <sys/types.h>

#include "core/result.h"
#include "core/unique_fd.h"
#include "oci/launch/container_plan.h"
#include "runtime/sync_channel.h"

namespace pulsebox::oci::launch {

class ContainerProcess {
 public:
  ContainerProcess(pid_t pid, core::UniqueFd pidfd, core::UniqueFd channel)
      : pid_(pid), pidfd_(std::move(pidfd)), channel_(std::move(channel)) {}

  pid_t pid() const { return pid_; }
  int pidfd() const { return pidfd_.get(); }
  int channel() const { return channel_.get(); }

  core::Status go();
  core::Status wait_ready(int timeout_ms);
  core::Status detach(int timeout_ms);
  // After detach, with no exec fifo to wait on: ok once execve has
  // replaced the process (its CLOEXEC end of the channel closed), or the
  // failed execve's error ("executing PROGRAM", its errno). End-of-file
  // also comes from a process killed before execve; its exit status tells.
  core::Status wait_exec(int timeout_ms);
  // SIGKILL through the pidfd (never a reused pid).
  core::Status kill();

 private:
  core::Status expect(runtime::ChildMessageKind kind, const char* waiting_for, int timeout_ms);

  pid_t pid_;
  core::UniqueFd pidfd_;
  core::UniqueFd channel_;
};

core::Result<ContainerProcess> spawn_container(const ContainerPlan& plan);

}  // namespace pulsebox::oci::launch
