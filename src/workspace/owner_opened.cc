#include "workspace/owner_opened.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace pulsebox::workspace {

OwnerOpened::OwnerOpened(int dirfd, const std::string& name, int flags, const struct stat& st)
    : fd_(::openat(dirfd, name.c_str(), flags | O_NOFOLLOW | O_CLOEXEC)) {
  if (fd_ || errno != EACCES || ::geteuid() == 0 || st.st_uid != ::geteuid()) return;
  if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) return;
  const mode_t wanted = S_ISDIR(st.st_mode) ? S_IRUSR | S_IXUSR : S_IRUSR;
  const mode_t mode = (st.st_mode & 07777) | wanted;
  // Never through a symlink put in its place since the lookup.
  if (::fchmodat(dirfd, name.c_str(), mode, AT_SYMLINK_NOFOLLOW) != 0) {
    errno = EACCES;
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
        (now.st_mode & 07777) == added_) {
      (void)::fchmodat(dirfd, name.c_str(), original_, AT_SYMLINK_NOFOLLOW);
    }
    added_ = 0;
    errno = saved;
  }
}

OwnerOpened::~OwnerOpened() {
  if (added_ == 0 || keep_ || !fd_) return;
  struct stat now {};
  if (::fstat(fd_.get(), &now) == 0 && (now.st_mode & 07777) == added_)
    (void)::fchmod(fd_.get(), original_);
}

}  // namespace pulsebox::workspace
