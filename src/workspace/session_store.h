// The session records under <workspace>/.agent/sessions/ and the layers
// they point to (see include/pulsebox/session.h). The facade opens a
// session around each run; the CLI's `session` commands go through the
// public functions in sessions.cc.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/result.h"
#include "core/unique_fd.h"
#include "pulsebox/session.h"

namespace pulsebox::workspace {

// A session record is read whole, up to this size.
inline constexpr std::uint64_t kMaxRecordBytes = 1 << 20;
// Deeper changes could not be merged (nor imported at the commit).
inline constexpr int kMaxLayerDepth = 500;
// Files checked for secrets at a session run: the per-file staging limit.
inline constexpr std::uint64_t kMaxScannedBytes = 50ull << 20;
// The marks of SessionSecrets take at most this much of the record.
inline constexpr std::uint64_t kMaxSecretRecordBytes = kMaxRecordBytes / 2;

// What a session's runs found holding a registered secret value, checked
// while each run knew the values (OpenSession::add_run; session_secrets.cc).
struct SessionSecrets {
  // Files the runs wrote -> the name of a redacted copy under redacted/.
  std::map<std::string, std::string> written;
  // Symlinks the runs made whose targets hold a value -> the name of a
  // redacted copy of the target. Apart from `written`: a mark outlives a
  // later run that knows no value, and a copy of one kind is never shown as
  // the other's (a file's content as a link's target).
  std::map<std::string, std::string> links;
  // Paths whose names hold a value: every change at or beneath one is
  // flagged, whatever a later run (knowing no value) makes there.
  std::set<std::string, std::less<>> named;
  // Files a run with values left too large to check (kMaxScannedBytes).
  std::set<std::string, std::less<>> unchecked;
  // While any mark above is held: keyed digests of the values the runs
  // registered (SecretScrubber::fingerprints under `value_key`, hex). A
  // later run that does not register them all could move what a mark
  // names from under it.
  std::string value_key;
  std::set<std::string> value_fingerprints;
  bool holds_marks() const {
    return !written.empty() || !links.empty() || !named.empty() || !unchecked.empty();
  }
  // What the runs replaced or deleted in the workspace (the review's before
  // side): its sha256 and redacted copy's name; both "" when it could not
  // be checked (too large, unreadable); `subtree` when nothing at or
  // beneath the path was checked (the run's budget ran out there).
  struct Base {
    std::string redacted;
    std::string sha256;
    bool subtree = false;
  };
  std::map<std::string, Base> bases;
  // Bases that could not be checked or marked anywhere (no room left in the
  // record): every base not in `bases` is then never shown
  // (ImportOptions::withhold_unknown_bases).
  bool bases_incomplete = false;
};

// What one session run reads of the workspace to check what it replaced
// (a deleted directory's whole tree), so that the run's end stays bounded;
// past it, what is left is marked unchecked. Tests lower it.
struct BaseCheckBudget {
  std::uint64_t paths = 100000;
  std::uint64_t bytes = 256ull << 20;
};
extern BaseCheckBudget base_check_budget;

struct SecretScan;  // one run's check (session_secrets.cc)

// A session held under its lock (.agent/sessions/<name>.lock) for the
// lifetime of this object: runs of one session and its commit are serialized.
class OpenSession {
 public:
  // Opens (waiting for the lock) the session `name`, finishing or undoing a
  // commit a crash interrupted. `kept_dir` is where layers are kept (the
  // backend's kept_changes_dir(), on the staging file system): the record
  // may name nothing else. With `create`, a missing session is created
  // there; else a missing session is an error. Without `recover`, an
  // interrupted commit is left as it is (a session being discarded: the
  // commit's transaction holds what it needs, and a decided one is still
  // finished by the next operation on the workspace). With
  // `layers_may_be_missing` (a discard), layers that are gone (removed by
  // hand) are no error.
  static core::Result<OpenSession> open(Workspace& workspace, const std::string& name,
                                        const std::filesystem::path& kept_dir, bool create,
                                        bool recover = true, bool layers_may_be_missing = false);

  const SessionInfo& info() const { return info_; }
  bool exists() const { return exists_; }

  // After a run: its upper directory (renamed, so on the same file system
  // as the layers) becomes the top layer, which is then merged into the
  // layer below. A merge that fails leaves both layers (the view is the same)
  // and is tried again after the next run. Returns the changes of the run.
  // With `secrets`, the run's files are checked for registered secret
  // values while they are known: a match is remembered (with a redacted
  // copy) so the session's review and commit treat it as a run's would.
  core::Result<std::vector<Change>> add_run(const std::filesystem::path& upper,
                                            const SecretScrubber* secrets = nullptr);

  // The paths found holding a secret, with their redacted content.
  std::map<std::string, std::string> known_secrets() const;
  // The symlinks found with one in their target, with the redacted target.
  std::map<std::string, std::string> known_secret_links() const;
  // Whether the session holds marks made while a value was registered that
  // `values` does not register (compared by fingerprint): a run without it
  // could `mv` a marked file, symlink or name, or a file too large to
  // check, to where no mark is, past the review.
  bool needs_values_beyond(const SecretScrubber& values) const;
  // The paths whose names hold one (ImportOptions::known_secret_names).
  const std::set<std::string, std::less<>>& known_secret_names() const { return secrets_.named; }
  // What the runs replaced that held a secret (ImportOptions::known_bases).
  std::map<std::string, ImportOptions::KnownBase> known_bases() const;
  bool bases_incomplete() const { return secrets_.bases_incomplete; }

  // Merges all layers into one; an error when one cannot be merged.
  core::Status collapse();
  core::Status save();
  // Ends the session: its record says so first ("removing"), then its
  // layers go (their storage's owner file last), then the record. A crash
  // in between leaves a record the next opening finishes removing (a
  // record naming missing layers would read as damaged, and refuse its
  // own discard). The record is in the workspace, where a repository or a
  // copy can bring one naming another session's storage: storage whose
  // owner file names another workspace or session is never removed (the
  // record goes alone). A discard or commit of the session by name
  // (kNamedByTheUser) also removes storage whose owner file is missing (an
  // earlier pulsebox's); a recovery (kOnlyItsOwn) only storage made for
  // this workspace and session.
  enum class StorageRemoval { kNamedByTheUser, kOnlyItsOwn };
  core::Status remove(StorageRemoval which);
  // Gives storage of an earlier pulsebox (no owner file) this session's
  // owner file, best effort: before a commit by name, so that a crash's
  // recovery may end the session with its storage.
  void claim_unstated_storage();
  // Whether the storage was made for another workspace or session that
  // still names it (this record is a copy's): a commit then copies the
  // layer's files instead of moving them in.
  bool storage_used_elsewhere() const;
  // After a commit whose outcome is unknown (CommitState::kUnknown): the
  // session stays, holding its changes (committing them again changes
  // nothing the workspace has), and its layers share no file with the
  // workspace any more.
  core::Status keep_after_unknown_commit();
  // The transaction being committed (nullopt: none), and whether the
  // session ends once it is committed (else it keeps what it holds: a
  // refused change). Saved in the record: an interrupted commit is finished
  // or undone as it was meant by the next opening.
  void set_committing(std::optional<std::string> tx, bool ends_session = true) {
    info_.committing = std::move(tx);
    commit_ends_session_ = ends_session;
  }

 private:
  OpenSession(Workspace& workspace, std::string name, core::UniqueFd lock)
      : workspace_(&workspace), name_(std::move(name)), lock_(std::move(lock)) {}
  core::Status recover();
  nlohmann::json secrets_json() const;
  nlohmann::json secret_links_json() const;
  nlohmann::json secret_bases_json() const;
  nlohmann::json secret_names_json() const;
  nlohmann::json secret_values_json() const;
  nlohmann::json secret_unchecked_json() const;
  std::uint64_t record_bytes() const;  // what the marks take in the record
  core::Status scan_for_secrets(const std::filesystem::path& layer, const SecretScrubber& secrets);
  core::Status mark_written(int layer_fd, SecretScan& scan);
  core::Status mark_path(std::set<std::string, std::less<>>& marks, const std::string& path,
                         SecretScan& scan);
  core::Status keep_fingerprints(SecretScan& scan);
  bool hides_below(const std::string& path) const;
  enum class Forget { kAt, kAtOrBeneath };
  void forget_marks_at(const std::string& path, Forget which, SecretScan& scan);
  std::vector<std::string> marked_paths() const;
  core::Status mark_link(int dirfd, const std::string& name, const std::string& path,
                         SecretScan& scan);
  core::Status check_bases_of(int layer_fd, SecretScan& scan);
  core::Status check_base_at(const std::string& path, bool whole, int depth, SecretScan& scan);
  void withhold_from(const std::string& path, SecretScan& scan);
  void forget_base(const std::string& path, SecretScan& scan);

  Workspace* workspace_;
  std::string name_;
  core::UniqueFd lock_;
  SessionInfo info_;
  std::filesystem::path storage_;  // the directory holding this session's layers
  std::uint64_t next_layer_ = 0;
  // Redacted copies are under storage_/redacted/.
  SessionSecrets secrets_;
  std::vector<std::string> superseded_copies_;  // under redacted/, to remove once saved
  std::vector<std::string> new_copies_;         // this run's, removed if it fails
  bool exists_ = false;
  bool commit_ends_session_ = true;
  bool removing_ = false;
};

// Where the commit of a session's transaction `tx` stands, from what its
// directory holds.
enum class CommitState {
  kUndoable,    // whole and undecided (its manifest, no READY): may be undone
  kDecided,     // READY: the next operation on the workspace finishes it
  kCommitted,   // its kCommittedMarker: committed, the marker kept for the session
  kUnknown,     // gone without a marker: committed, or discarded by another process
  kUnreadable,  // the directory cannot be read (or `tx` is no transaction id)
};

CommitState commit_state(const Workspace& workspace, const std::string& tx);
// Removes what is left of a committed transaction (its marker).
void remove_commit_marker(const Workspace& workspace, const std::string& tx);
// Refuses to discard `tx` while a session's record names it as the commit
// in progress: discarded, the session would read it as committed and end,
// its changes lost. Opening the session finishes or undoes that commit.
core::Status check_no_session_commits(const Workspace& workspace, const std::string& tx);

// The helpers of the records under .agent/ (sessions.cc and held.cc use
// them too).
// Makes .agent/<name> (0700), refusing an .agent or <name> that is not a
// directory (a symlink planted there).
core::Status ensure_agent_subdir(const Workspace& workspace, const char* name);
// .agent/sessions/<name>.json
std::filesystem::path record_path(const Workspace& ws, const std::string& name);
// A record, bounded and depth-checked.
core::Result<nlohmann::json> read_record(const std::filesystem::path& file);
// The JSON files of an .agent/ subdirectory, sorted. A directory that
// exists but cannot be read throws (SandboxConfigError), never "none".
std::vector<std::filesystem::path> record_files(const std::filesystem::path& dir);
Workspace::RunClock from_ns(std::int64_t ns);
// Whether a record is that of a session being removed (OpenSession::remove
// was interrupted): opening it finishes the removal.
bool record_says_removing(const nlohmann::json& document);
// Reads a session record; `storage`, `next_layer` and `secrets` (may be
// null) are OpenSession's.
// With info.name set, the record must name that session.
core::Status parse_session(const nlohmann::json& document, SessionInfo& info,
                           std::filesystem::path& storage, std::uint64_t& next_layer,
                           SessionSecrets* secrets, const std::filesystem::path& kept_dir,
                           bool layers_may_be_missing = false);

// Checks that a directory named in a record under .agent/ is one pulsebox
// keeps: <kept_dir>/<prefix>..., absolute and normal, not a symlink, in a
// kept_dir of the current user's that no one else can write. A record
// planted in a cloned repository (with a kept/ of its own) must not make
// pulsebox read, layer or delete anything else.
core::Status check_kept_location(const std::filesystem::path& location, std::string_view prefix,
                                 const std::filesystem::path& kept_dir);

}  // namespace pulsebox::workspace
