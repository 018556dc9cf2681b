#include "workspace/new_directory_move.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <optional>
#include <string_view>

#include "core/unique_fd.h"
#include "workspace/safe_open.h"
#include "workspace/tree.h"

namespace pulsebox::workspace {

using core::UniqueFd;

namespace {

// The entries staged beneath `path` are all files kept in place or
// directories; how many.
std::optional<std::size_t> staged_beneath(const Draft& draft, const std::string& path) {
  const std::string prefix = path + "/";
  std::size_t count = 0;
  for (auto it = draft.entries.lower_bound(prefix);
       it != draft.entries.end() && it->first.starts_with(prefix); ++it) {
    const Entry& entry = it->second;
    const bool in_place = entry.op == StagedOp::Write && entry.blob == kInPlaceBlob;
    if (!in_place && entry.op != StagedOp::Mkdir) return std::nullopt;
    ++count;
  }
  return count;
}

class Preparer {
 public:
  // `owner`: as root, the owner every entry takes; nullptr otherwise.
  Preparer(const Draft& draft, const struct stat* owner) : draft_(draft), owner_(owner) {}

  // The directory `fd` (at `path`, staged as `entry`): no extended
  // attributes, its staged mode with its owner's rwx (the commit sets the
  // staged mode after its last step; renaming a directory writes its "..")
  // and owner; then what it holds.
  bool directory(int fd, const std::string& path, const Entry& entry, int depth) {
    if (depth > kMaxTreeDepth || entry.op != StagedOp::Mkdir) return false;
    const ssize_t attributes = ::flistxattr(fd, nullptr, 0);
    if (attributes != 0 && !(attributes < 0 && errno == ENOTSUP)) return false;
    if (::fchmod(fd, entry.mode | 0700) != 0) return false;
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !take_owner(fd, "", st, AT_EMPTY_PATH)) return false;
    return for_each_name(fd, [&](const dirent& item) {
      return child(fd, path + "/" + item.d_name, item.d_name, depth);
    });
  }

  std::size_t seen() const { return seen_; }

 private:
  bool child(int dir, const std::string& path, const char* name, int depth) {
    const auto staged = draft_.entries.find(path);
    if (staged == draft_.entries.end()) return false;  // not the transaction's
    const Entry& entry = staged->second;
    struct stat st {};
    if (::fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return false;
    ++seen_;
    if (S_ISDIR(st.st_mode)) {
      UniqueFd sub(::openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      return sub && directory(sub.get(), path, entry, depth + 1);
    }
    // The file the commit's checks saw (its inode is in the sealed log).
    return S_ISREG(st.st_mode) && entry.op == StagedOp::Write && entry.blob == kInPlaceBlob &&
           entry.blob_inode == static_cast<std::uint64_t>(st.st_ino) && st.st_nlink == 1 &&
           (st.st_mode & 07777) == entry.mode && take_owner(dir, name, st, AT_SYMLINK_NOFOLLOW);
  }

  // As root, a new entry takes the owner of the directory it is made in,
  // which for all of them is the top's parent (adopt_owner).
  bool take_owner(int dir, const char* name, const struct stat& st, int flags) {
    if (owner_ == nullptr || (st.st_uid == owner_->st_uid && st.st_gid == owner_->st_gid))
      return true;
    return ::fchownat(dir, name, owner_->st_uid, owner_->st_gid, flags) == 0;
  }

  const Draft& draft_;
  const struct stat* owner_;
  std::size_t seen_ = 0;
};

}  // namespace

core::Result<bool> move_new_directory(const Draft& draft, const Entry& top, int blobs_fd, int dir,
                                      const std::string& name, const struct stat* dir_stat) {
  if (top.op != StagedOp::Mkdir || top.snapshot.exists()) return false;
  const auto count = staged_beneath(draft, top.path);
  if (!count || *count == 0) return false;
  const std::size_t slash = top.path.rfind('/');
  const std::string parent = std::string(kInPlaceBlob) +
                             (slash == std::string::npos ? "" : "/" + top.path.substr(0, slash));
  const std::string top_name = slash == std::string::npos ? top.path : top.path.substr(slash + 1);
  auto parent_fd =
      open_beneath(blobs_fd, parent, O_RDONLY | O_DIRECTORY, ResolveMode::kComponentWalk);
  if (!parent_fd) return false;
  UniqueFd top_fd(::openat(parent_fd->get(), top_name.c_str(),
                           O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!top_fd) return false;
  Preparer preparer(draft, ::geteuid() == 0 ? dir_stat : nullptr);
  if (!preparer.directory(top_fd.get(), top.path, top, 0) || preparer.seen() != *count)
    return false;
  return ::renameat2(parent_fd->get(), top_name.c_str(), dir, name.c_str(), RENAME_NOREPLACE) == 0;
}

}  // namespace pulsebox::workspace
