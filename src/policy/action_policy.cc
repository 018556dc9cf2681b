#include <algorithm>
#include <optional>
#include <string>

#include "core/byte_names.h"
#include "core/text.h"
#include "core/unicode_case.h"
#include "pulsebox/policy.h"

namespace pulsebox {

std::string_view to_string(ActionType action) {
  switch (action) {
    case ActionType::Read:
      return "read";
    case ActionType::Write:
      return "write";
    case ActionType::Delete:
      return "delete";
    case ActionType::Rename:
      return "rename";
    case ActionType::Shell:
      return "shell";
    case ActionType::Git:
      return "git";
    case ActionType::Python:
      return "python";
    case ActionType::Network:
      return "network";
    case ActionType::Secrets:
      return "secrets";
  }
  return "unknown";
}

std::string_view to_string(Decision decision) {
  switch (decision) {
    case Decision::Allow:
      return "allow";
    case Decision::Deny:
      return "deny";
    case Decision::Ask:
      return "ask";
  }
  return "deny";
}

std::optional<ActionType> parse_action_type(std::string_view word) {
  const std::string lower = core::ascii_lower(word);
  for (ActionType action : kAllActionTypes) {
    if (to_string(action) == lower) return action;
  }
  return std::nullopt;
}

std::optional<Decision> parse_decision(std::string_view word) {
  const std::string lower = core::ascii_lower(word);
  for (Decision decision : {Decision::Allow, Decision::Deny, Decision::Ask}) {
    if (to_string(decision) == lower) return decision;
  }
  return std::nullopt;
}

std::optional<std::string> normalize_policy_target(std::string_view target) {
  // Names are bytes: each byte of a malformed sequence becomes one character
  // of its own, so '*' and '?' treat it as they treat any character and no
  // two names share a spelling (a replacement character would merge them).
  // ASCII text is its own NFC and its full lower case is ASCII's: most
  // paths skip the Unicode library (a commit normalises every path it holds).
  const bool ascii = std::all_of(target.begin(), target.end(),
                                 [](char c) { return static_cast<unsigned char>(c) < 0x80; });
  std::optional<std::string> lowered;
  if (ascii) {
    lowered = core::ascii_lower(target);
  } else {
    const std::string spelled =
        core::is_valid_utf8(target) ? std::string(target) : core::spell_malformed_utf8(target);
    const auto composed = core::nfc(spelled);
    if (!composed) return std::nullopt;
    lowered = core::full_lower(*composed);
    if (!lowered) return std::nullopt;
  }
  std::replace(lowered->begin(), lowered->end(), '\\', '/');

  std::string_view view = *lowered;
  if (view.size() >= 2 && view[1] == ':' && view[0] >= 'a' && view[0] <= 'z') view.remove_prefix(2);
  std::string collapsed;
  collapsed.reserve(view.size());
  for (char c : view) {
    if (c == '/' && !collapsed.empty() && collapsed.back() == '/') continue;
    collapsed.push_back(c);
  }
  std::size_t begin = 0;
  std::size_t end = collapsed.size();
  while (begin < end && collapsed[begin] == '/')
    ++begin;
  while (end > begin && collapsed[end - 1] == '/')
    --end;
  return collapsed.substr(begin, end - begin);
}

std::string PolicyEvaluation::describe() const {
  std::string out(to_string(decision));
  switch (source) {
    case Source::Rule: {
      out += " by rule #" + std::to_string(*rule_index + 1) + " (";
      out += rule->action ? std::string(to_string(*rule->action)) : std::string("*");
      out += " \"" + rule->target_pattern + "\"";
      if (!rule->reason.empty()) out += ": " + rule->reason;
      out += ")";
      break;
    }
    case Source::Parent:
      out += " by the parent policy";
      break;
    case Source::Default:
      out += " by the default for this action";
      break;
    case Source::Fallback:
      out += " (no rule and no default: deny)";
      break;
  }
  return out;
}

std::map<ActionType, Decision> ActionPolicy::reference_defaults() {
  return {
      {ActionType::Read, Decision::Allow},   {ActionType::Write, Decision::Deny},
      {ActionType::Delete, Decision::Deny},  {ActionType::Rename, Decision::Deny},
      {ActionType::Shell, Decision::Deny},   {ActionType::Network, Decision::Deny},
      {ActionType::Secrets, Decision::Deny}, {ActionType::Git, Decision::Ask},
      {ActionType::Python, Decision::Ask},
  };
}

ActionPolicy::ActionPolicy() : defaults_(reference_defaults()) {}

std::optional<Decision> ActionPolicy::default_for(ActionType action) const {
  auto it = defaults_.find(action);
  if (it == defaults_.end()) return std::nullopt;
  return it->second;
}

void ActionPolicy::add_rule(PolicyRule rule) {
  rules_.insert(rules_.begin(), std::move(rule));
}

PolicyEvaluation ActionPolicy::explain(ActionType action, std::string_view target) const {
  const auto normalized = normalize_policy_target(target);
  return explain_normalized(action, normalized.value_or(std::string()), normalized.has_value());
}

PolicyEvaluation ActionPolicy::explain_normalized(ActionType action, const std::string& normalized,
                                                  bool target_valid) const {
  PolicyEvaluation result;
  result.normalized_target = normalized;
  if (!target_valid) return result;  // DENY, as the fallback
  for (std::size_t i = 0; i < rules_.size(); ++i) {
    const PolicyRule& rule = rules_[i];
    if (rule.action && *rule.action != action) continue;
    const auto pattern = normalize_policy_target(rule.target_pattern);
    // "*" normalises to itself; an empty pattern (e.g. "/") matches the root.
    if (!pattern || !glob_match(*pattern, normalized)) continue;
    result.decision = rule.decision;
    result.source = PolicyEvaluation::Source::Rule;
    result.rule_index = i;
    result.rule = rule;
    return result;
  }
  if (parent_) {
    PolicyEvaluation inherited = parent_->explain_normalized(action, normalized, true);
    if (inherited.source != PolicyEvaluation::Source::Fallback) {
      inherited.source = PolicyEvaluation::Source::Parent;
      return inherited;
    }
  }
  if (auto fallback = default_for(action)) {
    result.decision = *fallback;
    result.source = PolicyEvaluation::Source::Default;
    return result;
  }
  result.decision = Decision::Deny;
  result.source = PolicyEvaluation::Source::Fallback;
  return result;
}

}  // namespace pulsebox
