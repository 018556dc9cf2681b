// Mount steps inside a hostile root (design §2.3): every target is resolved
// with openat2(root_fd, target, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS), so
// a symlink in the image (an `/etc` pointing at a host directory) resolves
// inside the root and never outside it (the CVE-2021-30465 class). Missing
// components are made one at a time below what is already resolved. The
// mount goes onto the resolved descriptor with move_mount: a bind is an
// open_tree clone, a new filesystem an fsopen/fsmount tree. There is no
// path-based fallback.
//
// Raw system calls and stack buffers only: this runs between clone() and
// execve() (oci/launch/container_init.cc).
#pragma once

#include "linux/mounts.h"

namespace pulsebox::linux_api {

enum class CreateInRoot { None, Directory, File };

// The mount_setattr(2) attributes of MS_* flags (ro, nosuid, nodev, noexec,
// atime options) for the new mount API.
unsigned long long mount_attributes(unsigned long flags) noexcept;

// mount_setattr(2)'s propagation of the tree `tree` (a descriptor):
// MS_PRIVATE, MS_SLAVE, MS_UNBINDABLE or MS_SHARED, with MS_REC for the
// whole tree. Returns 0 or the errno.
int set_propagation(long tree, unsigned long propagation) noexcept;

// An O_PATH descriptor for `path` (absolute or not, taken inside root_fd).
// With `create`, missing components are made as directories (the last one
// as `create` says, with `mode`); a dangling symlink is followed inside the
// root. Returns the descriptor or -errno.
long open_in_root(int root_fd, const char* path, CreateInRoot create, unsigned mode) noexcept;

// Applies `step` with its target inside root_fd. A Bind's source is a host
// path (the bundle's); the target is made as a directory or a file after
// the source's type. Overlay is not supported here (EINVAL). Returns 0 or
// the errno; with step.optional a missing source or target is 0.
int apply_rooted_mount_step(int root_fd, const MountStep& step) noexcept;

// maskedPaths: a directory gets an empty read-only tmpfs, anything else a
// bind of the root's /dev/null (which must be the 1:3 character device). A
// path that does not exist is left alone. Returns 0 or the errno.
int mask_path_in_root(int root_fd, const char* path) noexcept;

// readonlyPaths: a recursive bind of the path onto itself, read-only,
// nosuid, nodev. A path that does not exist is left alone.
int make_read_only_in_root(int root_fd, const char* path) noexcept;

// Binds the file `source_fd` is open on (a pty's slave for /dev/console)
// onto `target` inside the root, made as a file if missing.
int bind_fd_in_root(int root_fd, int source_fd, const char* target) noexcept;

}  // namespace pulsebox::linux_api
