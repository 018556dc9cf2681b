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
#include "linux/pty.h"
#include "linux/syscalls.h"
#include "oci/launch/container_init.h"
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

PULSEBOX_CHILD_CODE void check(const runtime::Failure& fail, const char* stage, long result,
                               const char* detail = "") noexcept {
  if (result < 0) fail(stage, linux_api::raw_error(result), detail);
}

// exec's terminal: a pty of the container's devpts (its /dev/ptmx, now that
// the mount namespace is the container's), the controlling terminal and
// fds 0-2, its master sent on the console socket.
PULSEBOX_CHILD_CODE void exec_console(const ContainerPlan& plan,
                                      const runtime::Failure& fail) noexcept {
  using linux_api::raw;
  check(fail, "starting a session for the terminal", raw(SYS_setsid));
  winsize size{};
  size.ws_row = plan.console_rows;
  size.ws_col = plan.console_columns;
  int master = -1;
  int slave = -1;
  if (const int e = linux_api::open_controlling_pty(size, &master, &slave); e != 0)
    fail("opening the terminal in the container", e);
  unsigned number = 0;
  check(fail, "naming the terminal", raw(SYS_ioctl, master, TIOCGPTN, &number));
  char name[32] = "/dev/pts/";
  char digits[12];
  int count = 0;
  do {
    digits[count++] = static_cast<char>('0' + number % 10);
    number /= 10;
  } while (number != 0);
  int n = 9;
  while (count > 0)
    name[n++] = digits[--count];
  name[n] = '\0';
  for (int fd = 0; fd < 3; ++fd)
    check(fail, "connecting the terminal to stdin, stdout and stderr", raw(SYS_dup2, slave, fd));
  if (const int e = linux_api::send_console_master(plan.console_socket_fd, master, name); e != 0)
    fail("sending the terminal to the console socket", e);
  raw(SYS_close, master);
  raw(SYS_close, slave);
  raw(SYS_close, plan.console_socket_fd);
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
      return core::Error(core::ErrorKind::kInvalidInput, "oci",
                         where + ": not a namespace (" + std::string(std::strerror(errno)) +
                             "); give a /proc/<pid>/ns/<type> file or a bind mount of one");
    }
    if (type != ns.clone_flag) {
      return core::Error(core::ErrorKind::kInvalidInput, "oci",
                         where + ": " + article(type) + " " + type_name(type) +
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
  for (int fd = 0; fd < 3; ++fd) {
    if (plan.stdio[fd] >= 0 && plan.stdio[fd] != fd)
      check(fail, "connecting stdin, stdout and stderr", raw(SYS_dup2, plan.stdio[fd], fd));
    else if (plan.stdio[fd] == fd)
      raw(SYS_fcntl, fd, F_SETFD, 0);
  }
  // The pidfd, the cgroup directory and the namespace descriptors go here:
  // no host directory is open when the working directory is resolved.
  const int keep[] = {channel, plan.console_socket_fd};
  runtime::close_all_except(3U + static_cast<unsigned>(plan.preserved_fds), keep, 2);
  if (!runtime::wait_for_go(channel)) runtime::exit_now(runtime::kSetupFailed);

  if (plan.console_socket_fd >= 0) exec_console(plan, fail);
  if (plan.oom_score_adj) {
    char text[16];
    int n = 0;
    int value = *plan.oom_score_adj;
    unsigned magnitude =
        value < 0 ? 0U - static_cast<unsigned>(value) : static_cast<unsigned>(value);
    char digits[12];
    int count = 0;
    do {
      digits[count++] = static_cast<char>('0' + magnitude % 10);
      magnitude /= 10;
    } while (magnitude != 0);
    if (value < 0) text[n++] = '-';
    while (count > 0)
      text[n++] = digits[--count];
    const long fd = raw(SYS_openat, AT_FDCWD, "/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
    check(fail, "setting oom_score_adj", fd);
    check(fail, "setting oom_score_adj", raw(SYS_write, fd, text, n));
    raw(SYS_close, fd);
  }
  for (const auto& limit : plan.rlimits) {
    const std::uint64_t values[2] = {limit.soft, limit.hard};
    check(fail, "setting a resource limit", raw(SYS_prlimit64, 0, limit.resource, values, nullptr));
  }
  if (plan.umask) raw(SYS_umask, *plan.umask);
  // setns(CLONE_NEWNS) made the container's root this process's root and
  // cwd: the path resolves there, never on the host.
  check(fail, "changing to the working directory", raw(SYS_chdir, plan.cwd.c_str()),
        plan.cwd.c_str());
  apply_identity(plan, channel);
  if (runtime::send_child_ready(channel, -1) != 0) runtime::exit_now(runtime::kSetupFailed);
  if (!runtime::wait_for_detach(channel)) runtime::exit_now(runtime::kSetupFailed);
  raw(SYS_prctl, PR_SET_PDEATHSIG, 0, 0, 0, 0);
  runtime::send_child_detached(channel);

  const int keep_for_exec[] = {channel};
  runtime::close_all_except(3U + static_cast<unsigned>(plan.preserved_fds), keep_for_exec, 1);
  if (plan.stop_before_exec) raw(SYS_kill, raw(SYS_getpid), SIGSTOP);
  int error_number = ENOENT;
  for (const auto& candidate : plan.exec_candidates) {
    const int e = linux_api::raw_error(
        raw(SYS_execve, candidate.c_str(), plan.argv.data(), plan.envp.data()));
    if (e != ENOENT && e != ENOTDIR) error_number = e;
    if (e != ENOENT && e != ENOTDIR && e != EACCES) break;
  }
  runtime::send_child_error(channel, "executing", plan.args.empty() ? "" : plan.args[0].c_str(),
                            error_number);
  runtime::exit_now(error_number == ENOENT ? 127 : 126);
}

}  // namespace pulsebox::oci::launch
