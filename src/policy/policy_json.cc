#include "policy/policy_json.h"

#include <nlohmann/json.hpp>

#include "core/fs.h"
#include "core/json_parse.h"
#include "core/text.h"
#include "core/throw_error.h"

namespace pulsebox::policy {
namespace {

using core::Error;
using core::ErrorKind;
using nlohmann::json;

constexpr std::uint64_t kMaxPolicyFileBytes = 4ull << 20;

Error field_error(std::string_view source, const std::string& field, const std::string& problem) {
  return Error(ErrorKind::kInvalidInput, "policy",
               std::string(source) + ": " + field + ": " + problem);
}

std::string describe_json(const json& value) {
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return std::string(value.type_name()) + " " + text;
}

core::Result<std::string> expect_string(std::string_view source, const std::string& field,
                                        const json& value) {
  if (!value.is_string()) {
    return field_error(source, field, "expected a string, got " + describe_json(value));
  }
  return value.get<std::string>();
}

core::Result<Decision> expect_decision(std::string_view source, const std::string& field,
                                       const json& value) {
  PB_TRY(word, expect_string(source, field, value));
  if (auto decision = parse_decision(word)) return *decision;
  return field_error(source, field,
                     "expected one of \"allow\", \"deny\", \"ask\", got \"" + word + "\"");
}

std::string action_list() {
  std::string out;
  for (ActionType action : kAllActionTypes) {
    if (!out.empty()) out += ", ";
    out += "\"" + std::string(to_string(action)) + "\"";
  }
  return out;
}

core::Result<PolicyRule> parse_rule(std::string_view source, const std::string& field,
                                    const json& value) {
  if (!value.is_object()) {
    return field_error(source, field, "expected an object, got " + describe_json(value));
  }
  PolicyRule rule;
  bool has_decision = false;
  for (const auto& [key, item] : value.items()) {
    const std::string item_field = field + "." + key;
    if (key == "action") {
      PB_TRY(word, expect_string(source, item_field, item));
      if (word == "*") {
        rule.action.reset();
      } else if (auto action = parse_action_type(word)) {
        rule.action = *action;
      } else {
        return field_error(source, item_field,
                           "expected \"*\" or one of " + action_list() + ", got \"" + word + "\"");
      }
    } else if (key == "target" || key == "target_pattern") {
      PB_TRY(target, expect_string(source, item_field, item));
      if (target.empty()) return field_error(source, item_field, "expected a non-empty pattern");
      if (!core::is_valid_utf8(target)) {
        return field_error(source, item_field, "expected valid UTF-8");
      }
      rule.target_pattern = std::move(target);
    } else if (key == "decision") {
      PB_TRY(decision, expect_decision(source, item_field, item));
      rule.decision = decision;
      has_decision = true;
    } else if (key == "reason") {
      PB_TRY(reason, expect_string(source, item_field, item));
      rule.reason = std::move(reason);
    } else {
      return field_error(source, item_field,
                         "unknown key (expected \"action\", \"target\", \"decision\", \"reason\")");
    }
  }
  if (!value.contains("action")) {
    return field_error(source, field + ".action", "missing (expected \"*\" or an action name)");
  }
  if (!has_decision) {
    return field_error(source, field + ".decision",
                       "missing (expected \"allow\", \"deny\" or \"ask\")");
  }
  return rule;
}

}  // namespace

core::Result<ActionPolicy> parse_policy_json(std::string_view text, std::string_view source) {
  PB_TRY(document, core::parse_json(text, source));
  if (!document.is_object()) {
    return field_error(
        source, "(top level)",
        "expected an object with \"defaults\" and \"rules\", got " + describe_json(document));
  }

  ActionPolicy policy;
  std::vector<PolicyRule> rules;
  for (const auto& [key, value] : document.items()) {
    if (key == "defaults") {
      if (!value.is_object()) {
        return field_error(
            source, "defaults",
            "expected an object such as {\"read\": \"allow\"}, got " + describe_json(value));
      }
      for (const auto& [action_word, decision_value] : value.items()) {
        const std::string field = "defaults." + action_word;
        auto action = parse_action_type(action_word);
        if (!action) {
          return field_error(source, field,
                             "unknown action (expected one of " + action_list() + ")");
        }
        PB_TRY(decision, expect_decision(source, field, decision_value));
        policy.set_default(*action, decision);
      }
    } else if (key == "rules") {
      if (!value.is_array()) {
        return field_error(source, "rules", "expected an array, got " + describe_json(value));
      }
      for (std::size_t i = 0; i < value.size(); ++i) {
        PB_TRY(rule, parse_rule(source, "rules[" + std::to_string(i) + "]", value[i]));
        rules.push_back(std::move(rule));
      }
    } else {
      return field_error(source, key, "unknown key (expected \"defaults\" or \"rules\")");
    }
  }
  // The array is in priority order and add_rule inserts at the front.
  for (auto it = rules.rbegin(); it != rules.rend(); ++it)
    policy.add_rule(std::move(*it));
  return policy;
}

core::Result<ActionPolicy> load_policy_file(const std::string& path) {
  auto text = core::read_regular_file(path, kMaxPolicyFileBytes, "policy file");
  // Any unusable policy file is a configuration error (SandboxConfigError).
  if (!text) return std::move(text).error().with_kind(ErrorKind::kInvalidInput);
  return parse_policy_json(*text, path);
}

std::string policy_to_json(const ActionPolicy& policy) {
  json document;
  json defaults = json::object();
  for (ActionType action : kAllActionTypes) {
    if (auto decision = policy.default_for(action)) {
      defaults[std::string(to_string(action))] = std::string(to_string(*decision));
    }
  }
  document["defaults"] = defaults;
  json rules = json::array();
  for (const PolicyRule& rule : policy.rules()) {
    json item;
    item["action"] = rule.action ? std::string(to_string(*rule.action)) : std::string("*");
    item["target"] = rule.target_pattern;
    item["decision"] = std::string(to_string(rule.decision));
    item["reason"] = rule.reason;
    rules.push_back(std::move(item));
  }
  document["rules"] = rules;
  return document.dump(2) + "\n";
}

}  // namespace pulsebox::policy

namespace pulsebox {

std::string ActionPolicy::to_json() const {
  return policy::policy_to_json(*this);
}

ActionPolicy ActionPolicy::from_json(std::string_view json_text, std::string_view source_name) {
  return core::value_or_throw(policy::parse_policy_json(json_text, source_name));
}

ActionPolicy ActionPolicy::load_file(const std::filesystem::path& path) {
  return core::value_or_throw(policy::load_policy_file(path.string()));
}

void ActionPolicy::save_file(const std::filesystem::path& path) const {
  core::check_or_throw(core::write_file_atomic(path, to_json()));
}

}  // namespace pulsebox
