// Copy-on-write workspace transactions: preview, commit, discard.
//
// A sandboxed run never writes to the user's workspace. Its writes land in an
// overlayfs upper directory, which import_overlay() turns into a transaction
// stored under <workspace>/.agent/transactions/<id>/. The user (or the agent
// host) then previews it (diff), commits it or discards it.
//
// Usage:
//   pulsebox::Workspace ws("/home/me/project");
//   auto tx = ws.create_transaction();
//   ws.stage_write(tx, "src/main.cc", bytes, 0644);
//   ws.stage_delete(tx, "old.txt");
//   std::cout << ws.diff(tx, /*colour=*/false);
//   ws.commit(tx);            // or ws.discard(tx)
//
// Staging: the first time a path is staged, its current state is recorded
// (absent, or type, inode, device, size, mtime_ns, mode and SHA-256 of the
// content; for a directory a digest of the whole tree below it). Staging the
// same path again replaces the staged change but keeps the first snapshot.
// Limits: total staged bytes (256 MiB), bytes per file (50 MiB), open
// transactions (16); exceeding one throws SandboxResourceError.
//
// Commit, all or nothing:
//  1. under an exclusive lock on <workspace>/.agent/lock, every staged path is
//     compared with its snapshot; any difference (created, deleted, replaced,
//     type, mode, size, mtime or content changed) refuses the whole commit with
//     SandboxConcurrentModificationError naming every path and why; nothing is
//     applied and the transaction is kept for a retry;
//  2. every path is checked against the action policy (WRITE, DELETE, and
//     RENAME for a type change); protected paths (see protected_paths()) are
//     refused unless a policy rule names them (a bare "*" does not count);
//  3. a write-ahead log of the ordered steps is written and fsynced, then a
//     "ready" marker; from then on the commit is decided;
//  4. each step is applied idempotently with atomic per-file replacement
//     (temporary file, fsync, renameat) and the touched directories fsynced;
//  5. the transaction directory is removed.
// A crash at any instant leaves the old workspace (before the marker) or,
// after reconcile(), the fully committed one (after it). reconcile() replays
// decided commits, removes temporary files they left, and removes staging
// directories that never became a complete transaction.
//
// Paths are resolved beneath the workspace (openat2 RESOLVE_BENEATH): a
// symlink in the workspace can never make a commit write outside it.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pulsebox/export.h"
#include "pulsebox/policy.h"
#include "pulsebox/result.h"

namespace pulsebox {

struct WorkspaceLimits {
  std::uint64_t max_total_bytes = 256ull << 20;
  std::uint64_t max_file_bytes = 50ull << 20;
  std::size_t max_open_transactions = 16;
};

enum class StagedOp { Write, Delete, Mkdir, Symlink, Chmod };

struct StagedChange {
  std::string path;
  StagedOp op = StagedOp::Write;
  unsigned mode = 0;        // Write, Mkdir, Chmod
  std::string link_target;  // Symlink
  std::uint64_t size = 0;   // Write: bytes staged
  bool existed = false;     // the path existed when first staged
  ChangeKind kind = ChangeKind::Modified;
};

struct TransactionInfo {
  std::string id;
  std::string created;  // UTC ISO 8601
  std::string origin;   // free text, e.g. "run 1f2e... : make test"
  bool commit_in_progress = false;
  std::vector<StagedChange> changes;
  std::uint64_t staged_bytes = 0;
};

struct ProtectedPath {
  std::string pattern;  // glob, same syntax as policy rules
  std::string reason;
};

// Paths whose change would run code on the host outside the sandbox later
// (git hooks and config, direnv, editor tasks, CI definitions, .agent/).
PULSEBOX_API const std::vector<ProtectedPath>& protected_paths();

// The reference defaults plus: WRITE, DELETE and RENAME allowed in the
// workspace (the user commits by choice). Protected paths stay refused.
PULSEBOX_API ActionPolicy default_workspace_policy();

// The policy that decides which changes may be committed, given the user's
// action policy: default_workspace_policy() with the user's rules on top
// (they win). The user's defaults do not apply: WRITE is denied by default,
// yet committing is the user's own choice.
PULSEBOX_API ActionPolicy workspace_policy_for(const ActionPolicy& user_policy);

// Whether the workspace may be a system directory: "/", /etc, /usr and the
// rest of the system's own directories, shared ones such as /tmp or /home,
// a home directory itself (the rule: docs/cli.md, "System directories").
// Refused by default: a workspace gets .agent/ and the run's committed
// changes, and the sandbox sees all of it.
enum class SystemDirectoryUse { Refuse, Allow };

class PULSEBOX_API Workspace {
 public:
  // Throws SandboxConfigError when `root` is not a directory, and
  // SandboxSecurityError naming the reason when it is a system directory
  // (unless SystemDirectoryUse::Allow).
  explicit Workspace(std::filesystem::path root);
  Workspace(std::filesystem::path root, ActionPolicy policy, WorkspaceLimits limits = {},
            SystemDirectoryUse system_directory = SystemDirectoryUse::Refuse);

  const std::filesystem::path& root() const { return root_; }
  std::filesystem::path agent_dir() const { return root_ / ".agent"; }

  // Returns the new transaction's id.
  std::string create_transaction(std::string origin = {});
  // Staging throws SandboxSecurityError for a bad path, PolicyDenied when the
  // policy denies the action, SandboxResourceError past a limit.
  void stage_write(const std::string& tx, std::string_view path, std::string_view bytes,
                   unsigned mode = 0644);
  void stage_delete(const std::string& tx, std::string_view path);
  void stage_mkdir(const std::string& tx, std::string_view path, unsigned mode = 0755);
  void stage_symlink(const std::string& tx, std::string_view path, std::string_view target);
  void stage_chmod(const std::string& tx, std::string_view path, unsigned mode);

  // Turns an overlayfs upper directory (with `lower` the directory it was
  // layered on, normally this workspace) into a new transaction. Returns
  // nullopt when the upper directory holds no change. Whiteouts become
  // deletions, opaque directories delete the lower entries they hide. Device
  // nodes, FIFOs, sockets and setuid/setgid files are refused
  // (SandboxSecurityError), never applied.
  // `run_started`: when the run began. A staged file or symlink whose mtime
  // is later is marked, and commit refuses it: the run may have worked on the
  // older version. (A change within one kernel clock tick after the start
  // may carry a coarse, earlier timestamp and go unmarked.)
  using RunClock = std::chrono::system_clock::time_point;
  std::optional<std::string> import_overlay(const std::filesystem::path& upper,
                                            const std::filesystem::path& lower,
                                            std::string origin = {},
                                            std::optional<RunClock> run_started = std::nullopt);

  // Turns a complete, modified copy of the workspace (as the host backend
  // makes) into a new transaction: like import_overlay with the whole copy
  // treated as one opaque directory, so entries missing from it are deleted.
  // Costs O(workspace size). .agent/ is ignored on both sides.
  std::optional<std::string> import_copy(const std::filesystem::path& copy, std::string origin = {},
                                         std::optional<RunClock> run_started = std::nullopt);

  std::vector<TransactionInfo> list_transactions() const;
  TransactionInfo describe(const std::string& tx) const;
  // Unified diff (a/ b/ prefixes); ANSI colour when `colour`.
  std::string diff(const std::string& tx, bool colour = false) const;
  // Returns the paths changed. See the header comment for the guarantees.
  std::vector<std::string> commit(const std::string& tx);
  void discard(const std::string& tx);

  struct ReconcileReport {
    std::vector<std::string> replayed;         // transactions whose commit was finished
    std::vector<std::string> removed_staging;  // incomplete transaction directories
    std::size_t removed_temp_files = 0;
    // Private run directories (.agent/runs/<id>) of runs that crashed; a run
    // still in progress holds a lock on its directory and is left alone.
    std::vector<std::string> removed_runs;
  };
  ReconcileReport reconcile();

 private:
  std::filesystem::path root_;
  ActionPolicy policy_;
  WorkspaceLimits limits_;
};

}  // namespace pulsebox
