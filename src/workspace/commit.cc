// Committing a transaction: the write-ahead log, the commit point, applying
// its steps (idempotently, so a replay converges), partial commits, and
// reconcile's replay of decided commits. The store itself (manifests,
// staging, snapshots, bases) is transactions.cc.
#include <dirent.h>
#include <fcntl.h>
#include <malloc.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "audit/chain.h"
#include "core/byte_names.h"
#include "core/fs.h"
#include "core/json_parse.h"
#include "core/sha256.h"
#include "core/text.h"
#include "core/trace.h"
#include "workspace/blob_durability.h"
#include "workspace/commit_seal.h"
#include "workspace/new_directory_move.h"
#include "workspace/protected_changes.h"
#include "workspace/safe_open.h"
#include "workspace/store_files.h"
#include "workspace/transactions.h"
#include "workspace/tree.h"

namespace pulsebox::workspace {

using core::Error;
using core::ErrorKind;
using core::random_hex;
using core::UniqueFd;
using json = nlohmann::json;

core::Status replace_with_copy(int dir, const std::string& name, int fd, const struct stat& st,
                               unsigned mode, const std::string& path, bool with_owner,
                               bool durable, ino_t* inode, int temp_dir) {
  const int made_in = temp_dir >= 0 ? temp_dir : dir;
  const std::string temp = std::string(kTempPrefix) + random_hex(12);
  UniqueFd copy(
      ::openat(made_in, temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!copy) return Error::from_errno("workspace", "copy of " + path);
  const auto failed = [&](const std::string& what) {
    const Error error = Error::from_errno("workspace", what + " " + path);
    ::unlinkat(made_in, temp.c_str(), 0);
    return error;
  };
  for (off_t left = st.st_size; left > 0;) {
    const ssize_t n =
        ::copy_file_range(fd, nullptr, copy.get(), nullptr, static_cast<std::size_t>(left), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return failed("copying");
    left -= n;
  }
  const timespec times[2] = {st.st_atim, st.st_mtim};
  if (with_owner && ::fchown(copy.get(), st.st_uid, st.st_gid) != 0 && errno != EPERM)
    return failed("chown");
  if (::fchmod(copy.get(), mode) != 0) return failed("chmod");
  if (::futimens(copy.get(), times) != 0) return failed("setting the times of");
  if (durable && ::fsync(copy.get()) != 0) return failed("fsync the copy of");
  struct stat made {};
  if (inode != nullptr && ::fstat(copy.get(), &made) != 0) return failed("stat the copy of");
  if (::renameat(made_in, temp.c_str(), dir, name.c_str()) != 0)
    return failed("rename into place:");
  if (inode != nullptr) *inode = made.st_ino;
  return core::ok_status();
}

namespace {

// Every Write's blob is a regular file this store wrote (a symlink planted
// in blobs/ would be renamed into the workspace as if it were the file);
// with `gone_ok`, a blob already renamed into place (a replay) passes.
// `owner`, when given, is set to the owner every blob found has (the
// importing user's, as a rule), or left empty when they differ.
core::Status check_blobs_are_files(Draft& draft, const std::filesystem::path& dir, bool gone_ok,
                                   std::optional<BlobOwner>* owner) {
  PB_TRY(blob_dir, core::open_directory(dir / "blobs"));
  BlobShards shards(blob_dir.get());
  bool seen_one = false;
  const uid_t euid = ::geteuid();  // once: a system call, and 100,000 blobs
  for (auto& [path, entry] : draft.entries) {
    if (entry.op != StagedOp::Write) continue;
    auto blob = shards.locate(blob_relative_path(entry));
    struct stat st {};
    const bool found =
        blob && ::fstatat(blob->dir, blob->name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
    // Gone: the blob itself, or (kept in place) a directory on its way,
    // moved in whole with it (move_new_directory).
    const bool gone = blob ? errno == ENOENT : blob.error().error_number() == ENOENT;
    if (!found && gone_ok && gone) continue;
    if (!found || !S_ISREG(st.st_mode))
      return corrupt(dir / "blobs" / blob_relative_path(entry), "not a regular file");
    // A review killed while it read a blob the run had made unreadable to
    // its owner (OwnerOpened, an ordinary user's) left the owner's read
    // bit on: that bit alone is taken off again.
    if (euid != 0 && st.st_uid == euid && (entry.mode & S_IRUSR) == 0 &&
        (st.st_mode & 07777) == (entry.mode | S_IRUSR) &&
        ::fchmodat(blob->dir, blob->name.c_str(), entry.mode, AT_SYMLINK_NOFOLLOW) == 0) {
      st.st_mode &= ~static_cast<mode_t>(S_IRUSR);
    }
    // A blob carries its final mode, which the diff showed from the
    // manifest: any other (a planted setuid bit) is not what was reviewed.
    if ((st.st_mode & 07777) != entry.mode) {
      return corrupt(dir / "blobs" / blob_relative_path(entry),
                     "its mode " + core::octal_mode(st.st_mode & 07777) +
                         " is not the staged one, " + core::octal_mode(entry.mode));
    }
    // A log names each blob's inode and size (the seal covers them): a file
    // put in a blob's place is not the one the commit decided on.
    const auto inode = static_cast<std::uint64_t>(st.st_ino);
    if (entry.blob_inode != 0 &&
        (inode != entry.blob_inode || static_cast<std::uint64_t>(st.st_size) != entry.size)) {
      return corrupt(dir / "blobs" / blob_relative_path(entry),
                     "not the file the write-ahead log names (another inode or size)");
    }
    entry.blob_inode = inode;
    entry.blob_shared = st.st_nlink > 1;
    entry.blob_foreign = euid != 0 && st.st_uid != euid;
    if (owner != nullptr) {
      if (!seen_one) *owner = BlobOwner{st.st_uid, st.st_gid};
      if (*owner && (owner->value().first != st.st_uid || owner->value().second != st.st_gid))
        owner->reset();
      seen_one = true;
    }
  }
  return core::ok_status();
}

// A replay's directory that an attempt killed right after its mkdirat
// left root's: still that inode (fstat of the open directory), still
// root's and empty, it takes `parent`'s owner. Anything else was not made
// by the commit and keeps its owner.
void give_made_directory_its_owner(int fd, const struct stat& found, const struct stat& parent) {
  struct stat now {};
  if (::fstat(fd, &now) != 0 || now.st_ino != found.st_ino || now.st_dev != found.st_dev ||
      now.st_uid != 0 || parent.st_uid == 0) {
    return;
  }
  // Read whole without a single name: empty.
  const bool empty = for_each_name(fd, [](const dirent&) { return false; });
  if (empty) (void)::fchown(fd, parent.st_uid, parent.st_gid);
}

// Each blob with another link (a session layer's file, which its review
// shared: ImportOptions::share_upper_files), and as an ordinary user each
// blob of another owner (a subordinate id's, from a rootless run's layer),
// replaced by a copy of the store's own, before the commit point. Past it
// every Write is then the rename of a file only the store holds: made
// durable with the blobs (make_blobs_durable), its space taken before anything is
// applied, used up by its rename (a partial commit leaves no link behind,
// a replay no second copy), and the content is no longer anyone else's to
// change. It must still have the size it was staged with.
// With kMovedIn, a layer's file linked from the layer alone (two links)
// stays shared where the commit makes it the workspace's own as it is: as
// root (it takes its directory's owner), or when it is this user's.
// How many were copied.
core::Result<std::size_t> make_blobs_the_stores_own(Draft& draft, const std::filesystem::path& dir,
                                                    TransactionStore::SharedBlobs mode) {
  const bool moved_in = mode == TransactionStore::SharedBlobs::kMovedIn;
  const uid_t euid = ::geteuid();
  const gid_t egid = ::getegid();
  std::size_t made = 0;
  PB_TRY(blob_dir, core::open_directory(dir / "blobs"));
  BlobShards shards(blob_dir.get());
  for (auto& [path, entry] : draft.entries) {
    if (entry.op != StagedOp::Write || (!entry.blob_shared && !entry.blob_foreign)) continue;
    const auto blob_path = (dir / "blobs" / blob_relative_path(entry)).string();
    PB_TRY(blob, shards.locate(blob_relative_path(entry)));
    struct stat st {};
    if (::fstatat(blob.dir, blob.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
      return Error::from_errno("workspace", "stat " + blob_path);
    if (!S_ISREG(st.st_mode) || static_cast<std::uint64_t>(st.st_size) != entry.size)
      return corrupt(blob_path, "not the file that was staged (another type or size)");
    if (moved_in && st.st_nlink == 2 && (euid == 0 || (st.st_uid == euid && st.st_gid == egid))) {
      continue;
    }
    UniqueFd shared(
        ::openat(blob.dir, blob.name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    struct stat opened {};
    if (!shared || ::fstat(shared.get(), &opened) != 0)
      return Error::from_errno("workspace", "open " + blob_path);
    if (opened.st_ino != st.st_ino || opened.st_dev != st.st_dev || opened.st_size != st.st_size) {
      return corrupt(blob_path, "not the file that was staged (replaced while it was copied)");
    }
    ino_t inode = 0;
    PB_CHECK(replace_with_copy(blob.dir, blob.name, shared.get(), opened, entry.mode, blob_path,
                               /*with_owner=*/false, /*durable=*/false, &inode));
    entry.blob_inode = static_cast<std::uint64_t>(inode);
    entry.blob_shared = false;
    entry.blob_foreign = false;
    ++made;
  }
  return made;
}

}  // namespace

// A directory's mode while the steps run: its owner may write to it (an
// ordinary user renames entries into and out of it); the staged mode is set
// after the last step beneath it.
unsigned working_directory_mode(unsigned mode) {
  return mode | 0700;
}

// Applies every step; each is idempotent so a replay after a crash at any
// point converges on the committed state.
core::Status TransactionStore::apply(const Draft& draft, int root_fd,
                                     std::size_t* temp_files_removed,
                                     std::optional<BlobOwner> blobs_owner) {
  struct stat blobs_owner_stat {};
  if (blobs_owner) {
    blobs_owner_stat.st_uid = blobs_owner->first;
    blobs_owner_stat.st_gid = blobs_owner->second;
  }
  const auto blobs = tx_dir(draft.id) / "blobs";
  PB_TRY(blob_dir, core::open_directory(blobs));
  BlobShards shards(blob_dir.get());
  std::set<std::string> touched_dirs;
  // The parent directory of the previous step, kept for the siblings that
  // follow it, opened beneath the root like any other. Sorted, every entry
  // for a directory or its ancestors comes before the entries beneath it,
  // so no later step replaces a directory while it is kept.
  std::string open_path;
  UniqueFd open_dir;
  // Directories this pass made (not found made by an earlier attempt): they
  // hold only what later steps put there, so those steps need not look
  // their names up first (100,000 lookups of names that are not there).
  std::set<std::string> made_now;
  bool open_dir_made_now = false;
  // The owner a new entry of the open directory takes (as root), stat'ed
  // once for its entries.
  const bool as_root = ::geteuid() == 0;
  struct stat root_stat {};
  if (as_root && ::fstat(root_fd, &root_stat) != 0)
    return Error::from_errno("workspace", "stat the workspace");
  struct stat open_dir_stat {};
  // A new directory moved in whole (move_new_directory): what it holds is
  // in place with it.
  std::string moved_prefix;
  for (const auto& [path, entry] : draft.entries) {
    if (!moved_prefix.empty() && path.starts_with(moved_prefix)) continue;
    const std::size_t slash = path.rfind('/');
    const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
    const std::string parent_path =
        slash == std::string::npos ? std::string() : path.substr(0, slash);
    if (!parent_path.empty() && (!open_dir || open_path != parent_path)) {
      open_dir.reset();
      auto parent = open_beneath(root_fd, parent_path, O_RDONLY | O_DIRECTORY);
      if (!parent) {
        const int err = parent.error().error_number();
        // The parent is gone: for a delete that is success, otherwise the
        // parent was replaced by an earlier step and this entry cannot apply.
        if (entry.op == StagedOp::Delete && (err == ENOENT || err == ENOTDIR)) continue;
        return std::move(parent).error().with_context("applying " + path);
      }
      open_dir = std::move(parent).value();
      open_path = parent_path;
      open_dir_made_now = made_now.contains(parent_path);
      if (as_root && ::fstat(open_dir.get(), &open_dir_stat) != 0)
        return Error::from_errno("workspace", "stat " + parent_path);
    }
    const int dir = parent_path.empty() ? root_fd : open_dir.get();
    const struct stat* dir_stat = parent_path.empty() ? &root_stat : &open_dir_stat;
    touched_dirs.insert(parent_path);
    struct stat current {};
    const bool in_new_directory = !parent_path.empty() && open_dir_made_now;
    const bool exists =
        !in_new_directory && ::fstatat(dir, name.c_str(), &current, AT_SYMLINK_NOFOLLOW) == 0;
    switch (entry.op) {
      case StagedOp::Delete:
        PB_CHECK(remove_tree_at(dir, name));
        break;
      case StagedOp::Write: {
        // A blob that is gone was renamed into place by an earlier attempt
        // (check_blobs_are_files passed it as such): the rename finds it so,
        // without a stat of every blob first.
        auto blob = shards.locate(blob_relative_path(entry));
        if (!blob && blob.error().error_number() == ENOENT) break;  // moved in whole
        if (!blob) return std::move(blob).error().with_context("applying " + path);
        const bool replaces_file = exists && !S_ISDIR(current.st_mode);
        if (exists && S_ISDIR(current.st_mode)) {
          // Only a blob still there replaces the directory.
          struct stat blob_stat {};
          if (::fstatat(blob->dir, blob->name.c_str(), &blob_stat, AT_SYMLINK_NOFOLLOW) != 0) break;
          PB_CHECK(remove_tree_at(dir, name));
        }
        // Its owner first: a replay finds a blob already renamed with the
        // owner it has now (a session layer's file moved in is the mapped
        // user's until then).
        adopt_owner(blob->dir, blob->name, replaces_file ? &current : nullptr,
                    blobs_owner ? &blobs_owner_stat : nullptr, dir_stat);
        if (::renameat(blob->dir, blob->name.c_str(), dir, name.c_str()) != 0) {
          if (errno == ENOENT) break;
          return Error::from_errno("workspace", "rename into place: " + path);
        }
        failpoint("moved in " + path);
        break;
      }
      case StagedOp::Mkdir:
        if (exists && S_ISDIR(current.st_mode)) {
          UniqueFd fd(::openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
          if (!fd || ::fchmod(fd.get(), working_directory_mode(entry.mode)) != 0) {
            return Error::from_errno("workspace", "chmod " + path);
          }
          // A replay: an attempt killed after its mkdirat left the
          // directory root's, and empty (its chown came next).
          if (as_root && current.st_uid == 0 && entry.snapshot.type != NodeType::Directory)
            give_made_directory_its_owner(fd.get(), current, *dir_stat);
          break;
        }
        if (exists) PB_CHECK(remove_tree_at(dir, name));
        if (!exists) {
          PB_TRY(moved, move_new_directory(draft, entry, blob_dir.get(), dir, name,
                                           as_root ? dir_stat : nullptr));
          if (moved) {
            moved_prefix = path + "/";
            break;
          }
        }
        if (::mkdirat(dir, name.c_str(), working_directory_mode(entry.mode)) == 0) {
          made_now.insert(path);
        } else if (errno != EEXIST) {
          return Error::from_errno("workspace", "mkdir " + path);
        }
        failpoint("made directory " + path);
        if (::fchmodat(dir, name.c_str(), working_directory_mode(entry.mode), 0) != 0) {
          return Error::from_errno("workspace", "chmod " + path);
        }
        adopt_owner(dir, name, nullptr, nullptr, dir_stat);
        break;
      case StagedOp::Symlink: {
        if (exists && S_ISDIR(current.st_mode)) PB_CHECK(remove_tree_at(dir, name));
        const std::string temp = std::string(kTempPrefix) + random_hex(12);
        if (::symlinkat(entry.link_target.c_str(), dir, temp.c_str()) != 0) {
          return Error::from_errno("workspace", "symlink " + path);
        }
        if (auto timed = set_mtime_at(dir, temp, entry.mtime_ns, path); !timed.ok()) {
          ::unlinkat(dir, temp.c_str(), 0);
          return timed;
        }
        if (::renameat(dir, temp.c_str(), dir, name.c_str()) != 0) {
          const Error error = Error::from_errno("workspace", "rename into place: " + path);
          ::unlinkat(dir, temp.c_str(), 0);
          return error;
        }
        adopt_owner(dir, name, nullptr, nullptr, dir_stat);
        break;
      }
      case StagedOp::Chmod: {
        UniqueFd fd(::openat(dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
        struct stat linked {};
        if (fd && ::fstat(fd.get(), &linked) == 0 && S_ISREG(linked.st_mode) &&
            linked.st_nlink > 1) {
          // A file with other links (a pnpm store's, a `cp -al` tree's) is
          // not changed in place: its new mode is the workspace's alone, as
          // a written file's content is.
          PB_CHECK(replace_with_copy(dir, name, fd.get(), linked, entry.mode, path,
                                     /*with_owner=*/true, /*durable=*/true));
          break;
        }
        const bool directory = fd && S_ISDIR(linked.st_mode);  // stat'ed above
        const unsigned mode = directory ? working_directory_mode(entry.mode) : entry.mode;
        if (!fd || ::fchmod(fd.get(), mode) != 0) {
          return Error::from_errno("workspace", "chmod " + path);
        }
        break;
      }
    }
    failpoint("applied " + path);
  }
  core::trace_phase("commit: steps applied");
  // Make the renames durable, and remove temporary symlinks an interrupted
  // attempt may have left in the directories this commit touches.
  for (const std::string& dir_path : touched_dirs) {
    auto dir = dir_path.empty()
                   ? core::Result<UniqueFd>(UniqueFd(::fcntl(root_fd, F_DUPFD_CLOEXEC, 0)))
                   : open_beneath(root_fd, dir_path, O_RDONLY | O_DIRECTORY);
    if (!dir) continue;  // removed by a later step
    if (temp_files_removed != nullptr) {
      const int dup = ::fcntl(dir->get(), F_DUPFD_CLOEXEC, 0);
      if (DIR* listing = dup >= 0 ? ::fdopendir(dup) : nullptr) {
        while (const dirent* item = ::readdir(listing)) {
          if (std::string_view(item->d_name).rfind(kTempPrefix, 0) == 0 &&
              ::unlinkat(dir->get(), item->d_name, 0) == 0) {
            ++*temp_files_removed;
          }
        }
        ::closedir(listing);
      }
    }
    if (::fsync(dir->get()) != 0) return Error::from_errno("workspace", "fsync " + dir_path);
  }
  core::trace_phase("commit: directories synced");
  // Directory modes and times last, children before parents: every step
  // above that adds or removes an entry in a directory moves its time, and
  // needs it writable (working_directory_mode).
  for (auto it = draft.entries.rbegin(); it != draft.entries.rend(); ++it) {
    const Entry& entry = it->second;
    const bool sets_mode = entry.op == StagedOp::Mkdir || entry.op == StagedOp::Chmod;
    if ((entry.mtime_ns == 0 && !sets_mode) || type_after(entry) != NodeType::Directory) continue;
    std::string name;
    auto parent = open_parent(root_fd, entry.path, &name);
    if (!parent) continue;  // removed by a later step
    struct stat st {};
    if (::fstatat(parent->get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISDIR(st.st_mode)) {
      continue;
    }
    if (sets_mode && (st.st_mode & 07777) != entry.mode) {
      UniqueFd fd(
          ::openat(parent->get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!fd || ::fchmod(fd.get(), entry.mode) != 0)
        return Error::from_errno("workspace", "chmod " + entry.path);
    }
    if (entry.mtime_ns != 0)
      PB_CHECK(set_mtime_at(parent->get(), name, entry.mtime_ns, entry.path));
  }
  failpoint("directories synced");
  return core::ok_status();
}

namespace {

// The workspace's directories this commit puts entries into, removes
// them from or renames in, that its user may not write: an ordinary user's
// rename into a read-only one (`chmod 500 n`, committed by an earlier part
// of the same transaction too) failed past the commit point, and every
// later command replayed it into the same failure. Directories the commit
// makes or changes itself get their owner's rwx while it runs (apply), and
// so do the directories of a tree it removes (remove_tree_at).
std::vector<std::string> unwritable_directories(const Draft& draft, int root_fd) {
  std::vector<std::string> out;
  if (::geteuid() == 0) return out;
  std::set<std::string> seen;
  for (const auto& [path, entry] : draft.entries) {
    const std::size_t slash = path.rfind('/');
    const std::string parent = slash == std::string::npos ? "" : path.substr(0, slash);
    if (seen.count(parent) != 0) continue;
    if (const auto made = draft.entries.find(parent);
        made != draft.entries.end() &&
        (made->second.op == StagedOp::Mkdir || made->second.op == StagedOp::Chmod)) {
      continue;
    }
    if (beneath_new_directory(draft, path)) continue;
    auto dir = parent.empty()
                   ? core::Result<UniqueFd>(UniqueFd(::fcntl(root_fd, F_DUPFD_CLOEXEC, 0)))
                   : open_beneath(root_fd, parent, O_PATH | O_DIRECTORY);
    if (!dir) continue;  // gone: the snapshots' check says so
    if (entry.op == StagedOp::Chmod) {
      // Changed where it is, unless a file with other links (a pnpm
      // store's): that is replaced by a copy made in its directory.
      const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
      struct stat st {};
      if (::fstatat(dir->get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 ||
          !S_ISREG(st.st_mode) || st.st_nlink < 2) {
        continue;
      }
    }
    seen.insert(parent);
    if (::faccessat(dir->get(), ".", W_OK | X_OK, AT_EACCESS) != 0 && errno == EACCES)
      out.push_back(parent.empty() ? "." : parent);
  }
  return out;
}

// Splits `draft` for a partial commit: the selected entries, and the new
// directories (beneath_new_directory) they lie in, which they cannot do
// without, go to `part`; the rest stays in `draft`.
Draft split_off(Draft& draft, const std::vector<std::string>& selected) {
  Draft part;
  part.id = draft.id;
  std::set<std::string> taken;
  for (const auto& [path, entry] : draft.entries) {
    if (!is_selected(selected, path)) continue;
    taken.insert(path);
    for (std::size_t slash = path.find('/'); slash != std::string::npos;
         slash = path.find('/', slash + 1)) {
      const auto it = draft.entries.find(std::string_view(path).substr(0, slash));
      if (it != draft.entries.end() && type_after(it->second) == NodeType::Directory &&
          it->second.snapshot.type != NodeType::Directory) {
        taken.insert(it->first);
      }
    }
  }
  for (const std::string& path : taken) {
    auto node = draft.entries.extract(path);
    draft.total_bytes -= node.mapped().size;
    part.total_bytes += node.mapped().size;
    part.entries.insert(std::move(node));
  }
  return part;
}

// The entries left pending whose path is a directory above a committed one:
// their snapshot (a digest of the tree below) changes with the commit.
std::vector<std::string> directories_above(const Draft& rest, const Draft& part) {
  std::vector<std::string> out;
  for (const auto& [path, entry] : rest.entries) {
    if (entry.snapshot.type != NodeType::Directory) continue;
    for (const auto& [committed, ignored] : part.entries) {
      if (committed.size() > path.size() && committed.compare(0, path.size(), path) == 0 &&
          committed[path.size()] == '/') {
        out.push_back(path);
        break;
      }
    }
  }
  return out;
}

// Removes a fully committed transaction's directory in an order that a
// crash at any point leaves either a replayable commit (READY and the log)
// or nothing pending (no manifest): never the applied changes listed as
// pending again.
// With `marker`, kCommittedMarker is written before READY goes and is all
// that is left.
core::Status remove_committed(const std::filesystem::path& dir, bool marker) {
  std::error_code ec;
  std::filesystem::remove(dir / "manifest.json", ec);
  PB_CHECK(fsync_path(dir));
  if (marker) PB_CHECK(core::write_file_atomic(dir / kCommittedMarker, "", 0600));
  // READY gone for good before its log goes: a READY without its log could
  // never be replayed.
  if (!std::filesystem::remove(dir / "READY", ec) && ec)
    return Error(ErrorKind::kIo, "workspace", "cannot remove " + (dir / "READY").string(),
                 ec.value());
  PB_CHECK(fsync_path(dir));
  if (!marker) {
    std::filesystem::remove_all(dir, ec);
  } else {
    std::vector<std::filesystem::path> rest;
    for (auto it = std::filesystem::directory_iterator(dir, ec);
         !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
      if (it->path().filename() != kCommittedMarker) rest.push_back(it->path());
    }
    for (const auto& path : rest) {
      if (ec) break;
      std::filesystem::remove_all(path, ec);
    }
  }
  if (ec) return Error(ErrorKind::kIo, "workspace", "cannot remove " + dir.string(), ec.value());
  return core::ok_status();
}

}  // namespace

core::Result<std::vector<std::string>> TransactionStore::commit(
    const std::string& id, const std::vector<std::string>& selected, SharedBlobs shared) {
  PB_TRY(lock_fd, lock());
  PB_TRY(whole, load(id));
  core::trace_phase("commit: manifest loaded");
  PB_TRY(root_fd, open_root());
  const auto dir = tx_dir(id);
  std::error_code ec;
  if (std::filesystem::exists(dir / "READY", ec)) {
    return Error(
        ErrorKind::kRecovery, "workspace",
        "transaction " + id + " was interrupted while committing; run `pulsebox reconcile`");
  }
  // Moved, not copied: a commit of everything holds its entries once.
  Draft rest = std::move(whole);
  Draft draft = selected.empty() ? std::exchange(rest, Draft{}) : split_off(rest, selected);
  const bool partial = !rest.entries.empty();

  // 1. Nothing changed underneath since staging, and every blob is a file
  // this store wrote.
  std::optional<BlobOwner> blobs_owner;
  PB_CHECK(check_blobs_are_files(draft, dir, /*gone_ok=*/false, &blobs_owner));
  std::vector<std::pair<std::string, std::string>> conflicts;  // path, why
  for (const auto& [path, entry] : draft.entries) {
    // Beneath a directory that replaces a symlink or file: that entry's own
    // check covers it, and looking the path up could follow the symlink.
    if (beneath_new_directory(draft, path) && !entry.snapshot.exists()) continue;
    PB_TRY(now, take_snapshot(root_fd.get(), path));
    std::string why = describe_difference(entry.snapshot, now);
    if (!why.empty()) conflicts.emplace_back(path, std::move(why));
  }
  if (!conflicts.empty()) {
    std::string message = "the workspace changed since transaction " + id +
                          " was staged; nothing was applied and the transaction is kept:";
    for (const auto& [path, why] : conflicts)
      message += "\n  " + core::quote_name(path) + ": " + why;
    Error error(ErrorKind::kConcurrentModification, "commit", message);
    for (const auto& [path, why] : conflicts)
      error.paths().push_back(path);
    return error;
  }
  if (const auto shut = unwritable_directories(draft, root_fd.get()); !shut.empty()) {
    std::string names;
    for (const std::string& path : shut)
      names += (names.empty() ? "" : ", ") + core::quote_name(path);
    const bool one = shut.size() == 1;
    Error error(ErrorKind::kInvalidInput, "commit",
                "transaction " + id + " changes what " + names + (one ? " holds" : " hold") +
                    ", which you may not write into (" + (one ? "its" : "their") +
                    " mode); nothing was applied. Give " + (one ? "it" : "them") +
                    " your write permission (chmod u+wx), then commit again");
    for (const std::string& path : shut)
      error.paths().push_back(path);
    return error;
  }
  // A pending directory above a committed path gets a fresh snapshot after
  // the commit, but only if it still matches the old one now: a host change
  // to it must stay visible to its own commit.
  std::vector<std::string> refresh;
  for (const std::string& path : directories_above(rest, draft)) {
    PB_TRY(now, take_snapshot(root_fd.get(), path));
    if (describe_difference(rest.entries.at(path).snapshot, now).empty()) refresh.push_back(path);
  }
  failpoint("snapshots checked");
  core::trace_phase("commit: snapshots checked");

  // 2. The policy allows every change, and no change holds a secret the
  // user has not allowed.
  for (const auto& [path, entry] : draft.entries)
    PB_CHECK(check_entry_policy(draft, entry));
  if (!allow_secrets_) {
    std::vector<std::string> holding;
    for (const auto& [path, entry] : draft.entries) {
      if (entry.contains_secret) holding.push_back(path);
    }
    if (!holding.empty()) {
      std::string names;
      for (const std::string& path : holding)
        names += (names.empty() ? "" : ", ") + core::quote_name(path);
      Error error(ErrorKind::kSecurity, "commit",
                  "refusing to commit transaction " + id + ": " + names +
                      (holding.size() == 1 ? " holds" : " hold") +
                      " a registered secret value (the diff shows it redacted); nothing was "
                      "applied. Commit with --allow-secrets to write it to the workspace anyway");
      for (const std::string& path : holding)
        error.paths().push_back(path);
      return error;
    }
  }

  core::trace_phase("commit: policy checked");
  PB_TRY(made_private, make_blobs_the_stores_own(draft, dir, shared));
  // The copies are this process's: an owner the other blobs share is no
  // longer every blob's unless it is this process's too.
  if (made_private > 0 && blobs_owner && *blobs_owner != BlobOwner{::geteuid(), ::getegid()})
    blobs_owner.reset();
  failpoint("shared blobs made private");

  // 3. Write-ahead log, durable, then the commit point. A partial commit
  // also writes what stays pending (remaining.json), so that a replay can
  // finish it.
  PB_CHECK(make_blobs_durable(draft, /*leaves_pending=*/partial, dir, root_, root_fd.get()));
  core::trace_phase("commit: blobs synced");
  json wal = {{"id", id}};
  if (partial) {
    PB_CHECK(save(rest, "remaining.json"));
    wal["partial"] = true;
    json names = json::array();
    for (const std::string& path : refresh) {
      json item = json::object();
      core::put_name(item, "path", path);
      names.push_back(std::move(item));
    }
    wal["refresh"] = std::move(names);
  }
  if (shared == SharedBlobs::kMovedIn) wal["committed_marker"] = true;
  PB_CHECK(write_entries(dir / "wal.json", wal, "steps", draft.entries));
  failpoint("wal written");
  // Whole or not at all, the directory synced (an empty READY left by a
  // crash would read as unsealed, not as undecided).
  PB_TRY(seal, seal_commit_point(seal_key_, id, root_, dir / "wal.json"));
  PB_CHECK(core::write_file_atomic(dir / "READY", seal, 0600));
  failpoint("ready marker");
  core::trace_phase("commit: log written");

  // 4. Apply; 5. clean up (or, for a partial commit, keep the rest pending).
  PB_CHECK(apply(draft, root_fd.get(), nullptr, blobs_owner));
  core::trace_phase("commit: applied");
  if (partial) {
    std::vector<Entry> committed;
    for (const auto& [path, entry] : draft.entries)
      committed.push_back(entry);
    PB_CHECK(finish_partial(id, refresh, committed, root_fd.get()));
  } else {
    PB_CHECK(remove_committed(dir, shared == SharedBlobs::kMovedIn));
  }
  failpoint("cleaned up");
  core::trace_phase("commit: cleaned up");
  // The paths copied out, then the draft's memory handed back to the system
  // before the caller goes on to print and audit them: scattered among the
  // freed entries (moved keys), they would keep every page of them resident.
  std::vector<std::string> changed;
  changed.reserve(draft.entries.size());
  for (const auto& [path, entry] : draft.entries)
    changed.push_back(path);
  draft.entries.clear();
  ::malloc_trim(0);
  return changed;
}

core::Status TransactionStore::finish_partial(const std::string& id,
                                              const std::vector<std::string>& refresh,
                                              const std::vector<Entry>& committed, int root_fd) {
  const auto dir = tx_dir(id);
  std::error_code ec;
  if (std::filesystem::exists(dir / "remaining.json", ec)) {
    PB_TRY(rest, load(id, "remaining.json"));
    for (const std::string& path : refresh) {
      auto it = rest.entries.find(path);
      if (it == rest.entries.end()) continue;
      PB_TRY(now, take_snapshot(root_fd, path));
      now.changed_during_run = it->second.snapshot.changed_during_run;
      it->second.snapshot = std::move(now);
    }
    PB_CHECK(save(rest));
    failpoint("remaining saved");
    std::filesystem::remove(dir / "remaining.json", ec);
  }
  for (const Entry& entry : committed) {
    if (!entry.base_blob.empty()) std::filesystem::remove(dir / "base" / entry.base_blob, ec);
  }
  // READY before the log: a log without READY is dropped by reconcile, a
  // READY without its log could never be replayed.
  std::filesystem::remove(dir / "READY", ec);
  PB_CHECK(fsync_path(dir));
  std::filesystem::remove(dir / "wal.json", ec);
  return core::ok_status();
}

core::Status TransactionStore::replay(const std::string& id, int root_fd,
                                      std::size_t* temp_files_removed, bool accept_unsealed) {
  const auto dir = tx_dir(id);
  std::error_code ec;
  Draft draft;
  draft.id = id;
  const auto add = [&draft](Entry&& entry) {
    std::string path = entry.path;
    draft.entries.insert_or_assign(std::move(path), std::move(entry));
  };
  // A decided commit passed a commit's checks before its READY was written,
  // and its READY carries this user's seal over the log; a READY planted
  // with its log (a cloned repository's .agent/) must not write what no
  // commit of this user's decided, unreviewed.
  // Only a refused seal can be overridden (--accept-unsealed); a log that
  // fails a commit's checks is never applied.
  const auto planted = [&](const Error& why, bool seal) {
    const std::string what_to_do =
        seal ? ", then remove it, or finish it as logged with `pulsebox reconcile "
               "--accept-unsealed " +
                   id +
                   "` if you committed it yourself (as another user, with another audit key, "
                   "or with an older pulsebox): "
             : ", then remove it: ";
    return Error(ErrorKind::kSecurity, "workspace",
                 "transaction " + id +
                     " is marked as being committed, but pulsebox cannot tell that it decided "
                     "it (planted?); nothing of it was applied. Look at " +
                     dir.string() + what_to_do + why.to_string());
  };
  if (auto checked = check_directories(id); !checked.ok()) return planted(checked.error(), false);
  if (!accept_unsealed) {
    PB_TRY(ready, core::read_regular_file(dir / "READY", 4096, "commit point"));
    if (auto sealed = check_commit_seal(seal_key_, id, root_, dir / "wal.json", ready);
        !sealed.ok())
      return planted(sealed.error(), true);
  }
  PB_TRY(wal, read_only_entries(dir / "wal.json", "steps", add));
  std::vector<std::string> refresh;
  try {
    for (const auto& item : wal.value("refresh", json::array())) {
      std::string path = core::get_name(item, "path");
      if (auto checked = check_relative_path(path); !checked || *checked != path)
        return corrupt(dir / "wal.json", "bad path " + core::quote_name(path));
      refresh.push_back(std::move(path));
    }
  } catch (const json::exception& error) {
    return corrupt(dir / "wal.json", error.what());
  }
  // The checks a commit made before its READY pass again (a sealed log
  // too: the seal does not vouch for blobs or a changed policy).
  // A blob gone was renamed into place before the interruption.
  std::optional<BlobOwner> blobs_owner;
  if (auto files = check_blobs_are_files(draft, dir, /*gone_ok=*/true, &blobs_owner); !files.ok())
    return planted(files.error(), false);
  for (const auto& [path, entry] : draft.entries) {
    if (auto allowed = check_entry_policy(draft, entry); !allowed.ok())
      return planted(allowed.error(), false);
  }
  PB_CHECK(apply(draft, root_fd, temp_files_removed, blobs_owner));
  if (wal.value("partial", false)) {
    std::vector<Entry> committed;
    for (const auto& [path, entry] : draft.entries)
      committed.push_back(entry);
    return finish_partial(id, refresh, committed, root_fd);
  }
  return remove_committed(dir, wal.value("committed_marker", false));
}

namespace {

// `dir` is a directory itself, or not there: never a symlink to one.
core::Status check_real_directory(const std::filesystem::path& dir) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) {
    return errno == ENOENT ? core::ok_status()
                           : Error::from_errno("workspace", "stat " + dir.string());
  }
  if (!S_ISDIR(st.st_mode)) {
    return Error(ErrorKind::kSecurity, "workspace",
                 dir.string() +
                     " is not a directory (a symlink?); refusing to use it. Remove it "
                     "if it came with the workspace (a cloned repository's .agent/)");
  }
  return core::ok_status();
}

}  // namespace

core::Result<Workspace::ReconcileReport> TransactionStore::reconcile(
    const std::vector<std::string>& accept_unsealed) {
  PB_TRY(lock_fd, lock());
  PB_TRY(root_fd, open_root());
  Workspace::ReconcileReport report;
  std::error_code ec;
  const auto base = root_ / ".agent" / "transactions";
  // What reconcile removes it finds here and in runs/: never through a
  // symlink (a cloned repository's .agent/ may hold one to anywhere).
  PB_CHECK(check_real_directory(base));
  PB_CHECK(check_real_directory(root_ / ".agent" / "runs"));
  std::vector<std::filesystem::path> dirs;
  for (const auto& item : std::filesystem::directory_iterator(base, ec)) {
    if (item.is_directory(ec) && !item.is_symlink(ec)) dirs.push_back(item.path());
  }
  std::vector<std::string> importing;
  for (const auto& dir : dirs) {
    const std::string id = dir.filename().string();
    struct stat draft {};
    const bool being_imported = ::lstat((dir / kImportManifest).c_str(), &draft) == 0;
    if (being_imported) importing.push_back(id);
    const bool ready = std::filesystem::exists(dir / "READY", ec);
    if (ready) {
      // Decided: replay the logged steps to the end.
      const bool accepted =
          std::find(accept_unsealed.begin(), accept_unsealed.end(), id) != accept_unsealed.end();
      PB_CHECK(replay(id, root_fd.get(), &report.removed_temp_files, accepted));
      report.replayed.push_back(id);
      continue;
    }
    // Committed, its marker left for the session whose commit it was.
    if (std::filesystem::exists(dir / kCommittedMarker, ec)) continue;
    // Not decided: an interrupted commit rolls back to a pending transaction.
    std::filesystem::remove(dir / "wal.json", ec);
    std::filesystem::remove(dir / "remaining.json", ec);
    if (!being_imported && !std::filesystem::exists(dir / "manifest.json", ec)) {
      std::filesystem::remove_all(dir, ec);  // staging that never completed
      report.removed_staging.push_back(id);
    }
  }
  // Interrupted imports, after every decided commit is replayed.
  for (const std::string& id : importing)
    PB_CHECK(finish_import(id));
  // The host backend's run copies whose owner died: their lock, <id>.lock
  // beside the directory (taken before the directory is made), is free. A
  // lock file alone is a run that died before its mkdir.
  const auto crashed = core::remove_crashed_runs(
      root_ / ".agent" / "runs",
      [](const std::filesystem::path& dir) {
        std::error_code ignored;
        std::filesystem::remove_all(dir, ignored);
      },
      [](const std::filesystem::path& dir) {
        // Older versions locked <id>/lock inside the directory.
        UniqueFd inner(::open((dir / "lock").c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW));
        return inner && ::flock(inner.get(), LOCK_EX | LOCK_NB) != 0;
      });
  for (const auto& dir : crashed)
    report.removed_runs.push_back(dir.filename().string());
  return report;
}

}  // namespace pulsebox::workspace
