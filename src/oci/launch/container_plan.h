// Everything an OCI container's process does between clone and execve, as
// plain data (design §2.1). The glue from config.json (oci/spec) builds it;
// spawn_container (spawn.h) clones a process that carries it out
// (container_init.h). It is final before the clone: the child gets a copy
// of it and the parent writes nothing into it afterwards.
//
// Paths in `mounts`, `masked_paths`, `readonly_paths` and `cwd` are inside
// the container's root and are resolved there, never on the host; only a
// Bind step's `source` and `rootfs` are host paths.
#pragma once

#include <linux/filter.h>
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "linux/caps.h"
#include "linux/mounts.h"
#include "linux/userns.h"

namespace pulsebox::oci::launch {

// The kernel's struct rlimit64.
struct Rlimit {
  int resource = 0;
  std::uint64_t soft = 0;
  std::uint64_t hard = 0;
};

// The most AttachFd mount steps one plan may hold (their descriptors stay
// open in the process until the mounts are made).
inline constexpr int kMaxAttachFds = 16;

// One linux.sysctl entry (design §2.1 step 5): written after the mounts, in
// the container's namespaces, through `directory`/`name` under the root's
// own proc mount ("proc/sys/net/ipv4", "ip_forward"). `stage` names the key
// in errors ("writing linux.sysctl.net.ipv4.ip_forward").
struct SysctlWrite {
  std::string directory;
  std::string name;
  std::string value;
  std::string stage;
};

// A hook the container's process runs itself (design §2.1 steps 5 and 10):
// createContainer after the mounts and before pivot_root (so `path` is
// resolved in the runtime's view of the filesystem, as runc does), and
// startContainer after start and before execve (resolved in the
// container). Everything is made before the clone, since the process
// allocates nothing: seal() fills argv and envp.
struct ContainerHook {
  std::string stage;  // "hooks.createContainer[0] (/usr/bin/x)", for errors
  std::string path;
  std::vector<std::string> args;  // args[0] is argv[0]
  std::vector<std::string> env;   // the whole environment
  int timeout_seconds = 30;
  std::vector<char*> argv;
  std::vector<char*> envp;
};

struct ContainerPlan {
  // Namespaces. clone3 makes the user and pid namespaces; the process
  // unshares the rest after Go (the cgroup namespace last).
  std::uint64_t clone_namespaces = 0;    // CLONE_NEWUSER | CLONE_NEWPID
  std::uint64_t unshare_namespaces = 0;  // CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS
  bool new_cgroup_namespace = false;
  // Written by spawn_container when clone_namespaces has CLONE_NEWUSER.
  linux_api::IdMaps id_maps;
  // The unified cgroup leaf to start in (CLONE_INTO_CGROUP), or -1.
  int cgroup_fd = -1;
  // The v1 leaves' `tasks` files (ContainerCgroup::self_join_fds): the
  // process writes "0" to each right after Go, before anything else.
  static constexpr int kMaxCgroupTaskFiles = 10;
  int cgroup_task_fds[kMaxCgroupTaskFiles] = {};
  int cgroup_task_fd_count = 0;
  // The join path (design §1.2, oci/launch/join.h): existing namespaces
  // to enter, opened and type-checked by create, in the order to setns()
  // them (user first). Not empty: a first stage joins them and clones the
  // process; none of their types is in the fields above.
  struct JoinedNamespace {
    int fd = -1;
    int type = 0;  // CLONE_NEWNET, ...
  };
  std::vector<JoinedNamespace> join_namespaces;
  // exec (design §1.6): a running container's namespaces, joined through
  // its verified pidfd (setns(pidfd, join_pidfd_namespaces)) by the first
  // stage. The process then runs the exec setup list (join.h), not the
  // container's: no mounts, no pivot_root, nothing made.
  int join_pidfd = -1;
  std::uint64_t join_pidfd_namespaces = 0;
  // A test aid (PULSEBOX_TRACE_STOP_AT="oci exec: before execve"): the
  // exec'd process stops itself right before execve, with its final
  // identity, so a test can look at it from inside the container.
  bool stop_before_exec = false;
  // KEYCTL_JOIN_SESSION_KEYRING unless --no-new-keyring.
  bool new_session_keyring = true;

  // The filesystem. `/` first becomes rslave (nothing propagates back to
  // the host), then the root is bound on itself and everything below is
  // made relative to it (linux/rooted_mounts.h); after pivot_root the root
  // gets `root_propagation` (linux.rootfsPropagation).
  std::string rootfs;                  // absolute host path
  unsigned long root_propagation = 0;  // MS_PRIVATE/SLAVE/UNBINDABLE [| MS_REC]; 0: stays rslave
  std::vector<linux_api::MountStep> mounts;
  std::vector<std::string> masked_paths;
  std::vector<std::string> readonly_paths;
  bool root_readonly = false;
  std::vector<SysctlWrite> sysctls;

  // The hooks the process runs itself, and the state JSON they read on
  // stdin, each ending in `"pid":` for the process to finish with its pid
  // as the host sees it (read from the host's /proc before pivot_root).
  // createRuntime hooks (run by create): after the mounts and sysctls the
  // process sends Ready and waits for a second Go before its createContainer
  // hooks and pivot_root, runc's point for them.
  bool pause_for_runtime_hooks = false;
  std::vector<ContainerHook> create_container_hooks;
  std::vector<ContainerHook> start_container_hooks;
  std::string create_container_state;
  std::string start_container_state;

  std::string hostname;
  std::string domainname;
  std::optional<int> oom_score_adj;
  std::vector<Rlimit> rlimits;
  std::optional<unsigned long> personality;
  std::optional<mode_t> umask;
  std::string cwd = "/";

  // Identity and privileges (design §2.2).
  uid_t uid = 0;
  gid_t gid = 0;
  bool set_groups = true;  // false where setgroups is denied (user namespace)
  std::vector<gid_t> additional_gids;
  linux_api::CapabilitySets capabilities;
  int last_capability = 0;  // linux_api::prepare_capability_drop()
  bool no_new_privileges = false;
  // A compiled seccomp program (kills compiled as kernel kills); empty: none.
  std::vector<sock_filter> seccomp_program;
  unsigned seccomp_flags = 0;  // linux.seccomp.flags as seccomp(2) takes them

  // Descriptors. stdio[i] >= 0 becomes fd i (else the caller's fd i
  // stays); fds 3 .. 3 + preserved_fds - 1 are passed on as they are. Every
  // other descriptor of this plan must be above that range.
  int stdio[3] = {-1, -1, -1};
  int preserved_fds = 0;
  // The exec fifo's read end (O_RDONLY | O_NONBLOCK, close-on-exec): the
  // process waits for one byte on it, then holds it to execve, whose closing
  // it tells `start`; -1 starts at once. `exec_fifo_writer` is a
  // write end the process holds while it waits, so that a writer that comes
  // and goes without writing leaves no end-of-file behind (poll would
  // return POLLHUP forever); it is required with a fifo.
  int exec_fifo_fd = -1;
  int exec_fifo_writer_fd = -1;
  // process.terminal: the --console-socket connection (made by create, a
  // host path). After pivot_root the process opens a pty in the
  // container's devpts (/dev/ptmx must lead there), makes the slave its
  // controlling terminal, fds 0-2 and /dev/console, and sends the master
  // on this socket (design §2.5). -1: no terminal.
  int console_socket_fd = -1;
  unsigned short console_rows = 0;  // consoleSize; 0: the pty's default
  unsigned short console_columns = 0;

  // The program: its argv and envp, and the paths to try in order (PATH was
  // searched by the planner). seal() fills the pointer arrays.
  std::vector<std::string> args;
  std::vector<std::string> env;
  std::vector<std::string> exec_candidates;
  std::vector<char*> argv;
  std::vector<char*> envp;

  void seal() {
    argv.clear();
    for (auto& arg : args)
      argv.push_back(arg.data());
    argv.push_back(nullptr);
    envp.clear();
    for (auto& entry : env)
      envp.push_back(entry.data());
    envp.push_back(nullptr);
    for (auto* hooks : {&create_container_hooks, &start_container_hooks}) {
      for (auto& hook : *hooks) {
        hook.argv.clear();
        for (auto& arg : hook.args)
          hook.argv.push_back(arg.data());
        hook.argv.push_back(nullptr);
        hook.envp.clear();
        for (auto& entry : hook.env)
          hook.envp.push_back(entry.data());
        hook.envp.push_back(nullptr);
      }
    }
  }
};

}  // namespace pulsebox::oci::launch
