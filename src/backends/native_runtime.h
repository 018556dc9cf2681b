// The native backend's long-lived part, for processes that run many
// sandboxes (pulsebox serve --local): one NativeRuntime holds what every run
// from the same options shares (the host probe, the cgroup layout, compiled
// seccomp filters, idmapping namespaces) and hands out Backend objects that
// each hold one run at a time, so runs on several threads share it.
//
// With `prestart`, each run's sandbox is started ahead of its request: after
// a run, a thread of the runtime's own tears it down and starts the next
// sandbox in the same shape (namespaces, ids, cgroup limits, every base
// mount), up to init waiting for its workspace; a run of that shape begins
// there. A sandbox is never used twice, and one whose shape computed afresh
// differs (a hidden file appeared, a bind went) is not used at all.
//
// Usage:
//   auto runtime = backends::make_native_runtime(options, /*prestart=*/true);
//   runtime->start_ahead(NetworkPolicy{}, ResourcePolicy{});  // optional
//   SandboxOptions sandbox_options;
//   sandbox_options.backend = runtime->make_backend();  // one per Sandbox
#pragma once

#include <filesystem>
#include <memory>

#include "pulsebox/backend.h"

namespace pulsebox::backends {

class NativeRuntime {
 public:
  virtual ~NativeRuntime() = default;
  // A backend for one run at a time (a Sandbox's); any number may exist.
  virtual std::shared_ptr<Backend> make_backend() = 0;
  // With prestart: starts a sandbox ahead for runs with these settings and
  // no extra binds (e.g. the CLI's defaults, when a server starts).
  virtual void start_ahead(const NetworkPolicy& network, const ResourcePolicy& limits) = 0;
  // With prestart: blocks until nothing is being torn down or started
  // (tests and benchmarks use it to see the runtime at rest).
  virtual void wait_until_idle() = 0;

  struct Stats {
    int started_ahead = 0;       // sandboxes started ahead
    int used_started_ahead = 0;  // runs that began in one
    int launched_for_a_run = 0;  // runs that launched their own
    int discarded = 0;           // started ahead, never used (shape changed, ended)
    // The host's shape computed on its own, not by a launch: a run's check
    // just before its command starts, or a fresh look while two wait.
    int shapes_computed = 0;
  };
  virtual Stats stats() const = 0;
};

std::shared_ptr<NativeRuntime> make_native_runtime(NativeBackendOptions options, bool prestart);

// The state directory when NativeBackendOptions::state_dir is empty:
// $PULSEBOX_STATE_DIR, else /var/lib/pulsebox as root and
// /var/tmp/pulsebox-UID otherwise.
std::filesystem::path default_state_dir();
// Makes the state directory, or checks the one there: a directory of this
// user's (never a symlink), writable by nobody else, not a system directory
// unless PULSEBOX_ALLOW_SYSTEM_STATE_DIR=1; throws SandboxSecurityError
// naming it otherwise.
void ensure_state_dir(const std::filesystem::path& dir);

}  // namespace pulsebox::backends
