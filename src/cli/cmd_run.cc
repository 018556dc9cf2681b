// pulsebox run [OPTIONS] -- COMMAND [ARG...]   (see docs/cli.md; the run
// itself is run/run_command.h, shared with the local server)
#include <unistd.h>

#include <memory>
#include <optional>

#include "cli/commands.h"
#include "run/run_command.h"

namespace pulsebox::cli {
namespace {

// What followed "--", when the line had one.
std::optional<std::vector<std::string>>& run_command_tail() {
  static std::optional<std::vector<std::string>> tail;
  return tail;
}

}  // namespace

void set_run_command(std::vector<std::string> command) {
  run_command_tail() = std::move(command);
}

const std::vector<std::string>& arguments_after_dashes() {
  static const std::vector<std::string> none;
  return run_command_tail() ? *run_command_tail() : none;
}

void register_run_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<run::RunOptions>();
  CLI::App* run_cmd = app.add_subcommand(
      "run", "Run COMMAND in a fresh sandbox: pulsebox run [OPTIONS] [--] COMMAND [ARG...]");
  run::add_run_options(*run_cmd, *o);
  run_cmd->callback([o, run_cmd, &exit_code] {
    o->command = run::run_command_line(run_cmd->remaining(), run_command_tail());
    run::RunIo io;
    io.prompt_fd = STDIN_FILENO;  // asked only when it and stderr are terminals
    exit_code = run::execute_run(*o, io);
  });
}

}  // namespace pulsebox::cli
