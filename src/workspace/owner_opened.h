// An entry of a run's own directory (an upper directory or a session's
// layer) that its mode keeps out even its owner: a command's `chmod 000 d`
// or `chmod 000 f`. Root reads it anyway; an ordinary user, whose run's
// files are its own, adds the owner's permission for as long as it reads,
// and gives the mode back after, so that what the run left (and a later
// run of its session sees) is unchanged.
//
// Usage: stat the entry without following a link, then
//   OwnerOpened child(dirfd, name, O_RDONLY | O_DIRECTORY, st);
//   if (!child) ...errno says why...
//   walk(child.get());  // the mode comes back when `child` goes
#pragma once

#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "core/unique_fd.h"

namespace pulsebox::workspace {

class OwnerOpened {
 public:
  // openat(dirfd, name, flags | O_NOFOLLOW | O_CLOEXEC). Refused (EACCES)
  // to a process that is not root and owns the entry `st` describes (as
  // it was looked up), the owner's read permission (and a directory's
  // search permission) is added and it is opened again; the inode opened
  // must be that one (else EACCES stands). A directory opened that its
  // owner may not search gets the search permission the same way.
  OwnerOpened(int dirfd, const std::string& name, int flags, const struct stat& st);
  // An entry already opened (`st`: its fstat): only a directory its owner
  // may not search is changed.
  OwnerOpened(core::UniqueFd opened, const struct stat& st);
  // The mode given back, unless something changed it since this did.
  ~OwnerOpened();
  OwnerOpened(const OwnerOpened&) = delete;
  OwnerOpened& operator=(const OwnerOpened&) = delete;

  int get() const { return fd_.get(); }
  explicit operator bool() const { return static_cast<bool>(fd_); }
  // Whether the owner's permission was added to open it.
  bool opened_as_owner() const { return added_ != 0; }
  // The mode stays as this made it (a caller that gives the owner its
  // permissions for good).
  void keep_mode() { keep_ = true; }

 private:
  void widen_opened(const struct stat& st);  // a directory its owner may not search

  core::UniqueFd fd_;
  mode_t original_ = 0;  // the mode the entry had
  mode_t added_ = 0;     // the mode this gave it (0: none)
  bool keep_ = false;
};

// A run's own directory (its upper directory) that the run shut to its
// owner (`chmod 000 .` at the workspace's root, rootless) gets its owner's
// rwx back for good: nothing in it could be read, nor the directory moved
// to be held, and the run's changes were lost. The root's own mode is never
// a change a run makes (not staged, as root's runs show). Nothing as root.
void open_run_directory_to_owner(const std::filesystem::path& dir);

}  // namespace pulsebox::workspace
