#include "linux/mounts.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace pulsebox::linux_api {
namespace {

int result_of(int rc) noexcept {
  return rc == 0 ? 0 : errno;
}

int make_read_only(const MountStep& step) noexcept {
  mount_attr attr{};
  attr.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
  return result_of(::mount_setattr(AT_FDCWD, step.target.c_str(), step.recursive ? AT_RECURSIVE : 0,
                                   &attr, sizeof attr));
}

int apply(const MountStep& step) noexcept {
  const char* target = step.target.c_str();
  switch (step.op) {
    case MountOp::MakeDir:
      if (::mkdir(target, step.mode) != 0 && errno != EEXIST) return errno;
      return 0;
    case MountOp::MakeFile: {
      const int fd = ::open(target, O_CREAT | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, step.mode);
      if (fd < 0) return errno;
      ::close(fd);
      return 0;
    }
    case MountOp::Symlink:
      if (::symlink(step.source.c_str(), target) != 0 && errno != EEXIST) return errno;
      return 0;
    case MountOp::Bind:
      return result_of(::mount(step.source.c_str(), target, nullptr,
                               MS_BIND | (step.recursive ? MS_REC : 0), nullptr));
    case MountOp::ReadOnly:
      return make_read_only(step);
    case MountOp::Tmpfs:
      return result_of(::mount("tmpfs", target, "tmpfs", step.flags, step.data.c_str()));
    case MountOp::Proc:
      return result_of(::mount("proc", target, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr));
    case MountOp::Devpts:
      return result_of(
          ::mount("devpts", target, "devpts", MS_NOSUID | MS_NOEXEC, step.data.c_str()));
    case MountOp::Overlay:
      return result_of(::mount("overlay", target, "overlay", step.flags, step.data.c_str()));
    case MountOp::AttachFd:
      return result_of(::move_mount(step.fd, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH));
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
