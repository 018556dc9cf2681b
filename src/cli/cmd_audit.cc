// pulsebox audit verify FILE [--key FILE] [--anchor FILE] [--json]
#include <cstdlib>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "audit/key.h"
#include "cli/commands.h"
#include "cli/output.h"
#include "pulsebox/audit.h"
#include "pulsebox/error.h"

namespace pulsebox::cli {
namespace {

// Nothing proven: the log is consistent, but unkeyed, or without key or
// anchor; or it has no records.
constexpr int kExitUnproven = 2;

struct AuditOptions {
  std::string file;
  std::string key;
  std::string anchor;
  bool json = false;
};

// --key, else the key `pulsebox run` uses, when it exists (verify never
// makes one; without it, MACs are not checked and the result says so).
std::filesystem::path key_for(const AuditOptions& options) {
  if (!options.key.empty()) return options.key;
  const AuditKeyLocation location =
      audit::key_location([](const char* name) { return std::getenv(name); });
  std::error_code ec;
  if (!location.file.empty() && std::filesystem::symlink_status(location.file, ec).type() !=
                                    std::filesystem::file_type::not_found) {
    return location.file;
  }
  return {};
}

const char* verdict_name(AuditVerdict verdict) {
  switch (verdict) {
    case AuditVerdict::Verified:
      return "verified";
    case AuditVerdict::Unproven:
      return "unproven";
    case AuditVerdict::NoRecords:
      return "no_records";
    case AuditVerdict::Tampered:
      break;
  }
  return "tampered";
}

const char* mode_name(const AuditVerification& result) {
  if (result.entries == 0 && result.keyed_from == 0) return "none";
  if (result.keyed_from == 0) return "unkeyed";
  return result.keyed_from == 1 ? "keyed" : "mixed";
}

const char* anchor_name(AuditAnchorState state) {
  switch (state) {
    case AuditAnchorState::Matched:
      return "matched";
    case AuditAnchorState::Missing:
      return "missing";
    case AuditAnchorState::NotChecked:
      break;
  }
  return "not_checked";
}

int run_verify(const AuditOptions& options) {
  AuditVerification result;
  try {
    result = verify_audit_log(options.file,
                              {.key_file = key_for(options), .anchor_file = options.anchor});
  } catch (const SandboxError& error) {
    print_error(error.what());
    return kExitUsage;
  }
  const bool colour = stdout_is_colour_terminal();
  if (options.json) {
    nlohmann::json out{{"file", options.file},
                       {"verdict", verdict_name(result.verdict)},
                       {"ok", result.ok},
                       {"entries", result.entries},
                       {"mode", mode_name(result)},
                       {"keyed_from", result.keyed_from},
                       {"macs_checked", result.macs_checked},
                       {"anchor", anchor_name(result.anchor)},
                       {"summary", result.summary},
                       {"notes", result.notes}};
    if (!result.ok) {
      out["line"] = result.line;
      out["problem"] = result.problem;
    }
    std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    std::cout << options.file << ": ";
    switch (result.verdict) {
      case AuditVerdict::Verified:
        std::cout << paint("VERIFIED", Colour::Green, colour) << ": " << result.summary;
        break;
      case AuditVerdict::Unproven:
        std::cout << paint("NOT PROVEN", Colour::Yellow, colour) << ": " << result.summary;
        break;
      case AuditVerdict::NoRecords:
        std::cout << paint("NOTHING TO VERIFY", Colour::Yellow, colour) << ": " << result.summary;
        break;
      case AuditVerdict::Tampered:
        std::cout << paint("TAMPERED", Colour::Red, colour) << ": ";
        if (result.line != 0) std::cout << "line " << result.line << ": ";
        std::cout << result.problem;
        break;
    }
    std::cout << "\n";
    for (const auto& note : result.notes)
      std::cout << "  note: " << note << "\n";
  }
  switch (result.verdict) {
    case AuditVerdict::Verified:
      return kExitOk;
    case AuditVerdict::Tampered:
      return kExitCheckFailed;
    default:
      return kExitUnproven;
  }
}

}  // namespace

void register_audit_commands(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<AuditOptions>();
  CLI::App* audit = app.add_subcommand("audit", "Inspect audit logs");
  audit->require_subcommand(1);
  CLI::App* verify = audit->add_subcommand(
      "verify",
      "Check an audit log's chain, its MACs and its anchor (exit 0 verified, 1 tampered, 2 "
      "nothing proven: unkeyed, no key, no anchor or no records; 125 unreadable)");
  verify->add_option("FILE", options->file, "Audit log (JSON lines)")->required();
  verify->add_option("--key", options->key,
                     "The HMAC key (default: the one `pulsebox run` uses, if it exists)");
  verify->add_option("--anchor", options->anchor,
                     "The log's anchor (default: audit-anchors/ beside the key, by the log's "
                     "canonical path)");
  verify->add_flag("--json", options->json, "Print a JSON object");
  verify->callback([options, &exit_code] { exit_code = run_verify(*options); });
}

}  // namespace pulsebox::cli
