#include "oci/launch/join.h"

#include <fcntl.h>
#include <linux/nsfs.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#include <cerrno>
#include <cstring>
#include <iterator>
#include <string>

#include "linux/clone.h"
#include "linux/syscalls.h"
#include "oci/invalid_input.h"
#include "oci/launch/container_init.h"
#include "oci/launch/process_steps.h"
#include "runtime/child_steps.h"

namespace pulsebox::oci::launch {
namespace {

constexpr int kJoinOrder[] = {CLONE_NEWUSER, CLONE_NEWIPC, CLONE_NEWUTS,   CLONE_NEWNET,
                              CLONE_NEWPID,  CLONE_NEWNS,  CLONE_NEWCGROUP};

const char* type_name(int type) {
  switch (type) {
    case CLONE_NEWUSER:
      return "user";
    case CLONE_NEWIPC:
      return "ipc";
    case CLONE_NEWUTS:
      return "uts";
    case CLONE_NEWNET:
      return "network";
    case CLONE_NEWPID:
      return "pid";
    case CLONE_NEWNS:
      return "mount";
    case CLONE_NEWCGROUP:
      return "cgroup";
    case CLONE_NEWTIME:
      return "time";
    default:
      return "unknown";
  }
}

const char* article(int type) {
  return type == CLONE_NEWIPC || type == CLONE_NEWUTS ? "an" : "a";
}

struct ProcessStart {
  const ContainerPlan* plan;
  int channel;
};

PULSEBOX_CHILD_CODE int start_process(void* argument) {
  const auto* start = static_cast<const ProcessStart*>(argument);
  if (start->plan->join_pidfd >= 0) run_exec_process(*start->plan, start->channel);
  run_container_init(*start->plan, start->channel);
}

}  // namespace

int join_rank(int type) {
  for (int i = 0; i < static_cast<int>(std::size(kJoinOrder)); ++i) {
    if (kJoinOrder[i] == type) return i;
  }
  return -1;
}

core::Result<std::vector<NamespacePath>> open_namespace_paths(const spec::Spec& spec) {
  std::vector<NamespacePath> paths;
  for (std::size_t i = 0; i < spec.linux.namespaces.size(); ++i) {
    const auto& ns = spec.linux.namespaces[i];
    if (ns.path.empty()) continue;
    const std::string where =
        "config.json: linux.namespaces[" + std::to_string(i) + "].path \"" + ns.path + "\"";
    // /proc/<pid>/ns/* are links the kernel resolves itself: followed.
    core::UniqueFd fd(::open(ns.path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
    if (!fd) return core::Error::from_errno("oci", where + ": opening the namespace");
    const int type = ::ioctl(fd.get(), NS_GET_NSTYPE);
    if (type < 0) {
      return oci::invalid(where + ": not a namespace (" + std::string(std::strerror(errno)) +
                          "); give a /proc/<pid>/ns/<type> file or a bind mount of one");
    }
    if (type != ns.clone_flag) {
      return oci::invalid(where + ": " + article(type) + " " + type_name(type) +
                          " namespace, not a " + type_name(ns.clone_flag) +
                          " one; give a path of the named type");
    }
    paths.push_back({std::move(fd), type, i});
  }
  return paths;
}

[[noreturn]] PULSEBOX_CHILD_CODE void run_join_stage(const JoinStart& start) noexcept {
  using linux_api::raw;
  const runtime::Failure fail{start.channel};
  const ContainerPlan& plan = *start.plan;
  raw(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  // Inside the joined namespaces nothing may ptrace this copy of create or
  // open its /proc/<pid>/exe (the pulsebox binary).
  raw(SYS_prctl, PR_SET_DUMPABLE, 0, 0, 0, 0);
  for (const auto& ns : plan.join_namespaces) {
    const long joined = raw(SYS_setns, ns.fd, ns.type);
    if (joined < 0) fail("joining a namespace", linux_api::raw_error(joined), type_name(ns.type));
  }
  // exec: every namespace of the container at once, through the pidfd
  // create's record verified (never a reused pid).
  if (plan.join_pidfd >= 0) {
    const long joined = raw(SYS_setns, plan.join_pidfd, plan.join_pidfd_namespaces);
    if (joined < 0) fail("joining the container's namespaces", linux_api::raw_error(joined));
  }
  // A new pid namespace holds this stage's children, not the stage itself.
  if ((plan.clone_namespaces & CLONE_NEWPID) != 0) {
    const long made = raw(SYS_unshare, CLONE_NEWPID);
    if (made < 0) fail("creating the pid namespace", linux_api::raw_error(made));
  }
  ProcessStart process{&plan, start.channel};
  clone_args args{};
  // CLONE_PARENT: create's child, as on the fast path (create reaps or
  // hands it to its subreaper, and the pid stays create's until then).
  args.flags = CLONE_PARENT;
  if (plan.cgroup_fd >= 0) {
    args.flags |= CLONE_INTO_CGROUP;
    args.cgroup = static_cast<std::uint64_t>(plan.cgroup_fd);
  }
  // exit_signal stays 0: with CLONE_PARENT the kernel takes this stage's
  // (SIGCHLD) and refuses any other.
  args.stack = reinterpret_cast<std::uint64_t>(start.stack_base);
  args.stack_size = start.stack_size;
  const long pid = linux_api::clone3_on_stack(&args, start_process, &process);
  if (pid < 0) fail("cloning the container's process", linux_api::raw_error(pid));
  const int value = static_cast<int>(pid);
  if (raw(SYS_write, start.pid_pipe, &value, sizeof value) != sizeof value) {
    raw(SYS_kill, pid, SIGKILL);
    fail("passing on the container's pid", EPIPE);
  }
  runtime::exit_now(0);
}

[[noreturn]] PULSEBOX_CHILD_CODE void run_exec_process(const ContainerPlan& plan,
                                                       int channel) noexcept {
  using linux_api::raw;
  const runtime::Failure fail{channel};
  // Before anything else: undumpable (the first stage was too; this says
  // it again for this process), dies with exec, nothing inherited.
  raw(SYS_prctl, PR_SET_DUMPABLE, 0, 0, 0, 0);
  raw(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  runtime::reset_signals();
  connect_stdio(plan, fail);
  // The pidfd, the cgroup directory and the namespace descriptors go here:
  // no host directory is open when the working directory is resolved.
  int keep[2 + ContainerPlan::kMaxCgroupTaskFiles] = {channel, plan.console_socket_fd};
  const int kept = keep_cgroup_task_fds(plan, keep, 2);
  runtime::close_all_except(3U + static_cast<unsigned>(plan.preserved_fds), keep, kept);
  if (!runtime::wait_for_go(channel)) runtime::exit_now(runtime::kSetupFailed);
  join_cgroups(plan, fail);

  // exec's terminal: a pty of the container's devpts (its /dev/ptmx, now
  // that the mount namespace is the container's).
  if (plan.console_socket_fd >= 0) {
    const TerminalStages stages{"starting a session for the terminal",
                                "opening the terminal in the container",
                                "naming the terminal",
                                "",
                                "connecting the terminal to stdin, stdout and stderr",
                                "sending the terminal to the console socket"};
    set_up_terminal(plan, stages, -1, fail);
  }
  if (plan.oom_score_adj)
    check(fail, "setting oom_score_adj", write_oom_score_adj(*plan.oom_score_adj));
  set_rlimits(plan, fail);
  if (plan.umask) raw(SYS_umask, *plan.umask);
  // setns(CLONE_NEWNS) made the container's root this process's root and
  // cwd: the path resolves there, never on the host.
  check(fail, "changing to the working directory", raw(SYS_chdir, plan.cwd.c_str()),
        plan.cwd.c_str());
  apply_identity(plan, channel);
  report_ready_and_detach(channel);
  exec_program(plan, channel);
}

}  // namespace pulsebox::oci::launch
