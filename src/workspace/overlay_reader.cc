// Turns an overlayfs upper directory into a transaction.
//
// What the upper directory can hold, and what each becomes:
//   regular file            write (or chmod when only the mode differs from
//                           the lower file, or nothing when identical)
//   directory               recursed into; mkdir when the lower has none;
//                           chmod when only its mode changed
//   opaque directory        (xattr trusted.overlay.opaque or user.overlay.opaque
//                           = "y") lower entries below it that the upper does
//                           not have are deleted, at every depth
//   symlink                 symlink (unless the lower has the same one)
//   char device 0/0         a whiteout: delete
//   any other device, FIFO, socket, a file over the per-file limit: left
//                           out and listed in Draft::refused; the rest is taken
//   setuid/setgid file or directory: taken without those bits, with a note
//   a file met again through another hard link: a separate copy, with a note
// Each change keeps the upper entry's modification time (Entry::mtime_ns).
// Directories are opened with O_NOFOLLOW at every level, so a symlink in the
// upper directory is read as a symlink and never followed; the lower one
// likewise (a lower symlink replaced by a directory is never entered).
#include <dirent.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <map>
#include <set>

#include "core/fs.h"
#include "core/sha256.h"
#include "core/text.h"
#include "workspace/overlay_reader.h"
#include "workspace/owner_opened.h"
#include "workspace/safe_open.h"
#include "workspace/tree.h"

namespace pulsebox::workspace {

using core::Error;
using core::ErrorKind;
using core::UniqueFd;

namespace {

// Inode flags (FS_IOC_GETFLAGS) that a new file does not have, or that
// change how its data is kept or may change: a file carrying one is copied,
// never linked. Most can be set by the file's owner (chattr), so by the
// sandbox on its own files; immutable and append-only would keep the host
// from changing its own workspace's file; an encrypted file bound to a key
// must not land, as itself, in a workspace outside that key's tree. (Where
// a directory passes one of them on to every new file, or a mount sets it,
// every file is copied: slower, never less safe.)
constexpr int kFlagsACopyWouldNotHave =
    FS_IMMUTABLE_FL | FS_APPEND_FL | FS_SYNC_FL | FS_DIRSYNC_FL | FS_NOATIME_FL | FS_NODUMP_FL |
    FS_NOCOW_FL | FS_COMPR_FL | FS_NOCOMP_FL | FS_JOURNAL_DATA_FL | FS_DAX_FL | FS_VERITY_FL |
    FS_ENCRYPT_FL | FS_PROJINHERIT_FL;

std::string describe_special(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISCHR(mode)) return "a character device";
  return "a special file";
}

std::int64_t mtime_of(const struct stat& st) {
  return static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

core::Result<std::string> read_link(int dirfd, const std::string& name) {
  std::string target(PATH_MAX, '\0');
  const ssize_t n = ::readlinkat(dirfd, name.c_str(), target.data(), target.size());
  if (n < 0) return Error::from_errno("overlay", "readlink " + name);
  target.resize(static_cast<std::size_t>(n));
  return target;
}

struct Walker {
  TransactionStore& store;
  Draft& draft;
  std::uint64_t max_file_bytes;
  bool full_copy;                             // the upper side is a whole copy
  UpperFiles files;                           // ImportOptions::take/share_upper_files
  const std::vector<std::string>& own_paths;  // Workspace::own_paths
  std::vector<std::string>& linked_sources;   // upper files linked as blobs
  bool in_place;                              // files may stay as blobs where they are
  // Files with more than one link, by (device, inode): the first path met.
  std::map<std::pair<dev_t, ino_t>, std::string> linked = {};
  const uid_t euid = ::geteuid();
  const gid_t egid = ::getegid();

  // Every change passes here: one that would reach an own path is refused
  // (a file left as it was, as a whole copy holds them, is no change).
  core::Status stage(Entry entry, std::string_view bytes = {},
                     const TransactionStore::BlobSource* source = nullptr) {
    const bool keeps_directory = entry.op == StagedOp::Mkdir || entry.op == StagedOp::Chmod;
    if (std::string why = reaches_own_path(entry.path, keeps_directory); !why.empty())
      return refuse(entry.path, std::move(why));
    return store.stage(draft, std::move(entry), bytes, /*check_policy=*/false, source);
  }

  // Whether the upper file itself may become the blob (a hard link: no new
  // inode, no copy of its bytes), which must then be exactly what a copy
  // would be: one link (a second one stays a separate copy), no
  // setuid/setgid bits, no extended attributes (file capabilities, ACLs,
  // overlayfs's own), no immutable or append-only flag, and, taken, our
  // own owner and group (a file of the sandbox's mapped user is given them
  // first when we are root, as a copy would have them; otherwise it is
  // copied). A shared file keeps its owner: the layer is not changed, and
  // a commit replaces it with a copy of its own before its commit point.
  // Nothing writes to it any more: the run's processes are gone with its
  // namespaces before its changes are read. A whole copy (the host
  // backend's) is always copied.
  bool may_link(int fd, const struct stat& st) const {
    if (files == UpperFiles::kCopied || full_copy || st.st_nlink != 1 ||
        (st.st_mode & 07000) != 0) {
      return false;
    }
    if (::flistxattr(fd, nullptr, 0) != 0) return false;
    int flags = 0;
    if (::ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0 && (flags & kFlagsACopyWouldNotHave) != 0) {
      return false;
    }
    if (files == UpperFiles::kShared) return true;
    if (st.st_uid == euid && st.st_gid == egid) return true;
    return euid == 0 && ::fchown(fd, 0, 0) == 0;
  }

  // The open file is still the one its name was looked up as (`st`), holds
  // `size` bytes and no setuid/setgid bits, and may become its own blob
  // (may_link); else it is staged as a copy.
  bool linkable_as_looked_up(int fd, const struct stat& st, const struct stat& opened,
                             std::uint64_t size) const {
    return opened.st_ino == st.st_ino && opened.st_dev == st.st_dev &&
           static_cast<std::uint64_t>(opened.st_size) == size && mtime_of(opened) == mtime_of(st) &&
           (opened.st_mode & 07777) == (st.st_mode & 0777) && may_link(fd, opened);
  }

  // A file that becomes its own blob (may_link) when nothing looks into its
  // content: no registered secret value to find in it
  // (TransactionStore::reads_new_file_contents) and no lower file of its
  // size to compare it with. It is staged without being read: reading
  // every byte of a large change set only to link the same inodes was most
  // of an import's time where the page cache had let them go. true when
  // staged; false: read and staged as any other file.
  core::Result<bool> stage_unread(int fd, int upper, const std::string& name,
                                  const std::string& path, const struct stat& st, bool lower_exists,
                                  const struct stat& below) {
    if (files == UpperFiles::kCopied || full_copy || store.reads_new_file_contents()) return false;
    if (lower_exists && S_ISREG(below.st_mode) && below.st_size == st.st_size) return false;
    struct stat opened {};
    if (::fstat(fd, &opened) != 0) return Error::from_errno("overlay", "stat " + path);
    if (!linkable_as_looked_up(fd, st, opened, static_cast<std::uint64_t>(st.st_size))) {
      return false;
    }
    Entry entry;
    entry.path = path;
    entry.op = StagedOp::Write;
    entry.mode = st.st_mode & 0777;
    entry.mtime_ns = mtime_of(st);
    bool as_blob = false;
    TransactionStore::BlobSource source{upper, name, opened, fd, &as_blob};
    source.unread = true;
    source.in_place = keeps_in_place(path);
    PB_CHECK(stage(std::move(entry), {}, &source));
    note_taken(path, as_blob, source.in_place);
    return true;
  }

  // A taken file that became its blob by a link: its upper name is released
  // once the transaction is saved. A shared one keeps its name.
  void note_taken(const std::string& path, bool as_blob, bool in_place_blob) {
    if (as_blob && !in_place_blob && files == UpperFiles::kTaken) linked_sources.push_back(path);
  }

  // A file kept in place (kInPlaceBlob) is named by its path in the
  // manifest's text: a name that is not UTF-8 is linked as before.
  bool keeps_in_place(const std::string& path) const {
    return in_place && core::is_valid_utf8(path);
  }

  // Why a path the run changed can never be staged, refused alone so that
  // the rest of the change set is not held for it ("" when it can be).
  static std::string unstageable(const std::string& path) {
    // The commit reaches each path by name beneath the workspace's root: a
    // longer one could never be applied (and, staged, would stop the commit
    // halfway through).
    if (path.size() >= PATH_MAX) {
      return "a path of " + std::to_string(path.size()) + " bytes, over the kernel's limit of " +
             std::to_string(PATH_MAX - 1) + ": it could not be committed";
    }
    // Paths with one are refused everywhere in a workspace (pulsebox/path_validator.h):
    // a share from another system can take it for a separator.
    if (path.find('\\') != std::string::npos)
      return "a backslash in the name, which pulsebox never writes into a workspace";
    return "";
  }

  // Why a change of `path` (a directory staying one, or not) would reach one
  // of pulsebox's own paths ("" when it would not). A command can write one
  // that does not exist yet (only an existing one is masked): committed, it
  // would become the user's audit key.
  std::string reaches_own_path(const std::string& path, bool stays_directory) const {
    for (const std::string& own : own_paths) {
      if (core::is_at_or_beneath(path, own))
        return "pulsebox's own path " + core::quote_name(own) + ": a run never changes it";
      if (!stays_directory && core::is_at_or_beneath(own, path)) {
        return "on the way to pulsebox's own path " + core::quote_name(own) +
               ": a run never replaces or deletes it";
      }
    }
    return "";
  }

  core::Status refuse(const std::string& path, std::string reason) {
    draft.refused.push_back({path, std::move(reason)});
    return core::ok_status();
  }

  void note(const std::string& path, std::string text) {
    draft.notes.push_back({path, std::move(text)});
  }

  void note_dropped_bits(const std::string& path, mode_t mode) {
    if ((mode & (S_ISUID | S_ISGID)) != 0) {
      note(path, "setuid/setgid bits dropped (committed with mode " +
                     core::octal_mode(mode & 0777) + ")");
    }
  }

  // `lower` is the matching lower directory or -1; `hidden` means the lower
  // entries here are hidden by an opaque directory above.
  core::Status walk(int upper, int lower, bool hidden, const std::string& prefix, int depth) {
    if (depth > kMaxTreeDepth) {
      return Error(ErrorKind::kResource, "overlay", prefix + ": directories nested too deeply");
    }
    std::vector<std::string> upper_names = list_directory(upper);
    // .agent/ at the top is pulsebox's own: never a change, whatever the run did.
    const bool top_of_copy = prefix.empty();
    if (top_of_copy) std::erase(upper_names, std::string(".agent"));
    if (hidden && lower >= 0) {
      const std::set<std::string> present(upper_names.begin(), upper_names.end());
      for (const std::string& name : list_directory(lower)) {
        if (top_of_copy && name == ".agent") continue;
        if (present.count(name) == 0) {
          if (std::string why = unstageable(prefix + name); !why.empty()) {
            PB_CHECK(refuse(prefix + name, std::move(why)));
            continue;
          }
          Entry entry;
          entry.path = prefix + name;
          entry.op = StagedOp::Delete;
          PB_CHECK(stage(std::move(entry)));
        }
      }
    }
    for (const std::string& name : upper_names) {
      PB_CHECK(visit(upper, lower, hidden, prefix, name, depth));
    }
    return core::ok_status();
  }

  core::Status visit(int upper, int lower, bool hidden, const std::string& prefix,
                     const std::string& name, int depth) {
    const std::string path = prefix + name;
    if (std::string why = unstageable(path); !why.empty()) return refuse(path, std::move(why));
    struct stat st {};
    if (::fstatat(upper, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      return Error::from_errno("overlay", "stat " + path);
    }
    struct stat below {};
    const bool lower_exists =
        lower >= 0 && ::fstatat(lower, name.c_str(), &below, AT_SYMLINK_NOFOLLOW) == 0;

    if (S_ISCHR(st.st_mode) && major(st.st_rdev) == 0 && minor(st.st_rdev) == 0) {
      if (!lower_exists) return core::ok_status();  // whiteout of something already gone
      Entry entry;
      entry.path = path;
      entry.op = StagedOp::Delete;
      return stage(std::move(entry));
    }
    if (S_ISREG(st.st_mode)) {
      if (static_cast<std::uint64_t>(st.st_size) > max_file_bytes) {
        return refuse(path, std::to_string(st.st_size) + " bytes, over the per-file limit of " +
                                std::to_string(max_file_bytes));
      }
      // A file the run made unreadable to its owner (an ordinary user's run)
      // is read with the owner's permission added, never linked (its mode
      // then differs from the one looked up), and keeps its mode.
      const OwnerOpened fd(upper, name, O_RDONLY | O_NONBLOCK, st);
      if (!fd) return Error::from_errno("overlay", "open " + path);
      PB_TRY(staged_unread, stage_unread(fd.get(), upper, name, path, st, lower_exists, below));
      if (staged_unread) return core::ok_status();
      auto read = core::read_all(fd.get(), max_file_bytes, path);
      if (!read && read.error().kind() == ErrorKind::kResource) {
        return refuse(path, "grew over the per-file limit of " + std::to_string(max_file_bytes) +
                                " bytes while it was read");
      }
      PB_TRY(bytes, std::move(read));
      note_dropped_bits(path, st.st_mode);
      if (st.st_nlink > 1) {
        const auto [first, inserted] = linked.try_emplace({st.st_dev, st.st_ino}, path);
        if (!inserted) {
          note(path, "hard link to " + core::quote_name(first->second) +
                         ": committed as a separate copy");
        }
      }
      const unsigned mode = st.st_mode & 0777;
      if (lower_exists && S_ISREG(below.st_mode) &&
          static_cast<std::uint64_t>(below.st_size) == bytes.size()) {
        UniqueFd lower_fd(
            ::openat(lower, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
        if (lower_fd) {
          PB_TRY(lower_bytes, core::read_all(lower_fd.get(), max_file_bytes, path));
          if (lower_bytes == bytes) {
            if ((below.st_mode & 0777) == mode) return core::ok_status();  // copied up, unchanged
            Entry entry;
            entry.path = path;
            entry.op = StagedOp::Chmod;
            entry.mode = mode;
            return stage(std::move(entry));
          }
        }
      }
      Entry entry;
      entry.path = path;
      entry.op = StagedOp::Write;
      entry.mode = mode;
      entry.mtime_ns = mtime_of(st);
      // The inode as it was read (fd), not as the name was first looked up.
      struct stat opened {};
      if (::fstat(fd.get(), &opened) != 0) return Error::from_errno("overlay", "stat " + path);
      if (!linkable_as_looked_up(fd.get(), st, opened, bytes.size())) {
        return stage(std::move(entry), bytes);
      }
      bool as_blob = false;
      TransactionStore::BlobSource source{upper, name, opened, fd.get(), &as_blob};
      source.in_place = keeps_in_place(path);
      PB_CHECK(stage(std::move(entry), bytes, &source));
      note_taken(path, as_blob, source.in_place);
      return core::ok_status();
    }
    if (S_ISLNK(st.st_mode)) {
      PB_TRY(target, read_link(upper, name));
      if (lower_exists && S_ISLNK(below.st_mode)) {
        auto lower_target = read_link(lower, name);
        if (lower_target && *lower_target == target) return core::ok_status();
      }
      Entry entry;
      entry.path = path;
      entry.op = StagedOp::Symlink;
      entry.link_target = std::move(target);
      entry.mtime_ns = mtime_of(st);
      return stage(std::move(entry));
    }
    if (S_ISDIR(st.st_mode)) {
      const OwnerOpened child(upper, name, O_RDONLY | O_DIRECTORY, st);
      if (!child) return Error::from_errno("overlay", "open directory " + path);
      const unsigned mode = st.st_mode & 0777;
      note_dropped_bits(path, st.st_mode);
      // A lower symlink (or file) replaced by a directory: the directory is
      // new, and nothing below it is looked up in the lower one.
      const bool lower_is_dir = lower_exists && S_ISDIR(below.st_mode);
      if (!lower_is_dir) {
        Entry entry;
        entry.path = path;
        entry.op = StagedOp::Mkdir;
        entry.mode = mode;
        entry.mtime_ns = mtime_of(st);
        PB_CHECK(stage(std::move(entry)));
        return walk(child.get(), -1, false, path + "/", depth + 1);
      }
      if ((below.st_mode & 0777) != mode) {
        Entry entry;
        entry.path = path;
        entry.op = StagedOp::Chmod;
        entry.mode = mode;
        entry.mtime_ns = mtime_of(st);
        PB_CHECK(stage(std::move(entry)));
      }
      UniqueFd lower_child(
          ::openat(lower, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!lower_child && errno == EACCES) {
        // The workspace's own modes are never changed to read it (OwnerOpened
        // is for a run's entries): the user says whether to.
        return Error::from_errno("overlay", "open the workspace's directory " + path +
                                                " (its mode keeps you out: give it your read "
                                                "permission, chmod u+rx, to stage this change)");
      }
      if (!lower_child) return Error::from_errno("overlay", "open lower directory " + path);
      return walk(child.get(), lower_child.get(), hidden || is_opaque(child.get()), path + "/",
                  depth + 1);
    }
    return refuse(path, describe_special(st.st_mode) + " cannot be committed to the workspace");
  }
};

}  // namespace

bool is_opaque(int dirfd) {
  for (const char* attribute : {"trusted.overlay.opaque", "user.overlay.opaque"}) {
    char value[8] = {};
    const ssize_t n = ::fgetxattr(dirfd, attribute, value, sizeof value);
    if (n == 1 && value[0] == 'y') return true;
  }
  return false;
}

core::Status import_upper_directory(TransactionStore& store, Draft& draft,
                                    const std::filesystem::path& upper,
                                    const std::filesystem::path& lower,
                                    std::uint64_t max_file_bytes, bool full_copy, UpperFiles files,
                                    const std::vector<std::string>& own_paths,
                                    std::vector<std::string>& linked, bool in_place) {
  PB_TRY(upper_fd, core::open_directory(upper));
  PB_TRY(lower_fd, core::open_directory(lower));
  Walker walker{
      store, draft,     max_file_bytes, full_copy,
      files, own_paths, linked,         in_place && files == UpperFiles::kTaken && !full_copy};
  return walker.walk(upper_fd.get(), lower_fd.get(), full_copy || is_opaque(upper_fd.get()), "", 0);
}

void release_linked(const std::filesystem::path& upper, const std::vector<std::string>& linked) {
  auto upper_fd = core::open_directory(upper);
  if (!upper_fd) return;
  // Paths come directory by directory (the walk's order): one open each.
  std::string open_dir = "\x01";  // no directory's name
  UniqueFd dir;
  for (const std::string& path : linked) {
    const std::size_t slash = path.rfind('/');
    const std::string parent = slash == std::string::npos ? "" : path.substr(0, slash);
    if (parent != open_dir) {
      open_dir = parent;
      if (parent.empty()) {
        dir = UniqueFd(::fcntl(upper_fd->get(), F_DUPFD_CLOEXEC, 0));
      } else {
        auto opened = open_beneath(upper_fd->get(), parent, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
        dir = opened ? std::move(*opened) : UniqueFd();
      }
    }
    if (dir)
      (void)::unlinkat(dir.get(), path.c_str() + (slash == std::string::npos ? 0 : slash + 1), 0);
  }
}

}  // namespace pulsebox::workspace
