// The native backend's state directory: where it is, and the checks that
// keep it this user's alone. Layout:
//   <state>/runs/<id>/      a run's staging (overlay upper/ and work/);
//   <state>/runs/<id>.lock  flock-ed while the run lives (reconcile skips it)
//   <state>/trash/, pool/   finished staging trees (staging.h)
//   <state>/mnt/            mount points and mask sources every run shares
//   <state>/seccomp/        compiled filters (seccomp/compiler.h)
//   <state>/host-probe      the remembered host probe (probe.h)
#pragma once

#include <sys/types.h>

#include <filesystem>

#include "core/result.h"

namespace pulsebox::backends::native {

// Creates (or checks) a directory only this user controls: not a symlink,
// owned by the effective uid, with exactly `mode`. A directory planted by
// someone else in a shared place such as /var/tmp is refused (kSecurity).
core::Status ensure_private_dir(const std::filesystem::path& dir, mode_t mode);

// Refuses a system directory (core::system_directory_reason) as the state
// directory, which pulsebox makes private (chmod) and fills with staging,
// unless `allowed` (NativeBackendOptions::allow_system_state_dir) or
// PULSEBOX_ALLOW_SYSTEM_STATE_DIR=1: kSecurity, naming the directory, the
// reason and both ways to force it.
core::Status check_not_system_directory(const std::filesystem::path& dir, bool allowed);

// The mode of the state directory and of runs/: root's sandboxes (other
// host ids) must traverse them to reach their staging.
// As root: refuses a state directory below a directory that the sandbox's
// unprivileged ids may not search (what `mktemp -d` makes), with the fix.
core::Status check_reachable_by_sandbox(const std::filesystem::path& dir);

mode_t state_dir_mode();

// <state>/mnt (mount_points_dir): root/, lower/ and changes/, empty
// directories every run mounts on in its own mount namespace; empty and
// empty-dir, bound over masked files and directories; agent-whiteout/, the
// overlay layer that hides .agent/. Made once and checked each run (type and
// owner: never a symlink) by ensure_mount_points(), before init mounts on them.
std::filesystem::path mount_points_dir(const std::filesystem::path& state_dir);
core::Status ensure_mount_points(const std::filesystem::path& state_dir);

}  // namespace pulsebox::backends::native
