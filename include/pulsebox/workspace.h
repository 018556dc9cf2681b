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
// (absent, or type, inode, device, size, mtime_ns, the newest ctime, mode
// and SHA-256 of the content; for a directory a digest of the whole tree
// below it). Paths are bytes and need not be UTF-8. Staging the
// same path again replaces the staged change but keeps the first snapshot.
// Limits: total staged bytes (256 MiB), bytes per file (50 MiB), open
// transactions (16); exceeding one throws SandboxResourceError.
//
// Commit, all or nothing:
//  1. under an exclusive lock on <workspace>/.agent/lock, every staged path is
//     compared with its snapshot; any difference (created, deleted, replaced,
//     type, mode, size, mtime, ctime or content changed) refuses the whole commit with
//     SandboxConcurrentModificationError naming every path and why; nothing is
//     applied and the transaction is kept for a retry;
//  2. every path is checked against the action policy (WRITE, DELETE, and
//     RENAME for a type change); a change to a protected path (see
//     protected_paths()) is refused unless an ALLOW rule names it: one of
//     the names in the rule's pattern, spelled without wildcards, is the
//     protected name (".git", ".vscode", a bare repository's "x.git"; for a
//     deleted directory holding one, or a path reached through a symlink,
//     the changed path's own last name), so "*", "*/*", "**/config" or
//     "*.json" never count;
//  3. a write-ahead log of the ordered steps is written and fsynced, then a
//     "ready" marker; from then on the commit is decided;
//  4. each step is applied idempotently with atomic per-file replacement
//     (temporary file, fsync, renameat) and the touched directories fsynced;
//  5. the transaction directory is removed.
// A crash at any instant leaves the old workspace (before the marker) or,
// after recovery, the fully committed one (after it). Every operation that
// opens the transactions (create, import, list, describe, diff, commit,
// discard) first finishes decided commits; reconcile() does too, and also
// removes temporary files they left and staging directories that never
// became a complete transaction.
//
// Paths are resolved beneath the workspace (openat2 RESOLVE_BENEATH): a
// symlink in the workspace can never make a commit write outside it.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "pulsebox/audit.h"
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
  std::int64_t mtime_ns = 0;     // modification time kept at commit (0: unknown, commit time)
  bool contains_secret = false;  // the content (or link target) holds a registered secret
  // What the path held before the change, with a registered secret value
  // (ImportOptions::secrets): it held one, and the diff shows it redacted
  // (before_redacted); or it could not be kept to check, and the diff does
  // not show it (before_withheld).
  bool before_redacted = false;
  bool before_withheld = false;
};

// A path left out of a transaction at import (a FIFO, a socket, a device, a
// file over the per-file limit): the rest of the change set is taken.
struct RefusedChange {
  std::string path;
  std::string reason;
};

// A path taken into a transaction with a caveat ("setuid/setgid bits
// dropped", "hard link to P: committed as a separate copy").
struct ChangeNote {
  std::string path;
  std::string note;
};

struct TransactionInfo {
  std::string id;
  std::string created;  // UTC ISO 8601
  std::string origin;   // free text, e.g. "run 1f2e... : make test"
  bool commit_in_progress = false;
  std::vector<StagedChange> changes;
  std::uint64_t staged_bytes = 0;
  std::vector<RefusedChange> refused;  // recorded at import
  std::vector<ChangeNote> notes;       // recorded at import
  bool contains_secrets = false;       // some change holds a registered secret value
  // Non-empty when the transaction's files cannot be read back ("damaged:
  // why" for `changes`); such a transaction can only be discarded.
  std::string damaged;
};

class SecretScrubber;
namespace workspace {
struct SessionCommitAccess;  // the session store's way to commit_ending_layer()
}

struct ImportOptions {
  std::string origin;  // free text, e.g. "run 1f2e... : make test"
  // Workspace::stamp_now() when the run began (see import_overlay).
  std::optional<std::chrono::system_clock::time_point> run_started;
  // Given: staged file contents (and symlink targets) are checked with it;
  // a match flags the change (contains_secret) and stores a redacted copy
  // for diff. What each path held before is checked too, and kept redacted
  // for diff (StagedChange::before_redacted, before_withheld). Must outlive
  // the call.
  const SecretScrubber* secrets = nullptr;
  // Paths already known to hold a registered secret (a session's runs found
  // them, while the values were known), each with the redacted content diff
  // shows instead: flagged as if `secrets` had matched them.
  std::map<std::string, std::string> known_secrets;
  // Symlinks known to hold one in their target, with the redacted target.
  // Apart from known_secrets: each applies only to its own kind of change.
  std::map<std::string, std::string> known_secret_links;
  // Paths whose names hold a registered secret (found the same way): each
  // change at or beneath one is flagged, as a name matching `secrets` is.
  std::set<std::string, std::less<>> known_secret_names;
  // What paths held before a session's runs changed them, checked while
  // the values were known: a base of this content (sha256 of a file's bytes
  // or a symlink's target) is kept as `redacted` (StagedChange::
  // before_redacted); one that cannot be (other content now; or `redacted`
  // unset: it could not be checked) is not shown (before_withheld), nor is
  // any base at or beneath a `subtree` one (not checked there).
  struct KnownBase {
    std::string sha256;
    std::optional<std::string> redacted;
    bool subtree = false;
  };
  std::map<std::string, KnownBase> known_bases;
  // Bases were not all checked (a session's run stopped at its budget):
  // one not in known_bases is never shown either.
  bool withhold_unknown_bases = false;
  // The upper directory is a finished run's own and is removed after the
  // import (nothing else will read it, no process of the run is left): its
  // files may become the staged copies as they are (hard links, on the
  // same file system) where that is exactly what a copy would be, and
  // their names are then removed from it; or, when none of its paths is
  // refused, the directory itself moves into the transaction, those files
  // staying where they lie. Never for a layer that is kept (a session's).
  bool take_upper_files = false;
  // The upper directory is kept (a session's layer) and nothing writes to
  // its files in place any more: they may become the staged copies as hard
  // links, left exactly as they are (names, owner, mode), where a copy would
  // hold the same bytes, mode and time. A review then writes no file per
  // change. A commit first replaces such a blob (it has another link) with
  // a copy of its own, before its commit point, so the workspace never
  // shares an inode with a layer that lives on (commit_session of a whole
  // session moves them in: the layer ends with it). Ignored with
  // take_upper_files.
  bool share_upper_files = false;
};

struct ImportResult {
  // nullopt: nothing could be or needed to be staged (`refused` may still
  // list paths).
  std::optional<std::string> transaction;
  std::vector<RefusedChange> refused;  // paths left out (special files, too large, ...)
  std::vector<ChangeNote> notes;
  // What `transaction` stages, by path, as describe() lists it, and whether
  // a change holds a registered secret value: a run's summary without
  // reading back the manifest the import has just written.
  struct Staged {
    std::string path;
    ChangeKind kind = ChangeKind::Modified;
  };
  // A deque: built as the draft's entries are freed, its blocks take their
  // memory (a vector's one allocation would come on top of the draft's).
  std::deque<Staged> staged;
  bool contains_secrets = false;
};

struct DiffOptions {
  bool colour = false;  // ANSI colour
  // Empty: every change. Else only these paths, each selecting itself and
  // everything beneath it; a path matching no change is an error
  // (SandboxConfigError naming it).
  std::vector<std::string> paths;
};

struct DiffStat {
  std::string path;
  ChangeKind kind = ChangeKind::Modified;
  std::uint64_t added_lines = 0;
  std::uint64_t removed_lines = 0;
  bool binary = false;
  // "before", "after" or "both": that side's content could not be read
  // (over the per-file limit, or the host's file gone); only the other's
  // lines count ("both": binary).
  std::string not_shown;
};

struct CommitOptions {
  // Empty: the whole transaction. Else only these paths and everything
  // beneath them; the rest stays pending in the same transaction, with its
  // snapshots. A path matching no change is an error (SandboxConfigError).
  std::vector<std::string> paths;
  // A change holding a registered secret (StagedChange::contains_secret) is
  // refused (SandboxSecurityError naming the paths) unless this is set.
  bool allow_secrets = false;
};

// A protected path: changing it could make the host run code later, outside
// any sandbox, without the user choosing to run the project (a git command,
// a shell entering the directory, opening the folder in an editor), or
// touches pulsebox's own state. docs/workspace.md lists them with reasons.
//
// Pattern syntax: names separated by '/', matched against the last names of
// a path at ANY depth (".git" protects "sub/.git" too), ASCII
// case-insensitively (a case-insensitive file system makes ".GIT" the same
// directory); '*' and '?' match within one name. The pattern's path and
// everything beneath it are protected: created, written, deleted, replaced,
// chmod-ed, or made a symlink. A symlink staged at one of its ancestors
// (".github" -> elsewhere) is refused too, since it redirects the pattern;
// so is deleting or replacing a directory that holds a protected path.
struct ProtectedPath {
  std::string pattern;
  std::string reason;
  // Paths beneath `pattern` (same syntax, relative to it) that may change:
  // the data of a version-control directory (.git/objects, .git/refs, ...),
  // everything else in it being protected. A symlink there is never data.
  std::vector<std::string> except = {};
};

// The protected paths, in the order they are checked.
PULSEBOX_API const std::vector<ProtectedPath>& protected_paths();

// Names protected inside any directory that holds a file named HEAD, in the
// workspace or in the same transaction: a git directory under another name
// (a bare "x.git", the directory a ".git" file points to). Patterns are
// relative to that directory. Creating HEAD in a directory that holds one of
// them is protected as well, since it makes the directory a git directory.
PULSEBOX_API const std::vector<ProtectedPath>& protected_in_git_directories();

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
  // Staging throws SandboxSecurityError for a bad path (or one beneath a path
  // this transaction makes a symlink), PolicyDenied when the policy denies
  // the action or the path is protected, SandboxResourceError past a limit.
  // Each call holds the workspace's lock (.agent/lock), as commit and
  // discard do: callers staging into one transaction at once are serialised.
  // A transaction whose commit was interrupted once decided takes no more
  // changes (SandboxRecoveryError; `reconcile` finishes the commit).
  // With `secrets`, the change and what the path held are checked as an
  // import's are (ImportOptions::secrets).
  void stage_write(const std::string& tx, std::string_view path, std::string_view bytes,
                   unsigned mode = 0644, const SecretScrubber* secrets = nullptr);
  void stage_delete(const std::string& tx, std::string_view path,
                    const SecretScrubber* secrets = nullptr);
  void stage_mkdir(const std::string& tx, std::string_view path, unsigned mode = 0755);
  void stage_symlink(const std::string& tx, std::string_view path, std::string_view target,
                     const SecretScrubber* secrets = nullptr);
  void stage_chmod(const std::string& tx, std::string_view path, unsigned mode,
                   const SecretScrubber* secrets = nullptr);

  // Turns an overlayfs upper directory (with `lower` the directory it was
  // layered on, normally this workspace) into a new transaction. Returns
  // nullopt when the upper directory holds no change. Whiteouts become
  // deletions, opaque directories delete the lower entries they hide. Device
  // nodes, FIFOs, sockets and files over the per-file limit are left out
  // (ImportResult::refused, TransactionInfo::refused), never applied; the
  // rest is staged. setuid/setgid bits are dropped (a ChangeNote). Each
  // change keeps the upper entry's modification time. Limits on the whole
  // set (total bytes, open transactions) throw SandboxResourceError.
  // `run_started`: stamp_now() when the run began. A staged path the host
  // changed since (its ctime or mtime at or after it; for a directory the
  // entry removes, anything below it) is marked, and commit refuses it: the
  // run may have worked on the older version.
  using RunClock = std::chrono::system_clock::time_point;  // ImportOptions::run_started
  // The time stamp the workspace's file system gives a change made now, read
  // off a file of pulsebox's own that this call changes twice (.agent/clock,
  // or .agent/clock-UID where that is not a regular file of this user's that
  // no one else may write; .agent is never followed if it is a link):
  // a change made before the call has an earlier stamp, one made after it this
  // stamp or a later one, whatever the clocks do (file systems stamp with a
  // coarse clock that can lag the precise one by far on a busy machine).
  // Kernels without multigrain time stamps (before 6.13) may give a change
  // made within the same tick before the call the same stamp. Falls back to
  // the coarse clock file systems stamp with (CLOCK_REALTIME_COARSE), rounded
  // down to an even second, when neither file can be used: changes made
  // in the two seconds before the call then count as later too.
  RunClock stamp_now() const;
  ImportResult import_overlay(const std::filesystem::path& upper,
                              const std::filesystem::path& lower, const ImportOptions& options);
  // The same, returning only the transaction id.
  std::optional<std::string> import_overlay(const std::filesystem::path& upper,
                                            const std::filesystem::path& lower,
                                            std::string origin = {},
                                            std::optional<RunClock> run_started = std::nullopt);

  // Turns a complete, modified copy of the workspace (as the host backend
  // makes) into a new transaction: like import_overlay with the whole copy
  // treated as one opaque directory, so entries missing from it are deleted.
  // Costs O(workspace size). .agent/ is ignored on both sides.
  ImportResult import_copy(const std::filesystem::path& copy, const ImportOptions& options);
  std::optional<std::string> import_copy(const std::filesystem::path& copy, std::string origin = {},
                                         std::optional<RunClock> run_started = std::nullopt);

  std::vector<TransactionInfo> list_transactions() const;
  // The same descriptions, handed to `each` one at a time as each is read:
  // only one is held at once (a description is about 250 bytes a changed
  // path, and an agent's uncommitted runs can leave many large ones).
  void for_each_transaction(const std::function<void(TransactionInfo&&)>& each) const;
  TransactionInfo describe(const std::string& tx) const;
  // Unified diff (a/ b/ prefixes); ANSI colour when `colour`. Names that
  // hold control characters, bytes that are not UTF-8 or invisible format
  // characters are quoted as git quotes them ("b/new\nline"); the content is
  // as staged, escape sequences included: escape it before showing it on a
  // terminal (the CLI does).
  std::string diff(const std::string& tx, const DiffOptions& options) const;
  std::string diff(const std::string& tx, bool colour = false) const;
  // The same diff, one changed path at a time in path order: `section` gets
  // each path's part as soon as it is made, and the transaction is read
  // entry by entry, so neither the diff nor the transaction's entries are
  // ever held whole (`pulsebox diff` prints it as it comes). The view is
  // valid only during the call. A given path that selects no change, or a
  // manifest found damaged part way, throws only after the parts before it
  // were handed out: describe() first reads the whole manifest with the
  // same checks, and takes the paths to check (the CLI does both). So does
  // a staged file that cannot be read (never shown as an emptied file):
  // SandboxConcurrentModificationError naming its path when a commit,
  // discard or staging elsewhere changed the transaction meanwhile (a commit
  // or staging under way is waited for), SandboxRecoveryError when the
  // transaction is damaged (commit refuses it too, unless only a redacted
  // copy is missing) or its commit was interrupted, SandboxError for
  // another read error. Content that cannot be shown (over this
  // Workspace's per-file limit, on either side, or the host's file gone or
  // unreadable where the content staged over was not kept) is one
  // placeholder line, the other side shown in full (DiffStat::not_shown).
  // The string form throws the same, having handed out nothing.
  void diff(
      const std::string& tx, const DiffOptions& options,
      const std::function<void(const std::string& path, std::string_view section)>& section) const;
  // Lines added and removed per changed path (`paths` as DiffOptions::paths).
  std::vector<DiffStat> diff_stat(const std::string& tx,
                                  const std::vector<std::string>& paths = {}) const;
  // The same counts, one path at a time in path order, as the streamed
  // diff() above hands out its parts (and throws as it does).
  void diff_stat(const std::string& tx, const std::vector<std::string>& paths,
                 const std::function<void(DiffStat&&)>& each) const;
  // Returns the paths changed. See the header comment for the guarantees.
  std::vector<std::string> commit(const std::string& tx, const CommitOptions& options = {});
  void discard(const std::string& tx);
  // Discards only these paths (and everything beneath each); the
  // transaction goes when nothing is left. Empty: the whole transaction.
  void discard(const std::string& tx, const std::vector<std::string>& paths);

  struct ReconcileReport {
    std::vector<std::string> replayed;         // transactions whose commit was finished
    std::vector<std::string> removed_staging;  // incomplete transaction directories
    std::size_t removed_temp_files = 0;
    // Private run directories (.agent/runs/<id>) of runs that crashed; a run
    // still in progress holds a lock on its directory and is left alone.
    std::vector<std::string> removed_runs;
  };
  // `accept_unsealed`: interrupted commits to finish as logged although
  // their commit point carries no seal this user's key verifies (decided as
  // another user, with another audit key, or by an older pulsebox); without
  // it such a commit is refused as planted (SandboxSecurityError).
  ReconcileReport reconcile(const std::vector<std::string>& accept_unsealed = {});

  // The key that seals this workspace's commit points and verifies them
  // before a replay: the audit log's (SandboxOptions::audit_key, --audit-key).
  // Unset: default_audit_key_location(). A key kept inside the workspace
  // (and its anchors beside it) becomes an own path (add_own_path).
  void set_audit_key(AuditKeyLocation key);
  const std::optional<AuditKeyLocation>& audit_key() const { return audit_key_; }

  // A file of pulsebox's own kept inside the workspace besides .agent/ (an
  // audit log, key or key anchors): an import refuses a run's change at or
  // beneath it, or one that puts a file, symlink or deletion on the way to
  // it, whether or not it exists yet (the command never sees one that
  // exists). Outside the workspace or in .agent/: nothing to do.
  void add_own_path(const std::filesystem::path& host_path);
  // Relative to the root, in the order added.
  const std::vector<std::string>& own_paths() const { return own_paths_; }

 private:
  friend struct workspace::SessionCommitAccess;
  // commit() of the whole of `tx`, whose blobs shared with a session's
  // layer are renamed in, not copied: only for the commit of a whole
  // session, which ends the layer.
  std::vector<std::string> commit_ending_layer(const std::string& tx, bool allow_secrets);

  std::filesystem::path root_;
  ActionPolicy policy_;
  WorkspaceLimits limits_;
  std::optional<AuditKeyLocation> audit_key_;
  std::vector<std::string> own_paths_;
};

}  // namespace pulsebox
