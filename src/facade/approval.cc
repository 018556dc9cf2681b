// ASK decisions of the action policy: the approver (SandboxOptions::approver)
// decides before execute() runs anything, and both sides are audited.
#include <exception>
#include <nlohmann/json.hpp>

#include "facade/run_state.h"
#include "pulsebox/error.h"
#include "pulsebox/sandbox.h"

namespace pulsebox {

std::string ApprovalRequest::to_json() const {
  nlohmann::json out = {{"action", std::string(pulsebox::to_string(action))},
                        {"target", target},
                        {"decision", "ask"},
                        {"rule", evaluation.describe()},
                        {"reason", evaluation.rule ? evaluation.rule->reason : std::string()},
                        {"execution_id", execution_id},
                        {"workspace", workspace.string()}};
  // The command is the untrusted caller's text: never fail on bytes that
  // are not UTF-8, replace them.
  return out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void Sandbox::approve(Run& run, ActionType action, const std::string& target,
                      const PolicyEvaluation& asked) {
  // On disk before anybody is asked: an approver may take its time.
  run.write_pending();
  const std::string word(to_string(action));
  const std::string what = action == ActionType::Shell ? "running \"" + run.command + "\""
                                                       : word + " for \"" + run.command + "\"";
  if (!options_.approver) {
    const std::string why = "policy asks before " + what + ": " + asked.describe() +
                            "; no approver was given (answer on a terminal, -y to accept, or "
                            "--approve-with CMD)";
    run.deny(word, why);
    run.refuse(PolicyDenied(why, 0, "policy"));
  }
  const ApprovalRequest request{.action = action,
                                .target = target,
                                .evaluation = asked,
                                .execution_id = run.id,
                                .workspace = options_.workspace};
  ApprovalAnswer answer;
  try {
    answer = options_.approver(request);
  } catch (const std::exception& error) {
    answer = {.approved = false, .approver = "approver", .detail = error.what()};
  }
  if (answer.approver.empty()) answer.approver = "approver";
  const std::string by =
      answer.approver + (answer.detail.empty() ? std::string() : " (" + answer.detail + ")");
  audit_->record({.action = "approval",
                  .target = target,
                  .decision = answer.approved ? "allow" : "deny",
                  .container_id = run.backend_name,
                  .isolation_level = run.level,
                  .detail = word + " asked by " + asked.describe() + "; decided by " + by,
                  .extra = {{"approver", answer.approver}, {"asked_action", word}}});
  if (answer.approved) return;
  const std::string why =
      "policy asks before " + what + ": " + asked.describe() + "; not approved by " + by;
  run.deny(word, why);
  run.refuse(PolicyDenied(why, 0, "policy"));
}

}  // namespace pulsebox
