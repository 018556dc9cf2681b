#include "oci/self_exe.h"

#include <fcntl.h>
#include <linux/mount.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/fs.h"
#include "core/unique_fd.h"

extern char** environ;

namespace pulsebox::oci {
namespace {

// Set across the one re-execution, so that a copy that still looks
// writable fails instead of re-executing again.
constexpr const char* kReexecuted = "PULSEBOX_OCI_UNWRITABLE_EXE";
constexpr unsigned kSeals = F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE;
// overlayfs's second, empty lower layer (root only).
constexpr const char* kEmptyLayer = "/run/pulsebox-sealed-exe";

core::Error failed(const std::string& what) {
  const int err = errno;
  return core::Error::from_errno(
      "oci",
      "keeping the runtime's binary from containers: " + what +
          "; nothing was started (install pulsebox where containers' users cannot "
          "write it, such as a root-owned /usr/bin, on a kernel with overlayfs or "
          "memfd_create)",
      err);
}

bool unwritable(int exe) {
  struct statvfs fs {};
  if (::fstatvfs(exe, &fs) == 0 && (fs.f_flag & ST_RDONLY) != 0) return true;
  const int seals = ::fcntl(exe, F_GET_SEALS);
  if (seals >= 0 && (seals & F_SEAL_WRITE) != 0) return true;
  // Root's containers are root: only the mount or the seals stop them. An
  // ordinary user's are that user at most (their ids map to it or to
  // subordinate ids), so a binary this user may not write is out of reach.
  return ::geteuid() != 0 && ::faccessat(AT_FDCWD, "/proc/self/exe", W_OK, AT_EACCESS) != 0 &&
         errno == EACCES;
}

core::Result<std::vector<std::string>> own_command_line() {
  PB_TRY(text, core::read_regular_file("/proc/self/cmdline", 1 << 20, "/proc/self/cmdline"));
  std::vector<std::string> args;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t end = text.find('\0', start);
    args.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  if (args.empty()) return failed("reading /proc/self/cmdline (empty)");
  return args;
}

// overlayfs's lowerdir list escapes ':' and '\\'.
std::string escaped_layer(const std::string& path) {
  std::string out;
  for (const char c : path) {
    if (c == ':' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

// The binary through an overlayfs with two lower layers and no upper one
// (its directory on top, an empty one of root's below): the superblock
// itself is read-only. A read-only bind would not do: a container with
// CAP_SYS_ADMIN in a user namespace of its own may clear a detached
// mount's MOUNT_ATTR_RDONLY through an O_PATH descriptor of
// /proc/<pid>/exe (mount_setattr checks no owner for detached mounts), but
// nothing inside can reconfigure this superblock. Invalid where it cannot
// be made (an ordinary user; a kernel without overlayfs or fsopen).
core::UniqueFd read_only_overlay() {
  char target[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", target, sizeof target - 1);
  if (n <= 0) return {};
  const std::string program(target, static_cast<std::size_t>(n));
  const auto slash = program.rfind('/');
  if (slash == std::string::npos || slash == 0) return {};
  if (::mkdir(kEmptyLayer, 0700) != 0 && errno != EEXIST) return {};
  core::UniqueFd context(static_cast<int>(::syscall(SYS_fsopen, "overlay", FSOPEN_CLOEXEC)));
  if (!context) return {};
  const std::string layers =
      escaped_layer(program.substr(0, slash)) + ":" + escaped_layer(kEmptyLayer);
  if (::syscall(SYS_fsconfig, context.get(), FSCONFIG_SET_STRING, "lowerdir", layers.c_str(), 0) !=
      0)
    return {};
  (void)::syscall(SYS_fsconfig, context.get(), FSCONFIG_SET_STRING, "xino", "off", 0);
  if (::syscall(SYS_fsconfig, context.get(), FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) != 0)
    return {};
  core::UniqueFd mount(
      static_cast<int>(::syscall(SYS_fsmount, context.get(), FSMOUNT_CLOEXEC,
                                 MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV)));
  if (!mount) return {};
  return core::UniqueFd(
      ::openat(mount.get(), program.substr(slash + 1).c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
}

core::Result<core::UniqueFd> sealed_copy(int exe) {
  core::UniqueFd memory(::memfd_create("pulsebox-runc", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!memory) return failed("memfd_create");
  struct stat info {};
  if (::fstat(exe, &info) != 0) return failed("fstat of /proc/self/exe");
  off_t offset = 0;
  while (offset < info.st_size) {
    const ssize_t n =
        ::sendfile(memory.get(), exe, &offset, static_cast<std::size_t>(info.st_size - offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return failed("copying the binary into a memfd");
  }
  if (::fcntl(memory.get(), F_ADD_SEALS, kSeals) != 0) return failed("sealing the memfd");
  return memory;
}

}  // namespace

core::Status run_from_unwritable_binary() {
  const bool reexecuted = std::getenv(kReexecuted) != nullptr;
  ::unsetenv(kReexecuted);  // nothing the runtime starts inherits it
  core::UniqueFd exe(::open("/proc/self/exe", O_RDONLY | O_CLOEXEC));
  if (!exe) return failed("opening /proc/self/exe");
  if (unwritable(exe.get())) return core::ok_status();
  if (reexecuted) {
    errno = EPERM;
    return failed("the copy it runs from is still writable");
  }
  PB_TRY(args, own_command_line());
  std::vector<char*> argv;
  for (auto& arg : args)
    argv.push_back(arg.data());
  argv.push_back(nullptr);
  core::UniqueFd image = read_only_overlay();
  if (!image) {
    PB_TRY(copy, sealed_copy(exe.get()));
    image = std::move(copy);
  }
  ::setenv(kReexecuted, "1", 1);
  ::syscall(SYS_execveat, image.get(), "", argv.data(), environ, AT_EMPTY_PATH);
  const int error = errno;
  ::unsetenv(kReexecuted);
  errno = error;
  return failed("executing the runtime again from its copy");
}

}  // namespace pulsebox::oci
