// One native sandbox from its launch to its teardown, as data: what a launch
// depends on (LaunchSpec) and everything a run holds (SandboxRun). The
// functions that move a run along are NativeHost's (host.h), one file per
// stage: launch.cc (launch, arm), supervise.cc (start and supervise),
// host.cc (tear down).
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/native/ids.h"
#include "backends/native/network.h"
#include "core/trace.h"
#include "core/unique_fd.h"
#include "linux/cgroup.h"
#include "network/address.h"
#include "pulsebox/backend.h"
#include "runtime/launch_plan.h"
#include "runtime/launcher.h"
#include "runtime/plan.h"
#include "runtime/sync_channel.h"
#include "seccomp/compiler.h"

namespace pulsebox::backends::native {

// What a launch depends on, besides the backend's options: everything init
// makes before PlanReady (and so the shape of a sandbox started ahead).
struct LaunchSpec {
  std::string id;  // names the staging directory and the cgroups
  NetworkSetup network = NetworkSetup::Loopback;
  ResourcePolicy limits;
  std::vector<BindMount> binds;
};

// On the heap and never moved: init reads `plan` and runs on
// `sandbox.init_stack`.
struct SandboxRun {
  std::string id;
  std::filesystem::path run_dir;
  core::UniqueFd run_lock;  // held until the staging directory is gone
  bool staging_made = false;
  runtime::LaunchPlan plan;
  std::unique_ptr<core::ChildTrace> trace;
  int exec_error = 0;  // LaunchPlan::exec_error
  runtime::MountLayout layout;
  IdPlan ids;
  linux_api::CgroupSettings settings;
  std::optional<linux_api::SandboxCgroup> cgroup;
  core::UniqueFd out_read, err_read;
  runtime::LaunchedSandbox sandbox;
  bool launched = false;
  std::string launch_error;           // when not launched: why (the kernel refused)
  bool reported = false;              // init sent Exited: it is ending by itself
  std::string shape;                  // shape_text() of its plan, when started ahead
  std::string spec_key;               // spec_key() of its spec, when started ahead
  std::filesystem::path changes_dir;  // the overlay's upper directory (arm())
  // The run's tmpfs for its changes (--disk), from init: changes_dir is then
  // /proc/self/fd/N/upper, valid while this is open (until tear_down()).
  core::UniqueFd changes_root;
  // The seccomp filter the plan points into (arm()), kept while it runs.
  std::shared_ptr<const seccomp::CompiledFilter> filter;
  // The network: what init handed over and what was made for it (network.h).
  std::unique_ptr<RunNetwork> network = std::make_unique<RunNetwork>();
  // An allowlist's host names, as resolved (by rule; empty for an address).
  std::vector<std::vector<network::IpAddress>> resolved_destinations;
  // Messages init sent while the supervisor waited for its network sockets.
  std::vector<runtime::ChildMessage> early_messages;
};

}  // namespace pulsebox::backends::native
