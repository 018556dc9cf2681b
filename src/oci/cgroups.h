// The container's cgroups (design §2.4): cgroupfs paths only, on cgroup v2
// and on hybrid v1 hosts. One leaf per hierarchy at the container's
// cgroupsPath; the leaf must be new or empty (a cgroup holding processes is
// never adopted), and remove() removes the leaves only: parents such as
// /libpod_parent belong to the engine.
//
//   auto path = parse_cgroups_path(spec_text, systemd_flag, id);
//   auto cgroup = ContainerCgroup::create(discover_cgroups(), *path, resources);
//   clone3(CLONE_INTO_CGROUP, cgroup->unified_fd()); cgroup->attach(pid, true);
//   record cgroup->leaf_dirs() in state.json
//   ... later: ContainerCgroup::from_record(leaves).kill_all(SIGKILL); .remove();
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "core/unique_fd.h"
#include "linux/cgroup.h"

namespace pulsebox::oci {

// The refusal of systemd cgroup management, with what to use instead.
inline constexpr std::string_view kSystemdCgroupRefusal =
    "--systemd-cgroup: pulsebox oci manages cgroupfs paths only; use the engine's cgroupfs "
    "manager (podman --cgroup-manager cgroupfs, containerd SystemdCgroup = false)";

struct CgroupsPath {
  std::string relative;          // "a/b": no leading slash, no "." or ".."
  bool from_own_cgroup = false;  // under this process's cgroup, else under each root
};

// `linux.cgroupsPath`: "/a/b" sits under each hierarchy's root, "a/b" under
// this process's own cgroup, "" becomes "/pulsebox-oci/<id>". systemd's
// "slice:prefix:name" and --systemd-cgroup are refused with the fix.
core::Result<CgroupsPath> parse_cgroups_path(std::string_view text, bool systemd_flag,
                                             std::string_view id);

// One per-device value of linux.resources.blockIO (a weight or a rate).
struct BlockDeviceValue {
  std::int64_t major = 0, minor = 0;
  std::uint64_t value = 0;
  bool operator==(const BlockDeviceValue&) const = default;
};

struct BlockIoLimits {
  std::uint16_t weight = 0, leaf_weight = 0;  // 0: unset; else 10 to 1000
  // Index for index with the config's weightDevice; a value of 0 is unset.
  std::vector<BlockDeviceValue> weight_device, leaf_weight_device;
  std::vector<BlockDeviceValue> read_bps, write_bps, read_iops, write_iops;  // 0: no limit
  bool operator==(const BlockIoLimits&) const = default;
};

struct HugepageLimitValue {
  std::string page_size;  // "2MB"
  std::uint64_t limit = 0;
  bool operator==(const HugepageLimitValue&) const = default;
};

// linux.resources as this package applies it, with runc's conventions: 0
// (or nullopt) is unset, -1 unlimited. The reader's spec::Resources maps
// onto it (oci/plan_builder.h cgroup_resources).
struct CgroupResources {
  std::optional<std::int64_t> memory_limit;        // bytes
  std::optional<std::int64_t> memory_swap;         // memory + swap, as OCI gives it
  std::optional<std::int64_t> memory_reservation;  // bytes
  std::optional<std::uint64_t> memory_swappiness;  // v1 only
  bool disable_oom_killer = false;                 // v1 only
  std::optional<std::int64_t> pids_limit;
  std::optional<std::uint64_t> cpu_shares;
  std::optional<std::int64_t> cpu_quota;    // microseconds per period
  std::optional<std::uint64_t> cpu_period;  // microseconds
  std::optional<std::uint64_t> cpu_burst;   // microseconds
  std::optional<std::int64_t> cpu_idle;     // 0 or 1
  std::string cpuset_cpus, cpuset_mems;     // "0-1,3"; empty: unset
  std::optional<BlockIoLimits> block_io;
  std::vector<HugepageLimitValue> hugepage_limits;
  std::map<std::string, std::string> unified;  // v2 only: file -> value
  // Every field compared: none set is CgroupResources{} (create's "no limits").
  bool operator==(const CgroupResources&) const = default;
};

// One control file write, as create() plans it (exposed for the tests).
struct CgroupWrite {
  std::string hierarchy;  // "" unified, else the v1 controller
  std::string file;
  std::string value;
  std::string resource;  // the config path it comes from, for errors
  // Written instead when `file` does not exist (runc's fallbacks: blkio.weight
  // vs the bfq scheduler's blkio.bfq.weight, io.bfq.weight vs io.weight).
  std::string alternative_file, alternative_value;
};
// The writes `resources` needs, in order, on a v1 (`v2` false) or v2 host.
// What the host's cgroup version cannot do is refused naming the config path.
core::Result<std::vector<CgroupWrite>> plan_cgroup_writes(const CgroupResources& resources,
                                                          bool v2);

class ContainerCgroup {
 public:
  // Makes the leaves (parents as needed) in the unified hierarchy and, on a
  // hybrid host, in the v1 memory, pids, cpu, cpuacct and devices ones (and
  // cpuset, blkio and hugetlb when a limit needs them), and writes the
  // limits. A v1 cpuset level made here gets its parent's cpus and mems
  // (else it could hold no process). A hierarchy or control file the resources need and
  // the host lacks is refused, naming the resource. On failure the leaves
  // made so far are removed.
  // `before_making` (when given) gets the leaves before the first mkdir;
  // its error stops create with nothing made.
  using LeavesPlanned = std::function<core::Status(const std::vector<std::string>& leaves)>;
  static core::Result<ContainerCgroup> create(const linux_api::CgroupHost& host,
                                              const CgroupsPath& path,
                                              const CgroupResources& resources,
                                              const LeavesPlanned& before_making = {});
  // The leaves a record names, to kill and remove.
  static ContainerCgroup from_record(const std::vector<std::string>& leaf_dirs);

  ContainerCgroup() = default;
  ContainerCgroup(ContainerCgroup&&) = default;
  ContainerCgroup& operator=(ContainerCgroup&&) = default;

  int unified_fd() const { return unified_fd_.get(); }  // -1: no unified leaf
  // Writes `pid` into each leaf's cgroup.procs; `into_unified_done` skips the
  // unified leaf (clone3 put it there).
  core::Status attach(pid_t pid, bool into_unified_done) const;
  // Opens the v1 leaves' `tasks` files (linux_api::CgroupTaskFiles): the
  // container's process writes "0" to each to move itself. A leaf whose
  // file cannot be opened is left to attach_rest().
  void open_task_files() { task_files_.open(leaf_dirs_, unified_leaf_); }
  std::vector<int> self_join_fds() const { return task_files_.fds(); }
  // attach() for the leaves the process does not join itself.
  core::Status attach_rest(pid_t pid, bool into_unified_done) const;
  // Every process in the leaves.
  core::Result<std::vector<pid_t>> pids() const;
  // cgroup.kill for SIGKILL where a unified leaf has it; otherwise each
  // listed process through its own pidfd, until no new one appears (bounded).
  core::Status kill_all(int signal) const;
  // rmdir of each leaf (retried while an exiting process still holds it);
  // a missing leaf is fine. Parents are left alone.
  core::Status remove();
  const std::vector<std::string>& leaf_dirs() const { return leaf_dirs_; }

 private:
  std::vector<std::string> leaf_dirs_;  // unified first, when there is one
  std::string unified_leaf_;
  core::UniqueFd unified_fd_;
  linux_api::CgroupTaskFiles task_files_;
};

}  // namespace pulsebox::oci
