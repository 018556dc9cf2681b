// Sandbox::execute: one run, as a short list of named stages. Each stage
// audits what it decides; a refusal before the run ends the lifecycle as
// Failed and tears down what prepare() set up (its PreparedRun goes).
#include <filesystem>

#include "core/sandbox_home.h"
#include "core/text.h"
#include "core/trace.h"
#include "facade/run_state.h"
#include "pulsebox/error.h"
#include "pulsebox/lifecycle.h"
#include "pulsebox/sandbox.h"
#include "pulsebox/secrets.h"
#include "workspace/safe_open.h"

extern char** environ;

namespace pulsebox {

namespace {

// The command names the paths it changes: a name holding a registered value
// would carry it out in the result, past the scrubbed output (found by an
// attack: `mv a "$TOKEN"`). Only names holding a registered value change.
void redact_names(const SecretScrubber& scrubber, ProcessResult& result) {
  if (scrubber.secret_count() == 0) return;
  const auto redact = [&](std::string& text) {
    if (scrubber.contains_secret(text)) text = scrubber.redact(text);
  };
  for (auto& change : result.changes)
    redact(change.path);
  ChangesStatus& status = result.changes_status;
  for (auto& item : status.refused) {
    redact(item.path);
    redact(item.reason);
  }
  for (auto& item : status.notes) {
    redact(item.path);
    redact(item.reason);
  }
  redact(status.detail);
}

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

Enforcement levels_of(const std::vector<EnforcementDecision>& verdicts) {
  Enforcement enforcement;
  for (const EnforcementDecision& decision : verdicts) {
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
  return enforcement;
}

}  // namespace

void append_detail(ProcessResult& result, const std::string& text) {
  result.termination_detail += (result.termination_detail.empty() ? "" : "; ") + text;
}

ProcessResult Sandbox::execute(const std::vector<std::string>& argv,
                               const ExecuteOptions& options) {
  if (argv.empty() || argv[0].empty()) throw SandboxConfigError("no command to run", 0, "sandbox");
  // The backend's choice and the Starting transition wait in the run's
  // pending records, appended with the others made before the command
  // starts (run_and_scrub), or before anything else is recorded.
  std::string id = options.execution_id.empty() ? new_execution_id() : options.execution_id;
  std::string command = command_text(argv);
  std::vector<AuditRecord> chosen;
  initialize(chosen);
  core::trace_phase("sandbox: initialized");
  Run run(std::move(id), std::move(command), audit_.get(), *backend_);
  run.pending = std::move(chosen);
  run.lifecycle.transition(LifecycleState::Starting, run.pending);
  check_policy(run);
  ExecutionRequest request = build_request(run, argv, options);
  if (!options_.session.empty()) open_session(run, request);
  // The backend may set the run up (as far as the command's start) while
  // the verdicts are made and audited.
  run.prepared = backend_->prepare(request);
  decide_enforcement(run);
  ProcessResult result = run_and_scrub(run, request, options);
  result.execution_id = run.id;
  result.argv = argv;
  import_changes(run, result);
  redact_names(scrubber_, result);
  clean_up(run);
  return result;
}

// 1. May this command run at all, and with network and secrets?
void Sandbox::check_policy(Run& run) {
  run.shell = options_.policy.explain(ActionType::Shell, run.command);
  if (run.shell.decision == Decision::Deny) {
    run.deny("shell", "policy: " + run.shell.describe());
    run.refuse(PolicyDenied(
        "policy denies running \"" + run.command + "\": " + run.shell.describe(), 0, "policy"));
  }
  if (run.shell.decision == Decision::Ask) approve(run, ActionType::Shell, run.command, run.shell);
  auto require_allow = [&](ActionType action, bool requested, std::string_view mode_text) {
    if (!requested || options_.policy.is_allowed(action)) return;
    if (const PolicyEvaluation asked = options_.policy.explain(action, "*");
        asked.decision == Decision::Ask) {
      approve(run, action, "*", asked);
      return;
    }
    const std::string word(to_string(action));
    const std::string why = word + " mode " + std::string(mode_text) +
                            " was requested, but the action policy does not allow " + word + " (" +
                            options_.policy.explain(action, "*").describe() +
                            "); add a rule {\"action\": \"" + word +
                            "\", \"target\": \"*\", \"decision\": \"allow\"}";
    run.deny(word, why);
    run.refuse(PolicyDenied(why, 0, "policy"));
  };
  require_allow(ActionType::Network, options_.network.mode != NetworkMode::DenyAll,
                to_string(options_.network.mode));
  require_allow(ActionType::Secrets, options_.secret_policy.mode != SecretMode::DenyAll,
                to_string(options_.secret_policy.mode));
}

// 2. The request: everything the backend needs, the working directory
// checked (the rest of the options were checked by the constructor).
ExecutionRequest Sandbox::build_request(Run& run, const std::vector<std::string>& argv,
                                        const ExecuteOptions& options) {
  if (!options.cwd.empty()) {
    auto checked = workspace::check_relative_path(options.cwd);
    if (!checked) {
      run.refuse(SandboxConfigError(
          "working directory " + options.cwd + ": " + checked.error().to_string(), 0, "cwd"));
    }
    std::error_code ec;
    if (!std::filesystem::is_directory(options_.workspace / *checked, ec)) {
      run.refuse(SandboxConfigError(
          "working directory " + options.cwd + ": not a directory in the workspace", 0, "cwd"));
    }
  }
  ExecutionRequest request;
  request.argv = argv;
  request.workspace = options_.workspace;
  request.cwd = options.cwd;
  const auto host_env = options_.host_environment ? *options_.host_environment : host_environment();
  std::vector<std::string> values;
  for (const std::string& name : options_.secret_policy.explicit_env) {
    if (auto it = host_env.find(name); it != host_env.end()) {
      if (!it->second.empty() && !SecretScrubber::scrubbable(it->second))
        run.unscrubbable_secrets.push_back(name);
      values.push_back(it->second);
    }
  }
  try {
    scrubber_.add_secrets(values);
  } catch (const SandboxConfigError& error) {
    run.refuse(error);  // stage "secret": the CLI names --secret, the protocol `secrets`
  }
  request.environment =
      build_sandbox_environment(options_.secret_policy, host_env, options_.environment);
  request.limits = options_.limits;
  request.network = options_.network;
  request.binds = options_.binds;
  if (!options_.home.empty())
    request.binds.push_back({options_.home, std::string(core::kSandboxHome), true});
  request.seccomp_profile = options_.seccomp_profile;
  request.hidden_workspace_paths = hidden_workspace_paths_;
  request.secrets = options_.secret_policy;
  request.execution_id = run.id;
  request.cancel_fd = options.cancel_fd;
  request.stdin_fd = options.stdin_fd;
  request.terminal = options.terminal;
  request.terminal_input_fd = options.terminal_input_fd;
  request.terminal_resize_fd = options.terminal_resize_fd;
  return request;
}

// 3. How strongly is each dimension enforced here? Decided once, audited,
// carried in the result; a requested dimension enforced less than strongly,
// and not accepted, refuses the run.
void Sandbox::decide_enforcement(Run& run) {
  run.verdicts = enforcement_plan();
  // The secrets dimension is weaker for this run, and refused unless
  // accepted as a backend that cannot enforce it would be, when a session's
  // earlier runs registered values this run does not (it could move what
  // their checks marked, or could not mark, to where no mark is, past the
  // session's review), or when a registered value is too short to scrub (it
  // would match everywhere).
  std::vector<std::pair<std::string, std::string>> weaker_secrets;  // reason, fix
  if (run.session && run.session->needs_values_beyond(scrubber_)) {
    weaker_secrets.emplace_back(
        "earlier runs of session " + options_.session +
            " registered secret values that this run does not, so the session's review could "
            "not follow what this run does with what they left",
        "register the same values (--secret) in every run of the session");
  }
  if (!run.unscrubbable_secrets.empty()) {
    std::string names;
    for (const std::string& name : run.unscrubbable_secrets)
      names += (names.empty() ? "" : ", ") + name;
    weaker_secrets.emplace_back(
        "the value of " + names + " is under " + std::to_string(SecretScrubber::kMinSecretLength) +
            " bytes (without surrounding white space), too short to be found reliably: it is "
            "neither scrubbed from the output nor checked in the changes",
        "register a value of at least " + std::to_string(SecretScrubber::kMinSecretLength) +
            " bytes");
  }
  const bool weaker_for_this_run = !weaker_secrets.empty();
  for (EnforcementDecision& decision : run.verdicts) {
    if (!weaker_for_this_run || decision.dimension != Dimension::Secrets ||
        decision.level != EnforcementLevel::StronglyEnforced)
      continue;
    decision.level = EnforcementLevel::PartiallyEnforced;
    decision.requested = true;
    decision.accepted = options_.accept_weaker.count(Dimension::Secrets) > 0;
    decision.reason.clear();
    decision.fix.clear();
    for (const auto& [reason, fix] : weaker_secrets) {
      decision.reason += (decision.reason.empty() ? "" : "; ") + reason;
      decision.fix += (decision.fix.empty() ? "" : "; ") + fix;
    }
  }
  // Pending: appended together with the Running transition (run_and_scrub),
  // or by the refusal below (Run::deny appends what is pending first).
  run.pending.push_back(network_record(
      "*", std::nullopt, "any", options_.network.mode == NetworkMode::DenyAll ? "deny" : "allow",
      run.backend_name, std::string(to_string(run.verdicts[0].level)),
      "network mode " + std::string(to_string(options_.network.mode))));
  const EnforcementDecision* refused = nullptr;
  for (const EnforcementDecision& decision : run.verdicts) {
    const bool weak = decision.level != EnforcementLevel::StronglyEnforced;
    const bool blocks = weak && decision.requested && !decision.accepted;
    std::string detail = std::string(to_string(decision.level)) + ": " + decision.reason;
    if (weak && decision.accepted) detail += " (weaker level accepted with --allow-weaker)";
    if (weak && !decision.requested) detail += " (default limits: reported, not refused)";
    run.pending.push_back(
        {.action = "enforcement",
         .target = std::string(to_string(decision.dimension)),
         .decision = blocks ? "deny" : "allow",
         .container_id = run.backend_name,
         .isolation_level = run.level,
         .detail = detail,
         .extra = {{"enforcement_level", std::string(to_string(decision.level))}}});
    if (blocks && refused == nullptr) refused = &decision;
  }
  if (refused != nullptr) {
    const std::string dimension(to_string(refused->dimension));
    const bool for_this_run = weaker_for_this_run && refused->dimension == Dimension::Secrets;
    std::string message =
        dimension + ": " +
        (for_this_run ? std::string("not enforced strongly for this run")
                      : "the " + run.backend_name + " backend cannot enforce this strongly here") +
        " (" + std::string(to_string(refused->level)) + ": " + refused->reason + ")";
    if (!refused->fix.empty()) message += "; fix: " + refused->fix;
    message += "; or accept the weaker level with --allow-weaker " + dimension;
    run.deny("shell", "refused: " + message);
    run.refuse(SandboxUnsupportedPolicyError(message, 0, "enforcement"));
  }
}

// 4. The run, its output scrubbed as it streams, its result audited.
ProcessResult Sandbox::run_and_scrub(Run& run, ExecutionRequest& request,
                                     const ExecuteOptions& options) {
  for (const auto& bind : options_.binds) {
    run.pending.push_back({.action = "bind",
                           .target = bind.host.string() + " -> " + bind.sandbox_path,
                           .decision = "allow",
                           .container_id = run.backend_name,
                           .isolation_level = run.level,
                           .detail = bind.writable ? "read-write bind into the sandbox"
                                                   : "read-only bind into the sandbox"});
  }
  // Names only: a value may be a secret the caller did not mark as one.
  for (const auto& [name, value] : options_.environment) {
    run.pending.push_back({.action = "env",
                           .target = name,
                           .decision = "allow",
                           .container_id = run.backend_name,
                           .isolation_level = run.level,
                           .detail = is_dangerous_environment_variable(name)
                                         ? "set explicitly; changes how programs load code"
                                         : "set explicitly"});
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
  run.lifecycle.transition(LifecycleState::Running, run.pending);
  run.write_pending();
  // Files the host changes from now on while the run goes on are marked at
  // import (Workspace::import_overlay).
  run.started = workspace_.stamp_now();
  try {
    run.outcome = backend_->execute(request, std::move(run.prepared));
  } catch (...) {
    run.lifecycle.transition(LifecycleState::Failed);
    backend_->cleanup();
    run.finish(true);
    throw;
  }
  deliver(OutputStream::Stdout, out_stream.finish());
  deliver(OutputStream::Stderr, err_stream.finish());
  ProcessResult result = std::move(run.outcome.result);
  result.stdout_data = std::move(stdout_text);
  result.stderr_data = std::move(stderr_text);
  result.command = run.command;
  result.isolation_level = run.level;
  result.enforcement = levels_of(run.verdicts);
  result.enforcement_decisions = run.verdicts;
  audit_network_accesses(run, result);
  const bool succeeded =
      result.exit_code == 0 && result.termination_reason == TerminationReason::None;
  run.lifecycle.transition(succeeded ? LifecycleState::Completing : LifecycleState::Failed,
                           run.pending);
  std::string detail = "ran via the " + run.backend_name + " backend";
  if (result.termination_reason != TerminationReason::None) {
    detail += "; termination: " + std::string(to_string(result.termination_reason));
  }
  if (!result.termination_detail.empty()) detail += " (" + result.termination_detail + ")";
  if (out_stream.redacted() || err_stream.redacted()) {
    detail += "; secrets were redacted from the output";
  }
  run.pending.push_back({.action = "shell",
                         .target = run.command,
                         .decision = std::string(to_string(run.shell.decision)),
                         .exit_code = result.exit_code,
                         .duration_ms = result.duration_ms,
                         .container_id = run.backend_name + ":" + run.id,
                         .isolation_level = run.level,
                         .detail = detail});
  run.write_pending();
  core::trace_phase("sandbox: result audited");
  return result;
}

// Every decision of the network policy during the run (the proxy's
// requests, an allowlist's names): scrubbed first, since a host name can
// carry a secret out as well as any other text.
void Sandbox::audit_network_accesses(Run& run, ProcessResult& result) {
  const std::string level(to_string(result.enforcement.network));
  for (NetworkAccess& access : result.network_accesses) {
    access.host = scrubber_.redact(access.host);
    access.reason = scrubber_.redact(access.reason);
    for (auto& address : access.addresses)
      address = scrubber_.redact(address);
    std::string addresses;
    for (const auto& address : access.addresses)
      addresses += (addresses.empty() ? "" : " ") + address;
    run.pending.push_back({.action = "network",
                           .target = access.host,
                           .decision = access.allowed ? "allow" : "deny",
                           .container_id = run.backend_name + ":" + run.id,
                           .isolation_level = run.level,
                           .detail = access.reason,
                           .extra = {{"method", access.method},
                                     {"destination", access.host},
                                     {"port", static_cast<std::int64_t>(access.port)},
                                     {"addresses", addresses},
                                     {"bytes_up", static_cast<std::int64_t>(access.bytes_up)},
                                     {"bytes_down", static_cast<std::int64_t>(access.bytes_down)},
                                     {"network", result.network},
                                     {"enforcement_level", level}}});
  }
}

// 6. The backend's cleanup; a failure is audited and leaves the lifecycle
// in RecoveryRequired. Its records are appended together once it is over.
void Sandbox::clean_up(Run& run) {
  core::trace_phase("sandbox: changes imported");
  run.lifecycle.transition(LifecycleState::Cleaning, run.pending);
  bool cleanup_ok = true;
  try {
    backend_->cleanup();
  } catch (const std::exception& error) {
    cleanup_ok = false;
    run.pending.push_back(
        {.action = "sandbox-cleanup",
         .target = run.id,
         .decision = "deny",
         .detail = std::string("cleanup failed, leftovers may remain: ") + error.what()});
  }
  run.finish(cleanup_ok);
  core::trace_phase("sandbox: cleaned up");
}

}  // namespace pulsebox
