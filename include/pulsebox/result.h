// The outcome of one sandboxed run, and its JSON form (the `--json` object of
// `pulsebox run`, see docs/cli.md):
//
// {"command", "exit_code", "signal", "stdout", "stderr", "duration_ms",
//  "timed_out", "truncated", "termination_reason", "metrics": {"elapsed_ms",
//  "cpu_time_ms", "peak_memory_bytes", "process_count", "output_bytes"},
//  "isolation_level", "enforcement": {"network", "secrets", "filesystem",
//  "limits", "syscalls"}, "transaction_id", "changes": [{"path", "kind"}],
//  "changes_status": {"status", "refused": [{"path", "reason"}], "notes",
//  "held_id", "session", "contains_secrets", "detail"}}
//
// stdout and stderr are bytes; in JSON, invalid UTF-8 is replaced by U+FFFD.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pulsebox/export.h"
#include "pulsebox/network.h"

namespace pulsebox {

enum class EnforcementLevel { StronglyEnforced, PartiallyEnforced, Advisory, Unsupported };

enum class TerminationReason {
  None,  // the command exited by itself
  Timeout,
  Oom,
  Pids,
  CpuTime,
  OutputLimit,
  DiskLimit,
  Signal,
  Cancelled,
  LaunchError,
  Seccomp,
};

enum class ChangeKind { Added, Modified, Deleted, Mode, Symlink };

// "strongly_enforced", "timeout" (None -> JSON null), "added", ...
PULSEBOX_API std::string_view to_string(EnforcementLevel level);
PULSEBOX_API std::string_view to_string(TerminationReason reason);
PULSEBOX_API std::string_view to_string(ChangeKind kind);
PULSEBOX_API std::optional<EnforcementLevel> parse_enforcement_level(std::string_view text);

struct ExecutionMetrics {
  double elapsed_ms = 0;
  double cpu_time_ms = 0;
  std::uint64_t peak_memory_bytes = 0;
  std::uint64_t process_count = 0;
  std::uint64_t output_bytes = 0;
};

struct Enforcement {
  EnforcementLevel network = EnforcementLevel::Unsupported;
  EnforcementLevel secrets = EnforcementLevel::Unsupported;
  EnforcementLevel filesystem = EnforcementLevel::Unsupported;
  EnforcementLevel limits = EnforcementLevel::Unsupported;
  EnforcementLevel syscalls = EnforcementLevel::Unsupported;
};

struct Change {
  std::string path;
  ChangeKind kind = ChangeKind::Modified;
};

// The enforcement dimensions of the CLI's --allow-weaker and of
// ProcessResult::enforcement.
enum class Dimension { Network, Secrets, Filesystem, Limits, Syscalls };
PULSEBOX_API std::string_view to_string(Dimension dimension);
PULSEBOX_API std::optional<Dimension> parse_dimension(std::string_view word);
inline constexpr Dimension kAllDimensions[] = {Dimension::Network, Dimension::Secrets,
                                               Dimension::Filesystem, Dimension::Limits,
                                               Dimension::Syscalls};

// One dimension's verdict for a run: decided once, before it starts
// (Sandbox::enforcement_plan()), and carried in its result.
struct EnforcementDecision {
  Dimension dimension = Dimension::Network;
  EnforcementLevel level = EnforcementLevel::Unsupported;
  bool requested = true;  // false: only reported (defaults the host cannot enforce)
  bool accepted = false;  // weaker than strong, and the caller accepted it
  std::string reason;
  std::string fix;
};

// A path and what was said of it: a change left out of the transaction.
struct PathReason {
  std::string path;
  std::string reason;
};

// What became of a run's workspace changes (JSON "changes_status").
enum class ChangesOutcome {
  Unchanged,  // the run changed nothing
  Staged,     // a pending transaction holds them (transaction_id)
  Committed,  // committed (--changes commit)
  Discarded,  // thrown away (--changes discard)
  Conflict,   // --changes commit was refused; the transaction is kept
  Held,       // some or all could not be staged: kept (held_id), see refused
  Session,    // added to the session (session)
};
PULSEBOX_API std::string_view to_string(ChangesOutcome outcome);

struct ChangesStatus {
  ChangesOutcome outcome = ChangesOutcome::Unchanged;
  std::vector<PathReason> refused;  // per path, with Held
  std::vector<PathReason> notes;    // staged with a caveat (setuid bits dropped, ...)
  std::optional<std::string> held_id;
  std::optional<std::string> session;
  bool contains_secrets = false;  // a staged change holds a registered secret value
  std::string detail;             // why (Conflict, Held)
  // The run's changes are not where the caller asked them to be: the
  // CLI's exit status says so (kExitChangesNotKept) when the command succeeded.
  bool lost() const {
    return outcome == ChangesOutcome::Conflict || outcome == ChangesOutcome::Held;
  }
};

struct ProcessResult {
  std::string execution_id;       // the run's id (ExecuteOptions::execution_id, or made)
  std::string command;            // argv joined, for people
  std::vector<std::string> argv;  // exact
  int exit_code = 0;
  std::optional<int> signal;  // set when the command died of a signal
  std::string stdout_data;
  std::string stderr_data;
  double duration_ms = 0;
  bool timed_out = false;
  bool truncated = false;
  TerminationReason termination_reason = TerminationReason::None;
  // Free text next to the reason, e.g. the launch stage that failed.
  std::string termination_detail;
  ExecutionMetrics metrics;
  std::string isolation_level;  // "native", "host_unsafe", "remote_container", ...
  // How the network was made: "loopback", "proxy", "veth", "host"
  // (docs/network.md); empty for a backend that does not say.
  std::string network;
  // The network policy's decisions during the run (proxy requests, an
  // allowlist's resolved names), hosts scrubbed; each is in the audit log.
  std::vector<NetworkAccess> network_accesses;
  Enforcement enforcement;
  // The verdicts behind `enforcement`, with their reasons (Sandbox sets them).
  std::vector<EnforcementDecision> enforcement_decisions;
  std::optional<std::string> transaction_id;
  std::vector<Change> changes;
  ChangesStatus changes_status;
  std::int64_t pid = 0;
};

// One JSON object (no trailing newline).
PULSEBOX_API std::string to_json(const ProcessResult& result);

}  // namespace pulsebox
