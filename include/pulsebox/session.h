// Sessions and held changes: runs that build on each other, and changes
// that could not become a transaction but are kept, not lost.
//
// A session is a named sequence of runs in one workspace. Each run of the
// session (SandboxOptions::session, `pulsebox run --session NAME`) sees the
// workspace with the session's earlier changes layered on top, so a later
// command finds the files, deletions and renames of the earlier ones. The
// workspace itself is untouched until the session is committed: then its
// net changes become one transaction, checked for conflicts against the
// workspace as it was when the session began (a path the host changed since
// is refused), and committed atomically.
//
// Usage:
//   pulsebox::SandboxOptions options;          // workspace, policy, ...
//   options.session = "fix-tests";
//   pulsebox::Sandbox sandbox(options);
//   sandbox.execute({"python3", "-m", "venv", ".venv"});
//   sandbox.execute({".venv/bin/pip", "install", "-e", "."});
//   pulsebox::Workspace ws(options.workspace);
//   // Where the Sandbox's backend keeps the layers (the native backend's
//   // <state>/kept, with the same NativeBackendOptions::state_dir):
//   const auto kept = *pulsebox::make_native_backend()->kept_changes_dir();
//   const auto review = pulsebox::session_transaction(ws, "fix-tests", kept);
//   if (review.transaction) {
//     std::cout << ws.diff(*review.transaction);
//     ws.discard(*review.transaction);                      // done reviewing
//   }
//   pulsebox::commit_session(ws, "fix-tests", kept);           // or discard_session
//
// Storage: <workspace>/.agent/sessions/<NAME>.json records the session (its
// start, the workspace stamp the conflict check uses, its runs, its layers);
// the layers are directories the native backend keeps in its state
// directory (<state>/kept/), on the file system of its staging directories.
// A session survives the process, the server's restart and `reconcile`.
// Runs of one session are serialized (a run waits for the previous one).
// After each run its upper directory becomes the top layer and is merged
// into the one below, so a session of hundreds of runs mounts one layer.
//
// Held changes: when a run's changes cannot all become a transaction (a
// FIFO, a device node, a file over the size limit, the open-transaction
// limit), its upper directory is kept under <state>/kept/held-<run id> and
// recorded in <workspace>/.agent/held/<id>.json with the reason per path,
// until the user discards it (`pulsebox discard held-...`).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "pulsebox/export.h"
#include "pulsebox/workspace.h"

namespace pulsebox {

struct SessionInfo {
  std::string name;
  std::string created;   // UTC ISO 8601
  std::string last_run;  // UTC ISO 8601 of the last run ("" before the first)
  std::uint64_t runs = 0;
  std::int64_t base_stamp_ns = 0;             // the workspace's stamp when the session began
  std::vector<std::filesystem::path> layers;  // top first
  // Set while the session's transaction is being committed: the next
  // operation on the session finishes (or undoes) it.
  std::optional<std::string> committing;
  // Paths the session's runs wrote that hold a registered secret value (in
  // a file's content, a symlink's target, or the path's own name, which
  // flags everything beneath it too): the review shows their content
  // redacted and the commit refuses them unless allowed.
  std::vector<std::string> secret_paths;
  // Set by list_sessions() when the record cannot be read: why.
  std::string damaged;
};

// Session names: 1-64 characters of [A-Za-z0-9._-], not starting with '.'
// or '-'. Returns "" or why the name is refused.
PULSEBOX_API std::string check_session_name(const std::string& name);

// `kept_dir` below is where the session's layers are kept: the backend's
// Backend::kept_changes_dir() (the native backend's <state>/kept). A record
// that names a directory anywhere else is refused (SandboxSecurityError): a
// cloned repository can ship an .agent/ of its own.

// All sessions of the workspace, by name. Throws SandboxConfigError when
// .agent/sessions cannot be read (naming the path and why).
PULSEBOX_API std::vector<SessionInfo> list_sessions(const Workspace& workspace,
                                                    const std::filesystem::path& kept_dir);
// Throws SandboxConfigError when there is no such session.
PULSEBOX_API SessionInfo describe_session(const Workspace& workspace, const std::string& name,
                                          const std::filesystem::path& kept_dir);

// The session's net changes as a new pending transaction (origin
// "session NAME"), for review; the session itself is unchanged. Its
// conflict check is against the workspace as the session began. Its blobs
// are the layer's own files where the file system allows (hard links,
// ImportOptions::share_upper_files): a review costs no copy of the
// session's bytes, and committing or discarding the transaction leaves the
// layer as it was. Discard it once reviewed: while it is pending its links
// keep the next review from sharing those files (it copies them). Throws as
// Workspace::import_overlay does; nullopt when the session changed nothing.
PULSEBOX_API ImportResult session_transaction(Workspace& workspace, const std::string& name,
                                              const std::filesystem::path& kept_dir,
                                              const ImportOptions& options = {});

struct SessionCommitResult {
  std::optional<std::string> transaction;  // nullopt: nothing to commit
  std::vector<std::string> committed;      // the paths changed
  std::vector<RefusedChange> refused;      // left out of the transaction (kept in the session)
};
// Commits the session's net changes as one transaction and ends the session.
// On a refusal (a conflict, the policy, secrets) nothing is applied, the
// transaction is discarded and the session stays; the exception says why.
// When the session holds paths that cannot be committed (`refused`), the
// rest is committed and the session stays, holding only what it had.
// The whole session committed, its layer's files become the workspace's
// (renamed in, not copied); a session that stays gets copies.
// `import` may carry the secrets to look for (its origin and start are the
// session's).
PULSEBOX_API SessionCommitResult commit_session(Workspace& workspace, const std::string& name,
                                                const std::filesystem::path& kept_dir,
                                                const CommitOptions& options = {},
                                                const ImportOptions& import = {});
// Removes the session and its layers.
PULSEBOX_API void discard_session(Workspace& workspace, const std::string& name,
                                  const std::filesystem::path& kept_dir);

struct HeldChanges {
  std::string id;       // "held-<run id>"
  std::string created;  // UTC ISO 8601
  std::string origin;   // the run and its command
  std::string reason;
  std::vector<RefusedChange> refused;      // per path; empty when the whole set is held
  std::filesystem::path location;          // the kept upper directory
  std::optional<std::string> transaction;  // the transaction holding the rest, if any
};

PULSEBOX_API std::vector<HeldChanges> list_held(const Workspace& workspace);
// Throws SandboxConfigError when there is no such entry, SandboxSecurityError
// when its record names a directory outside `kept_dir`.
PULSEBOX_API void discard_held(const Workspace& workspace, const std::string& id,
                               const std::filesystem::path& kept_dir);
// Records kept changes (the facade does, after moving the directory).
PULSEBOX_API void record_held(const Workspace& workspace, const HeldChanges& held);

}  // namespace pulsebox
