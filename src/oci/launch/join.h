// The join path (design §1.2): a container that enters existing namespaces
// (`linux.namespaces[i].path`: podman's `--network ns:...`, a pod's shared
// namespaces) cannot be made by one clone3, since setns() into a pid
// namespace only moves the caller's future children. So a first stage, a
// fork-style child of create, setns()es each namespace in the kernel's
// order (user first, so that it holds the capabilities the others ask
// for), unshares a new pid namespace if asked, and clone3s the container's
// process into them (CLONE_PARENT: it is create's own child, like the fast
// path's; CLONE_INTO_CGROUP the unified leaf). The first stage writes the
// process's pid on a pipe and exits; the rest of create is unchanged.
//
//   PB_TRY(paths, open_namespace_paths(spec));   // before anything is made
//   inputs.namespace_fds[paths[i].index] = paths[i].fd.get();
//   ... build_container_plan fills plan.join_namespaces; spawn_container
//   takes the join path when it is not empty.
#pragma once

#include <cstddef>
#include <vector>

#include "core/result.h"
#include "core/unique_fd.h"
#include "oci/launch/container_plan.h"
#include "oci/spec/spec.h"

namespace pulsebox::oci::launch {

struct NamespacePath {
  core::UniqueFd fd;
  int type = 0;           // CLONE_NEWNET, ...
  std::size_t index = 0;  // linux.namespaces[index]
};

// Opens every linux.namespaces[i].path (close-on-exec) and checks with
// NS_GET_NSTYPE that it is a namespace of the type named beside it. A path
// that cannot be opened, is no namespace, or is one of another type is
// refused naming linux.namespaces[i].path.
core::Result<std::vector<NamespacePath>> open_namespace_paths(const spec::Spec& spec);

// Where a namespace type comes in the joining order (user, ipc, uts, net,
// pid, mnt, cgroup); -1 for anything else.
int join_rank(int type);

// What the first stage needs; everything is made by create before the
// clone (the stage allocates nothing).
struct JoinStart {
  const ContainerPlan* plan = nullptr;
  int channel = -1;
  int pid_pipe = -1;           // write end: the process's pid (an int) once cloned
  void* stack_base = nullptr;  // the container process's stack
  std::size_t stack_size = 0;
};

// exec's process (design §1.6), cloned by the first stage into a running
// container's namespaces and cgroup: undumpable from its first step (so
// nothing in the container can open /proc/<pid>/exe, the pulsebox binary,
// or its memory), only stdio, the channel, the console socket and the
// preserved fds kept; after Go: the console, rlimits, umask, the working
// directory (resolved in the container's root: no host directory is
// open by then), identity, capabilities and seccomp as at create; Ready,
// Detach, close_range and execve.
[[noreturn]] void run_exec_process(const ContainerPlan& plan, int channel) noexcept;

// The first stage: joins plan.join_namespaces (or the container of
// plan.join_pidfd), unshares the plan's new pid
// namespace, clones the container's process (run_container_init) and
// exits 0 once its pid is written. A failure goes on the channel as
// {stage, errno, detail} and the stage exits with kSetupFailed.
[[noreturn]] void run_join_stage(const JoinStart& start) noexcept;

}  // namespace pulsebox::oci::launch
