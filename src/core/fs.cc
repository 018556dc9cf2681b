#include "core/fs.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/text.h"

namespace pulsebox::core {

Result<std::string> read_all(int fd, std::uint64_t limit, std::string_view what) {
  std::string out;
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Error::from_errno("io", "reading " + std::string(what));
    }
    if (n == 0) break;
    if (out.size() + static_cast<std::uint64_t>(n) > limit) {
      return Error(
          ErrorKind::kResource, "io",
          std::string(what) + " is larger than the limit of " + std::to_string(limit) + " bytes");
    }
    out.append(buffer, static_cast<std::size_t>(n));
  }
  return out;
}

namespace {

std::string_view file_type_name(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

Result<UniqueFd> open_regular_file(const std::filesystem::path& path, std::uint64_t max_bytes,
                                   std::string_view what) {
  const std::string name = std::string(what) + " " + path.string();
  // O_PATH opens nothing (no driver's open, no FIFO rendezvous): the type
  // is checked before the file is opened for reading.
  UniqueFd located(::open(path.c_str(), O_PATH | O_CLOEXEC));
  if (!located) {
    Error error = Error::from_errno("io", "cannot open " + name);
    if (errno == ENOENT || errno == ENOTDIR) std::move(error).with_kind(ErrorKind::kInvalidInput);
    return error;
  }
  struct stat st {};
  if (::fstat(located.get(), &st) != 0) return Error::from_errno("io", "cannot stat " + name);
  if (!S_ISREG(st.st_mode)) {
    return Error(ErrorKind::kInvalidInput, "io",
                 name + " is " + std::string(file_type_name(st.st_mode)) + ", not a regular file");
  }
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes) {
    return Error(ErrorKind::kResource, "io",
                 name + " is " + std::to_string(st.st_size) + " bytes, over the limit of " +
                     std::to_string(max_bytes) + " bytes");
  }
  // Reopened through /proc so that it is the very file checked above;
  // without /proc, by its path again, and then it must be the same inode.
  const std::string by_fd = "/proc/self/fd/" + std::to_string(located.get());
  constexpr int kReadFlags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
  UniqueFd fd(::open(by_fd.c_str(), kReadFlags));
  if (!fd && errno == ENOENT) fd = UniqueFd(::open(path.c_str(), kReadFlags));
  if (!fd) return Error::from_errno("io", "cannot open " + name);
  struct stat opened {};
  if (::fstat(fd.get(), &opened) != 0) return Error::from_errno("io", "cannot stat " + name);
  if (opened.st_dev != st.st_dev || opened.st_ino != st.st_ino) {
    return Error(ErrorKind::kIo, "io", name + " was replaced while it was opened; try again");
  }
  return fd;
}

Result<std::string> read_regular_file(const std::filesystem::path& path, std::uint64_t max_bytes,
                                      std::string_view what) {
  PB_TRY(fd, open_regular_file(path, max_bytes, what));
  // read_all enforces the limit again: the file may grow after fstat.
  return read_all(fd.get(), max_bytes, std::string(what) + " " + path.string());
}

Status write_all(int fd, std::string_view bytes, std::string_view what) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Error::from_errno("io", "writing " + std::string(what));
    }
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return ok_status();
}

Result<UniqueFd> unnamed_temp_file(const std::filesystem::path& dir) {
  UniqueFd fd(::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  if (fd) return fd;
  if (errno != EOPNOTSUPP && errno != EISDIR) {
    return Error::from_errno("io", "cannot make a temporary file in " + dir.string());
  }
  std::string name = (dir / ".pulsebox-XXXXXX").string();
  fd.reset(::mkostemp(name.data(), O_CLOEXEC));
  if (!fd) return Error::from_errno("io", "cannot make a temporary file in " + dir.string());
  if (::unlink(name.c_str()) != 0) {
    return Error::from_errno("io", "cannot unlink the temporary file " + name);
  }
  return fd;
}

Result<UniqueFd> open_directory(const std::filesystem::path& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) return Error::from_errno("io", "cannot open directory " + path.string());
  return fd;
}

namespace {

// `path` made as an unnamed file in its directory, locked, then linked in;
// invalid where that cannot be done (then the caller opens and locks).
UniqueFd link_locked_file(const std::filesystem::path& path) {
  const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : ".";
  UniqueFd fd(::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  if (!fd || ::flock(fd.get(), LOCK_EX) != 0) return {};
  // linkat(AT_EMPTY_PATH) would need CAP_DAC_READ_SEARCH; the /proc link
  // does not.
  const std::string self = "/proc/self/fd/" + std::to_string(fd.get());
  if (::linkat(AT_FDCWD, self.c_str(), AT_FDCWD, path.c_str(), AT_SYMLINK_FOLLOW) != 0) return {};
  return fd;
}

}  // namespace

Result<UniqueFd> create_locked_file(const std::filesystem::path& path) {
  if (UniqueFd linked = link_locked_file(path)) return linked;
  for (int attempt = 0; attempt < 10; ++attempt) {
    UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!fd) return Error::from_errno("io", "locking " + path.string());
    while (::flock(fd.get(), LOCK_EX) != 0) {
      if (errno != EINTR) return Error::from_errno("io", "locking " + path.string());
    }
    struct stat held {
    }, current{};
    if (::fstat(fd.get(), &held) == 0 && ::lstat(path.c_str(), &current) == 0 &&
        held.st_ino == current.st_ino && held.st_dev == current.st_dev) {
      return fd;
    }
  }
  return Error(ErrorKind::kIo, "io", "locking " + path.string() + ": it keeps disappearing");
}

std::filesystem::path run_lock_path(const std::filesystem::path& run_dir) {
  return run_dir.string() + ".lock";
}

namespace {

// The lock of an entry of runs/: the entry itself, or the lock beside a
// run's directory.
std::filesystem::path lock_of_entry(const std::filesystem::path& entry) {
  return entry.extension() == ".lock" ? entry : run_lock_path(entry);
}

}  // namespace

bool left_by_crashed_run(const std::filesystem::path& entry) {
  UniqueFd lock(::open(lock_of_entry(entry).c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  struct stat st {};
  if (!lock) return ::lstat(entry.c_str(), &st) == 0;             // a directory without its lock
  if (::flock(lock.get(), LOCK_EX | LOCK_NB) != 0) return false;  // a live run's
  // A run that finished unlinks its lock while it holds it, then lets go.
  return ::fstat(lock.get(), &st) != 0 || st.st_nlink > 0;
}

std::vector<std::filesystem::path> remove_crashed_runs(
    const std::filesystem::path& runs_dir,
    const std::function<void(const std::filesystem::path&)>& remove_dir,
    const std::function<bool(const std::filesystem::path&)>& still_live) {
  std::vector<std::filesystem::path> removed;
  std::error_code ec;
  std::vector<std::filesystem::path> entries;
  // Never through a symlink: runs_dir itself (the caller checks it too) or
  // an entry of it.
  struct stat st {};
  if (::lstat(runs_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return removed;
  for (const auto& entry : std::filesystem::directory_iterator(runs_dir, ec)) {
    if (!entry.is_symlink(ec)) entries.push_back(entry.path());
  }
  for (const auto& path : entries) {
    const std::filesystem::path lock_path = lock_of_entry(path);
    UniqueFd lock(::open(lock_path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW));
    if (lock && ::flock(lock.get(), LOCK_EX | LOCK_NB) != 0) continue;  // a live run
    if (lock_path == path) {
      if (!std::filesystem::exists(path.parent_path() / path.stem(), ec)) ::unlink(path.c_str());
      continue;
    }
    if (still_live && still_live(path)) continue;
    remove_dir(path);
    if (lock) ::unlink(lock_path.c_str());  // while still holding it
    removed.push_back(path);
  }
  return removed;
}

Status write_file_atomic(const std::filesystem::path& path, std::string_view bytes, unsigned mode) {
  return write_file_atomic(path, mode, [&](int fd) { return write_all(fd, bytes, path.string()); });
}

Status write_file_atomic(const std::filesystem::path& path, unsigned mode,
                         const std::function<Status(int fd)>& write) {
  const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : ".";
  const std::string tmp_name =
      "." + path.filename().string() + ".tmp-" + random_hex(8) + "-" + std::to_string(::getpid());
  const std::filesystem::path tmp = dir / tmp_name;
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode));
  if (!fd) return Error::from_errno("io", "cannot create " + tmp.string());
  Status written = write(fd.get());
  if (written.ok() && ::fsync(fd.get()) != 0) {
    written = Error::from_errno("io", "fsync " + tmp.string());
  }
  fd.reset();
  if (!written.ok()) {
    ::unlink(tmp.c_str());
    return written;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    Error error = Error::from_errno("io", "cannot rename " + tmp.string() + " to " + path.string());
    ::unlink(tmp.c_str());
    return error;
  }
  PB_TRY(dir_fd, open_directory(dir));
  if (::fsync(dir_fd.get()) != 0) return Error::from_errno("io", "fsync " + dir.string());
  return ok_status();
}

void move_above_stdio(UniqueFd& fd) {
  if (fd.get() >= 3) return;
  fd.reset(::fcntl(fd.get(), F_DUPFD_CLOEXEC, 3));
}

std::string first_line_of_file(const char* path) {
  const UniqueFd fd(::open(path, O_RDONLY | O_CLOEXEC));
  char buffer[256];
  const ssize_t got = fd ? ::read(fd.get(), buffer, sizeof buffer) : -1;
  if (got <= 0) return "";
  const std::string_view text(buffer, static_cast<std::size_t>(got));
  return std::string(text.substr(0, text.find('\n')));
}

UniqueFd read_only_memory_file(std::string_view bytes, const char* name) {
  UniqueFd memory(::memfd_create(name, MFD_CLOEXEC));
  if (!memory || !write_all(memory.get(), bytes, "a memory file").ok()) return UniqueFd();
  const std::string path = "/proc/self/fd/" + std::to_string(memory.get());
  return UniqueFd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
}

}  // namespace pulsebox::core
