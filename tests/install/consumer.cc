// Built by tools/check against the *installed* headers and libpulsebox.so
// (through pkg-config): proves the public API is exported and usable alone.
#include <pulsebox/audit.h>
#include <pulsebox/error.h>
#include <pulsebox/policy.h>
#include <pulsebox/sandbox.h>
#include <pulsebox/secrets.h>
#include <pulsebox/version.h>
#include <pulsebox/workspace.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

int main() {
  namespace fs = std::filesystem;
  const fs::path ws = fs::temp_directory_path() / "pulsebox-consumer-ws";
  fs::remove_all(ws);
  fs::create_directories(ws);
  std::ofstream(ws / "a.txt") << "one\n";

  pulsebox::ActionPolicy policy = pulsebox::ActionPolicy::from_json(
      R"({"rules": [{"action": "shell", "target": "*", "decision": "allow"}]})");
  pulsebox::SecretScrubber scrubber({"consumer-secret"});
  if (scrubber.redact("x consumer-secret") != "x [REDACTED_SECRET]") return 1;

  pulsebox::SandboxOptions options;
  options.workspace = ws;
  options.policy = policy;
  options.backend_name = "host";
  options.unsafe_host_execution = true;
  for (auto d : pulsebox::kAllDimensions)
    options.accept_weaker.insert(d);
  pulsebox::Sandbox sandbox(options);
  const auto result = sandbox.execute({"sh", "-c", "echo two > a.txt"});
  if (result.exit_code != 0 || !result.transaction_id) return 2;
  sandbox.commit_transaction(*result.transaction_id);
  std::ifstream in(ws / "a.txt");
  std::string line;
  std::getline(in, line);
  if (line != "two") return 3;
  try {
    (void)pulsebox::ActionPolicy::from_json("{", "broken.json");
    return 4;
  } catch (const pulsebox::SandboxConfigError&) {
  }
  if (!pulsebox::verify_audit_log(ws / ".agent/logs/audit.jsonl").ok) return 5;
  // Keyed with the default key (tools/check names it): verified with it.
  if (!sandbox.audit().keyed() ||
      pulsebox::verify_audit_log(ws / ".agent/logs/audit.jsonl",
                                 {.key_file = sandbox.audit().key_file()})
              .verdict != pulsebox::AuditVerdict::Verified) {
    return 6;
  }
  std::printf("consumer: libpulsebox %s works from its installed headers\n",
              std::string(pulsebox::version()).c_str());
  fs::remove_all(ws);
  return 0;
}
