// `kill [--all] ID [SIGNAL]`: every signal goes through a pidfd, so a pid
// the kernel reused for another process is never signalled.
#include <cerrno>

#include "linux/syscalls.h"
#include "oci/cgroups.h"
#include "oci/commands/commands.h"
#include "oci/invalid_input.h"

namespace pulsebox::oci::commands {

namespace {

// Ends in runc's own words: containerd's shim matches "container not
// running" to learn that the process already finished (a not-found, not a
// failed kill).
core::Error not_running(std::string_view id) {
  return oci::invalid("container " + std::string(id) + " is not running (container not running)");
}

}  // namespace

core::Status kill(StateStore& store, std::string_view id, int signal, bool all) {
  PB_TRY(dir, store.open(id, false));
  PB_TRY(record, dir.read_record());
  const Status status = status_of(dir, record);
  if (status != Status::Created && status != Status::Running) return not_running(id);
  if (all) {
    if (record.cgroup_leaves.empty())
      return core::Error(core::ErrorKind::kUnsupported, "oci",
                         "kill --all: container " + std::string(id) +
                             " has no cgroup to find its processes in; kill it without --all");
    return ContainerCgroup::from_record(record.cgroup_leaves).kill_all(signal);
  }
  auto pidfd = open_verified_pidfd(record.process);
  if (!pidfd) {
    // It ended (or its pid went to another process) since the status check.
    if (pidfd.error().kind() == core::ErrorKind::kUnavailable) return not_running(id);
    return std::move(pidfd).error();
  }
  if (linux_api::sys_pidfd_send_signal(pidfd->get(), signal) != 0) {
    if (errno == ESRCH) return not_running(id);
    return core::Error::from_errno("oci",
                                   "signalling process " + std::to_string(record.process.pid));
  }
  return core::ok_status();
}

}  // namespace pulsebox::oci::commands
