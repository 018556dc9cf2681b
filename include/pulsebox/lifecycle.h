// The lifecycle of one sandboxed execution, with exactly the reference's
// transitions:
//   CREATED    -> STARTING | FAILED | CLEANING
//   STARTING   -> RUNNING | FAILED | CLEANING
//   RUNNING    -> COMPLETING | STOPPING | FAILED
//   STOPPING   -> FAILED | CLEANING
//   COMPLETING -> CLEANING | FAILED
//   FAILED     -> CLEANING
//   CLEANING   -> FINALIZED | RECOVERY_REQUIRED
// FINALIZED and RECOVERY_REQUIRED are terminal.
//
// Usage:
//   pulsebox::SandboxExecution execution("run-42", &audit_log);
//   execution.transition(pulsebox::LifecycleState::Starting);
// Every transition, allowed or refused, is written to the audit log
// (action "lifecycle-transition"); a refused one throws SandboxError.
// With a batch, the record joins records made with it and the caller
// appends them together (AuditLog::record_all) before anything the new
// state allows happens:
//   std::vector<pulsebox::AuditRecord> batch = {...};
//   execution.transition(pulsebox::LifecycleState::Running, batch);
//   audit_log.record_all(batch);
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "pulsebox/export.h"

namespace pulsebox {

class AuditLog;
struct AuditRecord;

enum class LifecycleState {
  Created,
  Starting,
  Running,
  Stopping,
  Completing,
  Failed,
  Cleaning,
  Finalized,
  RecoveryRequired,
};

PULSEBOX_API std::string_view to_string(LifecycleState state);
PULSEBOX_API bool is_transition_allowed(LifecycleState from, LifecycleState to);
PULSEBOX_API bool is_terminal(LifecycleState state);

class PULSEBOX_API SandboxExecution {
 public:
  // `audit` may be null (then nothing is logged); it must outlive this object.
  SandboxExecution(std::string execution_id, AuditLog* audit);

  const std::string& id() const { return id_; }
  LifecycleState state() const { return state_; }
  void transition(LifecycleState to);
  // As transition(to), but an allowed transition's record is added to
  // `batch` instead of written (nothing is added without an audit log). A
  // refused one appends `batch` and its own record at once, clears `batch`
  // and throws.
  void transition(LifecycleState to, std::vector<AuditRecord>& batch);

 private:
  AuditRecord record_of(LifecycleState to, bool allowed) const;
  [[noreturn]] void refused(LifecycleState to) const;

  std::string id_;
  AuditLog* audit_;
  LifecycleState state_ = LifecycleState::Created;
};

}  // namespace pulsebox
