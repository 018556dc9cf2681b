// pulsebox capabilities [--json]: what this host enforces, per backend,
// dimension, mode and limit, with the reason and the fix for every gap.
#include <cstdlib>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "backends/capabilities_json.h"
#include "cli/commands.h"
#include "cli/output.h"
#include "pulsebox/backend.h"

namespace pulsebox::cli {
namespace {

void print_backend(const Backend& backend, bool colour) {
  const Availability availability = backend.availability();
  std::cout << paint(backend.name(), Colour::Bold, colour) << ": ";
  if (!availability.available) {
    std::cout << paint("unavailable", Colour::Red, colour) << ": " << availability.reason << "\n\n";
    return;
  }
  std::cout << availability.reason << "\n";
  for (const auto& row : backends::capability_rows(backend)) {
    const bool strong = row.capability.level == EnforcementLevel::StronglyEnforced;
    const std::string level(to_string(row.capability.level));
    std::cout << "  " << row.what
              << std::string(row.what.size() < 26 ? 26 - row.what.size() : 1, ' ')
              << paint(level, strong ? Colour::Green : Colour::Yellow, colour)
              << std::string(level.size() < 20 ? 20 - level.size() : 1, ' ')
              << row.capability.reason << "\n";
    if (!row.capability.fix.empty()) {
      std::cout << std::string(48, ' ') << "fix: " << row.capability.fix << "\n";
    }
  }
  std::cout << "\n";
}

int run_capabilities(bool json) {
  const bool colour = stdout_is_colour_terminal();
  // The remote backend is a server's: what it enforces is that server's
  // `capabilities` (GET /v1/capabilities); here only whether one is named.
  const char* url = std::getenv("PULSE_REMOTE_URL");
  const bool remote_named = url != nullptr && url[0] != '\0';
  const std::string remote_reason =
      remote_named ? "PULSE_REMOTE_URL=" + std::string(url) +
                         " (a pulsebox serve --listen server; its own capabilities say what it "
                         "enforces, and it is reached when a run starts)"
                   : "no server named: set PULSE_REMOTE_URL and PULSE_REMOTE_TOKEN to a pulsebox "
                     "serve --listen server (docs/protocol.md)";
  auto native = make_native_backend();
  auto host = make_host_backend();
  if (json) {
    nlohmann::json out;
    out["backends"]["native"] = backends::capabilities_json(*native);
    out["backends"]["host"] = backends::capabilities_json(*host);
    out["backends"]["remote"] = {{"available", remote_named}, {"reason", remote_reason}};
    std::cout << out.dump(2) << "\n";
    return kExitOk;
  }
  print_backend(*native, colour);
  std::cout << paint("remote", Colour::Bold, colour) << ": "
            << (remote_named ? std::string() : paint("unavailable", Colour::Red, colour) + ": ")
            << remote_reason << "\n\n";
  print_backend(*host, colour);
  return kExitOk;
}

}  // namespace

void register_capabilities_command(CLI::App& app, int& exit_code) {
  auto json = std::make_shared<bool>(false);
  CLI::App* command = app.add_subcommand(
      "capabilities", "What this host enforces, per backend, mode and limit, and how to raise it");
  command->add_flag("--json", *json, "Print a JSON object");
  command->callback([json, &exit_code] { exit_code = run_capabilities(*json); });
}

}  // namespace pulsebox::cli
