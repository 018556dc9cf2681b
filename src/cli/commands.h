// Subcommand registration. Each cmd_*.cc adds its subcommands to the app and
// stores the exit status of the one that ran in `exit_code`.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "cli/exit_codes.h"
#include "core/result.h"

namespace pulsebox::cli {

// A `check` whose input did not load: 125 when it could not be read at all
// (missing, not a regular file, over its size limit: the file readers'
// stage "io"), 1 when it was read and is invalid.
inline int check_failure_status(const core::Error& error) {
  return error.stage() == "io" ? kExitUsage : kExitCheckFailed;
}

void register_policy_commands(CLI::App& app, int& exit_code);
void register_audit_commands(CLI::App& app, int& exit_code);
void register_scrub_command(CLI::App& app, int& exit_code);
void register_request_command(CLI::App& app, int& exit_code);
void register_changes_commands(CLI::App& app, int& exit_code);
void register_session_commands(CLI::App& app, int& exit_code);
void register_run_command(CLI::App& app, int& exit_code);
// The arguments after "--" on the command line: run's command, the review
// commands' paths.
void set_run_command(std::vector<std::string> command);
// `run`'s own arguments as given (after "run"): a remote run hands them on.
void set_run_arguments(std::vector<std::string> arguments);
const std::vector<std::string>& arguments_after_dashes();
void register_capabilities_command(CLI::App& app, int& exit_code);
void register_config_commands(CLI::App& app, int& exit_code);
void register_seccomp_commands(CLI::App& app, int& exit_code);
void register_serve_command(CLI::App& app, int& exit_code);
// `oci ...`: the OCI runtime, also reached as `pulsebox-runc`.
void register_oci_command(CLI::App& app, int& exit_code);
// The name the OCI runtime is installed under (a symlink to pulsebox).
inline constexpr const char* kOciRuntimeName = "pulsebox-runc";
// `completion bash|zsh|fish|man`: generated from `app`'s own definitions,
// so every other command must be registered when it runs.
void register_completion_command(CLI::App& app, int& exit_code);

}  // namespace pulsebox::cli
