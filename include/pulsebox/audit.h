// The structured audit log: one JSON object per line, hash-chained, and
// keyed with an HMAC when a key is given.
//
// Usage:
//   pulsebox::AuditLog log("/ws/.agent/logs/audit.jsonl", &scrubber,
//                          {.key = pulsebox::default_audit_key_location()});
//   log.record({.action = "shell", .target = "make test", .decision = "allow"});
//   auto check = pulsebox::verify_audit_log("/ws/.agent/logs/audit.jsonl",
//                                           {.key_file = log.key_file()});
//
// Each line has the reference's fields (timestamp, action, target, decision,
// exit_code, duration_ms, container_id, isolation_level, redacted, detail),
// any extra fields of the record, and:
//   seq     1, 2, 3, ... across every process that writes the log;
//   pid     the writing process;
//   key_id  (keyed lines) 16 hex digits naming the key, never revealing it;
//   prev    the previous line's hash (64 zeros for the first line);
//   hash    SHA-256 of prev followed by the line's bytes up to (not
//           including) the `,"hash":...}` suffix;
//   mac     (keyed lines) HMAC-SHA256 under the key of the same bytes.
// String fields are scrubbed of secrets (then `redacted` is true) and stripped
// of control characters other than tab, so a target cannot forge a line; a
// field too long for a line of 1 MiB is cut, saying how much was cut.
// Each line is appended with one write(2) on an O_APPEND descriptor while an
// exclusive flock is held, so several processes can share one log; with
// `fsync` set, each line is also fsynced before record() returns.
//
// What each mode proves (docs/security-model.md, "Audit log"):
//   unkeyed  the hash chain finds a line edited, removed, inserted or
//            reordered by mistake, but anyone who can write the file can
//            recompute every hash: verification proves nothing.
//   keyed    the key is a file of 32 random bytes outside the workspace,
//            readable only by its owner (made on first use). Nobody without
//            it can make a valid MAC, so an edited or added line shows. An
//            anchor beside the key (audit-anchors/<SHA-256 of the log's
//            canonical path>), updated under the log's lock with every
//            append and MACed too, holds the tip: a log truncated, emptied,
//            replaced by another chain or deleted shows as well.
// Anyone holding the key (the user, root) can still rewrite a keyed log.
// A log goes from unkeyed to keyed (its unkeyed lines are pinned from the
// first keyed line on), never back: a keyed log is not extended without
// its key, nor with another key.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
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

// Where the audit key is kept.
struct AuditKeyLocation {
  // The key file; empty: no place for one (`unavailable` says why).
  std::filesystem::path file;
  // Named by the user (PULSEBOX_AUDIT_KEY, --audit-key): a key that cannot
  // be used there is an error. Otherwise the log stays unkeyed, and
  // AuditLog::key_warning() says why.
  bool chosen = false;
  std::string unavailable;
};

// A network decision with the reference's fields (AuditLog::log_network
// appends one).
PULSEBOX_API AuditRecord network_record(const std::string& destination, std::optional<int> port,
                                        const std::string& protocol, const std::string& decision,
                                        const std::string& backend,
                                        const std::string& enforcement_level,
                                        const std::string& detail);

// From this process's environment: PULSEBOX_AUDIT_KEY if set (chosen), else
// $XDG_STATE_HOME/pulsebox/audit.key, else ~/.local/state/pulsebox/audit.key
// (when that base directory exists).
PULSEBOX_API AuditKeyLocation default_audit_key_location();

namespace audit {
class AnchorFile;
class Key;
}  // namespace audit

class PULSEBOX_API AuditLog {
 public:
  struct Options {
    bool fsync = false;
    // Empty `key.file`: an unkeyed chain.
    AuditKeyLocation key;
  };

  // Creates the parent directories and the file (mode 0600) if needed, and
  // the key and the log's anchor when keyed. `scrubber` may be null; it must
  // outlive the log. Throws SandboxError if the log is not a regular file,
  // SandboxSecurityError for a chosen key that cannot be used.
  explicit AuditLog(std::filesystem::path path, const SecretScrubber* scrubber = nullptr);
  AuditLog(std::filesystem::path path, const SecretScrubber* scrubber, Options options);
  ~AuditLog();
  AuditLog(const AuditLog&) = delete;
  AuditLog& operator=(const AuditLog&) = delete;

  // Appends one line; returns its seq. Throws SandboxError on I/O failure,
  // SandboxRecoveryError if the last line is not an entry, and
  // SandboxSecurityError when the log is keyed but this log has no key or
  // another one, or the log no longer matches its anchor (then nothing is
  // appended: run `pulsebox audit verify`). A keyed log whose anchor is
  // missing (the log was moved or copied, or the anchor removed), or an
  // anchor whose log is missing or empty, gets an "audit-anchor" record
  // saying so before this one.
  std::uint64_t record(const AuditRecord& record);
  // Appends the records in order as one append (one lock, one write, one
  // anchor update); returns the last one's seq, 0 for none. For records
  // made together: each still has its own seq, hash and MAC, and after a
  // crash the anchor can be behind by all of them at most, which the
  // writer and the verifier both accept (as for one record). Throws as
  // record() does; a failure before the write appends none of them.
  std::uint64_t record_all(std::span<const AuditRecord> records);

  // A network decision with the reference's fields.
  std::uint64_t log_network(const std::string& destination, std::optional<int> port,
                            const std::string& protocol, const std::string& decision,
                            const std::string& backend, const std::string& enforcement_level,
                            const std::string& detail);

  const std::filesystem::path& path() const { return path_; }
  bool keyed() const { return key_ != nullptr; }
  // The key's file when keyed; empty otherwise.
  std::filesystem::path key_file() const;
  // Why the log is unkeyed although a key location was given (none could
  // be used, and none was chosen); empty otherwise. Show it to the user.
  const std::string& key_warning() const { return key_warning_; }

 private:
  // The chain's tip as an append left it, with the file's size and ctime
  // then: while both are the same, nobody changed the file since, and the
  // tip needs no re-reading (ctime, unlike mtime, cannot be set back).
  struct Tip {
    std::uint64_t size = 0;
    std::int64_t ctime_sec = 0;
    std::int64_t ctime_nsec = 0;
    std::uint64_t seq = 0;
    std::string hash;
    std::uint64_t keyed_from = 0;  // keyed: for the anchor
    std::uint64_t generation = 0;  // keyed: the anchor's
  };

  std::uint64_t append(std::span<const AuditRecord> records);

  std::filesystem::path path_;
  const SecretScrubber* scrubber_;
  Options options_;
  int fd_ = -1;
  std::mutex mutex_;  // flock is per open file description; threads need this too
  std::optional<Tip> tip_;
  // Keyed: the key, and the log's anchor and its name there.
  std::unique_ptr<audit::Key> key_;
  std::unique_ptr<audit::AnchorFile> anchor_;
  std::string log_id_;
  std::string key_warning_;
};

enum class AuditVerdict {
  Verified,   // keyed, every MAC checked, and the anchor matches
  Unproven,   // nothing wrong found, but unkeyed, or without key or anchor
  NoRecords,  // an empty file (and no anchor claiming records)
  Tampered,
};

enum class AuditAnchorState { NotChecked, Missing, Matched };

struct AuditVerification {
  AuditVerdict verdict = AuditVerdict::Tampered;
  bool ok = false;  // no sign of tampering: any verdict but Tampered
  std::uint64_t entries = 0;
  std::uint64_t keyed_from = 0;  // the first keyed line; 0: none is keyed
  bool macs_checked = false;     // a key was given for the keyed lines
  AuditAnchorState anchor = AuditAnchorState::NotChecked;
  // Tampered: the 1-based line number (0: the file as a whole) and what is
  // wrong with it.
  std::uint64_t line = 0;
  std::string problem;
  // Facts that qualify the verdict ("line 7: ...").
  std::vector<std::string> notes;
  // What the verdict proves, in one sentence.
  std::string summary;
};

struct AuditVerifyOptions {
  // The key (never made here); empty: MACs are not checked.
  std::filesystem::path key_file;
  // Empty: the key's anchor for this log's path, if there is one.
  std::filesystem::path anchor_file;
};

// Reads at most 1 MiB per line, and nothing but a regular file, under a
// shared flock of the log (writers hold theirs for one append). Throws
// SandboxError if the file cannot be read (a missing log whose anchor
// claims records is Tampered, not an error), SandboxSecurityError for a key
// or an anchor that cannot be used.
PULSEBOX_API AuditVerification verify_audit_log(const std::filesystem::path& path,
                                                const AuditVerifyOptions& options = {});

}  // namespace pulsebox
