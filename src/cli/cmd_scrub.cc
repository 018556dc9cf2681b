// pulsebox scrub [--secret-env NAME]... : a filter that redacts secrets from
// stdin to stdout with the streaming scrubber (what `run` does to output).
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/output.h"
#include "core/fs.h"
#include "pulsebox/error.h"
#include "pulsebox/secrets.h"

namespace pulsebox::cli {
namespace {

struct ScrubOptions {
  std::vector<std::string> secret_env;
  bool no_patterns = false;
};

int run_scrub(const ScrubOptions& options) {
  SecretScrubber scrubber({}, !options.no_patterns);
  for (const std::string& name : options.secret_env) {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) {
      print_error("--secret-env " + name + ": the variable is not set");
      return kExitUsage;
    }
    try {
      scrubber.add_secret(value);
    } catch (const SandboxConfigError& error) {
      print_error("--secret-env " + name + ": " + error.what());
      return kExitUsage;
    }
  }
  auto stream = scrubber.stream();
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::read(STDIN_FILENO, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      print_error(std::string("reading stdin: ") + std::strerror(errno));
      return kExitUsage;
    }
    if (n == 0) break;
    if (!core::write_all(STDOUT_FILENO, stream.feed({buffer, static_cast<std::size_t>(n)}),
                         "stdout")
             .ok()) {
      return kExitUsage;
    }
  }
  return core::write_all(STDOUT_FILENO, stream.finish(), "stdout").ok() ? kExitOk : kExitUsage;
}

}  // namespace

void register_scrub_command(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<ScrubOptions>();
  CLI::App* scrub = app.add_subcommand("scrub", "Redact secrets from stdin to stdout");
  scrub->add_option("--secret-env", options->secret_env,
                    "Redact the value of this environment variable (repeatable)");
  scrub->add_flag("--no-patterns", options->no_patterns,
                  "Only redact registered values, not the built-in patterns");
  scrub->callback([options, &exit_code] { exit_code = run_scrub(*options); });
}

}  // namespace pulsebox::cli
