// pulsebox audit verify FILE
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/output.h"
#include "pulsebox/audit.h"
#include "pulsebox/error.h"

namespace pulsebox::cli {
namespace {

struct AuditOptions {
  std::string file;
  bool json = false;
};

int run_verify(const AuditOptions& options) {
  AuditVerification result;
  try {
    result = verify_audit_log(options.file);
  } catch (const SandboxError& error) {
    print_error(error.what());
    return kExitUsage;
  }
  const bool colour = stdout_is_colour_terminal();
  if (options.json) {
    nlohmann::json out{{"file", options.file}, {"ok", result.ok}, {"entries", result.entries}};
    if (!result.ok) {
      out["line"] = result.line;
      out["problem"] = result.problem;
    }
    std::cout << out.dump() << "\n";
  } else if (result.ok) {
    std::cout << options.file << ": " << paint("OK", Colour::Green, colour) << ", "
              << result.entries << (result.entries == 1 ? " entry" : " entries")
              << ", hash chain intact\n";
  } else {
    std::cout << options.file << ": " << paint("TAMPERED", Colour::Red, colour) << ": line "
              << result.line << ": " << result.problem << "\n";
  }
  return result.ok ? kExitOk : kExitCheckFailed;
}

}  // namespace

void register_audit_commands(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<AuditOptions>();
  CLI::App* audit = app.add_subcommand("audit", "Inspect audit logs");
  audit->require_subcommand(1);
  CLI::App* verify = audit->add_subcommand(
      "verify", "Check an audit log's hash chain (exit 0 intact, 1 tampered, 125 unreadable)");
  verify->add_option("FILE", options->file, "Audit log (JSON lines)")->required();
  verify->add_flag("--json", options->json, "Print a JSON object");
  verify->callback([options, &exit_code] { exit_code = run_verify(*options); });
}

}  // namespace pulsebox::cli
