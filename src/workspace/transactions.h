// The transaction store behind pulsebox::Workspace: manifests, blobs, the
// write-ahead log and the commit/replay machinery.
//
// On disk, <workspace>/.agent/transactions/<id>/ holds
//   manifest.json   the staged entries (path, op, mode, blob, snapshot)
//   blobs/<n/100>/<n>  new file contents, already carrying their final mode
//                   (blobs/<n> in manifests written before)
//   blobs/u/        the run's upper directory, moved whole at import: the
//                   files kept in place (kInPlaceBlob) at their paths
//   wal.json        written at commit: the ordered steps (fsynced)
//   READY           the commit point: once it exists the commit is replayed
#pragma once

#include <sys/stat.h>

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/result.h"
#include "core/unique_fd.h"
#include "pulsebox/audit.h"
#include "pulsebox/secrets.h"
#include "pulsebox/workspace.h"
#include "workspace/tree.h"

namespace pulsebox::workspace {

// Blob names (blobs/, redacted/): "<n / 100>/<n>" for the n-th blob, so no
// directory holds more than 100 of them (ext4 links into one directory of
// 100,000 names at half the speed: tools/benchmarks/commit_speed.py).
// Manifests written before this hold "<n>", which stays valid.
inline constexpr std::uint64_t kBlobsPerShard = 100;
std::string blob_name(std::uint64_t n);
// "<digits>", "<digits>/<digits>" or kInPlaceBlob: never a path that
// leaves its directory.
bool is_blob_name(std::string_view name);

// A Write's blob kept where the run wrote it: the run's upper directory,
// moved whole to blobs/u at import (ImportOptions::take_upper_files, on the
// same file system), holds it at blobs/u/<path>. A 100,000-file import
// linked each file into a shard and unlinked its upper name instead.
inline constexpr std::string_view kInPlaceBlob = "u";

// The draft of an import that keeps files in place, saved before the run's
// upper directory moves to blobs/u and renamed over manifest.json once it
// is there (promote_import). One left behind is an import interrupted
// between the two: the next opening of the workspace finishes it
// (finish_decided), so the run's files never sit in a transaction whose
// manifest does not list them.
inline constexpr std::string_view kImportManifest = "import.json";
// Where `entry`'s blob lies beneath blobs/ (and its redacted copy beneath
// redacted/): its name, or "u/<path>" for one kept in place.
std::string blob_relative_path(const struct Entry& entry);

// The shard directories of one of a transaction's blob directories, each
// opened with O_NOFOLLOW (a planted symlink there is an error, never
// followed), the last one kept open: blobs are met in order.
class BlobShards {
 public:
  explicit BlobShards(int dir) : dir_(dir) {}
  struct Location {
    int dir;           // the directory holding the blob
    std::string name;  // its name there
  };
  // Where `blob` (blob_relative_path) is; with `create`, its shard is made
  // first when missing (mode 0700). The directories of one kept in place
  // are opened without following any symlink.
  core::Result<Location> locate(const std::string& blob, bool create = false);

 private:
  int dir_;
  std::string shard_;  // the shard (or in-place directory) shard_fd_ is open on
  core::UniqueFd shard_fd_;
};

// A blob's owner, uid and gid.
using BlobOwner = std::pair<uid_t, gid_t>;

struct Entry {
  std::string path;
  StagedOp op = StagedOp::Write;
  unsigned mode = 0;
  std::string link_target;
  std::string blob;  // file name under blobs/ (Write)
  // The blob's inode when the commit's log was written (0 in manifests): the
  // sealed log names the very files it renames, not any with their names.
  std::uint64_t blob_inode = 0;
  // The blob has another link (a session layer's file, shared by its
  // review: ImportOptions::share_upper_files), seen by the commit's check of
  // the blobs (never saved): the commit replaces it with a copy of its own
  // before its commit point, so the workspace's file is an inode of its own,
  // unless the layer ends with the commit (SharedBlobs::kMovedIn).
  bool blob_shared = false;
  // As an ordinary user, the blob is another owner's (a subordinate id's, in
  // a rootless run's layer): copied before the commit point like a shared
  // one, so the workspace gets a file of the user's own.
  bool blob_foreign = false;
  std::uint64_t size = 0;
  std::int64_t mtime_ns = 0;     // set on the path at commit (0: left as the commit makes it)
  bool contains_secret = false;  // the content or link target holds a registered secret
  Snapshot snapshot;             // the path's state when first staged
  // What the path held when first staged, for diff: a file's content in
  // base/<base_blob> ("" when not kept: over a limit, or changed while read),
  // a symlink's target.
  std::string base_blob;
  std::string base_link;
  // With a registered secret value (ImportOptions::secrets), the base was
  // checked for it when kept: base_redacted when base_blob or base_link
  // holds it redacted. base_withheld when no base could be kept then: the
  // diff shows no before side, since the path's current content was never
  // checked.
  bool base_redacted = false;
  bool base_withheld = false;
  // With contains_secret: the link target redacted (a file's redacted
  // content is in redacted/<blob>).
  std::string redacted_link;
};

// A draft's entries by path; found by a string_view too (no copy of a
// parent's name for each lookup).
using Entries = std::map<std::string, Entry, std::less<>>;

struct Draft {
  std::string id;
  std::string created;
  std::string origin;
  Entries entries;                     // sorted: parents before children
  std::vector<RefusedChange> refused;  // left out at import
  std::vector<ChangeNote> notes;       // taken at import, with a caveat
  std::uint64_t next_blob = 0;
  std::uint64_t total_bytes = 0;  // sum of entries' sizes, kept by stage() and load()
  std::uint64_t base_bytes = 0;   // kept base contents, bounded like the staged bytes

  std::uint64_t staged_bytes() const { return total_bytes; }
};

std::string_view to_string(StagedOp op);
ChangeKind change_kind(const Entry& entry);
// What the path is once the entry is applied: a chmod keeps the type it had
// (a file if it had none), a delete leaves it absent.
NodeType type_after(const Entry& entry);

// Whether an ancestor of `path` is staged in `draft` as a directory that is
// not one in the workspace (absent, a file, a symlink to anywhere): the path
// has no state of its own there until commit, and nothing on the way may be
// looked up (a replaced symlink may point outside the workspace).
bool beneath_new_directory(const Draft& draft, const std::string& path);

// Whether `path` is `item` or beneath it.
bool is_at_or_beneath(std::string_view path, std::string_view item);
// Whether `path` is one of `selected` or beneath one (empty: everything).
bool is_selected(const std::vector<std::string>& selected, const std::string& path);

// Whether `id` is one TransactionStore::create makes: tx-YYYYMMDDhhmmss-<hex>,
// a plain name of the transactions directory (never a path).
bool is_transaction_id(std::string_view id);

class TransactionStore {
 public:
  TransactionStore(std::filesystem::path root, const ActionPolicy& policy, WorkspaceLimits limits);

  core::Result<std::string> create(std::string origin);
  // `file`: the manifest, or what a partial commit leaves pending.
  core::Result<Draft> load(const std::string& id, std::string_view file = "manifest.json") const;
  // Like load(), but hands each entry to `each` as it is read (in path
  // order, each path once: a file in any other order is damaged) and
  // returns the draft without entries, so that a reader that needs less
  // than the entries never holds them all. On an error `each` has seen the
  // entries before it. What `each` throws ends the calls and is thrown, as
  // it was, once the file is read.
  core::Result<Draft> load_each(const std::string& id, const std::function<void(Entry&&)>& each,
                                std::string_view file = "manifest.json") const;
  core::Status save(const Draft& draft, std::string_view file = "manifest.json") const;
  core::Status discard(const std::string& id);
  // Removes the selected entries (is_selected); the transaction when none is left.
  core::Status discard_entries(const std::string& id, const std::vector<std::string>& selected);
  // Transactions with a manifest (or one that cannot be read: load() says why).
  core::Result<std::vector<std::string>> list_ids() const;
  // Finishes every decided commit (READY present) under the lock, as
  // reconcile() does, and every interrupted import (kImportManifest
  // present); returns the commits' ids. Cheap when there is none: no lock.
  core::Result<std::vector<std::string>> finish_decided();

  // Held while an import moves the upper directory in and saves the draft
  // that names it (kImportManifest, then promote_import): no other process
  // finishes the import meanwhile. Not reentrant: release it before
  // discard(), discard_entries(), create(), commit(), reconcile() or
  // finish_decided().
  core::Result<core::UniqueFd> lock() const;
  // Whether the transaction's commit was decided (READY present): under
  // the lock, one interrupted after the decision, which reconcile finishes.
  bool commit_decided(const std::string& id) const;
  // kImportManifest becomes the transaction's manifest: blobs/ synced (the
  // moved upper directory's name), then one rename, synced.
  core::Status promote_import(const std::string& id) const;

  // A file whose inode may become a Write's blob as it is (a hard link, no
  // copy): `fd` is open on it, `name` its name in `dir`, `bytes` its
  // content as read and scanned, `st` its fstat, and its mode (no
  // setuid/setgid bits) and modification time are the entry's. The caller
  // vouches that nothing writes to it any more (overlay_reader.cc).
  // `*linked` says afterwards whether it was linked (false: written as a
  // copy). `unread`: the caller did not read it (`bytes` is empty, its
  // size is st_size) because nothing needed its content
  // (reads_new_file_contents() was false); stage() reads it from `fd` if
  // it must be copied after all.
  struct BlobSource {
    int dir;
    const std::string& name;
    const struct stat& st;
    int fd;
    bool* linked;
    bool unread = false;
    // The file stays where it is (kInPlaceBlob): `dir` is the upper
    // directory's, which the caller moves whole into blobs/u before the
    // draft is saved. Its path must be UTF-8 (a manifest's blob is text).
    bool in_place = false;
  };

  // Whether stage() looks into a new file's content (registered secret
  // values to find in it). When not, and the file can be linked as its
  // blob, the caller need not read it: a 100,000-file import read every
  // byte only to link the same inodes.
  bool reads_new_file_contents() const {
    return secrets_ != nullptr && secrets_->secret_count() > 0;
  }
  // Whether `path` is at or beneath a path known_secret_names_ holds.
  bool beneath_known_secret_name(std::string_view path) const;

  // Adds `entry` to the draft (snapshotting the path the first time), writing
  // `bytes` to a blob for a Write (or linking `source` as the blob, when it
  // is on the same file system). With check_policy, a DENY refuses it.
  core::Status stage(Draft& draft, Entry entry, std::string_view bytes, bool check_policy,
                     const BlobSource* source = nullptr);

  // What a commit does with a blob that has another link (a session
  // layer's file: ImportOptions::share_upper_files).
  enum class SharedBlobs {
    // Replaced by a copy of the store's own before the commit point: the
    // layer lives on and never shares an inode with the workspace.
    kCopied,
    // Renamed in like any blob: the caller ends the layer with this commit
    // (commit_session of a whole session), and until it has, the session's
    // record names this transaction, which only a finished commit clears.
    kMovedIn,
  };

  // Commits the selected entries (is_selected; empty: all) and the new
  // directories they lie in; the rest stays pending in the same transaction.
  core::Result<std::vector<std::string>> commit(const std::string& id,
                                                const std::vector<std::string>& selected = {},
                                                SharedBlobs shared = SharedBlobs::kCopied);
  // `accept_unsealed`: ids whose READY carries no seal this process can
  // verify (commit_seal.h) to replay as logged all the same; the user vouches.
  core::Result<Workspace::ReconcileReport> reconcile(
      const std::vector<std::string>& accept_unsealed = {});

  // The decision for one entry of `draft` at commit time (also used by
  // stage(), before the entry joins the draft).
  core::Status check_entry_policy(const Draft& draft, const Entry& entry) const;

  // Staged contents (and symlink targets) are checked against it: a match
  // marks the entry and keeps a redacted copy for diff. Must outlive the store.
  void set_secrets(const SecretScrubber* secrets) { secrets_ = secrets; }
  // Bases checked for secrets while the values were known (ImportOptions).
  void set_known_bases(const std::map<std::string, ImportOptions::KnownBase>* known,
                       bool withhold_unknown) {
    known_bases_ = known;
    withhold_unknown_bases_ = withhold_unknown;
  }
  // Files and symlinks known to hold a secret, with their redacted content
  // or target, and paths whose names hold one (ImportOptions).
  void set_known_secrets(const std::map<std::string, std::string>* files,
                         const std::map<std::string, std::string>* links,
                         const std::set<std::string, std::less<>>* names) {
    known_secrets_ = files;
    known_secret_links_ = links;
    known_secret_names_ = names;
  }
  // Commit what holds a registered secret instead of refusing it.
  void allow_secrets(bool allow) { allow_secrets_ = allow; }
  // The key that seals commit points and verifies them (commit_seal.h).
  void set_seal_key(AuditKeyLocation key) { seal_key_ = std::move(key); }

  std::filesystem::path tx_dir(const std::string& id) const;
  const std::filesystem::path& root() const { return root_; }
  core::Result<core::UniqueFd> open_root() const;
  // The root opened once for this store (a store serves one operation):
  // each staged path and policy check resolves beneath the same directory
  // without opening the workspace's path again.
  core::Result<int> shared_root() const;

 private:
  // `blobs_owner`: the owner every blob has, when one (check_blobs_are_files).
  core::Status apply(const Draft& draft, int root_fd, std::size_t* temp_files_removed,
                     std::optional<BlobOwner> blobs_owner);
  // Transactions with a commit decided (READY) or an import interrupted
  // (kImportManifest), from one listing.
  struct Unfinished {
    std::vector<std::string> decided;
    std::vector<std::string> importing;
  };
  core::Result<Unfinished> unfinished_ids() const;
  // An interrupted import (the lock held): with blobs/u there the move
  // happened, and its directories get the modes a commit needs before its
  // draft becomes the manifest; without, the draft is dropped.
  core::Status finish_import(const std::string& id) const;
  // Refuses a transaction whose directories (.agent, transactions/, its
  // own, blobs/, base/, redacted/) are not real directories: one planted
  // as a symlink would take reads, renames and removals elsewhere.
  core::Status check_directories(const std::string& id) const;
  // Replays a decided commit from its write-ahead log (the lock held), if
  // its seal verifies or `accept_unsealed`, and it passes a commit's checks.
  core::Status replay(const std::string& id, int root_fd, std::size_t* temp_files_removed,
                      bool accept_unsealed = false);
  // Keeps the base content of a file being staged for the first time.
  core::Status keep_base(Draft& draft, Entry& entry, int root_fd);
  void drop_beneath(Draft& draft, const std::string& path);
  // The end of a decided partial commit: remaining.json becomes the
  // manifest, with `refresh` (directories the commit changed below)
  // snapshotted again. Idempotent, for a replay.
  core::Status finish_partial(const std::string& id, const std::vector<std::string>& refresh,
                              const std::vector<Entry>& committed, int root_fd);

  // The blobs/ directory of the transaction being staged (blobs_id_).
  core::Result<BlobShards*> blob_shards(const std::string& id) const;

  std::filesystem::path root_;
  mutable core::UniqueFd shared_root_;
  mutable std::string blobs_id_;
  mutable core::UniqueFd blobs_fd_;
  mutable BlobShards blob_shards_{-1};  // over blobs_fd_
  const ActionPolicy& policy_;
  WorkspaceLimits limits_;
  const SecretScrubber* secrets_ = nullptr;
  const std::map<std::string, std::string>* known_secrets_ = nullptr;
  const std::map<std::string, std::string>* known_secret_links_ = nullptr;
  const std::set<std::string, std::less<>>* known_secret_names_ = nullptr;
  const std::map<std::string, ImportOptions::KnownBase>* known_bases_ = nullptr;
  bool withhold_unknown_bases_ = false;
  bool allow_secrets_ = false;
  AuditKeyLocation seal_key_;
};

// Test seam: called after each step of a commit (and of an import that
// moves the upper directory) with the step's name, so a test can kill the
// process at that exact point. Empty in production.
extern std::function<void(std::string_view step)> commit_failpoint;

}  // namespace pulsebox::workspace
