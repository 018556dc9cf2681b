// Building a LaunchPlan from a request: the sandbox's filesystem as mount
// steps, the command's exec candidates and environment, ids and rlimits.
// Pure computation plus lstat() of host paths; nothing is mounted here.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "core/result.h"
#include "pulsebox/backend.h"
#include "runtime/launch_plan.h"

namespace pulsebox::runtime {

struct MountLayout {
  std::filesystem::path workspace;  // canonical host path (the overlay's lower layer)
  std::filesystem::path run_dir;    // this run's staging: upper/ work/
  // Shared by all runs: root/ and lower/ (empty directories each run mounts
  // on in its own mount namespace), empty and empty-dir (bound over masked
  // files and directories). Made once: every directory made and removed per run costs the
  // state directory's file system block allocations (and discards).
  std::filesystem::path mount_points;
  std::vector<std::string> system_paths;
  std::vector<std::string> hidden_paths;
  std::vector<BindMount> binds;
  int idmapped_workspace_fd = -1;  // attached at mount_points/lower and used as the lower layer
  // Root's layout: a host directory bound as HOME (a bind at
  // core::kSandboxHome) is attached from an idmapped tree after PlanReady
  // (idmapped_home_fd), not bound among the base mounts.
  bool idmap_home = false;
  int idmapped_home_fd = -1;
  bool hide_agent_dir = true;
  // Size cap of /tmp and /dev/shm (RAM-backed); 0 leaves the kernel default.
  std::uint64_t tmpfs_size_bytes = 0;
  std::vector<std::string> hidden_workspace_paths;  // relative to the workspace
  // Layers between the upper directory and the workspace, top first (a
  // session's earlier changes).
  std::vector<std::filesystem::path> lower_layers;
  // The command's ids inside: the owner of its private HOME.
  unsigned home_uid = 1000;
  unsigned home_gid = 1000;
  // > 0: the run's changes (the overlay's upper and work directories) go to
  // a tmpfs of this size mounted on mount_points/changes (--disk), which
  // init hands to the supervisor; 0: to run_dir.
  std::uint64_t changes_size_bytes = 0;
  // The upper root's mode and owner inside (the workspace root's), for a
  // tmpfs of changes_size_bytes.
  unsigned upper_mode = 0755;
  unsigned upper_uid = 1000;
  unsigned upper_gid = 1000;
  // Not empty: a file bound read-only on /etc/hosts (the host names an
  // allowlist names, as pulsebox resolved them).
  std::filesystem::path hosts_file;
};

// Where the upper and work directories are for `layout`: host paths as init
// sees them before pivot_root.
std::filesystem::path changes_root(const MountLayout& layout);

// The mount steps in two parts, each in order. The base (the root, system
// directories, /proc, /dev, /tmp, extra binds) needs no per-run staging, so
// init makes it while the supervisor prepares the rest; fails
// (kInvalidInput) on a bad extra bind. The workspace part (the overlay, its
// masks) uses workspace, run_dir, idmapped_workspace_fd and the hidden paths.
core::Result<std::vector<linux_api::MountStep>> build_base_mount_steps(const MountLayout& layout);
std::vector<linux_api::MountStep> build_workspace_mount_steps(const MountLayout& layout);
// The extra binds' checks alone (build_base_mount_steps makes them too):
// the sandbox path's rules, and a source that exists.
core::Status check_extra_binds(const MountLayout& layout);
// Both, base first.
core::Result<std::vector<linux_api::MountStep>> build_mount_steps(const MountLayout& layout);

// The absolute paths execve() should try for argv[0], given PATH.
std::vector<std::string> exec_candidates(const std::string& program, const std::string& path);

// Checks an extra bind's sandbox path: absolute, normal, outside the
// directories the sandbox builds itself. Returns "" or the problem.
std::string check_bind_target(const std::string& sandbox_path,
                              const std::vector<std::string>& system_paths);

}  // namespace pulsebox::runtime
