// The action policy: may the agent read, write, run a shell, use the network...?
//
// Usage:
//   pulsebox::ActionPolicy policy;                 // the reference defaults
//   policy.add_rule({pulsebox::ActionType::Write, "src/*", pulsebox::Decision::Allow,
//                    "agent may edit sources"});
//   if (policy.evaluate(pulsebox::ActionType::Write, "src/main.cc") == Decision::Allow) ...
//
//   auto loaded = pulsebox::ActionPolicy::load_file("policy.json");  // throws
//                                                    // SandboxConfigError naming
//                                                    // the file and the field
//
// Evaluation order: rules, newest first (add_rule inserts at the front, and the
// JSON "rules" array is read in priority order: the first matching rule wins);
// then the parent policy, if any; then the per-action default; then DENY.
//
// Targets and patterns are normalised before matching: Unicode NFC, '\' to
// '/', lower case, a drive letter ("c:") stripped, "//" collapsed, leading and
// trailing '/' stripped. Patterns are fnmatch-style globs on the normalised
// text: '*' (and '**') match any run of characters *including* '/', '?' one
// character, "[abc]" / "[!abc]" a set. Targets are bytes (file names need
// not be UTF-8): each byte of a malformed UTF-8 sequence is matched as one
// character of its own (a private-use code point, U+10FE80 + byte - 0x80),
// so "*" and "?" match it and a rule can never mistake it for another name.
#pragma once

#include <cstddef>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pulsebox/export.h"

namespace pulsebox {

enum class ActionType { Read, Write, Delete, Rename, Shell, Git, Python, Network, Secrets };
enum class Decision { Allow, Deny, Ask };

inline constexpr ActionType kAllActionTypes[] = {
    ActionType::Read,   ActionType::Write,   ActionType::Delete,
    ActionType::Rename, ActionType::Shell,   ActionType::Git,
    ActionType::Python, ActionType::Network, ActionType::Secrets};

// "read", "write", ... and "allow", "deny", "ask" (the JSON spellings).
PULSEBOX_API std::string_view to_string(ActionType action);
PULSEBOX_API std::string_view to_string(Decision decision);
// Case-insensitive; nullopt for an unknown word.
PULSEBOX_API std::optional<ActionType> parse_action_type(std::string_view word);
PULSEBOX_API std::optional<Decision> parse_decision(std::string_view word);

struct PolicyRule {
  // nullopt matches every action ("*" in JSON).
  std::optional<ActionType> action;
  std::string target_pattern = "*";
  Decision decision = Decision::Deny;
  std::string reason;

  bool operator==(const PolicyRule&) const = default;
};

// Why evaluate() decided what it did (for `pulsebox policy eval` and audits).
struct PolicyEvaluation {
  enum class Source { Rule, Parent, Default, Fallback };
  Decision decision = Decision::Deny;
  Source source = Source::Fallback;
  // For Source::Rule: the index in rules() and the rule itself.
  std::optional<std::size_t> rule_index;
  std::optional<PolicyRule> rule;
  std::string normalized_target;

  // One line, e.g. `deny by rule #1 (write ".git/hooks/**": hooks run on the host)`.
  PULSEBOX_API std::string describe() const;
};

class PULSEBOX_API ActionPolicy {
 public:
  // The reference defaults: READ allow; WRITE, DELETE, RENAME, SHELL, NETWORK,
  // SECRETS deny; GIT, PYTHON ask.
  ActionPolicy();

  static std::map<ActionType, Decision> reference_defaults();

  void set_default(ActionType action, Decision decision) { defaults_[action] = decision; }
  // The default for `action`, or nullopt (which evaluates to DENY).
  std::optional<Decision> default_for(ActionType action) const;
  void clear_defaults() { defaults_.clear(); }

  // Inserts at the front: the newest rule wins.
  void add_rule(PolicyRule rule);
  const std::vector<PolicyRule>& rules() const { return rules_; }

  void set_parent(std::shared_ptr<const ActionPolicy> parent) { parent_ = std::move(parent); }
  const std::shared_ptr<const ActionPolicy>& parent() const { return parent_; }

  Decision evaluate(ActionType action, std::string_view target) const {
    return explain(action, target).decision;
  }
  PolicyEvaluation explain(ActionType action, std::string_view target) const;
  bool is_allowed(ActionType action, std::string_view target = "*") const {
    return evaluate(action, target) == Decision::Allow;
  }
  bool requires_approval(ActionType action, std::string_view target = "*") const {
    return evaluate(action, target) == Decision::Ask;
  }

  // JSON in the reference format:
  //   {"defaults": {"read": "allow", ...},
  //    "rules": [{"action": "write", "target": "src/*", "decision": "allow", "reason": "..."}]}
  // Defaults missing from the JSON keep the reference defaults. Unknown keys
  // are errors (a misspelt "decison" must not silently mean DENY or ALLOW).
  std::string to_json() const;
  // Throw SandboxConfigError with "<source>: <field>: <what was expected>".
  static ActionPolicy from_json(std::string_view json_text,
                                std::string_view source_name = "<policy>");
  static ActionPolicy load_file(const std::filesystem::path& path);
  void save_file(const std::filesystem::path& path) const;

 private:
  PolicyEvaluation explain_normalized(ActionType action, const std::string& normalized,
                                      bool target_valid) const;

  std::map<ActionType, Decision> defaults_;
  std::vector<PolicyRule> rules_;
  std::shared_ptr<const ActionPolicy> parent_;
};

// The normalisation described above (NFC, `\` to `/`, root-locale full lower
// case); nullopt only if the Unicode library fails.
PULSEBOX_API std::optional<std::string> normalize_policy_target(std::string_view target);

// fnmatch-style glob on UTF-8 text (see above); linear in practice, and never
// worse than pattern length x text length.
PULSEBOX_API bool glob_match(std::string_view pattern, std::string_view text);

}  // namespace pulsebox
