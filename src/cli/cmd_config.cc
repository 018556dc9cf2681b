// pulsebox config show [--json] [--profile NAME] [-w DIR]: the settings a
// `pulsebox run` here would have, and where each came from (the defaults,
// a profile of the user's config file, the workspace's .pulsebox.json).
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "config/run_config.h"
#include "core/text.h"
#include "pulsebox/error.h"
#include "run/run_command.h"

namespace pulsebox::cli {

void register_config_commands(CLI::App& app, int& exit_code) {
  CLI::App* config = app.add_subcommand("config", "Profiles and config files of pulsebox run");
  config->require_subcommand(1);
  struct Flags {
    bool json = false;
    run::RunOptions options;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* show = config->add_subcommand(
      "show", "Print the effective settings of a run here and where each came from");
  show->add_flag("--json", flags->json, "Print a JSON object");
  show->add_option("--profile", flags->options.profile, "As pulsebox run --profile");
  show->add_option("-w,--workspace", flags->options.workspace, "As pulsebox run -w");
  show->callback([flags, &exit_code] {
    try {
      run::RunOptions options = flags->options;
      const auto settings = config::apply_run_config(
          options, run::run_place(options).workspace,
          [](const std::string& name) { return std::getenv(name.c_str()); });
      std::cout << config::describe(settings, flags->json);
      exit_code = 0;
    } catch (const SandboxError& error) {
      std::cerr << "pulsebox: " << core::escape_for_terminal(error.what(), true) << "\n";
      exit_code = run::kExitRefused;
    }
  });
}

}  // namespace pulsebox::cli
