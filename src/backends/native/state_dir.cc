#include "backends/native/state_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/system_dirs.h"

namespace pulsebox::backends::native {

using core::Error;
using core::ErrorKind;
namespace fs = std::filesystem;

core::Status ensure_private_dir(const fs::path& dir, mode_t mode) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) {
    return Error::from_errno("native", "creating the state directory " + dir.string());
  }
  if (!S_ISDIR(st.st_mode) || st.st_uid != ::geteuid()) {
    return Error(ErrorKind::kSecurity, "native",
                 "the state directory " + dir.string() +
                     " is not a directory owned by this user; remove it or set PULSEBOX_STATE_DIR");
  }
  if ((st.st_mode & 07777) != mode && ::chmod(dir.c_str(), mode) != 0) {
    return Error::from_errno("native", "chmod " + dir.string());
  }
  return core::ok_status();
}

core::Status check_not_system_directory(const fs::path& dir, bool allowed) {
  if (allowed) return core::ok_status();
  const char* forced = std::getenv("PULSEBOX_ALLOW_SYSTEM_STATE_DIR");
  if (forced != nullptr && std::string(forced) == "1") return core::ok_status();
  const auto reason = core::system_directory_reason(dir);
  if (!reason) return core::ok_status();
  return Error(ErrorKind::kSecurity, "native",
               "the state directory " + dir.string() + " is a system directory (" + *reason +
                   "); set PULSEBOX_STATE_DIR to a directory of pulsebox's own, or set "
                   "PULSEBOX_ALLOW_SYSTEM_STATE_DIR=1 (C++: "
                   "NativeBackendOptions::allow_system_state_dir) to use it anyway");
}

core::Status check_reachable_by_sandbox(const fs::path& dir) {
  // Rootless, the sandbox runs as this user, who reaches what it made.
  if (::geteuid() != 0) return core::ok_status();
  std::error_code ec;
  const fs::path absolute = fs::absolute(dir, ec);
  if (ec) return core::ok_status();
  // As root the sandbox's ids are unprivileged and its setup mounts from
  // inside the state directory (made 0711 itself): every directory above it
  // must let others search it, or every run fails with EACCES.
  for (fs::path above = absolute.parent_path(); !above.empty(); above = above.parent_path()) {
    struct stat st {};
    if (::stat(above.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & S_IXOTH) == 0) {
      char mode[8];
      std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
      return Error(ErrorKind::kInvalidInput, "native",
                   "the state directory " + dir.string() +
                       " is out of reach of the sandbox's unprivileged ids: " + above.string() +
                       " (mode " + mode +
                       ") lets no one else search it, and each sandbox's setup mounts from "
                       "inside the state directory; fix: chmod o+x " +
                       above.string() +
                       ", or set PULSEBOX_STATE_DIR to a directory whose parents others may "
                       "enter (unset, it is /var/lib/pulsebox)");
    }
    if (above == above.root_path()) break;
  }
  return core::ok_status();
}

mode_t state_dir_mode() {
  return ::geteuid() == 0 ? 0711 : 0700;
}

namespace {

// Made first, checked after: concurrent first runs all try, EEXIST is fine
// (looking first and making after raced: found on a 1-CPU VM).
core::Status ensure_mount_point(const fs::path& path, bool directory, mode_t mode) {
  int made = -1;
  if (directory) {
    made = ::mkdir(path.c_str(), mode);
  } else if (const int fd = ::open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0);
             fd >= 0) {
    made = ::close(fd);
  }
  if (made != 0 && errno != EEXIST) return Error::from_errno("native", "creating " + path.string());
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return Error::from_errno("native", path.string());
  const bool right_type = directory ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode) && st.st_size == 0;
  if (!right_type || st.st_uid != ::geteuid()) {
    return Error(ErrorKind::kSecurity, "native",
                 path.string() + " is not " +
                     (directory ? "a directory" : "an empty regular file") +
                     " owned by this user; remove it (pulsebox makes it again)");
  }
  // The mode whatever the umask was (the file: unreadable).
  const mode_t wanted = directory ? mode : 0;
  if ((st.st_mode & 07777) != wanted && ::chmod(path.c_str(), wanted) != 0)
    return Error::from_errno("native", "chmod " + path.string());
  return core::ok_status();
}

// The overlay layer that hides the workspace's .agent/: a directory holding
// only a whiteout (a 0/0 character device, which any user may make since
// Linux 5.8) named .agent, stacked above the workspace. The sandbox sees no
// .agent at all and may make its own (the import never takes the top .agent).
core::Status ensure_agent_whiteout(const fs::path& layer) {
  PB_CHECK(ensure_mount_point(layer, true, 0755));
  const fs::path whiteout = layer / ".agent";
  if (::mknod(whiteout.c_str(), S_IFCHR | 0000, makedev(0, 0)) != 0 && errno != EEXIST)
    return Error::from_errno("native", "creating the whiteout " + whiteout.string());
  struct stat st {};
  if (::lstat(whiteout.c_str(), &st) != 0) return Error::from_errno("native", whiteout.string());
  if (!S_ISCHR(st.st_mode) || st.st_rdev != makedev(0, 0) || st.st_uid != ::geteuid()) {
    return Error(ErrorKind::kSecurity, "native",
                 whiteout.string() +
                     " is not a whiteout (character device 0/0) owned by this user; remove it "
                     "(pulsebox makes it again)");
  }
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(layer, ec)) {
    if (entry.path().filename() != ".agent") {
      return Error(ErrorKind::kSecurity, "native",
                   layer.string() + " holds " + entry.path().filename().string() +
                       ", which every sandbox would see in its workspace; remove it");
    }
  }
  return core::ok_status();
}

}  // namespace

fs::path mount_points_dir(const fs::path& state_dir) {
  return state_dir / "mnt";
}

core::Status ensure_mount_points(const fs::path& state_dir) {
  const fs::path dir = mount_points_dir(state_dir);
  PB_CHECK(ensure_private_dir(dir, state_dir_mode()));
  PB_CHECK(ensure_mount_point(dir / "root", true, 0755));
  PB_CHECK(ensure_mount_point(dir / "lower", true, 0755));
  PB_CHECK(ensure_mount_point(dir / "empty", false, 0));
  // A masked directory reads as empty.
  PB_CHECK(ensure_mount_point(dir / "empty-dir", true, 0555));
  PB_CHECK(ensure_agent_whiteout(dir / "agent-whiteout"));
  // Where a run's size-limited tmpfs for its changes is mounted (--disk).
  PB_CHECK(ensure_mount_point(dir / "changes", true, 0755));
  return core::ok_status();
}

}  // namespace pulsebox::backends::native
