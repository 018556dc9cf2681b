// What the stages of one Sandbox::execute share (facade/execute.cc runs
// them; facade/changes.cc decides what becomes of the run's changes).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pulsebox/lifecycle.h"
#include "pulsebox/sandbox.h"
#include "workspace/session_store.h"

namespace pulsebox {

// One execute(): what its stages share.
struct Sandbox::Run {
  Run(std::string run_id, std::string command_text, AuditLog* audit_log, const Backend& backend)
      : id(std::move(run_id)),
        command(std::move(command_text)),
        level(backend.isolation_level()),
        backend_name(backend.name()),
        audit(audit_log),
        lifecycle(id, audit_log) {}

  // What waits in `pending` is written before anything else is.
  ~Run() {
    try {
      write_pending();
    } catch (...) {  // NOLINT(bugprone-empty-catch): leaving by an exception already
    }
  }
  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;

  // Appends the records made together so far (one append).
  void write_pending() {
    if (pending.empty()) return;
    audit->record_all(pending);
    pending.clear();
  }
  // A record of a refusal of this run's command.
  void deny(const std::string& action, const std::string& detail) {
    write_pending();
    audit->record({.action = action,
                   .target = command,
                   .decision = "deny",
                   .container_id = backend_name,
                   .isolation_level = level,
                   .detail = detail});
  }
  // Ends the lifecycle (Failed, then Cleaning and Finalized) and throws.
  template <class Exception>
  [[noreturn]] void refuse(const Exception& exception) {
    write_pending();
    lifecycle.transition(LifecycleState::Failed);
    prepared.reset();  // a run prepare() set up, never started
    finish(true);
    throw exception;
  }
  // The Cleaning transition (unless clean_up() made it) and the end,
  // appended together with whatever else is pending. A supervisor that dies
  // while cleaning leaves leftovers that the next reconcile removes and
  // records.
  void finish(bool cleanup_ok) {
    if (lifecycle.state() != LifecycleState::Cleaning)
      lifecycle.transition(LifecycleState::Cleaning, pending);
    lifecycle.transition(cleanup_ok ? LifecycleState::Finalized : LifecycleState::RecoveryRequired,
                         pending);
    write_pending();
  }

  std::string id;
  std::string command;
  std::string level;
  std::string backend_name;
  AuditLog* audit;
  // Records made before the command starts, or once it ended, that are
  // appended together (AuditLog::record_all): the backend's choice, the
  // Starting transition, the network decision, the enforcement verdicts,
  // binds and variables with the Running transition; the network accesses
  // and the command's record with the transition after it; the Cleaning
  // transition, a failed cleanup's record and the end.
  std::vector<AuditRecord> pending;
  SandboxExecution lifecycle;
  PolicyEvaluation shell;  // the policy's verdict on the command
  std::unique_ptr<PreparedRun> prepared;
  std::vector<EnforcementDecision> verdicts;
  ExecutionOutcome outcome;
  Workspace::RunClock started;  // the workspace's stamp at the start
  // The run's session, locked for the run (SandboxOptions::session).
  std::optional<workspace::OpenSession> session;
  // Registered variables whose values are too short to scrub
  // (SecretScrubber::kMinSecretLength): the secrets dimension is weaker.
  std::vector<std::string> unscrubbable_secrets;
};

// Adds `text` to the result's termination detail ("; "-separated).
void append_detail(ProcessResult& result, const std::string& text);

}  // namespace pulsebox
