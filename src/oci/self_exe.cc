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

core::Error failed(const std::string& what) {
  return core::Error::from_errno("oci", "keeping the runtime's binary from containers: " + what);
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

// A read-only bind of the binary, detached: nothing but this fd (closed by
// the exec) names it, so no process can make it writable again.
core::UniqueFd read_only_clone() {
  core::UniqueFd tree(static_cast<int>(
      ::syscall(SYS_open_tree, AT_FDCWD, "/proc/self/exe", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC)));
  if (!tree) return tree;
  mount_attr attr{};
  attr.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
  if (::syscall(SYS_mount_setattr, tree.get(), "", AT_EMPTY_PATH, &attr, sizeof attr) != 0)
    return core::UniqueFd();
  return tree;
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
  core::UniqueFd image = read_only_clone();
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
