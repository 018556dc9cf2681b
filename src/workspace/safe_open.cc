#include "workspace/safe_open.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>

#include "core/fs.h"

namespace pulsebox::workspace {

using core::Error;
using core::ErrorKind;
using core::UniqueFd;

namespace {

Error security_error(std::string_view path, const std::string& why) {
  return Error(ErrorKind::kSecurity, "path", "refusing path \"" + std::string(path) + "\": " + why);
}

long sys_openat2(int dirfd, const char* path, open_how* how) {
  return ::syscall(SYS_openat2, dirfd, path, how, sizeof(*how));
}

}  // namespace

core::Result<std::string> check_relative_path(std::string_view path) {
  if (path.empty()) return security_error(path, "empty path");
  if (path.find('\0') != std::string_view::npos)
    return security_error("(contains NUL)", "NUL byte");
  if (path.find('\\') != std::string_view::npos) {
    return security_error(path, "backslashes are not allowed");
  }
  if (path.front() == '/') return security_error(path, "absolute paths are not allowed");
  std::string normalized;
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    const std::string_view part = path.substr(start, end - start);
    if (part == "..") return security_error(path, "\"..\" is not allowed");
    if (!part.empty() && part != ".") {
      if (!normalized.empty()) normalized += '/';
      normalized.append(part);
    }
    start = end + 1;
  }
  if (normalized.empty()) return security_error(path, "names the workspace itself, not a file");
  return normalized;
}

bool openat2_supported() {
  static const bool supported = [] {
    open_how how{};
    how.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC;
    how.resolve = RESOLVE_BENEATH;
    const long fd = sys_openat2(AT_FDCWD, ".", &how);
    if (fd >= 0) {
      ::close(static_cast<int>(fd));
      return true;
    }
    return errno != ENOSYS;
  }();
  return supported;
}

core::Result<UniqueFd> open_beneath(int root_fd, const std::string& relative, int flags,
                                    ResolveMode mode) {
  // openat2 refuses O_PATH with any flag but O_DIRECTORY, O_NOFOLLOW, O_CLOEXEC.
  flags |= (flags & O_PATH) != 0 ? O_CLOEXEC : O_CLOEXEC | O_NOCTTY;
  if (mode == ResolveMode::kAuto && openat2_supported()) {
    open_how how{};
    how.flags = static_cast<std::uint64_t>(flags);
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
    for (;;) {
      const long fd = sys_openat2(root_fd, relative.c_str(), &how);
      if (fd >= 0) return UniqueFd(static_cast<int>(fd));
      if (errno == EAGAIN || errno == EINTR) continue;  // a concurrent rename; retry
      if (errno == EXDEV || errno == ELOOP) {
        return Error(ErrorKind::kSecurity, "path",
                     "refusing path \"" + relative + "\": it resolves outside the allowed root",
                     errno);
      }
      return Error::from_errno("path", "cannot open \"" + relative + "\"");
    }
  }

  // The fallback walk: every directory component is opened with O_NOFOLLOW
  // relative to the previous one, so a symlink anywhere fails with ELOOP or
  // ENOTDIR instead of being followed.
  UniqueFd current(::fcntl(root_fd, F_DUPFD_CLOEXEC, 0));
  if (!current) return Error::from_errno("path", "dup of the root directory");
  std::size_t start = 0;
  for (;;) {
    const std::size_t slash = relative.find('/', start);
    const std::string part =
        relative.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    const bool last = slash == std::string::npos;
    const int part_flags =
        last ? (flags | O_NOFOLLOW) : (O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    UniqueFd next(::openat(current.get(), part.c_str(), part_flags, 0));
    if (!next) {
      if (errno == ELOOP || (errno == ENOTDIR && !last)) {
        return Error(ErrorKind::kSecurity, "path",
                     "refusing path \"" + relative + "\": \"" + part + "\" is a symlink", errno);
      }
      return Error::from_errno("path", "cannot open \"" + relative + "\"");
    }
    current = std::move(next);
    if (last) return current;
    start = slash + 1;
  }
}

core::Result<std::string> read_regular_file(int fd, std::uint64_t max_size, std::string_view name) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return Error::from_errno("path", "stat " + std::string(name));
  if (!S_ISREG(st.st_mode)) {
    return Error(ErrorKind::kSecurity, "path",
                 "refusing \"" + std::string(name) + "\": not a regular file");
  }
  if (static_cast<std::uint64_t>(st.st_size) > max_size) {
    return Error(ErrorKind::kResource, "path",
                 "\"" + std::string(name) + "\" is " + std::to_string(st.st_size) +
                     " bytes, over the limit of " + std::to_string(max_size));
  }
  // read_all enforces the limit again: the file may grow after fstat.
  return core::read_all(fd, max_size, "\"" + std::string(name) + "\"");
}

core::Result<std::string> read_file_or_link(int parent_fd, const std::string& name, bool is_symlink,
                                            std::uint64_t max_size, std::string_view what) {
  if (is_symlink) {
    std::string target(PATH_MAX, '\0');
    const ssize_t n = ::readlinkat(parent_fd, name.c_str(), target.data(), target.size());
    if (n < 0) return Error::from_errno("path", "readlink " + std::string(what));
    if (static_cast<std::size_t>(n) >= target.size()) {
      return Error(ErrorKind::kResource, "path", std::string(what) + ": the link is too long");
    }
    target.resize(static_cast<std::size_t>(n));
    return target;
  }
  UniqueFd fd(::openat(parent_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd) return Error::from_errno("path", "open " + std::string(what));
  return read_regular_file(fd.get(), max_size, what);
}

}  // namespace pulsebox::workspace
