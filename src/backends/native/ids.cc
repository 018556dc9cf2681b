#include "backends/native/ids.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fs.h"
#include "linux/userns.h"

namespace pulsebox::backends::native {

using core::Error;
using core::ErrorKind;
using core::UniqueFd;
namespace fs = std::filesystem;

namespace {

constexpr std::uint32_t kRootRangeSize = 65536;
// The host ids root's sandboxes map to when /etc/subuid has no "root" range:
// far above any ordinary account.
constexpr std::uint32_t kDefaultRootIdBase = 0x70000000;

}  // namespace

core::Result<IdPlan> plan_ids(const NativeBackendOptions& options, runtime::LaunchPlan& plan) {
  const uid_t sandbox_uid = options.sandbox_uid;
  const gid_t sandbox_gid = options.sandbox_gid;
  plan.command_uid = sandbox_uid;
  plan.command_gid = sandbox_gid;
  if (::geteuid() != 0) {
    // The sandbox uid is the invoking user, so the workspace is writable
    // inside and nothing else of the host is owned by the sandbox.
    plan.init_uid = sandbox_uid;
    plan.init_gid = sandbox_gid;
    if (!options.subordinate_ids) {
      plan.id_maps.uids = {{sandbox_uid, static_cast<std::uint32_t>(::geteuid()), 1}};
      plan.id_maps.gids = {{sandbox_gid, static_cast<std::uint32_t>(::getegid()), 1}};
      plan.id_maps.deny_setgroups = true;
      return IdPlan{};
    }
    const auto uid_base = linux_api::own_subordinate_id_base("/etc/subuid", kRootRangeSize - 1);
    const auto gid_base = linux_api::own_subordinate_id_base("/etc/subgid", kRootRangeSize - 1);
    const bool helpers =
        ::access(linux_api::kNewUidMap, X_OK) == 0 && ::access(linux_api::kNewGidMap, X_OK) == 0;
    if (!uid_base || !gid_base || !helpers || sandbox_uid >= kRootRangeSize ||
        sandbox_gid >= kRootRangeSize) {
      return Error(ErrorKind::kUnavailable, "native",
                   std::string("subordinate ids were asked for, but ") +
                       (!helpers ? "newuidmap/newgidmap are not installed (apt-get install uidmap)"
                                 : "this user has no range of 65535 ids in /etc/subuid and "
                                   "/etc/subgid (as root: usermod --add-subuids 100000-165534 "
                                   "--add-subgids 100000-165534 USER)"));
    }
    auto range = [](std::uint32_t sandbox_id, std::uint32_t own, std::uint32_t base) {
      std::vector<linux_api::IdMapping> maps;
      if (sandbox_id > 0) maps.push_back({0, base, sandbox_id});
      maps.push_back({sandbox_id, own, 1});
      maps.push_back({sandbox_id + 1, base + sandbox_id, kRootRangeSize - sandbox_id - 1});
      return maps;
    };
    plan.id_maps.uids = range(sandbox_uid, static_cast<std::uint32_t>(::geteuid()), *uid_base);
    plan.id_maps.gids = range(sandbox_gid, static_cast<std::uint32_t>(::getegid()), *gid_base);
    plan.id_maps.use_helpers = true;
    plan.id_maps.deny_setgroups = false;
    plan.clear_groups = true;  // newgidmap leaves setgroups allowed: drop the host's groups
    return IdPlan{};
  }
  // Root: a range of unprivileged host ids; the workspace is shown through
  // an idmapped mount in which its owner is the sandbox uid.
  IdPlan ids;
  ids.idmapped_workspace = true;
  ids.uid_base = linux_api::subordinate_id_base("/etc/subuid", "root", kRootRangeSize)
                     .value_or(kDefaultRootIdBase);
  ids.gid_base = linux_api::subordinate_id_base("/etc/subgid", "root", kRootRangeSize)
                     .value_or(kDefaultRootIdBase);
  plan.id_maps.uids = {{0, ids.uid_base, kRootRangeSize}};
  plan.id_maps.gids = {{0, ids.gid_base, kRootRangeSize}};
  plan.id_maps.deny_setgroups = false;
  plan.clear_groups = true;
  plan.init_uid = 0;
  plan.init_gid = 0;
  return ids;
}

core::Result<int> IdmappingNamespaces::get(std::pair<uid_t, gid_t> owner,
                                           std::pair<uid_t, gid_t> sandbox) {
  const std::lock_guard lock(mutex_);
  auto it = namespaces_.find(owner);
  if (it == namespaces_.end()) {
    linux_api::IdMaps maps;
    maps.uids = {{owner.first, sandbox.first, 1}};
    maps.gids = {{owner.second, sandbox.second, 1}};
    maps.deny_setgroups = false;
    PB_TRY(made, linux_api::create_mapping_namespace(maps));
    it = namespaces_.emplace(owner, std::move(made.ns)).first;
    exiting_.push_back(std::move(made.helper));
  }
  return it->second.get();
}

void IdmappingNamespaces::reap_exited() {
  const std::lock_guard lock(mutex_);
  std::erase_if(exiting_, [](linux_api::MappingHelper& helper) { return helper.try_reap(); });
}

core::Result<UniqueFd> idmapped_tree(const IdPlan& ids, const NativeBackendOptions& options,
                                     IdmappingNamespaces& namespaces, const fs::path& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return Error::from_errno("native", dir.string());
  const uid_t host_sandbox_uid = ids.uid_base + options.sandbox_uid;
  const gid_t host_sandbox_gid = ids.gid_base + options.sandbox_gid;
  auto mapping = namespaces.get({st.st_uid, st.st_gid}, {host_sandbox_uid, host_sandbox_gid});
  if (!mapping)
    return std::move(mapping).error().with_context("preparing the idmapped " + dir.string());
  UniqueFd tree(::open_tree(AT_FDCWD, dir.c_str(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC));
  if (!tree) return Error::from_errno("native", "open_tree " + dir.string());
  mount_attr attr{};
  attr.attr_set = MOUNT_ATTR_IDMAP;
  attr.userns_fd = static_cast<std::uint64_t>(*mapping);
  if (::mount_setattr(tree.get(), "", AT_EMPTY_PATH, &attr, sizeof attr) != 0) {
    return Error::from_errno("native", "idmapping the mount (MOUNT_ATTR_IDMAP) of " + dir.string())
        .with_kind(ErrorKind::kUnavailable);
  }
  core::move_above_stdio(tree);
  return tree;
}

core::Result<UniqueFd> prepare_staging(const IdPlan& ids, const NativeBackendOptions& options,
                                       IdmappingNamespaces& namespaces, const fs::path& workspace,
                                       const fs::path& run_dir) {
  struct stat ws {};
  if (::stat(workspace.c_str(), &ws) != 0) {
    return Error::from_errno("native", "workspace " + workspace.string());
  }
  const fs::path upper = run_dir / "upper";
  const fs::path work = run_dir / "work";
  if (::chmod(upper.c_str(), ws.st_mode & 07777) != 0) {
    return Error::from_errno("native", "chmod " + upper.string());
  }
  if (!ids.idmapped_workspace) return UniqueFd();
  const uid_t host_sandbox_uid = ids.uid_base + options.sandbox_uid;
  const gid_t host_sandbox_gid = ids.gid_base + options.sandbox_gid;
  PB_TRY(tree, idmapped_tree(ids, options, namespaces, workspace));

  // init (namespace root = host uid_base) mounts the overlay: it owns the
  // work directory; the upper root is the sandbox user's, like the workspace
  // root is its owner's. The staging directory is reachable by init's group only.
  if (::chown(work.c_str(), ids.uid_base, ids.gid_base) != 0 ||
      ::chown(upper.c_str(), host_sandbox_uid, host_sandbox_gid) != 0 ||
      ::chown(run_dir.c_str(), 0, ids.gid_base) != 0 || ::chmod(run_dir.c_str(), 0710) != 0) {
    return Error::from_errno("native", "preparing the ownership of " + run_dir.string());
  }
  return tree;
}

}  // namespace pulsebox::backends::native
