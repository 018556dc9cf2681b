// pulsebox capabilities [--json]: what this host enforces, per backend,
// dimension, mode and limit, with the reason and the fix for every gap.
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/output.h"
#include "pulsebox/backend.h"

namespace pulsebox::cli {
namespace {

struct Row {
  std::string what;
  Capability capability;
};

std::vector<Row> rows_for(const Backend& backend) {
  std::vector<Row> rows;
  for (auto mode : {NetworkMode::DenyAll, NetworkMode::LocalhostOnly, NetworkMode::Allowlist,
                    NetworkMode::Proxy, NetworkMode::AllowAll}) {
    NetworkPolicy policy;
    policy.mode = mode;
    rows.push_back({"network." + std::string(to_string(mode)), backend.network_capability(policy)});
  }
  for (auto mode : {SecretMode::DenyAll, SecretMode::AllowExplicit, SecretMode::AllowAll}) {
    rows.push_back(
        {"secrets." + std::string(to_string(mode)), backend.secrets_capability({mode, {}})});
  }
  rows.push_back({"filesystem", backend.filesystem_capability()});
  for (LimitKind kind : kAllLimitKinds) {
    rows.push_back({"limits." + std::string(to_string(kind)), backend.limit_capability(kind)});
  }
  for (const char* profile : {"default", "strict", "permissive", "unconfined"}) {
    rows.push_back({"syscalls." + std::string(profile), backend.syscall_capability(profile)});
  }
  rows.push_back({"process_containment", backend.process_containment_capability()});
  return rows;
}

nlohmann::json backend_json(const Backend& backend) {
  const Availability availability = backend.availability();
  nlohmann::json out = {{"available", availability.available},
                        {"reason", availability.reason},
                        {"unsafe", backend.is_unsafe()}};
  for (const auto& row : rows_for(backend)) {
    out["capabilities"][row.what] = {{"level", std::string(to_string(row.capability.level))},
                                     {"reason", row.capability.reason},
                                     {"fix", row.capability.fix}};
  }
  return out;
}

void print_backend(const Backend& backend, bool colour) {
  const Availability availability = backend.availability();
  std::cout << paint(backend.name(), Colour::Bold, colour) << ": ";
  if (!availability.available) {
    std::cout << paint("unavailable", Colour::Red, colour) << ": " << availability.reason << "\n\n";
    return;
  }
  std::cout << availability.reason << "\n";
  for (const auto& row : rows_for(backend)) {
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
  const char* remote_reason = "the remote backend is not part of this build yet";
  auto native = make_native_backend();
  auto host = make_host_backend();
  if (json) {
    nlohmann::json out;
    out["backends"]["native"] = backend_json(*native);
    out["backends"]["host"] = backend_json(*host);
    out["backends"]["remote"] = {{"available", false}, {"reason", remote_reason}};
    std::cout << out.dump(2) << "\n";
    return kExitOk;
  }
  print_backend(*native, colour);
  std::cout << paint("remote", Colour::Bold, colour) << ": "
            << paint("unavailable", Colour::Red, colour) << ": " << remote_reason << "\n\n";
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
