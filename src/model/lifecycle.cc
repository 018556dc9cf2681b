#include "pulsebox/lifecycle.h"

#include "pulsebox/audit.h"
#include "pulsebox/error.h"

namespace pulsebox {

std::string_view to_string(LifecycleState state) {
  switch (state) {
    case LifecycleState::Created:
      return "created";
    case LifecycleState::Starting:
      return "starting";
    case LifecycleState::Running:
      return "running";
    case LifecycleState::Stopping:
      return "stopping";
    case LifecycleState::Completing:
      return "completing";
    case LifecycleState::Failed:
      return "failed";
    case LifecycleState::Cleaning:
      return "cleaning";
    case LifecycleState::Finalized:
      return "finalized";
    case LifecycleState::RecoveryRequired:
      return "recovery_required";
  }
  return "unknown";
}

bool is_transition_allowed(LifecycleState from, LifecycleState to) {
  using S = LifecycleState;
  switch (from) {
    case S::Created:
      return to == S::Starting || to == S::Failed || to == S::Cleaning;
    case S::Starting:
      return to == S::Running || to == S::Failed || to == S::Cleaning;
    case S::Running:
      return to == S::Completing || to == S::Stopping || to == S::Failed;
    case S::Stopping:
      return to == S::Failed || to == S::Cleaning;
    case S::Completing:
      return to == S::Cleaning || to == S::Failed;
    case S::Failed:
      return to == S::Cleaning;
    case S::Cleaning:
      return to == S::Finalized || to == S::RecoveryRequired;
    case S::Finalized:
    case S::RecoveryRequired:
      return false;
  }
  return false;
}

bool is_terminal(LifecycleState state) {
  return state == LifecycleState::Finalized || state == LifecycleState::RecoveryRequired;
}

SandboxExecution::SandboxExecution(std::string execution_id, AuditLog* audit)
    : id_(std::move(execution_id)), audit_(audit) {}

AuditRecord SandboxExecution::record_of(LifecycleState to, bool allowed) const {
  const std::string move = std::string(to_string(state_)) + " -> " + std::string(to_string(to));
  AuditRecord record;
  record.action = "lifecycle-transition";
  record.target = id_;
  record.decision = allowed ? "allow" : "deny";
  record.detail = allowed ? move : "refused transition " + move;
  record.extra = {{"from", std::string(to_string(state_))}, {"to", std::string(to_string(to))}};
  return record;
}

void SandboxExecution::transition(LifecycleState to) {
  const bool allowed = is_transition_allowed(state_, to);
  if (audit_ != nullptr) audit_->record(record_of(to, allowed));
  if (!allowed) refused(to);
  state_ = to;
}

void SandboxExecution::transition(LifecycleState to, std::vector<AuditRecord>& batch) {
  const bool allowed = is_transition_allowed(state_, to);
  if (audit_ != nullptr) batch.push_back(record_of(to, allowed));
  if (!allowed) {
    if (audit_ != nullptr) {
      audit_->record_all(batch);
      batch.clear();
    }
    refused(to);
  }
  state_ = to;
}

void SandboxExecution::refused(LifecycleState to) const {
  throw SandboxError("execution " + id_ + ": invalid lifecycle transition " +
                         std::string(to_string(state_)) + " -> " + std::string(to_string(to)),
                     0, "lifecycle");
}

}  // namespace pulsebox
