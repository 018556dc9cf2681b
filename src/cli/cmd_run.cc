// pulsebox run [OPTIONS] -- COMMAND [ARG...]   (see docs/cli.md; the run
// itself is run/run_command.h, shared with the local server)
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <memory>
#include <optional>

#include "cli/cancel_on_signal.h"
#include "cli/commands.h"
#include "cli/output.h"
#include "core/libexec_helper.h"
#include "run/run_command.h"

namespace pulsebox::cli {
namespace {

// What followed "--", when the line had one.
std::optional<std::vector<std::string>>& run_command_tail() {
  static std::optional<std::vector<std::string>> tail;
  return tail;
}

std::vector<std::string>& run_arguments() {
  static std::vector<std::string> arguments;
  return arguments;
}

bool set_in_environment(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && value[0] != '\0';
}

// --backend remote, or no backend named while the environment names a
// remote server (PULSE_REMOTE_URL or PULSE_REMOTE_TOKEN, as the reference).
bool remote_chosen(const run::RunOptions& o) {
  if (o.backend == "remote") return true;
  return o.backend.empty() && !o.unsafe_host &&
         (set_in_environment("PULSE_REMOTE_URL") || set_in_environment("PULSE_REMOTE_TOKEN"));
}

// The run goes to pulsebox-http (the HTTP client is a shared library this
// static binary cannot link); returns only when it could not be started.
int exec_remote_run() {
  auto helper = core::find_libexec_helper("pulsebox-http", "http", "remote");
  if (!helper.ok()) {
    print_error("the remote backend: " + helper.error().to_string());
    return run::kExitRefused;
  }
  char self[4096];
  const ssize_t length = ::readlink("/proc/self/exe", self, sizeof self - 1);
  std::vector<std::string> args = {
      helper.value(), "remote-run", "--cli",
      length > 0 ? std::string(self, static_cast<std::size_t>(length)) : std::string()};
  args.insert(args.end(), run_arguments().begin(), run_arguments().end());
  core::exec_program(args);
  print_error("the remote backend: cannot run " + helper.value() + ": " + std::strerror(errno));
  return run::kExitRefused;
}

}  // namespace

void set_run_arguments(std::vector<std::string> arguments) {
  run_arguments() = std::move(arguments);
}

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
    if (remote_chosen(*o)) {
      exit_code = exec_remote_run();
      return;
    }
    run::RunIo io;
    io.prompt_fd = STDIN_FILENO;  // asked only when it and stderr are terminals
    const CancelOnSignal cancel;
    io.cancel_fd = cancel.fd();
    exit_code = run::execute_run(*o, io);
  });
}

}  // namespace pulsebox::cli
