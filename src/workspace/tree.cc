#include "workspace/tree.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <optional>
#include <vector>

#include "core/sha256.h"
#include "workspace/owner_opened.h"
#include "workspace/safe_open.h"

namespace pulsebox::workspace {

using core::Error;
using core::ErrorKind;
using core::UniqueFd;

std::string_view to_string(NodeType type) {
  switch (type) {
    case NodeType::Absent:
      return "absent";
    case NodeType::File:
      return "file";
    case NodeType::Directory:
      return "directory";
    case NodeType::Symlink:
      return "symlink";
    case NodeType::Other:
      return "other";
  }
  return "other";
}

NodeType node_type_from_string(std::string_view text) {
  for (auto type : {NodeType::Absent, NodeType::File, NodeType::Directory, NodeType::Symlink}) {
    if (to_string(type) == text) return type;
  }
  return NodeType::Other;
}

NodeType node_type_of(mode_t mode) {
  if (S_ISREG(mode)) return NodeType::File;
  if (S_ISDIR(mode)) return NodeType::Directory;
  if (S_ISLNK(mode)) return NodeType::Symlink;
  return NodeType::Other;
}

core::Result<UniqueFd> open_parent(int root_fd, const std::string& relative, std::string* name) {
  const auto slash = relative.rfind('/');
  *name = slash == std::string::npos ? relative : relative.substr(slash + 1);
  if (slash == std::string::npos) {
    UniqueFd dup(::fcntl(root_fd, F_DUPFD_CLOEXEC, 0));
    if (!dup) return Error::from_errno("workspace", "dup of the workspace fd");
    return dup;
  }
  return open_beneath(root_fd, relative.substr(0, slash), O_RDONLY | O_DIRECTORY);
}

core::Result<std::string> sha256_of_fd(int fd) {
  core::Sha256 hasher;
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error::from_errno("workspace", "reading for the content hash");
    if (n == 0) break;
    hasher.update({buffer, static_cast<std::size_t>(n)});
  }
  return hasher.hex_digest();
}

bool for_each_name(int dirfd, const std::function<bool(const dirent&)>& each) {
  const int dup = ::fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
  if (dup < 0) return false;
  DIR* dir = ::fdopendir(dup);
  if (dir == nullptr) {
    ::close(dup);
    return false;
  }
  ::rewinddir(dir);
  bool finished = true;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string_view name = entry->d_name;
    if (name == "." || name == "..") continue;
    if (!each(*entry)) {
      finished = false;
      break;
    }
  }
  ::closedir(dir);
  return finished;
}

namespace {

// `st`: `fd` as it was looked up (its mode before an OwnerOpened added the
// owner's permission), which `visit` is shown.
bool each_directory_at(
    int fd, const struct stat& st, const std::string& path, int depth,
    const std::function<bool(int dir, const struct stat& st, const std::string& path)>& visit,
    bool keep_owner_access) {
  if (depth > kMaxTreeDepth || !visit(fd, st, path)) return false;
  return for_each_name(fd, [&](const dirent& item) {
    if (item.d_type != DT_DIR && item.d_type != DT_UNKNOWN) return true;
    core::UniqueFd sub(::openat(fd, item.d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    const int open_error = errno;
    if (!sub && (open_error == ENOTDIR || open_error == ELOOP)) return true;  // DT_UNKNOWN: not one
    const std::string sub_path = path.empty() ? item.d_name : path + "/" + item.d_name;
    struct stat sub_st {};
    if (sub ? ::fstat(sub.get(), &sub_st) != 0
            : open_error != EACCES ||
                  ::fstatat(fd, item.d_name, &sub_st, AT_SYMLINK_NOFOLLOW) != 0) {
      return false;
    }
    if (sub && (sub_st.st_mode & S_IXUSR) != 0)
      return each_directory_at(sub.get(), sub_st, sub_path, depth + 1, visit, keep_owner_access);
    // A directory a run shut to its owner (`chmod 000`, `chmod 600`).
    std::optional<OwnerOpened> as_owner;
    if (sub) {
      as_owner.emplace(std::move(sub), sub_st);
    } else {
      as_owner.emplace(fd, item.d_name, O_RDONLY | O_DIRECTORY, sub_st);
    }
    if (!*as_owner) return false;
    if (keep_owner_access) as_owner->keep_mode();
    return each_directory_at(as_owner->get(), sub_st, sub_path, depth + 1, visit,
                             keep_owner_access);
  });
}

}  // namespace

bool each_directory(
    int fd,
    const std::function<bool(int dir, const struct stat& st, const std::string& path)>& visit,
    bool keep_owner_access) {
  struct stat st {};
  return ::fstat(fd, &st) == 0 && each_directory_at(fd, st, "", 0, visit, keep_owner_access);
}

bool make_directories_owner_writable(int fd, std::vector<ChangedMode>* changed) {
  return each_directory(
      fd,
      [&](int dir, const struct stat& st, const std::string& path) {
        if ((st.st_mode & 0700) == 0700) return true;
        if (changed != nullptr) changed->push_back({path, static_cast<mode_t>(st.st_mode & 07777)});
        return ::fchmod(dir, (st.st_mode & 07777) | 0700) == 0;
      },
      /*keep_owner_access=*/true);
}

core::Status restore_directory_modes(int fd, const std::vector<ChangedMode>& changed) {
  core::Status first = core::ok_status();
  const auto failed = [&](const std::string& path, mode_t mode) {
    char octal[8];
    std::snprintf(octal, sizeof octal, "%04o", static_cast<unsigned>(mode));
    if (first.ok())
      first = core::Error::from_errno("workspace", std::string("give back mode ") + octal + " to " +
                                                       (path.empty() ? "." : path));
  };
  // Children first: each parent keeps letting its owner in until its turn.
  for (auto it = changed.rbegin(); it != changed.rend(); ++it) {
    if (it->path.empty()) {
      if (::fchmod(fd, it->mode) != 0) failed(it->path, it->mode);
      continue;
    }
    auto dir = open_beneath(fd, it->path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW,
                            ResolveMode::kComponentWalk);
    if (!dir) {
      if (first.ok()) first = std::move(dir).error();
    } else if (::fchmod(dir->get(), it->mode) != 0) {
      failed(it->path, it->mode);
    }
  }
  return first;
}

std::vector<std::string> list_directory(int dirfd) {
  std::vector<std::string> names;
  (void)for_each_name(dirfd, [&names](const dirent& entry) {
    names.emplace_back(entry.d_name);
    return true;
  });
  std::sort(names.begin(), names.end());
  return names;
}

namespace {

std::int64_t nanoseconds(const timespec& time) {
  return static_cast<std::int64_t>(time.tv_sec) * 1000000000 + time.tv_nsec;
}

// Feeds a listing of the tree below dirfd into the hasher, and raises
// `newest_ctime` to the latest ctime in it.
void hash_tree(int dirfd, const std::string& prefix, core::Sha256& hasher,
               std::int64_t& newest_ctime, int depth) {
  if (depth > 256) return;
  for (const std::string& name : list_directory(dirfd)) {
    struct stat st {};
    if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    const std::string path = prefix + name;
    newest_ctime = std::max(newest_ctime, nanoseconds(st.st_ctim));
    hasher.update(path);
    hasher.update(std::string(1, '\0') + std::to_string(st.st_mode) + ":" +
                  std::to_string(st.st_size) + ":" + std::to_string(nanoseconds(st.st_mtim)) + ":" +
                  std::to_string(nanoseconds(st.st_ctim)) + ":" + std::to_string(st.st_ino) + "\n");
    if (S_ISDIR(st.st_mode)) {
      UniqueFd child(
          ::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (child) hash_tree(child.get(), path + "/", hasher, newest_ctime, depth + 1);
    }
  }
}

}  // namespace

core::Result<Snapshot> take_snapshot(int root_fd, const std::string& relative) {
  Snapshot snapshot;
  std::string name;
  auto parent = open_parent(root_fd, relative, &name);
  if (!parent) {
    const int err = parent.error().error_number();
    if (err == ENOENT || err == ENOTDIR) return snapshot;  // no parent, so no path
    return std::move(parent).error();
  }
  struct stat st {};
  if (::fstatat(parent->get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return snapshot;
    return Error::from_errno("workspace", "stat " + relative);
  }
  snapshot.type = node_type_of(st.st_mode);
  snapshot.inode = st.st_ino;
  snapshot.device = st.st_dev;
  snapshot.size = static_cast<std::uint64_t>(st.st_size);
  snapshot.mtime_ns = nanoseconds(st.st_mtim);
  snapshot.newest_ctime_ns = nanoseconds(st.st_ctim);
  snapshot.mode = st.st_mode & 07777;
  switch (snapshot.type) {
    case NodeType::File: {
      UniqueFd fd(
          ::openat(parent->get(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
      if (!fd) return Error::from_errno("workspace", "open " + relative);
      PB_TRY(digest, sha256_of_fd(fd.get()));
      snapshot.sha256 = std::move(digest);
      break;
    }
    case NodeType::Symlink: {
      std::string target(PATH_MAX, '\0');
      const ssize_t n = ::readlinkat(parent->get(), name.c_str(), target.data(), target.size());
      if (n < 0) return Error::from_errno("workspace", "readlink " + relative);
      target.resize(static_cast<std::size_t>(n));
      snapshot.sha256 = core::sha256_hex(target);
      break;
    }
    case NodeType::Directory: {
      UniqueFd fd(
          ::openat(parent->get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!fd) return Error::from_errno("workspace", "open directory " + relative);
      core::Sha256 hasher;
      hash_tree(fd.get(), "", hasher, snapshot.newest_ctime_ns, 0);
      snapshot.sha256 = hasher.hex_digest();
      break;
    }
    case NodeType::Absent:
    case NodeType::Other:
      break;
  }
  return snapshot;
}

std::string describe_difference(const Snapshot& before, const Snapshot& now) {
  if (before.changed_during_run) return "changed on the host while the run was in progress";
  if (!before.exists() && now.exists()) return "created since the transaction was staged";
  if (before.exists() && !now.exists()) return "deleted since the transaction was staged";
  if (!before.exists()) return "";
  if (before.type != now.type) {
    return std::string("replaced: was a ") + std::string(to_string(before.type)) + ", now a " +
           std::string(to_string(now.type));
  }
  if (before.sha256 != now.sha256) {
    return before.type == NodeType::Directory ? "directory contents changed" : "content changed";
  }
  if (before.inode != now.inode || before.device != now.device) {
    return "replaced by another file (inode changed)";
  }
  if (before.mode != now.mode) return "mode changed";
  if (before.type != NodeType::Directory && before.size != now.size) return "size changed";
  if (before.type == NodeType::File && before.mtime_ns != now.mtime_ns) {
    return "modification time changed";
  }
  // 0: a manifest from before ctimes were recorded.
  if (before.newest_ctime_ns != 0 && before.type != NodeType::Directory &&
      before.newest_ctime_ns != now.newest_ctime_ns) {
    return "changed (its inode change time moved)";
  }
  return "";
}

core::Status remove_tree_at(int dirfd, const std::string& name, const TreeRemoval& how, int depth) {
  if (depth > how.max_depth)
    return Error(ErrorKind::kResource, how.stage, name + ": directories nested too deeply");
  struct stat st {};
  if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return core::ok_status();
    return Error::from_errno(how.stage, "stat " + name);
  }
  if (S_ISDIR(st.st_mode)) {
    // A directory going away that its ordinary owner may not empty (a Go
    // module cache's are 555, a run's `chmod 000`): its owner's rwx first,
    // as `rm -rf` after `chmod -R u+w` would.
    const bool owners = ::geteuid() != 0 && st.st_uid == ::geteuid();
    UniqueFd child(::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!child && errno == EACCES && owners &&
        ::fchmodat(dirfd, name.c_str(), S_IRWXU, AT_SYMLINK_NOFOLLOW) == 0) {
      child =
          UniqueFd(::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    } else if (child && owners && (st.st_mode & S_IRWXU) != S_IRWXU) {
      (void)::fchmod(child.get(), (st.st_mode & 07777) | S_IRWXU);
    }
    if (!child) return Error::from_errno(how.stage, "open directory " + name);
    for (const std::string& entry : list_directory(child.get())) {
      PB_CHECK(remove_tree_at(child.get(), entry, how, depth + 1));
    }
    if (::unlinkat(dirfd, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
      return Error::from_errno(how.stage, "remove directory " + name);
    }
    return core::ok_status();
  }
  if (::unlinkat(dirfd, name.c_str(), 0) != 0 && errno != ENOENT) {
    return Error::from_errno(how.stage, "remove " + name);
  }
  return core::ok_status();
}

}  // namespace pulsebox::workspace
