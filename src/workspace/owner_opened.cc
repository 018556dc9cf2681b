#include "workspace/owner_opened.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

namespace pulsebox::workspace {

namespace {

// Whether `now` is the mode this gave (`added`). A chmod by an owner
// outside the file's group drops its setgid bit, whichever way.
bool still_as_added(mode_t now, mode_t added) {
  return ((now & 07777) | S_ISGID) == (added | S_ISGID);
}

}  // namespace

OwnerOpened::OwnerOpened(int dirfd, const std::string& name, int flags, const struct stat& st)
    : fd_(::openat(dirfd, name.c_str(), flags | O_NOFOLLOW | O_CLOEXEC)) {
  if (fd_) {
    // A directory its owner may read but not search (`chmod 600 d`):
    // nothing in it could be looked up.
    if (S_ISDIR(st.st_mode) && (st.st_mode & S_IXUSR) == 0) widen_opened(st);
    return;
  }
  if (errno != EACCES || ::geteuid() == 0 || st.st_uid != ::geteuid()) return;
  if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) return;
  const mode_t wanted = S_ISDIR(st.st_mode) ? S_IRUSR | S_IXUSR : S_IRUSR;
  const mode_t mode = (st.st_mode & 07777) | wanted;
  // Never through a symlink put in its place since the lookup.
  if (::fchmodat(dirfd, name.c_str(), mode, AT_SYMLINK_NOFOLLOW) != 0) {
    errno = EACCES;  // the open's answer stands
    return;
  }
  original_ = st.st_mode & 07777;
  added_ = mode;
  fd_ = core::UniqueFd(::openat(dirfd, name.c_str(), flags | O_NOFOLLOW | O_CLOEXEC));
  struct stat opened {};
  if (fd_ && (::fstat(fd_.get(), &opened) != 0 || opened.st_ino != st.st_ino ||
              opened.st_dev != st.st_dev)) {
    fd_ = core::UniqueFd();
    errno = EACCES;
  }
  if (!fd_) {
    const int saved = errno;
    struct stat now {};
    if (::fstatat(dirfd, name.c_str(), &now, AT_SYMLINK_NOFOLLOW) == 0 && now.st_ino == st.st_ino &&
        still_as_added(now.st_mode, added_)) {
      (void)::fchmodat(dirfd, name.c_str(), original_, AT_SYMLINK_NOFOLLOW);
    }
    added_ = 0;
    errno = saved;
  }
}

OwnerOpened::OwnerOpened(core::UniqueFd opened, const struct stat& st) : fd_(std::move(opened)) {
  if (fd_ && S_ISDIR(st.st_mode) && (st.st_mode & S_IXUSR) == 0) widen_opened(st);
}

void OwnerOpened::widen_opened(const struct stat& st) {
  struct stat opened {};
  if (::geteuid() == 0 || st.st_uid != ::geteuid() || ::fstat(fd_.get(), &opened) != 0 ||
      opened.st_ino != st.st_ino || opened.st_dev != st.st_dev) {
    return;
  }
  const mode_t mode = (opened.st_mode & 07777) | S_IXUSR;
  if (::fchmod(fd_.get(), mode) != 0) return;
  original_ = opened.st_mode & 07777;
  added_ = mode;
}

OwnerOpened::~OwnerOpened() {
  if (added_ == 0 || keep_ || !fd_) return;
  struct stat now {};
  if (::fstat(fd_.get(), &now) == 0 && still_as_added(now.st_mode, added_))
    (void)::fchmod(fd_.get(), original_);
}

void open_run_directory_to_owner(const std::filesystem::path& dir) {
  struct stat st {};
  if (::geteuid() == 0 || ::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) ||
      st.st_uid != ::geteuid() || (st.st_mode & S_IRWXU) == S_IRWXU) {
    return;
  }
  (void)::fchmodat(AT_FDCWD, dir.c_str(), (st.st_mode & 07777) | S_IRWXU, AT_SYMLINK_NOFOLLOW);
}

}  // namespace pulsebox::workspace
