#include "linux/mounts.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "linux/syscalls.h"

namespace pulsebox::linux_api {
namespace {

// Raw system calls: this runs in the sandbox's init, which shares the
// supervisor's memory (see linux/clone.h).
int make_read_only(const MountStep& step) noexcept {
  mount_attr attr{};
  attr.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
  return raw_error(raw(SYS_mount_setattr, AT_FDCWD, step.target.c_str(),
                       step.recursive ? AT_RECURSIVE : 0, &attr, sizeof attr));
}

int mount(const char* source, const char* target, const char* type, unsigned long flags,
          const char* data) noexcept {
  return raw_error(raw(SYS_mount, source, target, type, flags, data));
}

int apply(const MountStep& step) noexcept {
  const char* target = step.target.c_str();
  switch (step.op) {
    case MountOp::MakeDir: {
      const int error = raw_error(raw(SYS_mkdirat, AT_FDCWD, target, step.mode));
      if (error != 0 || step.uid < 0) return error == EEXIST ? 0 : error;
      // The umask left out bits of `mode`; the owner is set before them.
      if (const int e = raw_error(
              raw(SYS_fchownat, AT_FDCWD, target, step.uid, step.gid, AT_SYMLINK_NOFOLLOW));
          e != 0) {
        return e;
      }
      return raw_error(raw(SYS_fchmodat, AT_FDCWD, target, step.mode));
    }
    case MountOp::MakeFile: {
      const long fd =
          raw(SYS_openat, AT_FDCWD, target, O_CREAT | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, step.mode);
      if (fd < 0) return raw_error(fd);
      raw(SYS_close, fd);
      return 0;
    }
    case MountOp::Symlink: {
      const int error = raw_error(raw(SYS_symlinkat, step.source.c_str(), AT_FDCWD, target));
      return error == EEXIST ? 0 : error;
    }
    case MountOp::Bind:
      return mount(step.source.c_str(), target, nullptr, MS_BIND | (step.recursive ? MS_REC : 0),
                   nullptr);
    case MountOp::ReadOnly:
      return make_read_only(step);
    case MountOp::Tmpfs:
      return mount("tmpfs", target, "tmpfs", step.flags, step.data.c_str());
    case MountOp::Proc:
      return mount("proc", target, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr);
    case MountOp::Devpts:
      return mount("devpts", target, "devpts", MS_NOSUID | MS_NOEXEC, step.data.c_str());
    case MountOp::Overlay:
      return mount("overlay", target, "overlay", step.flags, step.data.c_str());
    case MountOp::AttachFd:
      return raw_error(raw(SYS_move_mount, step.fd, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH));
    case MountOp::Sysfs:
      return mount("sysfs", target, "sysfs", step.flags, nullptr);
    case MountOp::Mqueue:
      return mount("mqueue", target, "mqueue", step.flags, nullptr);
    case MountOp::MakeDevice: {
      const int error = raw_error(raw(SYS_mknodat, AT_FDCWD, target, step.mode, step.device));
      if (error != 0 || step.uid < 0) return error;
      return raw_error(
          raw(SYS_fchownat, AT_FDCWD, target, step.uid, step.gid, AT_SYMLINK_NOFOLLOW));
    }
  }
  return EINVAL;
}

}  // namespace

int apply_mount_step(const MountStep& step) noexcept {
  const int error = apply(step);
  if (error == ENOENT && step.optional) return 0;
  return error;
}

std::string escape_overlay_path(const std::string& path) {
  std::string out;
  for (char c : path) {
    if (c == ',' || c == ':' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace pulsebox::linux_api
