// Mount steps: the sandbox's filesystem as a list of data, computed in the
// parent (src/runtime/plan.cc) and applied one by one in the child.
//
// Every step holds complete absolute paths (already joined with the new
// root's path), so applying one is a syscall or two with no allocation.
// A step's `stage` names it in error reports; the lists are checked as data,
// without privileges, in tests/unit/plan_test.cc.
#pragma once

#include <string>
#include <vector>

namespace pulsebox::linux_api {

enum class MountOp {
  MakeDir,     // mkdir target (mode in `mode`), EEXIST is fine; with uid/gid >= 0 the
               // new directory gets that owner and exactly `mode`
  MakeFile,    // create an empty file as a bind-mount point
  Symlink,     // symlink source -> target
  Bind,        // bind-mount source on target (recursive)
  ReadOnly,    // make target's mount read-only, nosuid, nodev (recursive if `recursive`)
  Tmpfs,       // mount a tmpfs on target with `data` and `flags`
  Proc,        // mount a fresh proc on target
  Devpts,      // mount a new devpts instance on target
  Overlay,     // mount overlayfs on target with `data`
  AttachFd,    // attach the detached mount tree `fd` (open_tree) on target
  Sysfs,       // mount a sysfs on target with `flags` (needs its own network namespace)
  Mqueue,      // mount an mqueue on target with `flags` (needs its own ipc namespace)
  MakeDevice,  // mknod target: `mode` holds the type (S_IFCHR, S_IFBLK) and permissions,
               // `device` the numbers (makedev); uid/gid >= 0 set its owner
};

struct MountStep {
  MountOp op = MountOp::MakeDir;
  std::string source;
  std::string target;
  std::string data;
  unsigned long flags = 0;
  unsigned mode = 0755;
  int fd = -1;
  int uid = -1;  // MakeDir: the new directory's owner (-1: the caller's)
  int gid = -1;
  unsigned long device = 0;  // MakeDevice: makedev(major, minor)
  bool recursive = true;
  // Bind: MS_PRIVATE, MS_SLAVE or MS_UNBINDABLE (| MS_REC for the whole
  // tree) set on the attached mount; 0 keeps the clone's (a slave of the
  // source's peers when the source is shared or a slave).
  unsigned long propagation = 0;
  bool optional = false;  // a missing target/source (ENOENT) is not an error
  std::string stage;      // "mounting overlay on /workspace", for error reports
};

// Applies one step in the child. Returns 0 or the errno.
int apply_mount_step(const MountStep& step) noexcept;

// Escapes ',' ':' and '\' for an overlayfs path option.
std::string escape_overlay_path(const std::string& path);

}  // namespace pulsebox::linux_api
