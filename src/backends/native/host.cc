#include "backends/native/host.h"

#include <signal.h>
#include <unistd.h>

#include "backends/native/capabilities.h"
#include "backends/native/prestart.h"
#include "backends/native/staging.h"
#include "backends/native/state_dir.h"
#include "core/fs.h"
#include "core/trace.h"
#include "linux/syscalls.h"

namespace pulsebox::backends::native {

namespace fs = std::filesystem;

NativeHost::NativeHost(NativeBackendOptions options, bool prestart) : options_(std::move(options)) {
  if (options_.state_dir.empty()) options_.state_dir = default_state_dir();
  // Threads other than the caller's use it (prestart): never relative to a
  // working directory that may change.
  if (prestart) options_.state_dir = fs::absolute(options_.state_dir);
  filters_ = std::make_unique<seccomp::FilterCache>(options_.state_dir / "seccomp");
  if (prestart) prestart_ = std::make_unique<Prestart>(*this);
}

Availability NativeHost::availability() const {
  const HostProbe& host = probe();
  if (!host.namespaces_ok) return {false, host.namespaces_reason + "; " + namespaces_fix()};
  return {true, "user, mount, pid, ipc, uts, cgroup and network namespaces work on this host"};
}

const HostProbe& NativeHost::probe() const {
  std::call_once(probe_once_, [this] { probe_ = remembered_or_fresh_probe(options_.state_dir); });
  return probe_;
}

const linux_api::CgroupHost& NativeHost::cgroups() const {
  std::call_once(cgroups_once_, [this] { cgroups_ = linux_api::discover_cgroups(); });
  return cgroups_;
}

const NetworkHostFacts& NativeHost::network_facts() const {
  std::call_once(network_once_, [this] { network_facts_ = probe_network_host(); });
  return network_facts_;
}

NativeRuntime::Stats NativeHost::stats() const {
  const std::lock_guard lock(stats_mutex_);
  return stats_;
}

void NativeHost::count(int Stats::*counter) {
  const std::lock_guard lock(stats_mutex_);
  ++(stats_.*counter);
}

bool NativeHost::holds_run(const std::string& id) const {
  const std::lock_guard lock(runs_mutex_);
  return own_runs_.count(id) > 0;
}

// Every run's lock file sits in runs/ (flock-ed) until it has cleaned up,
// cgroups included; one nobody holds is a crashed run's (reconcile() has
// the details). With none, start-up skips scanning each cgroup hierarchy.
std::vector<std::string> NativeHost::reconcile_if_needed() {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(options_.state_dir / "runs", ec)) {
    const fs::path path = entry.path();
    // This process's own runs (a server's, started ahead or running) hold
    // their locks: no need to try them.
    if (holds_run(path.stem().string())) continue;
    if (core::left_by_crashed_run(path)) return reconcile();
  }
  return {};
}

std::vector<std::string> NativeHost::reconcile() {
  // Mounts and processes cannot outlive a run: the mounts live in the
  // sandbox's mount namespace and init dies with its supervisor
  // (PR_SET_PDEATHSIG), taking the pid namespace with it. What a crash
  // leaves is the staging directory, unlocked.
  std::vector<std::string> removed;
  for (const auto& path : linux_api::reconcile_cgroups(cgroups()))
    removed.push_back("the cgroup of a crashed run (" + path + ")");
  const auto staging = core::remove_crashed_runs(options_.state_dir / "runs",
                                                 [](const fs::path& dir) { remove_tree(dir); });
  for (const auto& path : staging) {
    removed.push_back("the staging directory of crashed run " + path.filename().string() + " (" +
                      path.string() + ")");
  }
  for (auto& what : reconcile_network(network_facts()))
    removed.push_back("the " + what + " of a crashed run");
  return removed;
}

void NativeHost::tear_down(SandboxRun& run) {
  // init's exit tears its namespaces down (its mount tree with the overlay,
  // its network namespace); its pid namespace took every other process. An
  // init that has not reported (still waiting for its plan, or the run
  // failed before it could) is ended first.
  if (run.launched && !run.reported)
    linux_api::sys_pidfd_send_signal(run.sandbox.pidfd.get(), SIGKILL);
  run.sandbox.wait();
  core::trace_phase("native: init reaped");
  // The helper an idmapped workspace's user namespace was made with, if
  // start_and_supervise() has not reaped it (a run that never started): no
  // zombie left behind.
  idmapping_.reap_exited();
  // Its veth went with its namespace; the host's NAT table for it goes now.
  tear_down_network(run);
  core::trace_phase("native: network torn down");
  // The last reference to the run's tmpfs for its changes (--disk): its
  // memory goes with it.
  run.changes_root.reset();
  // No kill first (remove() kills whatever an outsider put there). A cgroup
  // left behind keeps the lock file (unlocked once this process exits): the
  // next start-up reconciles because of it.
  const bool cgroup_removed = !run.cgroup || run.cgroup->remove();
  run.cgroup.reset();
  if (run.staging_made) {
    // Out of the way at once, removed during a later run (TrashRemover).
    const fs::path trash = options_.state_dir / "trash" / run.run_dir.filename();
    if (::rename(run.run_dir.c_str(), trash.c_str()) != 0) remove_tree(run.run_dir);
    run.staging_made = false;
  }
  // While still holding it.
  if (run.run_lock && cgroup_removed) ::unlink(core::run_lock_path(run.run_dir).c_str());
  if (run.run_lock) {
    const std::lock_guard lock(runs_mutex_);
    own_runs_.erase(run.id);
  }
  run.run_lock.reset();
  core::trace_phase("native: init reaped, cgroup removed");
}

NativeHost::~NativeHost() {
  prestart_.reset();
}

std::unique_ptr<SandboxRun> NativeHost::take_started(const std::string& spec_key) {
  return prestart_ ? prestart_->take(spec_key) : nullptr;
}

void NativeHost::retire(std::vector<std::unique_ptr<SandboxRun>> runs, const LaunchSpec* next) {
  if (prestart_) {
    prestart_->retire(std::move(runs), next);
    return;
  }
  for (auto& run : runs)
    tear_down(*run);
}

void NativeHost::start_ahead(const NetworkPolicy& network, const ResourcePolicy& limits) {
  if (!prestart_) return;
  LaunchSpec spec;
  spec.network = choose_network(network, network_facts()).setup;
  spec.limits = limits;
  prestart_->retire({}, &spec);
}

void NativeHost::wait_until_idle() {
  if (prestart_) prestart_->wait_until_idle();
}

core::Result<fs::path> NativeHost::kept_changes_dir() const {
  const fs::path dir = options_.state_dir / "kept";
  PB_CHECK(ensure_private_dir(dir, state_dir_mode()));
  return dir;
}

}  // namespace pulsebox::backends::native
