#include "linux/rooted_mounts.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <climits>

#include "linux/syscalls.h"

namespace pulsebox::linux_api {

unsigned long long mount_attributes(unsigned long flags) noexcept {
  unsigned long long attributes = 0;
  if (flags & MS_RDONLY) attributes |= MOUNT_ATTR_RDONLY;
  if (flags & MS_NOSUID) attributes |= MOUNT_ATTR_NOSUID;
  if (flags & MS_NODEV) attributes |= MOUNT_ATTR_NODEV;
  if (flags & MS_NOEXEC) attributes |= MOUNT_ATTR_NOEXEC;
  if (flags & MS_NOATIME) attributes |= MOUNT_ATTR_NOATIME;
  if (flags & MS_STRICTATIME) attributes |= MOUNT_ATTR_STRICTATIME;
  if (flags & MS_NODIRATIME) attributes |= MOUNT_ATTR_NODIRATIME;
  return attributes;
}

int set_propagation(long tree, unsigned long propagation) noexcept {
  mount_attr attr{};
  attr.propagation = propagation & ~static_cast<unsigned long>(MS_REC);
  const unsigned recursive = (propagation & MS_REC) != 0 ? AT_RECURSIVE : 0;
  return raw_error(raw(SYS_mount_setattr, tree, "", AT_EMPTY_PATH | recursive, &attr, sizeof attr));
}

namespace {

// As many symlinks as the kernel follows in one lookup (MAXSYMLINKS).
constexpr int kMaxSymlinks = 40;

long resolve(int root_fd, const char* path, int flags) noexcept {
  open_how how{};
  how.flags = static_cast<unsigned long long>(flags | O_CLOEXEC);
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  return raw(SYS_openat2, root_fd, path, &how, sizeof how);
}

void close_fd(long fd) noexcept {
  if (fd >= 0) raw(SYS_close, fd);
}

std::size_t length(const char* text) noexcept {
  std::size_t n = 0;
  while (text[n] != '\0')
    ++n;
  return n;
}

// to = a + b + c, or false if it does not fit.
bool join3(char* to, std::size_t size, const char* a, std::size_t a_length, const char* b,
           const char* c) noexcept {
  std::size_t n = 0;
  for (std::size_t i = 0; i < a_length; ++i) {
    if (n + 1 >= size) return false;
    to[n++] = a[i];
  }
  for (const char* part : {b, c}) {
    for (; *part != '\0'; ++part) {
      if (n + 1 >= size) return false;
      to[n++] = *part;
    }
  }
  to[n] = '\0';
  return true;
}

// Makes `name` in `parent` (a directory, or the last component as a file).
// 0, -EEXIST when something is already there, or -errno.
long make_component(long parent, const char* name, bool as_file, unsigned mode) noexcept {
  if (!as_file) return raw(SYS_mkdirat, parent, name, mode);
  const long fd =
      raw(SYS_openat, parent, name, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) return fd;
  close_fd(fd);
  return 0;
}

// One pass over `path`: resolves each prefix inside the root and makes what
// is missing. Returns the last component's descriptor, -errno, or -EAGAIN
// with `path` rewritten when a dangling symlink was met (its target
// replaces it, and the caller walks again).
long walk(int root_fd, char* path, std::size_t size, CreateInRoot create, unsigned mode) noexcept {
  long parent = resolve(root_fd, "/", O_PATH | O_DIRECTORY);
  if (parent < 0) return parent;
  std::size_t i = 0;
  for (;;) {
    while (path[i] == '/')
      ++i;
    if (path[i] == '\0') return parent;  // every component existed
    const std::size_t start = i;
    while (path[i] != '\0' && path[i] != '/')
      ++i;
    const std::size_t end = i;
    std::size_t after = end;
    while (path[after] == '/')
      ++after;
    const bool last = path[after] == '\0';
    const char saved = path[end];
    path[end] = '\0';
    long next = resolve(root_fd, path, O_PATH);
    if (next == -ENOENT) {
      const bool as_file = last && create == CreateInRoot::File;
      const long made = make_component(parent, path + start, as_file, last ? mode : 0755);
      if (made == -EEXIST) {
        // Present but not resolvable: a symlink whose target is missing.
        char link[PATH_MAX];
        const long n = raw(SYS_readlinkat, parent, path + start, link, sizeof link - 1);
        close_fd(parent);
        if (n < 0) return n == -EINVAL ? -EEXIST : n;
        link[n] = '\0';
        path[end] = saved;
        char rewritten[PATH_MAX];
        // An absolute target starts again at the root, a relative one in
        // the symlink's directory; the rest of the path follows it.
        const std::size_t keep = link[0] == '/' ? 0 : start;
        if (!join3(rewritten, sizeof rewritten, path, keep, link, path + end)) return -ENAMETOOLONG;
        if (length(rewritten) + 1 > size) return -ENAMETOOLONG;
        for (std::size_t k = 0; k <= length(rewritten); ++k)
          path[k] = rewritten[k];
        return -EAGAIN;
      }
      if (made < 0) {
        close_fd(parent);
        return made;
      }
      next = resolve(root_fd, path, O_PATH);
    }
    close_fd(parent);
    if (next < 0) return next;
    path[end] = saved;
    if (last) return next;
    parent = next;
    i = end;
  }
}

int set_attributes(long tree, unsigned long long attributes, bool recursive) noexcept {
  if (attributes == 0) return 0;
  mount_attr attr{};
  attr.attr_set = attributes;
  return raw_error(raw(SYS_mount_setattr, tree, "", AT_EMPTY_PATH | (recursive ? AT_RECURSIVE : 0),
                       &attr, sizeof attr));
}

int attach(long tree, long target) noexcept {
  return raw_error(
      raw(SYS_move_mount, tree, "", target, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH));
}

// A new filesystem of `type` with the comma-separated `options` ("size=64k,
// mode=755", a bare word is a flag), as a detached tree. Returns it or -errno.
long new_filesystem(const char* type, const char* options, unsigned long long attributes) noexcept {
  const long context = raw(SYS_fsopen, type, FSOPEN_CLOEXEC);
  if (context < 0) return context;
  char buffer[PATH_MAX];
  const std::size_t n = length(options);
  if (n + 1 > sizeof buffer) {
    close_fd(context);
    return -E2BIG;
  }
  for (std::size_t k = 0; k <= n; ++k)
    buffer[k] = options[k];
  for (char* option = buffer; *option != '\0';) {
    char* end = option;
    while (*end != '\0' && *end != ',')
      ++end;
    const bool more = *end == ',';
    *end = '\0';
    if (*option != '\0') {
      char* value = option;
      while (*value != '\0' && *value != '=')
        ++value;
      long rc;
      if (*value == '=') {
        *value++ = '\0';
        rc = raw(SYS_fsconfig, context, FSCONFIG_SET_STRING, option, value, 0);
      } else {
        rc = raw(SYS_fsconfig, context, FSCONFIG_SET_FLAG, option, nullptr, 0);
      }
      if (rc < 0) {
        close_fd(context);
        return rc;
      }
    }
    option = more ? end + 1 : end;
  }
  long rc = raw(SYS_fsconfig, context, FSCONFIG_CMD_CREATE, nullptr, nullptr, 0);
  if (rc >= 0) rc = raw(SYS_fsmount, context, FSMOUNT_CLOEXEC, attributes);
  close_fd(context);
  return rc;
}

// Mounts `tree` (consumed) on `target` inside the root, made as `create`;
// then sets its `propagation` (0: none), on the attached mount: the
// container's own namespace holds it by then.
int attach_in_root(int root_fd, long tree, const char* target, CreateInRoot create, unsigned mode,
                   unsigned long propagation = 0) noexcept {
  if (tree < 0) return raw_error(tree);
  const long target_fd = open_in_root(root_fd, target, create, mode);
  if (target_fd < 0) {
    close_fd(tree);
    return raw_error(target_fd);
  }
  int error = attach(tree, target_fd);
  if (error == 0 && propagation != 0) error = set_propagation(tree, propagation);
  close_fd(target_fd);
  close_fd(tree);
  return error;
}

bool is_directory(long fd) noexcept {
  struct stat status {};
  return raw(SYS_newfstatat, fd, "", &status, AT_EMPTY_PATH) == 0 && S_ISDIR(status.st_mode);
}

// The directory of `target`'s last component, resolved (and made) in the
// root; *name is where that component starts in `target`. -errno on error.
long open_parent_in_root(int root_fd, const char* target, std::size_t* name) noexcept {
  char parent[PATH_MAX];
  const std::size_t n = length(target);
  if (n + 1 > sizeof parent) return -ENAMETOOLONG;
  std::size_t slash = n;
  while (slash > 0 && target[slash - 1] != '/')
    --slash;
  if (slash == n) return -EINVAL;  // no last component
  for (std::size_t k = 0; k < slash; ++k)
    parent[k] = target[k];
  parent[slash] = '\0';
  *name = slash;
  return open_in_root(root_fd, slash == 0 ? "/" : parent, CreateInRoot::Directory, 0755);
}

int apply(int root_fd, const MountStep& step) noexcept {
  const char* target = step.target.c_str();
  switch (step.op) {
    case MountOp::MakeDir: {
      const long fd = open_in_root(root_fd, target, CreateInRoot::Directory, step.mode);
      if (fd < 0) return raw_error(fd);
      int error = 0;
      if (step.uid >= 0) {
        error = raw_error(raw(SYS_fchownat, fd, "", step.uid, step.gid, AT_EMPTY_PATH));
      }
      close_fd(fd);
      return error;
    }
    case MountOp::MakeFile: {
      const long fd = open_in_root(root_fd, target, CreateInRoot::File, step.mode);
      close_fd(fd);
      return raw_error(fd < 0 ? fd : 0);
    }
    case MountOp::Symlink: {
      // The link's directory is resolved in the root; the link itself is
      // made there by name.
      std::size_t name = 0;
      const long directory = open_parent_in_root(root_fd, target, &name);
      if (directory < 0) return raw_error(directory);
      const int error =
          raw_error(raw(SYS_symlinkat, step.source.c_str(), directory, target + name));
      close_fd(directory);
      return error == EEXIST ? 0 : error;
    }
    case MountOp::Bind: {
      const long tree =
          raw(SYS_open_tree, AT_FDCWD, step.source.c_str(),
              OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | (step.recursive ? AT_RECURSIVE : 0));
      if (tree < 0) return raw_error(tree);
      if (const int e = set_attributes(tree, mount_attributes(step.flags), step.recursive);
          e != 0) {
        close_fd(tree);
        return e;
      }
      const CreateInRoot create = is_directory(tree) ? CreateInRoot::Directory : CreateInRoot::File;
      return attach_in_root(root_fd, tree, target, create,
                            create == CreateInRoot::File ? 0644 : 0755, step.propagation);
    }
    case MountOp::ReadOnly:
      return make_read_only_in_root(root_fd, target);
    case MountOp::Tmpfs:
      return attach_in_root(
          root_fd, new_filesystem("tmpfs", step.data.c_str(), mount_attributes(step.flags)), target,
          CreateInRoot::Directory, 0755);
    case MountOp::Proc:
      return attach_in_root(
          root_fd,
          new_filesystem("proc", "", MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC),
          target, CreateInRoot::Directory, 0555);
    case MountOp::Devpts:
      return attach_in_root(
          root_fd,
          new_filesystem("devpts", step.data.c_str(), MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC),
          target, CreateInRoot::Directory, 0755);
    case MountOp::Sysfs:
      return attach_in_root(root_fd, new_filesystem("sysfs", "", mount_attributes(step.flags)),
                            target, CreateInRoot::Directory, 0555);
    case MountOp::Mqueue:
      return attach_in_root(root_fd, new_filesystem("mqueue", "", mount_attributes(step.flags)),
                            target, CreateInRoot::Directory, 01777);
    case MountOp::MakeDevice: {
      // The node is made by name in its directory, resolved in the root;
      // mknodat never follows a symlink in the last component.
      std::size_t name = 0;
      const long directory = open_parent_in_root(root_fd, target, &name);
      if (directory < 0) return raw_error(directory);
      int error = raw_error(raw(SYS_mknodat, directory, target + name, step.mode, step.device));
      if (error == 0 && step.uid >= 0) {
        error = raw_error(
            raw(SYS_fchownat, directory, target + name, step.uid, step.gid, AT_SYMLINK_NOFOLLOW));
      }
      close_fd(directory);
      return error;
    }
    case MountOp::Overlay:
      return EINVAL;
    case MountOp::AttachFd: {
      const long target_fd = open_in_root(root_fd, target, CreateInRoot::Directory, 0755);
      if (target_fd < 0) return raw_error(target_fd);
      const int error = attach(step.fd, target_fd);
      close_fd(target_fd);
      return error;
    }
  }
  return EINVAL;
}

}  // namespace

long open_in_root(int root_fd, const char* path, CreateInRoot create, unsigned mode) noexcept {
  const long fd = resolve(root_fd, path, O_PATH);
  if (fd != -ENOENT || create == CreateInRoot::None) return fd;
  char buffer[PATH_MAX];
  const std::size_t n = length(path);
  if (n + 1 > sizeof buffer) return -ENAMETOOLONG;
  for (std::size_t k = 0; k <= n; ++k)
    buffer[k] = path[k];
  for (int round = 0; round <= kMaxSymlinks; ++round) {
    const long result = walk(root_fd, buffer, sizeof buffer, create, mode);
    if (result != -EAGAIN) return result;
  }
  return -ELOOP;
}

int apply_rooted_mount_step(int root_fd, const MountStep& step) noexcept {
  const int error = apply(root_fd, step);
  if (error == ENOENT && step.optional) return 0;
  return error;
}

int mask_path_in_root(int root_fd, const char* path) noexcept {
  const long target = open_in_root(root_fd, path, CreateInRoot::None, 0);
  if (target == -ENOENT) return 0;
  if (target < 0) return raw_error(target);
  long tree;
  if (is_directory(target)) {
    tree = new_filesystem(
        "tmpfs", "mode=555",
        MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
  } else {
    // The root's own /dev/null: the image could have put anything there.
    const long null = open_in_root(root_fd, "/dev/null", CreateInRoot::None, 0);
    struct stat status {};
    if (null < 0 || raw(SYS_newfstatat, null, "", &status, AT_EMPTY_PATH) != 0 ||
        !S_ISCHR(status.st_mode) || status.st_rdev != makedev(1, 3)) {
      close_fd(null);
      close_fd(target);
      return ENXIO;
    }
    tree = raw(SYS_open_tree, null, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
    close_fd(null);
  }
  if (tree < 0) {
    close_fd(target);
    return raw_error(tree);
  }
  const int error = attach(tree, target);
  close_fd(tree);
  close_fd(target);
  return error;
}

int bind_fd_in_root(int root_fd, int source_fd, const char* target) noexcept {
  const long tree =
      raw(SYS_open_tree, source_fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
  return attach_in_root(root_fd, tree, target, CreateInRoot::File, 0600);
}

int make_read_only_in_root(int root_fd, const char* path) noexcept {
  const long target = open_in_root(root_fd, path, CreateInRoot::None, 0);
  if (target == -ENOENT) return 0;
  if (target < 0) return raw_error(target);
  const long tree = raw(SYS_open_tree, target, "",
                        OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
  int error = raw_error(tree < 0 ? tree : 0);
  if (error == 0) {
    error = set_attributes(tree, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, true);
  }
  if (error == 0) error = attach(tree, target);
  close_fd(tree);
  close_fd(target);
  return error;
}

}  // namespace pulsebox::linux_api
