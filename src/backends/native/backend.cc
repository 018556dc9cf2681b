// The native backend as a pulsebox::Backend: one run at a time, on a
// NativeHost that may serve others (a server's). This file is where the
// native backend's internal errors (core::Result) become the public
// exceptions: execute() is the only place that throws.
#include <algorithm>

#include "backends/native/capabilities.h"
#include "backends/native/host.h"
#include "backends/native/launch.h"
#include "backends/native/state_dir.h"
#include "core/throw_error.h"
#include "core/trace.h"

namespace pulsebox {

namespace backends::native {
namespace {

using core::Error;
using core::ErrorKind;
namespace fs = std::filesystem;

// A run launched (or taken from the sandboxes started ahead) and armed for
// its request: init waits for Start.
struct Begun {
  std::unique_ptr<SandboxRun> run;
  bool armed = false;  // false: the kernel refused the launch (run->launch_error says why)
  // Started ahead, its shape not compared yet (confirm_started_ahead()).
  bool taken_ahead = false;
  fs::path workspace;
  runtime::Clock::time_point start;  // the run's wall-clock limit counts from here
  LaunchSpec spec;
};

// prepare()'s run: execute() goes on from it. Dropped unexecuted, it is torn
// down at once: it holds its run's lock, which a run with the same id would
// wait for.
class NativePreparedRun final : public PreparedRun {
 public:
  NativePreparedRun(std::shared_ptr<NativeHost> host, Begun begun)
      : host_(std::move(host)), begun_(std::move(begun)) {}
  ~NativePreparedRun() override {
    if (begun_.run) host_->tear_down(*begun_.run);
  }
  Begun take() { return std::move(begun_); }
  const NativeHost* host() const { return host_.get(); }

 private:
  std::shared_ptr<NativeHost> host_;
  Begun begun_;
};

class NativeBackend final : public Backend {
 public:
  explicit NativeBackend(std::shared_ptr<NativeHost> host) : host_(std::move(host)) {}
  ~NativeBackend() override { cleanup(); }
  NativeBackend(const NativeBackend&) = delete;
  NativeBackend& operator=(const NativeBackend&) = delete;

  std::string name() const override { return "native"; }
  bool is_unsafe() const override { return false; }
  std::string isolation_level() const override { return "native"; }
  Availability availability() const override { return host_->availability(); }
  std::vector<std::string> reconcile() override { return host_->reconcile(); }
  std::vector<std::string> reconcile_if_needed() override { return host_->reconcile_if_needed(); }

  // The run set up to the command's start while the facade makes its last
  // checks and records (init's workspace mounts and pivot_root overlap them).
  std::unique_ptr<PreparedRun> prepare(const ExecutionRequest& request) override {
    auto begun = begin(request);
    if (!begun) return nullptr;  // execute() does it again and reports it
    return std::make_unique<NativePreparedRun>(host_, std::move(begun).value());
  }

  using Backend::execute;
  ExecutionOutcome execute(const ExecutionRequest& request,
                           std::unique_ptr<PreparedRun> prepared) override {
    return core::value_or_throw(run(request, std::move(prepared)));
  }

  // The runs execute() left for it: init reaped, cgroup removed, staging
  // moved to trash/. (execute() returns as soon as init has reported, so the
  // facade reads the changes while the kernel tears init down.) With
  // prestart, this happens on the host's thread, which then starts the next
  // sandbox in this run's shape.
  void cleanup() override {
    if (finished_.empty()) return;
    host_->retire(std::move(finished_), last_spec_ ? &*last_spec_ : nullptr);
    finished_.clear();
    last_spec_.reset();
  }

  std::optional<std::filesystem::path> kept_changes_dir() override {
    return core::value_or_throw(host_->kept_changes_dir());
  }

  Capability network_capability(const NetworkPolicy& policy) const override {
    return choose_network(policy, host_->network_facts()).capability;
  }
  Capability secrets_capability(const SecretPolicy& policy) const override {
    return native::secrets_capability(policy);
  }
  Capability filesystem_capability() const override { return native::filesystem_capability(); }
  Capability limit_capability(LimitKind kind) const override {
    return native::limit_capability(kind, host_->cgroups());
  }
  Capability syscall_capability(const std::string& profile) const override {
    return native::syscall_capability(profile);
  }
  Capability process_containment_capability() const override {
    return native::process_containment_capability();
  }

 private:
  core::Result<Begun> begin(const ExecutionRequest& request);
  core::Status launch_for_the_run(Begun& begun);
  core::Status arm(Begun& begun, const ExecutionRequest& request);
  core::Status confirm_started_ahead(Begun& begun, const ExecutionRequest& request);
  core::Result<ExecutionOutcome> run(const ExecutionRequest& request,
                                     std::unique_ptr<PreparedRun> prepared);

  std::shared_ptr<NativeHost> host_;
  // Runs whose result execute() returned, for cleanup().
  std::vector<std::unique_ptr<SandboxRun>> finished_;
  std::optional<LaunchSpec> last_spec_;
};

core::Result<Begun> NativeBackend::begin(const ExecutionRequest& request) {
  core::trace_phase("native: execute");
  Begun begun;
  begun.start = runtime::Clock::now();
  const NativeBackendOptions& options = host_->options();
  std::error_code ec;
  begun.workspace = fs::canonical(request.workspace, ec);
  if (ec) {
    return Error(ErrorKind::kInvalidInput, "native",
                 "workspace " + request.workspace.string() + ": " + ec.message());
  }
  // Inside the workspace, the staging would be an overlay layer inside another.
  const fs::path state = fs::weakly_canonical(options.state_dir, ec);
  const auto [ws_end, state_end] =
      std::mismatch(begun.workspace.begin(), begun.workspace.end(), state.begin(), state.end());
  if (ws_end == begun.workspace.end()) {
    return Error(ErrorKind::kInvalidInput, "native",
                 "the state directory " + options.state_dir.string() +
                     " is inside the workspace; choose another (PULSEBOX_STATE_DIR)");
  }
  PB_CHECK(check_reachable_by_sandbox(options.state_dir));

  LaunchSpec& spec = begun.spec;
  spec.id = request.execution_id;
  spec.network = choose_network(request.network, host_->network_facts()).setup;
  spec.limits = request.limits;
  spec.binds = request.binds;
  if (host_->prestarts()) {
    begun.run = host_->take_started(spec_key(spec));
    begun.taken_ahead = begun.run != nullptr;
    if (begun.taken_ahead) core::trace_phase("native: sandbox started ahead taken");
  }
  if (!begun.run) PB_CHECK(launch_for_the_run(begun));
  if (!begun.run->launched) return begun;
  PB_CHECK(arm(begun, request));
  return begun;
}

core::Status NativeBackend::launch_for_the_run(Begun& begun) {
  PB_TRY(launched, host_->launch(begun.spec));
  begun.run = std::move(launched);
  host_->count(&NativeRuntime::Stats::launched_for_a_run);
  return core::ok_status();
}

core::Status NativeBackend::arm(Begun& begun, const ExecutionRequest& request) {
  if (auto armed = host_->arm(*begun.run, request, begun.workspace); !armed) {
    host_->tear_down(*begun.run);
    return std::move(armed).error();
  }
  begun.armed = true;
  return core::ok_status();
}

// A sandbox started ahead runs the command only if the host still gives
// its shape: a file to hide that appeared since it started has no mask in
// it. Compared here, just before Start, rather than when taken: init makes
// the workspace mounts meanwhile. Otherwise it goes before its command
// starts, and a sandbox launched for the run takes its place.
core::Status NativeBackend::confirm_started_ahead(Begun& begun, const ExecutionRequest& request) {
  begun.taken_ahead = false;
  if (host_->shape_of(begun.spec) == begun.run->shape) {
    host_->count(&NativeRuntime::Stats::used_started_ahead);
    core::trace_phase("native: shape of the sandbox started ahead confirmed");
    return core::ok_status();
  }
  host_->count(&NativeRuntime::Stats::discarded);
  std::vector<std::unique_ptr<SandboxRun>> discarded;
  discarded.push_back(std::move(begun.run));
  host_->retire(std::move(discarded), nullptr);
  begun.armed = false;
  PB_CHECK(launch_for_the_run(begun));
  if (!begun.run->launched) return core::ok_status();
  return arm(begun, request);
}

core::Result<ExecutionOutcome> NativeBackend::run(const ExecutionRequest& request,
                                                  std::unique_ptr<PreparedRun> prepared) {
  Begun begun;
  if (prepared) {
    auto* ours = dynamic_cast<NativePreparedRun*>(prepared.get());
    if (ours == nullptr || ours->host() != host_.get()) {
      return Error(ErrorKind::kInternal, "native",
                   "execute() was given a run another backend prepared");
    }
    begun = ours->take();
  } else {
    PB_TRY(fresh, begin(request));
    begun = std::move(fresh);
  }
  if (begun.taken_ahead) PB_CHECK(confirm_started_ahead(begun, request));
  // Whatever happens from here, cleanup() tears the run down.
  SandboxRun& run = *begun.run;
  finished_.push_back(std::move(begun.run));
  last_spec_ = begun.spec;
  ExecutionOutcome outcome;
  if (!begun.armed) {
    ProcessResult& result = outcome.result;
    result.termination_reason = TerminationReason::LaunchError;
    result.exit_code = 125;
    result.termination_detail = run.launch_error;
    result.metrics.elapsed_ms =
        std::chrono::duration<double, std::milli>(runtime::Clock::now() - begun.start).count();
    result.duration_ms = result.metrics.elapsed_ms;
    return outcome;
  }
  host_->start_and_supervise(run, request, begun.start, outcome);
  return outcome;
}

}  // namespace

std::shared_ptr<Backend> NativeHost::make_backend() {
  return std::make_shared<NativeBackend>(shared_from_this());
}

}  // namespace backends::native

namespace {

// The options with their state directory resolved and checked.
NativeBackendOptions checked(NativeBackendOptions options) {
  if (options.state_dir.empty()) options.state_dir = backends::default_state_dir();
  core::check_or_throw(backends::native::check_not_system_directory(
      options.state_dir, options.allow_system_state_dir));
  return options;
}

}  // namespace

std::shared_ptr<Backend> make_native_backend(NativeBackendOptions options) {
  return std::make_shared<backends::native::NativeHost>(checked(std::move(options)), false)
      ->make_backend();
}

void backends::ensure_state_dir(const std::filesystem::path& dir) {
  core::check_or_throw(native::check_not_system_directory(dir, false));
  core::check_or_throw(native::ensure_private_dir(dir, native::state_dir_mode()));
}

std::filesystem::path backends::default_state_dir() {
  if (const char* dir = std::getenv("PULSEBOX_STATE_DIR"); dir != nullptr && *dir != '\0') {
    return dir;
  }
  if (::geteuid() == 0) return "/var/lib/pulsebox";
  return "/var/tmp/pulsebox-" + std::to_string(::geteuid());
}

std::shared_ptr<backends::NativeRuntime> backends::make_native_runtime(NativeBackendOptions options,
                                                                       bool prestart) {
  return std::make_shared<native::NativeHost>(checked(std::move(options)), prestart);
}

}  // namespace pulsebox
