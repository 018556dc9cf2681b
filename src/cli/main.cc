// The `pulsebox` command line. See docs/cli.md for the contract.
#include <fcntl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <exception>
#include <iostream>
#include <string_view>
#include <vector>

#include "cli/commands.h"
#include "cli/output.h"
#include "cli/prefault.h"
#include "cli/server_client.h"
#include "core/trace.h"
#include "pulsebox/version.h"

namespace {

std::string first_line(const std::string& text) {
  const auto newline = text.find('\n');
  return newline == std::string::npos ? text : text.substr(0, newline);
}

}  // namespace

int main(int argc, char** argv) {
  if (pulsebox_image_prefaulted != 0) pulsebox::cli::prefault_heap();
  // A closed standard descriptor would be taken by the first one this
  // process opens: a run would hand it to the command as its stdin, and
  // what is printed would be written into it (an audit log, a held diff).
  if (::fcntl(STDIN_FILENO, F_GETFD) < 0) (void)::open("/dev/null", O_RDONLY);
  if (::fcntl(STDOUT_FILENO, F_GETFD) < 0) (void)::open("/dev/null", O_WRONLY);
  if (::fcntl(STDERR_FILENO, F_GETFD) < 0) (void)::open("/dev/null", O_WRONLY);
  pulsebox::core::trace_phase("main");
  if (pulsebox::cli::text_fault_is_slow(pulsebox_text_fault_ns)) {
    pulsebox::core::trace_phase("main: text populated (one text fault was slow)");
  } else if (pulsebox_text_fault_ns >= 0) {
    pulsebox::core::trace_phase("main: text left to fault in (one text fault was fast)");
  }
  using namespace pulsebox::cli;
  // Called as pulsebox-runc (engines run it as a runc): `pulsebox oci ...`.
  // Before the server shortcut, so `pulsebox-runc run` is never a sandbox run.
  std::vector<char*> oci_argv;
  const std::string_view program = argc > 0 ? argv[0] : "";
  if (program.substr(program.rfind('/') + 1) == kOciRuntimeName) {
    oci_argv.assign(argv, argv + argc);
    static char oci_word[] = "oci";
    oci_argv.insert(oci_argv.begin() + 1, oci_word);
    oci_argv.push_back(nullptr);
    argc += 1;
    argv = oci_argv.data();
  }
  // A resident server of this user does the run when there is one
  // (cli/server_client.h): before anything else is built.
  if (argc > 1 && std::string_view(argv[1]) == "run") {
    if (const auto code = run_through_server(argc, argv)) {
      pulsebox::core::trace_phase("main: returning");
      pulsebox::core::trace_flush();
      return *code;
    }
  }
  CLI::App app{"pulsebox: run untrusted commands in a sandbox built from Linux primitives"};
  app.name("pulsebox");
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("pulsebox ") + std::string(pulsebox::version()));

  int exit_code = kExitOk;
  app.add_subcommand("version", "Print the version")->callback([] {
    std::cout << "pulsebox " << pulsebox::version() << "\n";
  });
  // Only the named command is registered when the first argument names one:
  // building every command's options showed in every `pulsebox run`.
  // Anything else (--help, a typo) gets them all.
  using Registrar = void (*)(CLI::App&, int&);
  struct Command {
    std::vector<std::string_view> names;
    Registrar add;
  };
  const Command commands[] = {
      {{"policy"}, register_policy_commands},
      {{"audit"}, register_audit_commands},
      {{"scrub"}, register_scrub_command},
      {{"request"}, register_request_command},
      {{"run"}, register_run_command},
      {{"changes", "diff", "commit", "discard", "reconcile"}, register_changes_commands},
      {{"capabilities"}, register_capabilities_command},
      {{"config"}, register_config_commands},
      {{"seccomp"}, register_seccomp_commands},
      {{"serve"}, register_serve_command},
      {{"oci"}, register_oci_command},
      {{"session"}, register_session_commands},
  };
  const std::string_view first = argc > 1 ? argv[1] : "";
  if (first == "run") set_run_arguments(std::vector<std::string>(argv + 2, argv + argc));
  const Command* named = nullptr;
  for (const Command& command : commands) {
    if (std::find(command.names.begin(), command.names.end(), first) != command.names.end())
      named = &command;
  }
  for (const Command& command : commands) {
    if (named == nullptr || named == &command) command.add(app, exit_code);
  }
  register_completion_command(app, exit_code);

  // Everything after the first "--" is the command for `run`, verbatim: it is
  // never parsed as pulsebox options.
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--") {
      set_run_command(std::vector<std::string>(argv + i + 1, argv + argc));
      break;
    }
    args.emplace_back(argv[i]);
  }
  std::reverse(args.begin(), args.end());  // CLI11 takes the arguments reversed

  try {
    app.parse(args);
  } catch (const CLI::CallForHelp& help) {
    return app.exit(help);
  } catch (const CLI::CallForAllHelp& help) {
    return app.exit(help);
  } catch (const CLI::CallForVersion& version) {
    return app.exit(version);
  } catch (const CLI::ParseError& error) {
    print_error(first_line(error.what()) + " (see `pulsebox --help`)");
    return kExitUsage;
  } catch (const std::exception& error) {
    // Subcommands report their own errors; this is the last line of defence
    // so that no input ever produces a stack trace.
    print_error(first_line(error.what()));
    return kExitUsage;
  }
  pulsebox::core::trace_phase("main: returning");
  pulsebox::core::trace_flush();
  return exit_code;
}
