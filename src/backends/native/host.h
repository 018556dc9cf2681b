// The native backend's shared part: what every run from the same options
// shares, thread-safe (the host probe and cgroup layout, compiled seccomp
// filters, the idmapping namespaces, the runs this process holds and, with
// prestart, the sandbox started ahead). It implements backends::NativeRuntime
// and hands out one Backend per Sandbox (backend.cc).
//
// A run moves through its stages, one file each:
//   launch.cc     launch(): cgroup, clone3, id maps, base mounts, staging;
//                 arm(): the workspace, the command and its filter, PlanReady
//   supervise.cc  start_and_supervise(): Start, then the run to init's report
//   host.cc       tear_down(): init reaped, cgroup removed, staging to trash/
//   prestart.cc   the thread that tears finished runs down and starts the next
//                 sandbox ahead
// Internal functions return core::Result; backend.cc turns errors into
// exceptions, in one place.
#pragma once

#include <filesystem>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "backends/native/ids.h"
#include "backends/native/probe.h"
#include "backends/native/sandbox_run.h"
#include "backends/native_runtime.h"
#include "core/result.h"
#include "linux/cgroup.h"
#include "runtime/supervisor.h"
#include "seccomp/compiler.h"

namespace pulsebox::backends::native {

class Prestart;

class NativeHost final : public NativeRuntime, public std::enable_shared_from_this<NativeHost> {
 public:
  NativeHost(NativeBackendOptions options, bool prestart);
  ~NativeHost() override;
  NativeHost(const NativeHost&) = delete;
  NativeHost& operator=(const NativeHost&) = delete;

  const NativeBackendOptions& options() const { return options_; }

  // NativeRuntime.
  std::shared_ptr<Backend> make_backend() override;
  void start_ahead(const NetworkPolicy& network, const ResourcePolicy& limits) override;
  void wait_until_idle() override;
  Stats stats() const override;
  void count(int Stats::*counter);

  Availability availability() const;
  const HostProbe& probe() const;
  const linux_api::CgroupHost& cgroups() const;
  const NetworkHostFacts& network_facts() const;
  std::vector<std::string> reconcile();
  // <state>/kept: sessions' layers and held changes (never reconciled away).
  core::Result<std::filesystem::path> kept_changes_dir() const;
  // reconcile(), only when a run's lock file is left unlocked (a crashed
  // run's: a live run and one that cleaned up leave none).
  std::vector<std::string> reconcile_if_needed();

  // launch.cc: up to init waiting for PlanReady. A bad extra bind or state
  // directory is an error; a launch the kernel refused is a run with its
  // launch_error.
  core::Result<std::unique_ptr<SandboxRun>> launch(const LaunchSpec& spec);
  // launch.cc: the workspace, the command and its filter, then PlanReady:
  // init sets the sandbox up and waits for Start.
  core::Status arm(SandboxRun& run, const ExecutionRequest& request,
                   const std::filesystem::path& workspace);
  // launch.cc: what a launch for `spec` would give init before PlanReady, as
  // text (shape_text()): a sandbox started ahead is used only for a run whose
  // shape is the same now.
  std::string shape_of(const LaunchSpec& spec);
  // supervise.cc: Start, then the run to init's report; fills outcome.result.
  void start_and_supervise(SandboxRun& run, const ExecutionRequest& request,
                           runtime::Clock::time_point start, ExecutionOutcome& outcome);
  // host.cc: init reaped, cgroup removed, staging moved to trash/
  // (idempotent; what cannot be removed keeps its lock file for reconcile).
  void tear_down(SandboxRun& run);

  // With prestart: a sandbox started ahead for a spec with this spec_key(),
  // if there is one and it is still waiting; nullptr otherwise (launch then).
  // It is used only if shape_of() still gives its shape.
  std::unique_ptr<SandboxRun> take_started(const std::string& spec_key);
  // Hands finished runs over (torn down in the background when prestarting,
  // here otherwise) and, with prestart, asks for a sandbox of `next`'s shape.
  void retire(std::vector<std::unique_ptr<SandboxRun>> runs, const LaunchSpec* next);
  bool prestarts() const { return prestart_ != nullptr; }
  // Runs whose lock this object holds (made by launch(), until tear_down()).
  bool holds_run(const std::string& id) const;

 private:
  // The parts of a launch that decide its shape, written into `plan`,
  // `layout` and `settings` for `spec`: what launch() does before clone3.
  core::Result<IdPlan> plan_launch(const LaunchSpec& spec,
                                   const std::filesystem::path& mount_points,
                                   runtime::LaunchPlan& plan, runtime::MountLayout& layout,
                                   linux_api::CgroupSettings& settings);
  core::Status launch_into(SandboxRun& run, const LaunchSpec& spec);

  NativeBackendOptions options_;
  mutable std::once_flag probe_once_;
  mutable HostProbe probe_;
  mutable std::once_flag network_once_;
  mutable NetworkHostFacts network_facts_;
  mutable std::once_flag cgroups_once_;
  mutable linux_api::CgroupHost cgroups_;
  std::unique_ptr<seccomp::FilterCache> filters_;
  IdmappingNamespaces idmapping_;
  mutable std::mutex stats_mutex_;
  Stats stats_;
  mutable std::mutex runs_mutex_;
  std::set<std::string> own_runs_;
  std::unique_ptr<Prestart> prestart_;
};

}  // namespace pulsebox::backends::native
