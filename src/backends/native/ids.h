// Whose ids the sandbox has: the id maps of its user namespace, the ids of
// init and the command, and for root the idmapped workspace that shows the
// workspace's owner as the sandbox user.
//
//   an ordinary user:  one id, the sandbox uid/gid -> the invoking user's;
//                      with subordinate_ids, 65536 through newuidmap/newgidmap
//   root:              65536 unprivileged host ids (the "root" range of
//                      /etc/subuid and /etc/subgid, else from 0x70000000);
//                      nothing inside is the host's root
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "core/result.h"
#include "core/unique_fd.h"
#include "linux/userns.h"
#include "pulsebox/backend.h"
#include "runtime/launch_plan.h"

namespace pulsebox::backends::native {

struct IdPlan {
  bool idmapped_workspace = false;  // root: the workspace's owner shown as the sandbox uid
  std::uint32_t uid_base = 0;
  std::uint32_t gid_base = 0;
};

// Writes the id maps and the ids of init and the command into `plan`
// (before clone). Subordinate ids without ranges or helpers: kUnavailable,
// with the fix.
core::Result<IdPlan> plan_ids(const NativeBackendOptions& options, runtime::LaunchPlan& plan);

// The user namespaces that idmapped workspace mounts use, one per workspace
// owner, made once and kept (thread-safe).
class IdmappingNamespaces {
 public:
  // A namespace mapping host `owner` to `sandbox` (uid, gid); owned here.
  core::Result<int> get(std::pair<uid_t, gid_t> owner, std::pair<uid_t, gid_t> sandbox);
  // Reaps the helpers the namespaces were made with that have exited (a
  // run asks once its command is started, and at its teardown; the rest
  // are waited for on destruction).
  void reap_exited();

 private:
  std::mutex mutex_;
  std::map<std::pair<uid_t, gid_t>, core::UniqueFd> namespaces_;
  std::vector<linux_api::MappingHelper> exiting_;
};

// `dir` as a detached mount tree (open_tree + MOUNT_ATTR_IDMAP) in which its
// owner is the sandbox uid and gid: root's view of a host directory the
// sandbox writes to (the workspace, a kept HOME).
core::Result<core::UniqueFd> idmapped_tree(const IdPlan& ids, const NativeBackendOptions& options,
                                           IdmappingNamespaces& namespaces,
                                           const std::filesystem::path& dir);

// The staging directory's modes and owners for `ids` (upper/ like the
// workspace root, work/ init's), and for root the idmapped workspace tree
// (open_tree + MOUNT_ATTR_IDMAP; an invalid descriptor otherwise). Runs while
// init makes its base mounts.
core::Result<core::UniqueFd> prepare_staging(const IdPlan& ids, const NativeBackendOptions& options,
                                             IdmappingNamespaces& namespaces,
                                             const std::filesystem::path& workspace,
                                             const std::filesystem::path& run_dir);

}  // namespace pulsebox::backends::native
