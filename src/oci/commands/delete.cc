// `delete [--force] ID` and `reconcile`: the same idempotent steps, so a
// container left half made by a killed create, or half removed by a killed
// delete, is removed by running them again.
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>

#include "core/trace.h"
#include "linux/syscalls.h"
#include "oci/cgroups.h"
#include "oci/commands/commands.h"
#include "oci/hooks.h"
#include "oci/invalid_input.h"
#include "oci/process_ref.h"

namespace pulsebox::oci::commands {

namespace {

constexpr int kExitWaitMs = 2000;
constexpr int kExitPollMs = 10;

// Waits until the killed process has ended or is ending. A pid namespace's
// init ends only once every process of its namespace is reaped, and one whose
// parent was outside it (an exec'd process whose `exec` returned) is reaped
// by the host's init, which may take over a second; by then the kernel has
// killed them all and init runs nothing of its own (PF_EXITING).
bool ended_or_ending(int pidfd, pid_t pid) {
  for (int waited = 0; waited < kExitWaitMs; waited += kExitPollMs) {
    pollfd ready{pidfd, POLLIN, 0};
    if (::poll(&ready, 1, kExitPollMs) == 1) return true;
    // Read while the pidfd said alive: a pid reused after that is seen as
    // ended at the next poll.
    const auto stat = read_process_stat(pid);
    if (!stat || stat->exiting) return true;
  }
  return false;
}

// The delete steps on a directory held with LOCK_EX. `record` is null when
// there is none (a create killed before writing it).
core::Status destroy(ContainerDir& dir, const ContainerRecord* record) {
  if (record != nullptr) {
    // The process only through a verified pidfd: a reused pid is left alone.
    if (auto pidfd = open_verified_pidfd(record->process)) {
      (void)linux_api::sys_pidfd_send_signal(pidfd->get(), SIGKILL);
      if (!ended_or_ending(pidfd->get(), record->process.pid))
        return core::Error(core::ErrorKind::kResource, "oci",
                           "container " + dir.id() + ": process " +
                               std::to_string(record->process.pid) +
                               " did not end after SIGKILL; run delete again");
    }
    // Crash points (tests/oci/oci_crash_test.cc): a delete killed at any
    // of them is finished by the next delete or reconcile.
    core::trace_phase("oci: delete process killed");
    auto cgroup = ContainerCgroup::from_record(record->cgroup_leaves);
    PB_CHECK(cgroup.kill_all(SIGKILL));
    PB_CHECK(cgroup.remove());
    // Leaves a create killed meanwhile made but never listed: removed only
    // when empty (a populated one is not the container's: create refuses
    // those).
    for (const auto& leaf : record->planned_cgroup_leaves) {
      if (std::find(record->cgroup_leaves.begin(), record->cgroup_leaves.end(), leaf) ==
          record->cgroup_leaves.end())
        (void)::rmdir(leaf.c_str());
    }
    core::trace_phase("oci: delete cgroup removed");
    // Only for a container create finished; a delete run again after a
    // failure here runs them again.
    if (record->phase == ContainerRecord::Phase::Created)
      run_recorded_hooks(*record, "poststop", "stopped");
  }
  return dir.remove();
}

}  // namespace

core::Status remove(StateStore& store, std::string_view id, bool force) {
  PB_TRY(dir, store.open(id, true));
  auto record = dir.read_record();
  if (record) {
    if (!force && status_of(dir, *record) == Status::Running)
      return oci::invalid("container " + std::string(id) + " is running: stop it first (kill " +
                          std::string(id) + " KILL) or use --force");
    return destroy(dir, &*record);
  }
  // A damaged record (not a missing one) is kept for a look unless forced.
  if (!force && dir.has_record())
    return std::move(record).error().with_context("delete " + std::string(id) +
                                                  " (--force removes it)");
  return destroy(dir, nullptr);
}

std::vector<std::string> reconcile(StateStore& store, std::vector<std::string>& problems) {
  std::vector<std::string> removed = store.remove_stale_staging();
  for (const auto& id : store.ids()) {
    auto dir = store.try_open_exclusive(id);
    if (!dir) continue;  // still held: a create or delete at work, or gone meanwhile
    auto record = dir->read_record();
    if (record && status_of(*dir, *record) != Status::Stopped) continue;
    const auto status = destroy(*dir, record ? &*record : nullptr);
    if (status.ok()) {
      removed.push_back(id);
    } else {
      problems.push_back(id + ": " + status.error().to_string());
    }
  }
  return removed;
}

}  // namespace pulsebox::oci::commands
