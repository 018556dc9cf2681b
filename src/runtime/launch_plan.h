// The launch plan: everything the sandbox's child processes need. The child
// code (runtime/child.cc) reads it and makes syscalls; it never allocates,
// throws or logs. It is written in parts: the fields init reads before "go"
// are final before clone() (base_mounts: before "go"); the rest is written
// while init makes the base mounts, then PlanReady is sent (init shares
// this memory, see linux/clone.h).
//
// Process layout:
//   supervisor (this process)
//     `- init     pid 1 in the new pid namespace: sets up mounts, hostname,
//        |        loopback, rlimits and the bounding set, waits for Start,
//        |        starts the command, then reaps zombies;
//        |        when the command has exited it kills and reaps everything
//        |        left, reports the command's wait status and exits (if it
//        |        dies first, the kernel kills everything in the namespace).
//        `- command   pid 2: switches to the sandbox uid, drops every
//                     capability, sets no_new_privs, closes every other fd,
//                     then execve().
#pragma once

#include <linux/filter.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/trace.h"
#include "linux/caps.h"
#include "linux/clone.h"
#include "linux/mounts.h"
#include "linux/userns.h"

namespace pulsebox::runtime {

struct LaunchPlan {
  std::uint64_t namespaces = 0;  // CLONE_NEW* flags
  // Made by clone3. init unshares the others itself (mount, network, ipc,
  // uts: a network namespace is not cheap, docs/benchmarks.md) as it
  // starts, while the supervisor writes its id maps and the base mount
  // steps; the cgroup namespace follows "go".
  static constexpr std::uint64_t kNamespacesAtClone = CLONE_NEWUSER | CLONE_NEWPID;
  // init unshares its cgroup namespace once it is in the sandbox's cgroups
  // (after "go"), so the namespace's root is the sandbox's own cgroup.
  bool new_cgroup_namespace = false;
  // The sandbox's unified cgroup (clone3 CLONE_INTO_CGROUP), -1 for none.
  int cgroup_fd = -1;
  // The sandbox's v1 cgroups' `tasks` files (SandboxCgroup::self_join_fds),
  // opened while init makes its namespaces and sent to it with Go: init
  // writes "0" to each, which moves it without the kernel's global lock a
  // move by pid takes (linux/cgroup.h).
  static constexpr int kMaxCgroupTaskFiles = 4;
  int cgroup_task_fds[kMaxCgroupTaskFiles] = {};
  int cgroup_task_fd_count = 0;
  linux_api::IdMaps id_maps;

  // Ids inside the user namespace.
  uid_t init_uid = 0;
  gid_t init_gid = 0;
  uid_t command_uid = 1000;
  gid_t command_gid = 1000;
  bool clear_groups = false;  // setgroups(0, NULL) (only when setgroups is allowed)

  // The new root: an empty host directory the tmpfs root is mounted on.
  std::string new_root;
  // Written before "go", made after it: everything that needs no per-run
  // staging.
  std::vector<linux_api::MountStep> base_mounts;

  // Descriptors the child keeps (everything else is closed).
  int channel_fd = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;

  // The command process's stack until its execve (it is started with
  // CLONE_VM | CLONE_VFORK from init): mmap-ed, so untouched pages cost
  // nothing, with a guard page, so an overflow faults instead of writing
  // into the supervisor's memory. Allocated before clone().
  static constexpr std::size_t kCommandStackSize = 16 * 1024;
  linux_api::ChildStack command_stack;
  // With PULSEBOX_TRACE=1: where init and the command mark their progress.
  core::ChildTrace* trace = nullptr;
  // Where the command writes its execve's errno when every candidate
  // failed, before it reports that: at the memory limit the report itself
  // may be refused, a store to memory it shares with the supervisor never
  // is. Owned by the caller; 0 while nothing failed.
  int* exec_error = nullptr;

  std::string hostname;
  bool bring_up_loopback = false;
  // What init hands the supervisor from its network namespace once lo is
  // up (ChildMessageKind::Network): nothing, a TCP listener on
  // 127.0.0.1:proxy_port (the proxy's: the sandbox's one way out), or a
  // NETLINK_ROUTE and a NETLINK_NETFILTER socket (the supervisor adds the
  // veth's addresses and routes and the filter through them; as a rootless
  // supervisor it could not enter the namespace to open them itself).
  enum class NetworkHandover : std::uint8_t { None, ProxyListener, Netlink };
  NetworkHandover network_handover = NetworkHandover::None;
  std::uint16_t proxy_port = 0;
  linux_api::CapabilityDrop capabilities;

  // ---- Read by init only after PlanReady.
  // The workspace's mounts.
  std::vector<linux_api::MountStep> mounts;
  // Where init puts the descriptor PlanReady carries (the idmapped workspace
  // tree, referenced by a step of `mounts`), -1 for none.
  int passed_tree_fd = -1;
  // The same for the idmapped home (SandboxOptions::home, as root).
  int passed_home_fd = -1;
  // The same for the command's stdin (ExecutionRequest::stdin_fd); -1: the
  // command reads /dev/null.
  int passed_stdin_fd = -1;

  // Not empty: after `mounts`, init opens this directory (the run's tmpfs
  // for its changes, see runtime/plan.h) and sends it to the supervisor
  // (ChildMessageKind::Changes), which reads the changes through it.
  std::string send_changes_root;

  // -t: the command opens a pseudo-terminal in the sandbox's own devpts
  // (linux/pty.h), makes it its controlling terminal and stdin, stdout and
  // stderr, and sends the master to the supervisor (ChildMessageKind::
  // Terminal), which relays it. `window` is its first size.
  bool terminal = false;
  winsize window{};

  std::vector<std::pair<int, rlimit>> rlimits;
  // The compiled seccomp filter (the storage belongs to the caller), loaded
  // by the command as its last step before execve.
  bool load_seccomp = false;
  bool seccomp_listener = false;  // pass the listener to the supervisor
  sock_fprog seccomp_program{};

  // The command: execve() is tried on each candidate in turn (PATH search
  // done in the parent); `argv`/`envp` point into the storage vectors.
  std::vector<std::string> exec_candidates;
  std::vector<std::string> argv_storage;
  std::vector<std::string> env_storage;
  std::vector<char*> argv;
  std::vector<char*> envp;
  std::string cwd;  // inside the sandbox

  LaunchPlan() = default;
  LaunchPlan(const LaunchPlan&) = delete;
  LaunchPlan& operator=(const LaunchPlan&) = delete;
  ~LaunchPlan() = default;

  // Fills argv/envp from the storage vectors (call after they are final).
  void seal();
};

}  // namespace pulsebox::runtime
