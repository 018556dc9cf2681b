#include "pulsebox/sandbox.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "core/text.h"
#include "core/throw_error.h"
#include "core/trace.h"
#include "pulsebox/error.h"
#include "pulsebox/lifecycle.h"
#include "pulsebox/path_validator.h"
#include "seccomp/profile.h"
#include "workspace/safe_open.h"

extern char** environ;

namespace pulsebox {

using core::Error;
using core::ErrorKind;

namespace {

std::string new_execution_id() {
  return "run-" + core::random_hex(16);
}

std::map<std::string, std::string> host_environment() {
  std::map<std::string, std::string> env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string_view text = *entry;
    const auto eq = text.find('=');
    if (eq != std::string_view::npos) env.emplace(text.substr(0, eq), text.substr(eq + 1));
  }
  return env;
}

EnforcementLevel weakest(EnforcementLevel a, EnforcementLevel b) {
  return static_cast<int>(a) >= static_cast<int>(b) ? a : b;
}

std::filesystem::path default_audit_path(const SandboxOptions& options) {
  if (!options.audit_log_path.empty()) return options.audit_log_path;
  return options.workspace / ".agent" / "logs" / "audit.jsonl";
}

}  // namespace

Sandbox::Sandbox(SandboxOptions options)
    : options_(std::move(options)),
      scrubber_(options_.secrets),
      workspace_(options_.workspace, workspace_policy_for(options_.policy), WorkspaceLimits{},
                 options_.allow_system_directory ? SystemDirectoryUse::Allow
                                                 : SystemDirectoryUse::Refuse) {
  options_.limits.validate();
  if (options_.seccomp_profile != "unconfined" &&
      !seccomp::is_builtin_profile(options_.seccomp_profile)) {
    core::value_or_throw(seccomp::load_profile(options_.seccomp_profile));
  }
  options_.workspace = workspace_.root();
  audit_ = std::make_unique<AuditLog>(
      default_audit_path(options_), &scrubber_,
      AuditLog::Options{
          .fsync = options_.audit_fsync,
          .key = options_.audit_key ? *options_.audit_key : default_audit_key_location()});
}

Sandbox::~Sandbox() = default;

const Backend& Sandbox::backend() const {
  if (!backend_) throw SandboxUnavailableError("the sandbox is not initialized", 0, "sandbox");
  return *backend_;
}

void Sandbox::initialize() {
  if (backend_) return;
  core::trace_phase("sandbox: initialize");
  auto init_record = [&](const std::string& target, const std::string& decision,
                         const std::string& level, const std::string& detail) {
    audit_->record({.action = "sandbox-init",
                    .target = target,
                    .decision = decision,
                    .isolation_level = level,
                    .detail = detail});
  };
  auto refuse = [&](const std::string& target, const std::string& why) {
    init_record(target, "deny", "unavailable", why);
    throw SandboxUnavailableError(why, 0, "sandbox");
  };
  auto use = [&](std::shared_ptr<Backend> backend) {
    const Availability availability = backend->availability();
    if (!availability.available)
      refuse(backend->name(), backend->name() + ": " + availability.reason);
    core::trace_phase("sandbox: backend available");
    for (const std::string& what : backend->reconcile_if_needed()) {
      audit_->record({.action = "reconcile",
                      .target = backend->name(),
                      .decision = "allow",
                      .detail = "removed " + what});
    }
    core::trace_phase("sandbox: backend reconciled");
    backend_ = std::move(backend);
    init_record(
        backend_->name(), "allow", backend_->isolation_level(),
        backend_->is_unsafe()
            ? "WARNING: unsafe host execution selected explicitly; the command is not isolated"
            : "backend " + backend_->name() + " initialized");
  };

  if (options_.backend) return use(options_.backend);
  const std::string& name = options_.backend_name;
  if (name == "host") {
    if (!options_.unsafe_host_execution) {
      refuse("host",
             "the host backend runs the command unsandboxed on this machine; it needs an explicit "
             "opt-in (--unsafe-host)");
    }
    return use(make_host_backend());
  }
  if (name == "native") return use(make_native_backend(options_.native));
  if (name == "remote")
    refuse("remote", "the remote backend is not part of this build of pulsebox yet");
  if (!name.empty()) {
    throw SandboxConfigError("unknown backend \"" + name + "\" (expected native, host or remote)");
  }

  std::string tried;
  const char* remote = std::getenv("PULSE_REMOTE_URL");
  if (remote != nullptr && remote[0] != '\0') {
    tried = "remote (PULSE_REMOTE_URL is set): not part of this build yet; ";
  }
  auto native = make_native_backend(options_.native);
  const Availability native_availability = native->availability();
  if (native_availability.available) return use(std::move(native));
  tried += "native: " + native_availability.reason;
  if (options_.unsafe_host_execution) {
    init_record("host", "allow", "host_unsafe",
                "no secure backend (" + tried + "); falling back to the host by explicit opt-in");
    return use(make_host_backend());
  }
  refuse("none",
         "no secure backend is available (" + tried +
             "); to run unsandboxed on this host anyway, pass --backend host --unsafe-host");
}

std::string Sandbox::command_text(const std::vector<std::string>& argv) const {
  std::string text;
  for (const auto& arg : argv) {
    if (!text.empty()) text += ' ';
    text += arg;
  }
  return text;
}

std::vector<EnforcementDecision> Sandbox::enforcement_plan() {
  initialize();
  std::vector<EnforcementDecision> plan;
  auto add = [&](Dimension dimension, const Capability& capability, bool requested) {
    EnforcementDecision decision;
    decision.dimension = dimension;
    decision.level = capability.level;
    decision.requested = requested;
    decision.reason = capability.reason;
    decision.fix = capability.fix;
    decision.accepted = capability.level != EnforcementLevel::StronglyEnforced &&
                        options_.accept_weaker.count(dimension) > 0;
    plan.push_back(std::move(decision));
  };
  add(Dimension::Network, backend_->network_capability(options_.network), true);
  add(Dimension::Secrets, backend_->secrets_capability(options_.secret_policy), true);
  add(Dimension::Filesystem, backend_->filesystem_capability(), true);

  // Limits: every applied limit counts towards the reported level; only the
  // explicit ones can refuse the run.
  std::vector<LimitKind> applied = {LimitKind::Memory, LimitKind::Processes,
                                    LimitKind::Cpu,    LimitKind::WallTime,
                                    LimitKind::Output, LimitKind::OpenFiles};
  if (options_.limits.swap_bytes) applied.push_back(LimitKind::Swap);
  if (options_.limits.cpu_time_seconds) applied.push_back(LimitKind::CpuTime);
  if (options_.limits.disk_bytes) applied.push_back(LimitKind::Disk);
  Capability limits{EnforcementLevel::StronglyEnforced, "", ""};
  Capability explicit_limits{EnforcementLevel::StronglyEnforced, "", ""};
  for (LimitKind kind : applied) {
    const Capability capability = backend_->limit_capability(kind);
    const bool is_explicit = options_.explicit_limits.count(kind) > 0;
    Capability& target = is_explicit ? explicit_limits : limits;
    if (capability.level != EnforcementLevel::StronglyEnforced) {
      if (!target.reason.empty()) target.reason += "; ";
      target.reason += std::string(to_string(kind)) + ": " + capability.reason;
      target.fix = capability.fix;
    }
    target.level = weakest(target.level, capability.level);
  }
  if (!options_.explicit_limits.empty() &&
      explicit_limits.level != EnforcementLevel::StronglyEnforced) {
    explicit_limits.level = weakest(explicit_limits.level, limits.level);
    add(Dimension::Limits, explicit_limits, true);
  } else {
    limits.level = weakest(limits.level, explicit_limits.level);
    if (limits.reason.empty()) limits.reason = "every limit is enforced for the whole sandbox";
    add(Dimension::Limits, limits, false);
  }
  add(Dimension::Syscalls, backend_->syscall_capability(options_.seccomp_profile), true);
  return plan;
}

PolicyEvaluation Sandbox::require_not_denied(ActionType action, const std::string& target) {
  const PolicyEvaluation evaluation = options_.policy.explain(action, target);
  if (evaluation.decision == Decision::Deny) {
    const std::string verb(to_string(action));
    audit_->record({.action = verb,
                    .target = target,
                    .decision = "deny",
                    .detail = "policy: " + evaluation.describe()});
    throw PolicyDenied("policy denies " + verb + " of " + target + ": " + evaluation.describe(), 0,
                       "policy");
  }
  return evaluation;
}

std::string Sandbox::read_file(std::string_view relative_path) {
  const std::string target(relative_path);
  const PolicyEvaluation evaluation = require_not_denied(ActionType::Read, target);
  PathValidator validator(options_.workspace,
                          {.allowed_external_reads = options_.allowed_external_reads});
  std::string bytes;
  try {
    bytes = relative_path.empty() || relative_path.front() != '/' ? validator.read(relative_path)
                                                                  : validator.read_external(target);
  } catch (const SandboxError& error) {
    audit_->record(
        {.action = "read", .target = target, .decision = "deny", .detail = error.what()});
    throw;
  }
  auto scrubbed = scrubber_.scrub(bytes);
  audit_->record({.action = "read",
                  .target = target,
                  .decision = std::string(to_string(evaluation.decision)),
                  .detail = "read " + std::to_string(bytes.size()) + " bytes"});
  return std::move(scrubbed.text);
}

std::string Sandbox::create_transaction() {
  return workspace_.create_transaction("api");
}

void Sandbox::stage_write(const std::string& tx, std::string_view path, std::string_view bytes,
                          unsigned mode) {
  const std::string target(path);
  const PolicyEvaluation evaluation = require_not_denied(ActionType::Write, target);
  if (scrubber_.contains_secret(bytes)) {
    audit_->record({.action = "write",
                    .target = target,
                    .decision = "deny",
                    .detail = "refused: the content contains a registered secret"});
    throw SandboxSecurityError("refusing to stage " + target + ": it contains a registered secret",
                               0, "secrets");
  }
  workspace_.stage_write(tx, path, bytes, mode);
  audit_->record({.action = "write-staged",
                  .target = target,
                  .decision = std::string(to_string(evaluation.decision)),
                  .detail = tx});
}

void Sandbox::stage_delete(const std::string& tx, std::string_view path) {
  const std::string target(path);
  const PolicyEvaluation evaluation = require_not_denied(ActionType::Delete, target);
  workspace_.stage_delete(tx, path);
  audit_->record({.action = "delete-staged",
                  .target = target,
                  .decision = std::string(to_string(evaluation.decision)),
                  .detail = tx});
}

std::string Sandbox::preview_changes(const std::string& tx, bool colour) {
  return workspace_.diff(tx, colour);
}

std::vector<std::string> Sandbox::commit_transaction(const std::string& tx) {
  try {
    auto changed = workspace_.commit(tx);
    for (const auto& path : changed) {
      audit_->record({.action = "commit", .target = path, .decision = "allow", .detail = tx});
    }
    return changed;
  } catch (const SandboxError& error) {
    audit_->record({.action = "commit", .target = tx, .decision = "deny", .detail = error.what()});
    throw;
  }
}

void Sandbox::discard_transaction(const std::string& tx) {
  workspace_.discard(tx);
  audit_->record({.action = "discard",
                  .target = tx,
                  .decision = "allow",
                  .detail = "discarded the transaction"});
}

ProcessResult Sandbox::execute(const std::vector<std::string>& argv,
                               const ExecuteOptions& options) {
  if (argv.empty() || argv[0].empty()) throw SandboxConfigError("no command to run", 0, "sandbox");
  initialize();
  core::trace_phase("sandbox: initialized");
  const std::string id = options.execution_id.empty() ? new_execution_id() : options.execution_id;
  const std::string command = command_text(argv);
  const std::string level = backend_->isolation_level();
  SandboxExecution execution(id, audit_.get());
  execution.transition(LifecycleState::Starting);

  auto deny = [&](const std::string& action, const std::string& detail) {
    audit_->record({.action = action,
                    .target = command,
                    .decision = "deny",
                    .container_id = backend_->name(),
                    .isolation_level = level,
                    .detail = detail});
  };
  auto finish = [&](bool cleanup_ok) {
    if (execution.state() != LifecycleState::Cleaning)
      execution.transition(LifecycleState::Cleaning);
    execution.transition(cleanup_ok ? LifecycleState::Finalized : LifecycleState::RecoveryRequired);
  };
  std::unique_ptr<PreparedRun> prepared;
  auto fail_before_run = [&](const auto& exception) {
    execution.transition(LifecycleState::Failed);
    prepared.reset();  // a run prepare() set up, never started
    finish(true);
    throw exception;
  };

  // 1. May this command run at all?
  const PolicyEvaluation shell = options_.policy.explain(ActionType::Shell, command);
  if (shell.decision == Decision::Deny) {
    deny("shell", "policy: " + shell.describe());
    fail_before_run(PolicyDenied("policy denies running \"" + command + "\": " + shell.describe(),
                                 0, "policy"));
  }
  // 2. Network and secrets need the policy's ALLOW when asked for.
  auto require_allow = [&](ActionType action, bool requested, std::string_view mode_text) {
    if (!requested || options_.policy.is_allowed(action)) return;
    const std::string word(to_string(action));
    const std::string why = word + " mode " + std::string(mode_text) +
                            " was requested, but the action policy does not allow " + word + " (" +
                            options_.policy.explain(action, "*").describe() +
                            "); add a rule {\"action\": \"" + word +
                            "\", \"target\": \"*\", \"decision\": \"allow\"}";
    deny(word, why);
    fail_before_run(PolicyDenied(why, 0, "policy"));
  };
  require_allow(ActionType::Network, options_.network.mode != NetworkMode::DenyAll,
                to_string(options_.network.mode));
  require_allow(ActionType::Secrets, options_.secret_policy.mode != SecretMode::DenyAll,
                to_string(options_.secret_policy.mode));
  for (const auto& [name, value] : options_.environment) {
    if (is_dangerous_environment_variable(name) || name.empty() ||
        name.find('=') != std::string::npos) {
      fail_before_run(SandboxConfigError(
          "--env " + name + ": refusing a variable that changes how programs load code", 0, "env"));
    }
  }
  if (!options.cwd.empty()) {
    auto checked = workspace::check_relative_path(options.cwd);
    if (!checked)
      fail_before_run(
          SandboxConfigError("--cwd " + options.cwd + ": " + checked.error().to_string()));
    std::error_code ec;
    if (!std::filesystem::is_directory(options_.workspace / *checked, ec)) {
      fail_before_run(
          SandboxConfigError("--cwd " + options.cwd + ": not a directory in the workspace"));
    }
  }

  // The request, which the backend may start setting up while the
  // enforcement verdicts are made and audited (the native backend goes as
  // far as the command's start; the command itself waits for execute()).
  ExecutionRequest request;
  request.argv = argv;
  request.workspace = options_.workspace;
  request.cwd = options.cwd;
  const auto host_env = options_.host_environment ? *options_.host_environment : host_environment();
  for (const std::string& name : options_.secret_policy.explicit_env) {
    if (auto it = host_env.find(name); it != host_env.end()) scrubber_.add_secret(it->second);
  }
  request.environment =
      build_sandbox_environment(options_.secret_policy, host_env, options_.environment);
  request.limits = options_.limits;
  request.network = options_.network;
  request.binds = options_.binds;
  request.seccomp_profile = options_.seccomp_profile;
  {
    // An audit log kept inside the workspace (not in .agent/) is hidden too.
    std::error_code ec;
    const auto audit_path = std::filesystem::weakly_canonical(default_audit_path(options_), ec);
    const auto relative = audit_path.lexically_relative(options_.workspace);
    if (!ec && !relative.empty() && *relative.begin() != ".." && *relative.begin() != ".agent") {
      request.hidden_workspace_paths.push_back(relative.string());
    }
  }
  request.secrets = options_.secret_policy;
  request.execution_id = id;
  request.cancel_fd = options.cancel_fd;
  prepared = backend_->prepare(request);

  // 3. How strongly is each dimension enforced here?
  const std::vector<EnforcementDecision> plan = enforcement_plan();
  audit_->log_network("*", std::nullopt, "any",
                      options_.network.mode == NetworkMode::DenyAll ? "deny" : "allow",
                      backend_->name(), std::string(to_string(plan[0].level)),
                      "network mode " + std::string(to_string(options_.network.mode)));
  Enforcement enforcement;
  const EnforcementDecision* refused = nullptr;
  for (const EnforcementDecision& decision : plan) {
    const bool weak = decision.level != EnforcementLevel::StronglyEnforced;
    const bool blocks = weak && decision.requested && !decision.accepted;
    std::string detail = std::string(to_string(decision.level)) + ": " + decision.reason;
    if (weak && decision.accepted) detail += " (weaker level accepted with --allow-weaker)";
    if (weak && !decision.requested) detail += " (default limits: reported, not refused)";
    audit_->record({.action = "enforcement",
                    .target = std::string(to_string(decision.dimension)),
                    .decision = blocks ? "deny" : "allow",
                    .container_id = backend_->name(),
                    .isolation_level = level,
                    .detail = detail,
                    .extra = {{"enforcement_level", std::string(to_string(decision.level))}}});
    if (blocks && refused == nullptr) refused = &decision;
    switch (decision.dimension) {
      case Dimension::Network:
        enforcement.network = decision.level;
        break;
      case Dimension::Secrets:
        enforcement.secrets = decision.level;
        break;
      case Dimension::Filesystem:
        enforcement.filesystem = decision.level;
        break;
      case Dimension::Limits:
        enforcement.limits = decision.level;
        break;
      case Dimension::Syscalls:
        enforcement.syscalls = decision.level;
        break;
    }
  }
  if (refused != nullptr) {
    const std::string dimension(to_string(refused->dimension));
    std::string message = dimension + ": the " + backend_->name() +
                          " backend cannot enforce this " + "strongly here (" +
                          std::string(to_string(refused->level)) + ": " + refused->reason + ")";
    if (!refused->fix.empty()) message += "; fix: " + refused->fix;
    message += "; or accept the weaker level with --allow-weaker " + dimension;
    deny("shell", "refused: " + message);
    fail_before_run(SandboxUnsupportedPolicyError(message, 0, "enforcement"));
  }

  // 4. Run, scrubbing output as it streams.
  for (const auto& bind : options_.binds) {
    audit_->record({.action = "bind",
                    .target = bind.host.string() + " -> " + bind.sandbox_path,
                    .decision = "allow",
                    .container_id = backend_->name(),
                    .isolation_level = level,
                    .detail = bind.writable ? "read-write bind into the sandbox"
                                            : "read-only bind into the sandbox"});
  }
  std::string stdout_text;
  std::string stderr_text;
  auto out_stream = scrubber_.stream();
  auto err_stream = scrubber_.stream();
  auto deliver = [&](OutputStream which, const std::string& text) {
    if (text.empty()) return;
    (which == OutputStream::Stdout ? stdout_text : stderr_text) += text;
    if (options.on_output) options.on_output(which, text);
  };
  request.on_output = [&](OutputStream which, std::string_view chunk) {
    deliver(which, (which == OutputStream::Stdout ? out_stream : err_stream).feed(chunk));
  };

  core::trace_phase("sandbox: request ready");
  execution.transition(LifecycleState::Running);
  // Files the host changed after this (by ctime or mtime) while the run went
  // on are marked at import (Workspace::import_overlay).
  const auto run_started = workspace_.stamp_now();
  ExecutionOutcome outcome;
  try {
    outcome = backend_->execute(request, std::move(prepared));
  } catch (...) {
    execution.transition(LifecycleState::Failed);
    backend_->cleanup();
    finish(true);
    throw;
  }
  deliver(OutputStream::Stdout, out_stream.finish());
  deliver(OutputStream::Stderr, err_stream.finish());
  const bool redacted = out_stream.redacted() || err_stream.redacted();
  ProcessResult result = std::move(outcome.result);
  result.stdout_data = std::move(stdout_text);
  result.stderr_data = std::move(stderr_text);
  result.command = command;
  result.isolation_level = level;
  result.enforcement = enforcement;
  const bool succeeded =
      result.exit_code == 0 && result.termination_reason == TerminationReason::None;
  execution.transition(succeeded ? LifecycleState::Completing : LifecycleState::Failed);
  std::string detail = "ran via the " + backend_->name() + " backend";
  if (result.termination_reason != TerminationReason::None) {
    detail += "; termination: " + std::string(to_string(result.termination_reason));
  }
  if (!result.termination_detail.empty()) detail += " (" + result.termination_detail + ")";
  if (redacted) detail += "; secrets were redacted from the output";
  audit_->record({.action = "shell",
                  .target = command,
                  .decision = std::string(to_string(shell.decision)),
                  .exit_code = result.exit_code,
                  .duration_ms = result.duration_ms,
                  .container_id = backend_->name() + ":" + id,
                  .isolation_level = level,
                  .detail = detail});

  core::trace_phase("sandbox: result audited");
  // 5. The run's workspace changes become a transaction.
  if (outcome.changes_dir) {
    try {
      const std::string origin = id + ": " + command;
      const auto tx = outcome.changes_dir_is_full_copy
                          ? workspace_.import_copy(*outcome.changes_dir, origin, run_started)
                          : workspace_.import_overlay(*outcome.changes_dir, options_.workspace,
                                                      origin, run_started);
      if (tx) {
        result.transaction_id = *tx;
        for (const auto& change : workspace_.describe(*tx).changes) {
          result.changes.push_back({change.path, change.kind});
        }
        audit_->record({.action = "changes-staged",
                        .target = *tx,
                        .decision = "allow",
                        .isolation_level = level,
                        .detail = std::to_string(result.changes.size()) + " changes from " + id});
        if (options_.changes == ChangesMode::Commit) {
          try {
            commit_transaction(*tx);
          } catch (const SandboxError& error) {
            result.termination_detail +=
                std::string(result.termination_detail.empty() ? "" : "; ") + "changes kept as " +
                *tx + ", not committed: " + error.what();
          }
        } else if (options_.changes == ChangesMode::Discard) {
          discard_transaction(*tx);
        }
      }
    } catch (const SandboxError& error) {
      audit_->record({.action = "changes-staged",
                      .target = id,
                      .decision = "deny",
                      .isolation_level = level,
                      .detail = error.what()});
      result.termination_detail += std::string(result.termination_detail.empty() ? "" : "; ") +
                                   "changes refused: " + error.what();
    }
  }

  // 6. Clean up.
  core::trace_phase("sandbox: changes imported");
  execution.transition(LifecycleState::Cleaning);
  bool cleanup_ok = true;
  try {
    backend_->cleanup();
  } catch (const std::exception& error) {
    cleanup_ok = false;
    audit_->record(
        {.action = "sandbox-cleanup",
         .target = id,
         .decision = "deny",
         .detail = std::string("cleanup failed, leftovers may remain: ") + error.what()});
  }
  finish(cleanup_ok);
  core::trace_phase("sandbox: cleaned up");
  return result;
}

}  // namespace pulsebox
