// cgroups: where this process may create cgroups, and one cgroup per sandbox.
//
// Two host layouts are handled:
//   cgroup v2 (/sys/fs/cgroup is cgroup2): every controller in one hierarchy;
//   hybrid (v1 controllers under /sys/fs/cgroup/<controller>, plus a unified
//     cgroup2 hierarchy, usually /sys/fs/cgroup/unified, without controllers):
//     limits through the v1 memory, pids and cpu hierarchies; the unified
//     hierarchy still gives CLONE_INTO_CGROUP, cgroup.kill and cpu.stat.
//
// Where sandboxes' cgroups are created (never in a cgroup pulsebox did not
// create itself):
//   root:                     <mount>/pulsebox/sandbox-<name> in the unified
//                             hierarchy and in each v1 one (the "pulsebox"
//                             level stays: removing it would race with
//                             concurrent runs)
//   an ordinary user:         <own cgroup>/<name>, when its own cgroup is
//                             delegated to it (owned by it: systemd's
//                             Delegate=yes, or a directory an administrator
//                             chowned and started it in). On cgroup v2 the
//                             process first moves itself into the leaf
//                             <own cgroup>/pulsebox-supervisor, since a cgroup
//                             with processes cannot give controllers to children.
//
// Call order: discover_cgroups() (reads /proc; no side effects) ->
//   SandboxCgroup::create() -> clone3(CLONE_INTO_CGROUP, unified_fd()) ->
//   the child writes "0" to each of self_join_fds() and the supervisor calls
//   attach_rest(pid), both before the child runs anything -> usage() while it runs ->
//   kill() (not needed once init is reaped: its pid namespace took every
//   process with it) -> usage() for the final numbers -> remove().
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "core/unique_fd.h"

namespace pulsebox::linux_api {

enum class CgroupController { Memory, Pids, Cpu, CpuAccounting };
inline constexpr CgroupController kAllCgroupControllers[] = {
    CgroupController::Memory, CgroupController::Pids, CgroupController::Cpu,
    CgroupController::CpuAccounting};
const char* cgroup_controller_name(CgroupController controller);

// Where one controller's per-sandbox cgroups go, or why there is no place.
struct ControllerPlace {
  bool usable = false;
  bool v1 = false;      // a v1 hierarchy (else the unified one)
  std::string parent;   // absolute directory the per-sandbox cgroups are created in
  std::string problem;  // when not usable: why
  std::string fix;      // when not usable: what would make it usable
};

struct CgroupHost {
  bool pure_v2 = false;       // /sys/fs/cgroup is a cgroup2 mount
  bool hybrid = false;        // v1 controller hierarchies are mounted
  std::string unified_mount;  // the cgroup2 mount ("" when none)
  ControllerPlace unified;    // the unified hierarchy itself (kill, events, cpu.stat)
  ControllerPlace memory, pids, cpu, cpu_accounting;
  bool swap_accounting = false;  // memory.swap.max / memory.memsw.* exist
  // An ordinary user on cgroup v2 whose own cgroup still holds this process:
  // create() moves the process into <own>/pulsebox-supervisor first.
  std::string move_self_to;
  // Every mounted hierarchy (the OCI runtime places cgroupsPath under each
  // one's root): a v1 controller's name, or "" for the unified one, -> its
  // mount point; and this process's own cgroup directory in it.
  std::map<std::string, std::string> hierarchy_mounts;
  std::map<std::string, std::string> own_cgroup_dirs;

  const ControllerPlace& place(CgroupController controller) const;
  // "cgroup v2 at /sys/fs/cgroup" / "hybrid: v1 memory, pids, cpu ..."
  std::string describe() const;
};

// Reads /proc/self/mountinfo and /proc/self/cgroup; changes nothing.
CgroupHost discover_cgroups();

// Writes `value` to the control file `file` of the cgroup directory `dir_fd`
// (never creating it: a file the kernel did not make means the host lacks
// the feature). kUnavailable naming the file on failure.
core::Status write_limit(int dir_fd, const char* file, std::string_view value);

struct CgroupSettings {
  std::optional<std::uint64_t> memory_max;
  std::optional<std::uint64_t> swap_max;  // swap on top of memory_max
  std::optional<std::uint64_t> pids_max;
  // CFS bandwidth: `cpu_quota_us` of CPU time per `cpu_period_us`.
  std::optional<std::uint64_t> cpu_quota_us;
  std::uint64_t cpu_period_us = 100000;
};

struct CgroupUsage {
  std::optional<std::uint64_t> cpu_usec;
  std::optional<std::uint64_t> memory_peak;
  std::optional<std::uint64_t> pids_current;
  std::optional<std::uint64_t> pids_peak;
  std::uint64_t oom_kills = 0;
  // Charges refused at the memory limit (reclaimed or not): v1
  // memory.failcnt, v2 memory.events "max".
  std::uint64_t memory_limit_hits = 0;
  std::uint64_t pids_limit_hits = 0;  // fork()/clone() refused at pids.max
};

// The v1 `tasks` files of some cgroup directories, opened for writing: a
// single-threaded process writes "0" to each to move itself. The kernel
// moves one thread moving itself without its global threadgroup lock,
// whose write side waits for an RCU grace period when no other cgroup move
// came just before (nearly always, for a sandbox started on its own);
// writing a pid to cgroup.procs takes it. The kernel checks the opener's
// credentials, so the files work from the child's user namespace.
class CgroupTaskFiles {
 public:
  // Opens <dir>/tasks for each of `dirs` but `skip` (the unified one: v2
  // moves single threads only in threaded cgroups). One that cannot be
  // opened (a delegation that chowned only cgroup.procs) is left out: the
  // caller moves the process there by pid.
  void open(const std::vector<std::string>& dirs, const std::string& skip);
  std::vector<int> fds() const;
  bool has(const std::string& dir) const { return files_.contains(dir); }

 private:
  std::map<std::string, core::UniqueFd> files_;
};

class SandboxCgroup {
 public:
  // Creates <parent>/<name> in every usable hierarchy the settings need (plus
  // the unified one and cpu accounting) and writes the limits. A limit the
  // host cannot apply is an error (kUnavailable), not a silent omission. The
  // directories are flock-ed while this object lives, so reconcile_cgroups()
  // can tell a live sandbox from a crashed one.
  static core::Result<SandboxCgroup> create(const CgroupHost& host, const std::string& name,
                                            const CgroupSettings& settings);
  // create() in steps, for a launch that makes the cgroups while the child
  // makes its namespaces: make() creates and locks the directories, writing
  // each one's limits as it is made (before anything can run there), opens
  // the `tasks` files and the counters usage() reads. With
  // Hierarchies::UnifiedFirst, make() creates only the unified directory
  // (the one clone3 puts the child in) and make_others() the rest, after the
  // clone and before the child joins them.
  enum class Hierarchies { All, UnifiedFirst };
  static core::Result<SandboxCgroup> make(const CgroupHost& host, const std::string& name,
                                          const CgroupSettings& settings,
                                          Hierarchies which = Hierarchies::All);
  core::Status make_others();

  SandboxCgroup() = default;
  SandboxCgroup(SandboxCgroup&&) = default;
  SandboxCgroup& operator=(SandboxCgroup&&) = default;
  ~SandboxCgroup();

  // The unified cgroup's directory (for CLONE_INTO_CGROUP), -1 when none.
  int unified_fd() const { return unified_fd_.get(); }
  // Moves `pid` into every hierarchy; `into_unified_done` skips the unified
  // one (clone3 already put it there).
  core::Status attach(pid_t pid, bool into_unified_done) const;
  // The v1 hierarchies' `tasks` files (CgroupTaskFiles), opened by make():
  // the sandbox's init writes "0" to each.
  std::vector<int> self_join_fds() const { return task_files_.fds(); }
  // attach() for the hierarchies the child does not join itself (those
  // whose `tasks` file could not be opened, and the unified one unless
  // `into_unified_done`).
  core::Status attach_rest(pid_t pid, bool into_unified_done) const;
  CgroupUsage usage() const;
  // pids.peak exists (Linux 6.1): the process count needs no sampling.
  bool keeps_pids_peak() const;
  // cgroup.kill where the kernel has it, else SIGKILL to each listed
  // process, repeated until the cgroups are empty (bounded).
  void kill() const;
  // Kills what is left and removes the directories (idempotent).
  core::Status remove();
  const std::vector<std::string>& directories() const { return directories_; }

 private:
  std::vector<std::string> directories_;  // deepest-last order of creation
  std::vector<std::string> others_;       // make_others() creates them
  core::Status create_directories(const std::vector<std::string>& dirs);
  core::Status write_limits_in(const std::string& dir);
  std::string unified_, memory_, pids_, cpu_, cpu_accounting_;
  bool memory_v1_ = false;
  bool cpu_accounting_v1_ = false;
  // Every directory is flock-ed while the sandbox lives (reconcile skips it).
  core::UniqueFd unified_fd_;
  std::vector<core::UniqueFd> locks_;
  CgroupTaskFiles task_files_;
  // What write_limits_in() writes.
  CgroupSettings settings_;
  bool swap_accounting_ = false;
  bool cpu_v1_ = false;
  // The files usage() reads, opened by create() (-1 where there is none).
  struct Counters {
    core::UniqueFd cpu, memory_peak, oom, memory_failcnt, pids_current, pids_peak, pids_events;
  };
  Counters counters_;
  void open_counters();
};

// Removes the per-sandbox cgroups under this host's parents that no live
// SandboxCgroup holds (killing what is left in them); returns their paths.
std::vector<std::string> reconcile_cgroups(const CgroupHost& host);

}  // namespace pulsebox::linux_api
