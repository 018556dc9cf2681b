// File-system operations beneath a trusted root directory fd, never following
// a symlink out of it: snapshots of a path's state, recursive removal.
#pragma once

#include <dirent.h>

#include <sys/stat.h>

#include <climits>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/result.h"
#include "core/unique_fd.h"

namespace pulsebox::workspace {

// How deep the workspace's walks go: a deeper tree is refused, not followed
// (each level holds a descriptor open).
inline constexpr int kMaxTreeDepth = 512;

enum class NodeType { Absent, File, Directory, Symlink, Other };

std::string_view to_string(NodeType type);
NodeType node_type_from_string(std::string_view text);
NodeType node_type_of(mode_t mode);

// The state of one path, as recorded when it is first staged.
struct Snapshot {
  NodeType type = NodeType::Absent;
  std::uint64_t inode = 0;
  std::uint64_t device = 0;
  std::uint64_t size = 0;
  std::int64_t mtime_ns = 0;
  unsigned mode = 0;
  // The latest inode change time (ctime) of the path, and for a directory
  // of everything below it. Unlike mtime, user space cannot set it: a
  // write that keeps the old mtime (cp -p, rsync -t, a checkout of an older
  // file) still moves it.
  std::int64_t newest_ctime_ns = 0;
  // File: SHA-256 of the content; symlink: of the target; directory: of a
  // listing of the whole tree below (names, types, sizes, mtimes, ctimes,
  // modes, inodes).
  std::string sha256;
  // The path was changed on the host while the run that staged it was in
  // progress: the run may have worked on an older version, so committing it
  // could silently undo that change. Commit refuses such a path.
  bool changed_during_run = false;

  bool exists() const { return type != NodeType::Absent; }
};

// Opens the directory that holds the last component of `relative` (checked
// by check_relative_path) beneath root_fd; `name` receives that component.
// ENOENT/ENOTDIR from a missing parent come back as errors with that errno.
core::Result<core::UniqueFd> open_parent(int root_fd, const std::string& relative,
                                         std::string* name);

core::Result<Snapshot> take_snapshot(int root_fd, const std::string& relative);

// "" when equal, else why they differ ("content changed", "deleted", ...).
std::string describe_difference(const Snapshot& before, const Snapshot& now);

// How remove_tree_at removes: the stage its errors name, and how deep it
// goes before it refuses (a commit removes whatever the workspace holds; a
// session's layers are bounded).
struct TreeRemoval {
  const char* stage = "workspace";
  int max_depth = INT_MAX;
};
// Removes `name` in dirfd, recursively for a directory, never following
// symlinks. A missing entry is not an error. A directory of this
// (ordinary) user that its mode keeps it from emptying (`chmod 555`,
// `chmod 000`) gets its owner's rwx first, as `rm -rf` after `chmod -R u+w`
// would.
core::Status remove_tree_at(int dirfd, const std::string& name, const TreeRemoval& how = {},
                            int depth = 0);

core::Result<std::string> sha256_of_fd(int fd);

// The names in a directory (without "." and ".."), sorted.
std::vector<std::string> list_directory(int dirfd);
// Hands `each` every entry of a directory but "." and "..", unsorted (with
// its d_type), until it returns false. false: the directory could not be
// read, or `each` stopped.
bool for_each_name(int dirfd, const std::function<bool(const dirent&)>& each);

// Hands `visit` the directory `fd` and then each directory beneath it
// (opened one name at a time, never through a symlink), with its path
// relative to `fd` ("" for it), until it returns false. false: `visit`
// stopped, a directory could not be read, or the tree is deeper than kMaxTreeDepth.
// A directory of this (ordinary) user that keeps its owner out (`chmod 000`)
// is opened with the owner's permission added (OwnerOpened), `visit` is shown
// the mode it had, and the mode comes back after its subtree unless
// `keep_owner_access`.
bool each_directory(
    int fd,
    const std::function<bool(int dir, const struct stat& st, const std::string& path)>& visit,
    bool keep_owner_access = false);

// A directory's mode before make_directories_owner_writable changed it.
struct ChangedMode {
  std::string path;  // relative to the walk's first directory ("" for it)
  mode_t mode = 0;
};
// Gives `fd` and every directory beneath it its owner's rwx. An ordinary
// user renames a file out of a directory only where it may write (a file
// of a transaction kept in place, at commit). `changed`, when given, gets
// each mode it changed, parents first. false: a directory could not be
// read or changed.
bool make_directories_owner_writable(int fd, std::vector<ChangedMode>* changed = nullptr);
// Gives the directories beneath `fd` back the modes `changed` holds,
// children first; the error names the first that could not be reached or
// changed (the others are still restored).
core::Status restore_directory_modes(int fd, const std::vector<ChangedMode>& changed);

}  // namespace pulsebox::workspace
