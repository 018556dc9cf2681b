// The structured audit log: one JSON object per line, hash-chained.
//
// Usage:
//   pulsebox::AuditLog log("/ws/.agent/logs/audit.jsonl", &scrubber);
//   log.record({.action = "shell", .target = "make test", .decision = "allow"});
//   auto check = pulsebox::verify_audit_log("/ws/.agent/logs/audit.jsonl");
//
// Each line has the reference's fields (timestamp, action, target, decision,
// exit_code, duration_ms, container_id, isolation_level, redacted, detail),
// any extra fields of the record, and:
//   seq   1, 2, 3, ... across every process that writes the log;
//   pid   the writing process;
//   prev  the previous line's hash (64 zeros for the first line);
//   hash  SHA-256 of prev followed by the line's bytes up to (not including)
//         the `,"hash":...}` suffix.
// String fields are scrubbed of secrets (then `redacted` is true) and stripped
// of control characters other than tab, so a target cannot forge a line.
// Each line is appended with one write(2) on an O_APPEND descriptor while an
// exclusive flock is held, so several processes can share one log; with
// `fsync` set, each line is also fsynced before record() returns.
//
// Verification finds the first line that was edited, removed, inserted or
// reordered. Removing lines from the *end* of the log cannot be detected from
// the log alone; keep the last hash elsewhere if that matters.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "pulsebox/export.h"

namespace pulsebox {

class SecretScrubber;

using AuditValue = std::variant<std::nullptr_t, bool, std::int64_t, double, std::string>;

struct AuditRecord {
  std::string action;
  std::string target;
  std::string decision;
  std::optional<int> exit_code;
  std::optional<double> duration_ms;
  std::string container_id;
  std::string isolation_level;
  std::string detail;
  // Further fields (e.g. destination, port, protocol for network decisions).
  std::vector<std::pair<std::string, AuditValue>> extra;
};

class PULSEBOX_API AuditLog {
 public:
  struct Options {
    bool fsync = false;
  };

  // Creates the parent directories and the file (mode 0600) if needed.
  // `scrubber` may be null; it must outlive the log.
  explicit AuditLog(std::filesystem::path path, const SecretScrubber* scrubber = nullptr);
  AuditLog(std::filesystem::path path, const SecretScrubber* scrubber, Options options);
  ~AuditLog();
  AuditLog(const AuditLog&) = delete;
  AuditLog& operator=(const AuditLog&) = delete;

  // Appends one line; returns its seq. Throws SandboxError on I/O failure.
  std::uint64_t record(const AuditRecord& record);

  // A network decision with the reference's fields.
  std::uint64_t log_network(const std::string& destination, std::optional<int> port,
                            const std::string& protocol, const std::string& decision,
                            const std::string& backend, const std::string& enforcement_level,
                            const std::string& detail);

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  const SecretScrubber* scrubber_;
  Options options_;
  int fd_ = -1;
  std::mutex mutex_;  // flock is per open file description; threads need this too
  // The chain's tip as our last append left it, and the file's size then:
  // while the size is the same, nobody appended since and the tip needs
  // no re-reading.
  bool tip_known_ = false;
  std::uint64_t tip_size_ = 0;
  std::uint64_t tip_seq_ = 0;
  std::string tip_hash_;
};

struct AuditVerification {
  bool ok = false;
  std::uint64_t entries = 0;
  // On failure: the 1-based line number and what is wrong with it.
  std::uint64_t line = 0;
  std::string problem;
};

// Throws SandboxError only if the file cannot be read.
PULSEBOX_API AuditVerification verify_audit_log(const std::filesystem::path& path);

}  // namespace pulsebox
