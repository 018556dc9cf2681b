// pulsebox policy check FILE
// pulsebox policy eval [--policy FILE] ACTION TARGET
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/output.h"
#include "policy/policy_json.h"

namespace pulsebox::cli {
namespace {

struct PolicyOptions {
  std::string file;
  std::string policy_file;
  std::string action;
  std::string target;
  bool json = false;
};

std::string action_names() {
  std::string out;
  for (ActionType action : kAllActionTypes) {
    if (!out.empty()) out += ", ";
    out += to_string(action);
  }
  return out;
}

int run_check(const PolicyOptions& options) {
  auto loaded = policy::load_policy_file(options.file);
  if (!loaded) {
    if (options.json) {
      std::cout << nlohmann::json{{"file", options.file},
                                  {"valid", false},
                                  {"error", loaded.error().to_string()}}
                       .dump()
                << "\n";
    } else {
      print_error(loaded.error().to_string());
    }
    return check_failure_status(loaded.error());
  }
  const ActionPolicy& policy = *loaded;
  std::string defaults;
  for (ActionType action : kAllActionTypes) {
    if (auto decision = policy.default_for(action)) {
      if (!defaults.empty()) defaults += ", ";
      defaults += std::string(to_string(action)) + "=" + std::string(to_string(*decision));
    }
  }
  if (options.json) {
    std::cout << nlohmann::json{{"file", options.file},
                                {"valid", true},
                                {"rules", policy.rules().size()}}
                     .dump()
              << "\n";
  } else {
    std::cout << options.file << ": valid policy, " << policy.rules().size()
              << (policy.rules().size() == 1 ? " rule" : " rules") << "; defaults: " << defaults
              << "\n";
  }
  return kExitOk;
}

int run_eval(const PolicyOptions& options) {
  const auto action = parse_action_type(options.action);
  if (!action) {
    print_error("unknown action \"" + options.action + "\" (expected one of " + action_names() +
                ")");
    return kExitUsage;
  }
  ActionPolicy policy;
  if (!options.policy_file.empty()) {
    auto loaded = policy::load_policy_file(options.policy_file);
    if (!loaded) {
      print_error(loaded.error().to_string());
      return kExitUsage;
    }
    policy = std::move(loaded).value();
  }
  const PolicyEvaluation evaluation = policy.explain(*action, options.target);
  if (options.json) {
    nlohmann::json out{{"action", std::string(to_string(*action))},
                       {"target", options.target},
                       {"normalized_target", evaluation.normalized_target},
                       {"decision", std::string(to_string(evaluation.decision))},
                       {"explanation", evaluation.describe()}};
    if (evaluation.rule_index) out["rule_index"] = *evaluation.rule_index;
    std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    const bool colour = stdout_is_colour_terminal();
    const Colour tint = evaluation.decision == Decision::Allow ? Colour::Green
                        : evaluation.decision == Decision::Ask ? Colour::Yellow
                                                               : Colour::Red;
    std::string text = evaluation.describe();
    const std::string word(to_string(evaluation.decision));
    std::cout << paint(word, tint, colour) << text.substr(word.size()) << "\n";
  }
  switch (evaluation.decision) {
    case Decision::Allow:
      return 0;
    case Decision::Deny:
      return 1;
    case Decision::Ask:
      return 2;
  }
  return 1;
}

}  // namespace

void register_policy_commands(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<PolicyOptions>();
  CLI::App* policy = app.add_subcommand("policy", "Check and evaluate action policies");
  policy->require_subcommand(1);

  CLI::App* check = policy->add_subcommand(
      "check", "Validate a policy file (exit 0 valid, 1 invalid, 125 unusable input)");
  check->add_option("FILE", options->file, "Policy JSON file")->required();
  check->add_flag("--json", options->json, "Print a JSON object");
  check->callback([options, &exit_code] { exit_code = run_check(*options); });

  CLI::App* eval = policy->add_subcommand(
      "eval", "Decide ACTION on TARGET (exit 0 allow, 1 deny, 2 ask, 125 bad input)");
  eval->add_option("--policy", options->policy_file,
                   "Policy JSON file (default: the built-in defaults)");
  eval->add_option("ACTION", options->action, "read, write, delete, rename, shell, git, ...")
      ->required();
  eval->add_option("TARGET", options->target, "Path or command the action applies to")->required();
  eval->add_flag("--json", options->json, "Print a JSON object");
  eval->callback([options, &exit_code] { exit_code = run_eval(*options); });
}

}  // namespace pulsebox::cli
