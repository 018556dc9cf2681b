#include <dirent.h>
#include <fcntl.h>
#include <malloc.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>

#include "audit/key.h"
#include "core/fs.h"
#include "core/system_dirs.h"
#include "core/text.h"
#include "core/throw_error.h"
#include "core/trace.h"
#include "pulsebox/workspace.h"
#include "workspace/diff.h"
#include "workspace/overlay_reader.h"
#include "workspace/owner_opened.h"
#include "workspace/safe_open.h"
#include "workspace/session_store.h"
#include "workspace/store_files.h"
#include "workspace/transactions.h"
#include "workspace/tree.h"

namespace pulsebox {

using core::Error;
using core::ErrorKind;
using workspace::Draft;
using workspace::Entry;
using workspace::is_selected;
using workspace::TransactionStore;

ActionPolicy default_workspace_policy() {
  ActionPolicy policy;
  for (ActionType action : {ActionType::Write, ActionType::Delete, ActionType::Rename}) {
    policy.add_rule({action, "*", Decision::Allow,
                     "workspace changes are applied only when the user commits them"});
  }
  return policy;
}

ActionPolicy workspace_policy_for(const ActionPolicy& user_policy) {
  ActionPolicy out = default_workspace_policy();
  const auto& rules = user_policy.rules();
  for (auto it = rules.rbegin(); it != rules.rend(); ++it)
    out.add_rule(*it);
  return out;
}

namespace {

TransactionStore store_for(const Workspace& ws, const ActionPolicy& policy,
                           const WorkspaceLimits& limits) {
  TransactionStore store(ws.root(), policy, limits);
  store.set_seal_key(ws.audit_key() ? *ws.audit_key() : default_audit_key_location());
  return store;
}

// A commit that was decided (its READY marker written) but interrupted is
// finished by the next operation that opens the workspace, not only by an
// explicit reconcile(): until then the workspace is half committed.
TransactionStore opened_store(const Workspace& ws, const ActionPolicy& policy,
                              const WorkspaceLimits& limits) {
  TransactionStore store = store_for(ws, policy, limits);
  (void)core::value_or_throw(store.finish_decided());
  return store;
}

StagedChange describe_entry(const Entry& entry) {
  StagedChange change;
  change.path = entry.path;
  change.op = entry.op;
  change.mode = entry.mode;
  change.link_target = entry.link_target;
  change.size = entry.size;
  change.existed = entry.snapshot.exists();
  change.kind = workspace::change_kind(entry);
  change.mtime_ns = entry.mtime_ns;
  change.contains_secret = entry.contains_secret;
  change.before_redacted = entry.base_redacted;
  change.before_withheld = entry.base_withheld;
  return change;
}

// What list_transactions and describe show of a transaction, read from its
// manifest entry by entry: the entries themselves are never all in memory
// (load() would hold a 100,000-entry draft beside the description).
core::Result<TransactionInfo> describe_transaction(const TransactionStore& store,
                                                   const std::string& id) {
  TransactionInfo info;
  std::uint64_t staged_bytes = 0;
  PB_TRY(head, store.load_each(id, [&](Entry&& entry) {
    staged_bytes += entry.size;
    info.changes.push_back(describe_entry(entry));
  }));
  for (const StagedChange& change : info.changes)
    info.contains_secrets = info.contains_secrets || change.contains_secret;
  info.id = head.id;
  info.created = head.created;
  info.origin = head.origin;
  info.commit_in_progress = store.commit_decided(head.id);
  info.staged_bytes = staged_bytes;
  info.refused = std::move(head.refused);
  info.notes = std::move(head.notes);
  return info;
}

void stage_one(TransactionStore& store, const std::string& tx, Entry entry,
               std::string_view bytes) {
  // Under the lock, as a commit or discard: two stagings that loaded the
  // same manifest gave their files the same staged name (one failed), and
  // a review met a staged file removed before the manifest naming the new
  // one was saved.
  const auto lock = core::value_or_throw(store.lock());
  // Under the lock no commit is under way: READY is one interrupted after it
  // was decided, whose replay would drop what is staged now.
  if (store.commit_decided(tx)) {
    core::throw_error(Error(ErrorKind::kRecovery, "workspace",
                            "the commit of " + tx +
                                " was interrupted after it was decided; run `pulsebox "
                                "reconcile` to finish it, and stage into another transaction"));
  }
  Draft draft = core::value_or_throw(store.load(tx));
  core::check_or_throw(store.stage(draft, std::move(entry), bytes, /*check_policy=*/true));
  core::check_or_throw(store.save(draft));
}

}  // namespace

Workspace::Workspace(std::filesystem::path root)
    : Workspace(std::move(root), default_workspace_policy()) {}

Workspace::Workspace(std::filesystem::path root, ActionPolicy policy, WorkspaceLimits limits,
                     SystemDirectoryUse system_directory)
    : root_(std::move(root)), policy_(std::move(policy)), limits_(limits) {
  std::error_code ec;
  if (!std::filesystem::is_directory(root_, ec)) {
    const bool missing = !std::filesystem::exists(std::filesystem::symlink_status(root_, ec));
    core::throw_error(
        Error(ErrorKind::kInvalidInput, "workspace",
              root_.string() + (missing ? ": no such directory" : ": not a directory")));
  }
  const std::filesystem::path given = root_;
  root_ = std::filesystem::canonical(root_, ec);
  if (system_directory == SystemDirectoryUse::Allow) return;
  if (const auto reason = core::system_directory_reason(root_)) {
    const std::string resolved = root_ == given ? "" : " (resolved: " + root_.string() + ")";
    core::throw_error(Error(ErrorKind::kSecurity, "workspace",
                            "the workspace " + given.string() + resolved +
                                " is a system directory (" + *reason +
                                "); choose a project directory, or pass --allow-system-dir "
                                "(C++: SystemDirectoryUse::Allow) to use it anyway"));
  }
}

namespace {

// The run's clock file in `.agent/` (never followed if a link), open for
// writing: `clock`, or where that is not a regular file of this user's that
// it may write (a run as root left it, or it was made read-only) the
// user's own `clock-UID`. Each stamps on the workspace's file system;
// without either, every run would take the coarse fallback below. A file
// another user could write is never used: a change to it between the two
// stamps below would move the run's start past host edits made meanwhile.
core::UniqueFd open_own_clock(int dir, const char* name) {
  core::UniqueFd fd(
      ::openat(dir, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0600));
  struct stat st {};
  if (!fd || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid() ||
      (st.st_mode & 022) != 0) {
    return core::UniqueFd();
  }
  return fd;
}

core::UniqueFd open_clock(const std::filesystem::path& agent_dir) {
  ::mkdir(agent_dir.c_str(), 0700);  // as ensure_agent_dir makes it
  const core::UniqueFd dir(
      ::open(agent_dir.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir) return core::UniqueFd();
  if (auto fd = open_own_clock(dir.get(), "clock")) return fd;
  return open_own_clock(dir.get(), ("clock-" + std::to_string(::geteuid())).c_str());
}

}  // namespace

Workspace::RunClock Workspace::stamp_now() const {
  core::UniqueFd fd = open_clock(agent_dir());
  // A change takes the later of the coarse clock and the newest precise
  // stamp handed out (multigrain time stamps), so the first change can share
  // its stamp with a change made just before it. After the fstat between,
  // the second change takes a stamp past the first (precise, unless the tick
  // has moved on): every earlier change is older than it, and every later
  // one gets it or a later stamp.
  // Without multigrain both changes share the tick's stamp.
  struct stat st {};  // the first fstat only asks; the second's ctime is the stamp
  if (!fd || ::futimens(fd.get(), nullptr) != 0 || ::fstat(fd.get(), &st) != 0 ||
      ::futimens(fd.get(), nullptr) != 0 || ::fstat(fd.get(), &st) != 0) {
    // The clock file systems stamp with, rounded down to an even second:
    // every later change gets this or a later stamp, even where the file
    // system stores whole seconds (ext4's small inodes) or two (FAT). The
    // precise clock runs ahead of it: a change made just after a precise
    // reading could look older than the run. Earlier is safe: a change
    // made before the run at most counts as made during it.
    timespec coarse{};
    ::clock_gettime(CLOCK_REALTIME_COARSE, &coarse);
    st.st_ctim = {.tv_sec = coarse.tv_sec - coarse.tv_sec % 2, .tv_nsec = 0};
  }
  return RunClock(std::chrono::duration_cast<RunClock::duration>(
      std::chrono::seconds(st.st_ctim.tv_sec) + std::chrono::nanoseconds(st.st_ctim.tv_nsec)));
}

std::string Workspace::create_transaction(std::string origin) {
  auto store = opened_store(*this, policy_, limits_);
  return core::value_or_throw(store.create(std::move(origin)));
}

namespace {

Entry make_entry(std::string_view path, StagedOp op, unsigned mode = 0,
                 std::string_view link_target = {}) {
  Entry entry;
  entry.path = std::string(path);
  entry.op = op;
  entry.mode = mode;
  entry.link_target = std::string(link_target);
  return entry;
}

}  // namespace

void Workspace::stage_write(const std::string& tx, std::string_view path, std::string_view bytes,
                            unsigned mode, const SecretScrubber* secrets) {
  auto store = store_for(*this, policy_, limits_);
  store.set_secrets(secrets);
  stage_one(store, tx, make_entry(path, StagedOp::Write, mode), bytes);
}

void Workspace::stage_delete(const std::string& tx, std::string_view path,
                             const SecretScrubber* secrets) {
  auto store = store_for(*this, policy_, limits_);
  store.set_secrets(secrets);
  stage_one(store, tx, make_entry(path, StagedOp::Delete), {});
}

void Workspace::stage_mkdir(const std::string& tx, std::string_view path, unsigned mode) {
  auto store = store_for(*this, policy_, limits_);
  stage_one(store, tx, make_entry(path, StagedOp::Mkdir, mode), {});
}

void Workspace::stage_symlink(const std::string& tx, std::string_view path, std::string_view target,
                              const SecretScrubber* secrets) {
  auto store = store_for(*this, policy_, limits_);
  store.set_secrets(secrets);
  stage_one(store, tx, make_entry(path, StagedOp::Symlink, 0, target), {});
}

void Workspace::stage_chmod(const std::string& tx, std::string_view path, unsigned mode,
                            const SecretScrubber* secrets) {
  auto store = store_for(*this, policy_, limits_);
  store.set_secrets(secrets);
  stage_one(store, tx, make_entry(path, StagedOp::Chmod, mode), {});
}

namespace {

bool upper_is_unchanged(const std::filesystem::path& upper, const std::filesystem::path& lower) {
  struct stat upper_st {
  }, lower_st{};
  if (::lstat(upper.c_str(), &upper_st) != 0 || ::lstat(lower.c_str(), &lower_st) != 0 ||
      !S_ISDIR(upper_st.st_mode) || (upper_st.st_mode & 07777) != (lower_st.st_mode & 07777)) {
    return false;
  }
  DIR* dir = ::opendir(upper.c_str());
  if (dir == nullptr) return false;
  bool empty = true;
  while (const dirent* entry = ::readdir(dir)) {
    if (std::strcmp(entry->d_name, ".") != 0 && std::strcmp(entry->d_name, "..") != 0) {
      empty = false;
      break;
    }
  }
  ::closedir(dir);
  return empty;
}

// The snapshots are taken after the run: a path the host changed while the
// run went on shows it in its ctime (which a write always moves, and user
// space cannot set back) or mtime, at or after the run's start as the file
// system stamps it (Workspace::stamp_now()).
void mark_changed_during_run(Draft& draft, std::chrono::system_clock::time_point run_started) {
  const std::int64_t since_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(run_started.time_since_epoch()).count();
  for (auto& [path, entry] : draft.entries) {
    workspace::Snapshot& snapshot = entry.snapshot;
    if (!snapshot.exists()) continue;
    // A directory counts where the entry removes it with everything below
    // (a host file added there meanwhile would go with it); a mode change
    // or a new file inside it loses nothing of the host's.
    const bool removes_tree = workspace::type_after(entry) != workspace::NodeType::Directory;
    if (snapshot.type == workspace::NodeType::Directory && !removes_tree) continue;
    if (std::max(snapshot.mtime_ns, snapshot.newest_ctime_ns) >= since_ns) {
      snapshot.changed_during_run = true;
    }
  }
}

// Whether `upper` can be moved whole into `tx` (one file system): its files
// may then stay where they are as their blobs (kInPlaceBlob).
bool same_file_system(const std::filesystem::path& upper, const std::filesystem::path& tx) {
  struct stat upper_st {};
  struct stat tx_st {};
  return ::lstat(upper.c_str(), &upper_st) == 0 && S_ISDIR(upper_st.st_mode) &&
         ::stat(tx.c_str(), &tx_st) == 0 && upper_st.st_dev == tx_st.st_dev;
}

bool keeps_files_in_place(const Draft& draft) {
  return std::any_of(draft.entries.begin(), draft.entries.end(),
                     [](const auto& item) { return item.second.blob == workspace::kInPlaceBlob; });
}

// Whether this user owns `fd` and every directory beneath it: an ordinary
// user cannot rename a file out of a directory of another owner (a
// subordinate id's, where a run maps a range), which a file kept in place
// needs at commit. Nothing is changed: a run's directory is then left whole.
bool owns_every_directory(int fd) {
  return workspace::each_directory(
      fd, [](int, const struct stat& st, const std::string&) { return st.st_uid == ::geteuid(); });
}

// Whether the run's upper directory may move into a transaction as it is:
// root always, an ordinary user where it owns every directory of it.
bool upper_may_move(const std::filesystem::path& upper) {
  if (::geteuid() == 0) return true;
  core::UniqueFd fd(::open(upper.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  return fd && owns_every_directory(fd.get());
}

enum class UpperMove {
  kMoved,     // the upper directory is the transaction's blobs/u
  kNotMoved,  // it is where it was, whole and unchanged
  kStuck,     // it is in blobs/u, beside its draft: the next opening finishes the import
};

// Gives the directory at `moved` back the modes `changed` holds (children
// first), then moves it back to `upper`. Stuck (`why` says why) when a
// mode cannot be restored or the rename fails: it stays with its draft,
// which knows the run's modes, rather than go back with the owner's rwx
// for a second walk to stage as the run's. Killed between, the next
// opening finishes the import from the draft too.
UpperMove move_upper_back(const std::filesystem::path& moved, const std::filesystem::path& upper,
                          const std::vector<workspace::ChangedMode>& changed, std::string& why) {
  core::UniqueFd fd(::open(moved.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) {
    why = core::Error::from_errno("workspace", "open " + moved.string()).to_string();
    return UpperMove::kStuck;
  }
  if (auto restored = workspace::restore_directory_modes(fd.get(), changed); !restored.ok()) {
    why = restored.error().to_string();
    return UpperMove::kStuck;
  }
  if (::rename(moved.c_str(), upper.c_str()) != 0) {
    why = core::Error::from_errno("workspace", "rename it to " + upper.string()).to_string();
    return UpperMove::kStuck;
  }
  return UpperMove::kNotMoved;
}

// The upper directory becomes the transaction's blobs/u, closed to others,
// with every directory its owner's rwx for an ordinary user; on a failure
// after the rename it is moved back (move_upper_back). `changed`: the modes
// the move changed (its root's first).
UpperMove move_upper_into(const std::filesystem::path& upper, const std::filesystem::path& tx,
                          std::vector<workspace::ChangedMode>& changed, std::string& why) {
  struct stat before {};
  if (::lstat(upper.c_str(), &before) != 0) return UpperMove::kNotMoved;
  const auto target = tx / "blobs" / workspace::kInPlaceBlob;
  if (::rename(upper.c_str(), target.c_str()) != 0) return UpperMove::kNotMoved;
  // Killed from here on, the next opening finishes the import and gives
  // the directories the modes a commit needs itself (finish_import).
  workspace::failpoint("import: upper directory renamed");
  core::UniqueFd moved(::open(target.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!moved) {  // nothing changed yet
    if (::rename(target.c_str(), upper.c_str()) == 0) return UpperMove::kNotMoved;
    why = core::Error::from_errno("workspace", "rename it to " + upper.string()).to_string();
    return UpperMove::kStuck;
  }
  changed = {{"", static_cast<mode_t>(before.st_mode & 07777)}};
  bool ready = ::fchmod(moved.get(), 0700) == 0;
  if (ready && ::geteuid() != 0)
    ready = workspace::make_directories_owner_writable(moved.get(), &changed);
  if (ready) return UpperMove::kMoved;
  return move_upper_back(target, upper, changed, why);
}

// Saves `draft` and moves the upper directory into its transaction under
// the store's lock, in an order a crash cannot split: the draft as
// kImportManifest, the move, the draft renamed over the manifest. Killed
// between, the next opening of the workspace finishes the import
// (TransactionStore::finish_decided); the run's files are never in a
// transaction whose manifest does not name them. kNotMoved: nothing saved.
// kStuck: `why` says why the directory could not go back.
core::Result<UpperMove> save_moving_upper(TransactionStore& store, const Draft& draft,
                                          const std::filesystem::path& upper, std::string& why) {
  // Checked before the draft is saved: a directory this user does not own
  // keeps the run's directory where it is, at no cost.
  if (!upper_may_move(upper)) return UpperMove::kNotMoved;
  const auto tx = store.tx_dir(draft.id);
  const auto moved_upper = tx / "blobs" / workspace::kInPlaceBlob;
  const auto draft_file = tx / workspace::kImportManifest;
  PB_TRY(lock, store.lock());
  PB_CHECK(store.save(draft, workspace::kImportManifest));
  workspace::failpoint("import: draft saved");
  std::vector<workspace::ChangedMode> changed;
  const UpperMove move = move_upper_into(upper, tx, changed, why);
  // Stuck: the draft stays beside the directory, and the next opening of
  // the workspace stages the run's changes from them (finish_import).
  if (move == UpperMove::kStuck) return move;
  if (move == UpperMove::kNotMoved) {
    // A draft left behind is dropped by the next opening.
    (void)::unlink(draft_file.c_str());
    return move;
  }
  workspace::failpoint("import: upper directory moved");
  if (auto promoted = store.promote_import(draft.id); !promoted.ok()) {
    // The rename over the manifest done, only a sync failed: the import
    // stands (a crash before the rename reached the disk leaves the draft
    // beside the directory, which the next opening finishes).
    struct stat st {};
    if (::lstat(draft_file.c_str(), &st) != 0 && errno == ENOENT) return UpperMove::kMoved;
    if (move_upper_back(moved_upper, upper, changed, why) == UpperMove::kStuck) {
      why = promoted.error().to_string() + "; then " + why;
      return UpperMove::kStuck;
    }
    (void)::unlink(draft_file.c_str());  // a draft left behind is dropped by the next opening
    return std::move(promoted).error();
  }
  return UpperMove::kMoved;
}

ImportResult import_into_new_transaction(TransactionStore& store,
                                         const std::filesystem::path& upper,
                                         const std::filesystem::path& lower,
                                         const ImportOptions& options, std::uint64_t max_file_bytes,
                                         bool full_copy,
                                         const std::vector<std::string>& own_paths) {
  const auto& run_started = options.run_started;
  store.set_secrets(options.secrets);
  store.set_known_secrets(&options.known_secrets, &options.known_secret_links,
                          &options.known_secret_names);
  store.set_known_bases(&options.known_bases, options.withhold_unknown_bases);
  std::string id;
  Draft draft;
  std::vector<std::string> linked;
  // The upper directory's files stay where they are, and the directory
  // moves into the transaction as one (a link and an unlink a file cost
  // most of a 100,000-file import), unless it must stay whole: paths were
  // refused (it is kept as held changes), or it cannot move.
  bool in_place = options.take_upper_files && !full_copy;
  const auto walk = [&]() -> core::Status {
    id = core::value_or_throw(store.create(options.origin));
    draft = core::value_or_throw(store.load(id));
    linked.clear();
    in_place = in_place && same_file_system(upper, store.tx_dir(id));
    const auto files = options.take_upper_files    ? workspace::UpperFiles::kTaken
                       : options.share_upper_files ? workspace::UpperFiles::kShared
                                                   : workspace::UpperFiles::kCopied;
    return workspace::import_upper_directory(store, draft, upper, lower, max_file_bytes, full_copy,
                                             files, own_paths, linked, in_place);
  };
  const auto walk_again_linking = [&]() -> core::Status {
    (void)store.discard(id);
    in_place = false;
    return walk();
  };
  auto imported = walk();
  if (imported.ok() && in_place && !draft.refused.empty()) imported = walk_again_linking();
  core::trace_phase("import: upper directory read");
  if (imported.ok() && run_started) mark_changed_during_run(draft, *run_started);
  if (imported.ok() && draft.entries.empty()) imported = store.discard(id);
  bool moved = false;
  if (imported.ok() && !draft.entries.empty() && in_place && keeps_files_in_place(draft)) {
    std::string why;
    auto move = save_moving_upper(store, draft, upper, why);
    if (move && *move == UpperMove::kStuck) {
      // Never discarded: the transaction's directory holds the run's
      // changes, beside the draft that names them.
      core::throw_error(core::Error(
          core::ErrorKind::kIo, "workspace",
          "the run's changes are in " + (store.tx_dir(id) / "blobs" / "u").string() +
              " and could not be moved back to " + upper.string() + " after a failed import (" +
              why + "): the next opening of the workspace stages them as transaction " + id));
    }
    if (!move) imported = std::move(move).error();
    moved = move && *move == UpperMove::kMoved;
    if (move && *move == UpperMove::kNotMoved) {
      imported = walk_again_linking();
      if (imported.ok() && run_started) mark_changed_during_run(draft, *run_started);
    }
  }
  if (!imported.ok()) {
    (void)store.discard(id);  // never leave a half-imported transaction behind
    core::throw_error(
        std::move(imported).error().with_context("reading changes from " + upper.string()));
  }
  ImportResult result;
  result.refused = draft.refused;
  result.notes = draft.notes;
  if (draft.entries.empty()) return result;
  const auto moved_upper = store.tx_dir(id) / "blobs" / workspace::kInPlaceBlob;
  if (!moved) core::check_or_throw(store.save(draft));  // a failure: the caller keeps `upper`
  core::trace_phase("import: manifest saved");
  workspace::release_linked(moved ? moved_upper : upper, linked);
  core::trace_phase("import: linked names released");
  // The run's summary from the draft, entry by entry as each is freed, so
  // the two are never whole side by side; the rest of the draft's memory
  // goes back to the system rather than stay resident.
  while (!draft.entries.empty()) {
    auto node = draft.entries.extract(draft.entries.begin());
    result.contains_secrets = result.contains_secrets || node.mapped().contains_secret;
    result.staged.push_back({std::move(node.key()), workspace::change_kind(node.mapped())});
  }
  draft = Draft{};
  linked = {};
  ::malloc_trim(0);
  result.transaction = id;
  return result;
}

}  // namespace

ImportResult Workspace::import_overlay(const std::filesystem::path& upper,
                                       const std::filesystem::path& lower,
                                       const ImportOptions& options) {
  // Most runs change nothing: an empty upper directory (with the lower
  // root's mode) needs no transaction to be made and thrown away.
  if (upper_is_unchanged(upper, lower)) return {};
  auto store = opened_store(*this, policy_, limits_);
  return import_into_new_transaction(store, upper, lower, options, limits_.max_file_bytes, false,
                                     own_paths_);
}

std::optional<std::string> Workspace::import_overlay(const std::filesystem::path& upper,
                                                     const std::filesystem::path& lower,
                                                     std::string origin,
                                                     std::optional<RunClock> run_started) {
  return import_overlay(upper, lower,
                        ImportOptions{.origin = std::move(origin), .run_started = run_started})
      .transaction;
}

ImportResult Workspace::import_copy(const std::filesystem::path& copy,
                                    const ImportOptions& options) {
  auto store = opened_store(*this, policy_, limits_);
  return import_into_new_transaction(store, copy, root_, options, limits_.max_file_bytes, true,
                                     own_paths_);
}

std::optional<std::string> Workspace::import_copy(const std::filesystem::path& copy,
                                                  std::string origin,
                                                  std::optional<RunClock> run_started) {
  return import_copy(copy, ImportOptions{.origin = std::move(origin), .run_started = run_started})
      .transaction;
}

void Workspace::set_audit_key(AuditKeyLocation key) {
  if (!key.file.empty()) {
    add_own_path(key.file);
    add_own_path(audit::Key::anchor_directory_of(key.file));
  }
  audit_key_ = std::move(key);
}

void Workspace::add_own_path(const std::filesystem::path& host_path) {
  if (host_path.empty()) return;
  std::error_code ec;
  const auto relative = std::filesystem::weakly_canonical(host_path, ec).lexically_relative(root_);
  if (ec || relative.empty() || *relative.begin() == ".." || *relative.begin() == ".agent" ||
      relative == ".")
    return;
  if (std::find(own_paths_.begin(), own_paths_.end(), relative.string()) == own_paths_.end())
    own_paths_.push_back(relative.string());
}

void Workspace::for_each_transaction(const std::function<void(TransactionInfo&&)>& each) const {
  auto store = opened_store(*this, policy_, limits_);
  for (const std::string& id : core::value_or_throw(store.list_ids())) {
    auto info = describe_transaction(store, id);
    if (info) {
      each(std::move(info).value());
      continue;
    }
    // Listed, never left out: the user must see it to discard it.
    TransactionInfo damaged;
    damaged.id = id;
    damaged.damaged = info.error().to_string();
    each(std::move(damaged));
  }
}

std::vector<TransactionInfo> Workspace::list_transactions() const {
  std::vector<TransactionInfo> out;
  for_each_transaction([&](TransactionInfo&& info) { out.push_back(std::move(info)); });
  return out;
}

TransactionInfo Workspace::describe(const std::string& tx) const {
  auto store = opened_store(*this, policy_, limits_);
  return core::value_or_throw(describe_transaction(store, tx));
}

namespace {

// The path's current content: the "before" side of a preview. At commit it
// must still match the snapshot, or the commit is refused.
workspace::DiffSide current_side(int root_fd, const Entry& entry, std::uint64_t limit) {
  using workspace::NodeType;
  workspace::DiffSide side;
  side.exists = entry.snapshot.exists();
  side.mode = entry.snapshot.mode & 0777;
  side.is_symlink = entry.snapshot.type == NodeType::Symlink;
  if (entry.snapshot.type != NodeType::File && !side.is_symlink) return side;
  // Unreadable now (over the limit, gone, replaced): not shown, rather than
  // shown as empty.
  side.unshown = true;
  std::string name;
  auto parent = workspace::open_parent(root_fd, entry.path, &name);
  if (!parent) return side;
  auto read = workspace::read_file_or_link(parent->get(), name, side.is_symlink, limit, entry.path);
  if (read) {
    side.content = std::move(read).value();
    side.unshown = false;
  }
  return side;
}

// A staged file's content (or its redacted copy), its shard directory
// opened without following a symlink.
core::Result<std::string> read_blob(const std::filesystem::path& dir, const std::string& blob,
                                    std::uint64_t limit) {
  PB_TRY(dir_fd, core::open_directory(dir));
  workspace::BlobShards shards(dir_fd.get());
  PB_TRY(where, shards.locate(blob));
  core::UniqueFd fd(
      ::openat(where.dir, where.name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd && errno == EACCES) {
    // Staged with the mode the run gave it (`chmod 000`), which keeps an
    // ordinary user out of its own file: read as its owner.
    struct stat st {};
    if (::fstatat(where.dir, where.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
      return core::Error::from_errno("workspace", "stat staged file " + blob);
    const workspace::OwnerOpened as_owner(where.dir, where.name, O_RDONLY | O_NONBLOCK, st);
    if (!as_owner) return core::Error::from_errno("workspace", "open staged file " + blob);
    return workspace::read_regular_file(as_owner.get(), limit, "staged file");
  }
  if (!fd) return core::Error::from_errno("workspace", "open staged file " + blob);
  return workspace::read_regular_file(fd.get(), limit, "staged file");
}

// The path as it was when first staged (Entry::base_blob, base_link), so a
// diff shows the transaction's own change whatever was committed since;
// nullopt when it was not kept.
std::optional<workspace::DiffSide> base_side(const TransactionStore& store, const std::string& tx,
                                             const Entry& entry, std::uint64_t limit) {
  using workspace::NodeType;
  workspace::DiffSide side;
  side.exists = true;
  side.mode = entry.snapshot.mode & 0777;
  if (entry.snapshot.type == NodeType::Symlink && !entry.base_link.empty()) {
    side.is_symlink = true;
    side.content = entry.base_link;
    return side;
  }
  if (entry.snapshot.type != NodeType::File || entry.base_blob.empty()) return std::nullopt;
  auto bytes = core::read_regular_file(store.tx_dir(tx) / "base" / entry.base_blob, limit, "base");
  if (!bytes) return std::nullopt;
  side.content = std::move(bytes).value();
  return side;
}

// A base never checked for the registered secret values (Entry::base_withheld):
// its current content is not shown.
workspace::DiffSide withheld_side(const Entry& entry) {
  workspace::DiffSide side;
  side.exists = true;
  side.mode = entry.snapshot.mode & 0777;
  side.is_symlink = entry.snapshot.type == workspace::NodeType::Symlink;
  side.unshown = true;
  return side;
}

std::string directory_diff(const std::string& path, const Entry& entry, bool colour) {
  auto bold = [&](const std::string& text) {
    return colour ? "\033[1m" + text + "\033[0m\n" : text + "\n";
  };
  char modes[64];
  std::string out = bold(workspace::diff_header(path));
  if (entry.op == StagedOp::Delete) {
    out += bold("deleted directory (with everything in it)");
  } else if (entry.op == StagedOp::Mkdir && !entry.snapshot.exists()) {
    std::snprintf(modes, sizeof modes, "new directory mode 040%03o", entry.mode);
    out += bold(modes);
  } else if (entry.op == StagedOp::Mkdir) {
    std::snprintf(modes, sizeof modes, "replaced by a directory, mode 040%03o", entry.mode);
    out += bold(modes);
  } else {
    std::snprintf(modes, sizeof modes, "old mode 040%03o", entry.snapshot.mode & 0777);
    out += bold(modes);
    std::snprintf(modes, sizeof modes, "new mode 040%03o", entry.mode);
    out += bold(modes);
  }
  return out;
}

}  // namespace

namespace {

// The two sides of one entry's preview; `directory` when it is shown as a
// directory change (directory_diff) rather than a file diff.
struct EntrySides {
  bool directory = false;
  workspace::DiffSide before;
  workspace::DiffSide after;
};

// A review's transaction as it was when the review began, to tell what a
// staged file that cannot be read means: the transaction changed meanwhile
// (a commit, discard or staging elsewhere moved or removed the file), a
// commit left interrupted, or damage. Shown as an empty file, it was a
// change the commit would refuse, or one it no longer has.
class ReviewedTransaction {
 public:
  ReviewedTransaction(const TransactionStore& store, std::string tx)
      : store_(store), tx_(std::move(tx)), manifest_(store.tx_dir(tx_) / "manifest.json") {
    found_ = ::stat(manifest_.c_str(), &identity_) == 0;
  }
  const std::string& id() const { return tx_; }

  // Throws for `blob`, the staged file of `path` (or its redacted copy),
  // that could not be read (`why`).
  [[noreturn]] void unreadable(const std::filesystem::path& blob, const std::string& path,
                               bool redacted_copy, const Error& why) const {
    // Whoever moves or removes staged files holds the workspace's lock until
    // the manifest is replaced or removed: wait for it, then look again.
    if (!changed()) (void)store_.lock();  // released as the descriptor closes
    if (changed()) {
      Error gone(ErrorKind::kConcurrentModification, "workspace",
                 "transaction " + tx_ + " changed while it was read (committed, discarded or " +
                     "staged again elsewhere: the staged file of " + core::quote_name(path) +
                     " is gone); run the command again");
      gone.paths().push_back(path);
      core::throw_error(gone);
    }
    if (store_.commit_decided(tx_)) {
      core::throw_error(Error(ErrorKind::kRecovery, "workspace",
                              "the commit of " + tx_ +
                                  " was interrupted after it had begun to move its staged files; "
                                  "run `pulsebox reconcile` to finish it"));
    }
    const int err = why.error_number();
    const bool missing =
        err == ENOENT || err == ENOTDIR || err == ELOOP || why.kind() == ErrorKind::kSecurity;
    if (missing && redacted_copy) {
      // Only the diff reads it: the commit would still apply the staged file.
      core::throw_error(Error(ErrorKind::kRecovery, "workspace",
                              blob.string() + ", the redacted copy shown in place of " +
                                  core::quote_name(path) +
                                  " (it holds a secret), is missing or not a regular file; "
                                  "`pulsebox commit --allow-secrets` would apply the staged file "
                                  "unseen, or discard the transaction"));
    }
    if (missing) {
      core::throw_error(workspace::corrupt(
          blob, "the staged file of " + core::quote_name(path) +
                    " is missing or not a regular file" +
                    (err != 0 ? std::string(": ") + std::strerror(err) : std::string())));
    }
    core::throw_error(Error(
        ErrorKind::kIo, "workspace",
        "cannot read " + blob.string() + ", the staged file of " + core::quote_name(path), err));
  }

 private:
  bool changed() const {
    struct stat now {};
    return !found_ || ::stat(manifest_.c_str(), &now) != 0 || now.st_dev != identity_.st_dev ||
           now.st_ino != identity_.st_ino;
  }

  const TransactionStore& store_;
  std::string tx_;
  std::filesystem::path manifest_;
  struct stat identity_ {};
  bool found_ = false;
};

EntrySides entry_sides(const TransactionStore& store, int root_fd,
                       const ReviewedTransaction& reviewed, const Entry& entry,
                       std::uint64_t limit) {
  const std::string& tx = reviewed.id();
  using workspace::NodeType;
  EntrySides sides;
  const bool was_directory = entry.snapshot.type == NodeType::Directory;
  if (entry.op == StagedOp::Mkdir ||
      (was_directory && entry.op != StagedOp::Write && entry.op != StagedOp::Symlink)) {
    sides.directory = true;
    return sides;
  }
  workspace::DiffSide& before = sides.before;
  workspace::DiffSide& after = sides.after;
  if (entry.base_withheld) {
    before = withheld_side(entry);
  } else {
    auto base = base_side(store, tx, entry, limit);
    // A redacted base that cannot be read (grown past the limit by its
    // redaction marks, or gone) is never replaced by the current content.
    before = base                  ? std::move(*base)
             : entry.base_redacted ? withheld_side(entry)
                                   : current_side(root_fd, entry, limit);
  }
  if (was_directory) before = {};  // a directory replaced by a file: show the file as new
  switch (entry.op) {
    case StagedOp::Write: {
      after.exists = true;
      after.mode = entry.mode;
      // A change holding a secret is only ever shown redacted.
      const auto blobs = store.tx_dir(tx) / (entry.contains_secret ? "redacted" : "blobs");
      auto bytes = read_blob(blobs, workspace::blob_relative_path(entry), limit);
      if (bytes) {
        after.content = std::move(bytes).value();
      } else if (bytes.error().kind() == ErrorKind::kResource) {
        after.unshown = true;  // over this Workspace's per-file limit
      } else {
        reviewed.unreadable(blobs / workspace::blob_relative_path(entry), entry.path,
                            entry.contains_secret, bytes.error());
      }
      break;
    }
    case StagedOp::Symlink:
      after.exists = true;
      after.is_symlink = true;
      after.mode = 0777;
      after.content = entry.contains_secret ? entry.redacted_link : entry.link_target;
      if (before.is_symlink) before.mode = 0777;
      break;
    case StagedOp::Chmod:
      after = before;
      after.mode = entry.mode;
      // The same content on both sides, shown or not: a mode change only.
      before.unshown = after.unshown = false;
      break;
    case StagedOp::Delete:
    case StagedOp::Mkdir:
      break;
  }
  return sides;
}

// The paths a review selects (DiffOptions::paths), normalised: an invalid
// one throws at once; which of them selected no change is known once every
// entry has been seen.
class Selection {
 public:
  explicit Selection(const std::vector<std::string>& given) : given_(given) {
    for (const std::string& path : given) {
      auto checked = workspace::check_relative_path(path);
      if (!checked) {
        core::throw_error(
            Error(ErrorKind::kInvalidInput, "workspace",
                  "path " + core::quote_name(path) + ": " + checked.error().message()));
      }
      paths_.push_back(*checked);
    }
    matched_.resize(paths_.size());
  }

  // Whether `path` is selected; notes which of the given paths select it.
  bool selects(const std::string& path) {
    bool any = paths_.empty();
    for (std::size_t i = 0; i < paths_.size(); ++i) {
      if (!workspace::is_at_or_beneath(path, paths_[i])) continue;
      matched_[i] = true;
      any = true;
    }
    return any;
  }

  // Throws naming every given path that selected nothing in `tx`.
  void check_all_matched(const std::string& tx) const {
    std::string names;
    for (std::size_t i = 0; i < paths_.size(); ++i) {
      if (!matched_[i]) names += (names.empty() ? "" : ", ") + core::quote_name(given_[i]);
    }
    if (names.empty()) return;
    core::throw_error(Error(ErrorKind::kInvalidInput, "workspace",
                            "transaction " + tx + " has no change at or beneath " + names +
                                " (see `pulsebox diff --name-only " + tx + "`)"));
  }

  const std::vector<std::string>& paths() const { return paths_; }

 private:
  const std::vector<std::string>& given_;
  std::vector<std::string> paths_;
  std::vector<bool> matched_;
};

// The paths as given, normalised; each must select a change of `draft`.
std::vector<std::string> checked_selection(const Draft& draft,
                                           const std::vector<std::string>& paths) {
  Selection selection(paths);
  for (const auto& [entry_path, entry] : draft.entries)
    (void)selection.selects(entry_path);
  selection.check_all_matched(draft.id);
  return selection.paths();
}

}  // namespace

void Workspace::diff(
    const std::string& tx, const DiffOptions& options,
    const std::function<void(const std::string& path, std::string_view section)>& section) const {
  auto store = opened_store(*this, policy_, limits_);
  Selection selection(options.paths);
  const auto root_fd = core::value_or_throw(store.open_root());
  const ReviewedTransaction reviewed(store, tx);
  // Entry by entry as the manifest is read, in path order: a 100,000-entry
  // transaction's entries are never all held.
  (void)core::value_or_throw(store.load_each(tx, [&](Entry&& entry) {
    if (!selection.selects(entry.path)) return;
    const EntrySides sides =
        entry_sides(store, root_fd.get(), reviewed, entry, limits_.max_file_bytes);
    section(entry.path, sides.directory
                            ? directory_diff(entry.path, entry, options.colour)
                            : workspace::unified_file_diff(entry.path, sides.before, sides.after,
                                                           options.colour));
  }));
  selection.check_all_matched(tx);
}

std::string Workspace::diff(const std::string& tx, const DiffOptions& options) const {
  std::string out;
  diff(tx, options, [&](const std::string&, std::string_view section) { out += section; });
  return out;
}

std::string Workspace::diff(const std::string& tx, bool colour) const {
  return diff(tx, DiffOptions{.colour = colour, .paths = {}});
}

void Workspace::diff_stat(const std::string& tx, const std::vector<std::string>& paths,
                          const std::function<void(DiffStat&&)>& each) const {
  auto store = opened_store(*this, policy_, limits_);
  Selection selection(paths);
  const auto root_fd = core::value_or_throw(store.open_root());
  const ReviewedTransaction reviewed(store, tx);
  (void)core::value_or_throw(store.load_each(tx, [&](Entry&& entry) {
    if (!selection.selects(entry.path)) return;
    DiffStat stat;
    stat.kind = workspace::change_kind(entry);
    const EntrySides sides =
        entry_sides(store, root_fd.get(), reviewed, entry, limits_.max_file_bytes);
    if (!sides.directory) {
      const auto counts = workspace::count_changed_lines(sides.before, sides.after);
      stat.added_lines = counts.added;
      stat.removed_lines = counts.removed;
      stat.binary = counts.binary;
      stat.not_shown = counts.not_shown;
    }
    stat.path = std::move(entry.path);
    each(std::move(stat));
  }));
  selection.check_all_matched(tx);
}

std::vector<DiffStat> Workspace::diff_stat(const std::string& tx,
                                           const std::vector<std::string>& paths) const {
  std::vector<DiffStat> out;
  diff_stat(tx, paths, [&](DiffStat&& stat) { out.push_back(std::move(stat)); });
  return out;
}

std::vector<std::string> Workspace::commit(const std::string& tx, const CommitOptions& options) {
  auto store = opened_store(*this, policy_, limits_);
  store.allow_secrets(options.allow_secrets);
  std::vector<std::string> selected;
  if (!options.paths.empty()) {
    selected = checked_selection(core::value_or_throw(store.load(tx)), options.paths);
  }
  return core::value_or_throw(store.commit(tx, selected));
}

std::vector<std::string> Workspace::commit_ending_layer(const std::string& tx, bool allow_secrets) {
  auto store = opened_store(*this, policy_, limits_);
  store.allow_secrets(allow_secrets);
  return core::value_or_throw(store.commit(tx, {}, TransactionStore::SharedBlobs::kMovedIn));
}

void Workspace::discard(const std::string& tx) {
  auto store = opened_store(*this, policy_, limits_);
  core::check_or_throw(workspace::check_no_session_commits(*this, tx));
  core::check_or_throw(store.discard(tx));
}

void Workspace::discard(const std::string& tx, const std::vector<std::string>& paths) {
  auto store = opened_store(*this, policy_, limits_);
  core::check_or_throw(workspace::check_no_session_commits(*this, tx));
  if (paths.empty()) {
    core::check_or_throw(store.discard(tx));
    return;
  }
  const Draft draft = core::value_or_throw(store.load(tx));
  core::check_or_throw(store.discard_entries(tx, checked_selection(draft, paths)));
}

Workspace::ReconcileReport Workspace::reconcile(const std::vector<std::string>& accept_unsealed) {
  auto store = store_for(*this, policy_, limits_);
  ReconcileReport report = core::value_or_throw(store.reconcile(accept_unsealed));
  // The marker of a commit that ended a session, left by a crash after the
  // session ended: no record names it any more.
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(agent_dir() / "transactions", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    const std::string id = it->path().filename().string();
    if (workspace::commit_state(*this, id) == workspace::CommitState::kCommitted &&
        workspace::check_no_session_commits(*this, id).ok()) {
      workspace::remove_commit_marker(*this, id);
    }
  }
  return report;
}

}  // namespace pulsebox
