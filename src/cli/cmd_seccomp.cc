// pulsebox seccomp check FILE | show NAME   [--json]
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/output.h"
#include "seccomp/compiler.h"
#include "seccomp/profile.h"

namespace pulsebox::cli {
namespace {

struct SeccompOptions {
  std::string profile;
  bool json = false;
};

std::string action_text(seccomp::Action action, int errno_ret) {
  std::string text(seccomp::to_string(action));
  if (action == seccomp::Action::Errno || action == seccomp::Action::Trace) {
    text += "(" + std::to_string(errno_ret) + ")";
  }
  return text;
}

std::string args_text(const std::vector<seccomp::ArgCheck>& args) {
  std::string text;
  for (const auto& arg : args) {
    text += (text.empty() ? "" : " && ") + std::string("arg") + std::to_string(arg.index) + " " +
            std::string(seccomp::to_string(arg.op)) + " " + std::to_string(arg.value);
    if (arg.op == seccomp::ArgOp::MaskedEqual)
      text += " (result " + std::to_string(arg.value_two) + ")";
  }
  return text;
}

// Loads and compiles: a profile libseccomp rejects is as invalid as bad JSON.
core::Result<std::pair<seccomp::Profile, std::size_t>> load_and_compile(const std::string& name) {
  PB_TRY(profile, seccomp::load_profile(name));
  PB_TRY(filter, seccomp::compile(profile));
  return std::make_pair(std::move(profile), filter->program.size());
}

int run_check(const SeccompOptions& options) {
  auto loaded = load_and_compile(options.profile);
  if (!loaded) {
    if (options.json) {
      std::cout << nlohmann::json{{"profile", options.profile},
                                  {"valid", false},
                                  {"error", loaded.error().to_string()}}
                       .dump()
                << "\n";
    } else {
      print_error(loaded.error().to_string());
    }
    return check_failure_status(loaded.error());
  }
  const auto& [profile, instructions] = loaded.value();
  if (options.json) {
    std::cout << nlohmann::json{{"profile", options.profile},
                                {"valid", true},
                                {"rules", profile.rules.size()},
                                {"bpf_instructions", instructions}}
                     .dump()
              << "\n";
  } else {
    std::cout << options.profile << ": valid seccomp profile, " << profile.rules.size()
              << " rules, default " << action_text(profile.default_action, profile.default_errno)
              << ", " << instructions << " BPF instructions\n";
  }
  return kExitOk;
}

int run_show(const SeccompOptions& options) {
  auto loaded = seccomp::load_profile(options.profile);
  if (!loaded) {
    print_error(loaded.error().to_string());
    return kExitUsage;
  }
  const seccomp::Profile& profile = loaded.value();
  if (options.json) {
    nlohmann::json rules = nlohmann::json::array();
    for (const auto& rule : profile.rules) {
      for (const auto& name : rule.names) {
        nlohmann::json args = nlohmann::json::array();
        for (const auto& arg : rule.args) {
          args.push_back({{"index", arg.index},
                          {"op", std::string(seccomp::to_string(arg.op))},
                          {"value", arg.value},
                          {"value_two", arg.value_two}});
        }
        rules.push_back({{"syscall", name},
                         {"action", std::string(seccomp::to_string(rule.action))},
                         {"errno", rule.errno_ret},
                         {"args", args}});
      }
    }
    std::cout << nlohmann::json{{"profile", profile.name},
                                {"default_action",
                                 std::string(seccomp::to_string(profile.default_action))},
                                {"default_errno", profile.default_errno},
                                {"architectures", profile.architectures},
                                {"rules", rules}}
                     .dump(2)
              << "\n";
    return kExitOk;
  }
  std::cout << "profile " << profile.name << ": default "
            << action_text(profile.default_action, profile.default_errno) << "\n";
  for (const auto& rule : profile.rules) {
    const std::string action = action_text(rule.action, rule.errno_ret);
    const std::string condition = args_text(rule.args);
    for (const auto& name : rule.names) {
      std::cout << "  " << name << std::string(name.size() < 24 ? 24 - name.size() : 1, ' ')
                << action << (condition.empty() ? "" : "  if " + condition) << "\n";
    }
  }
  return kExitOk;
}

}  // namespace

void register_seccomp_commands(CLI::App& app, int& exit_code) {
  CLI::App* group = app.add_subcommand("seccomp", "Check and show seccomp profiles");
  group->require_subcommand(1);
  auto check_options = std::make_shared<SeccompOptions>();
  CLI::App* check = group->add_subcommand(
      "check", "Validate a seccomp profile (Docker/OCI JSON) and compile it; exit 1 if invalid");
  check->add_option("FILE", check_options->profile, "Profile file or built-in name")->required();
  check->add_flag("--json", check_options->json, "Print a JSON object");
  check->callback([check_options, &exit_code] { exit_code = run_check(*check_options); });
  auto show_options = std::make_shared<SeccompOptions>();
  CLI::App* show = group->add_subcommand("show", "Print a profile's resolved rules");
  show->add_option("NAME", show_options->profile, "default, strict, permissive or a file")
      ->required();
  show->add_flag("--json", show_options->json, "Print a JSON object");
  show->callback([show_options, &exit_code] { exit_code = run_show(*show_options); });
}

}  // namespace pulsebox::cli
