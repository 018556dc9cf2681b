// The child side of a launch: one flat, ordered list of system calls. No
// allocation, no exceptions, no logging: a failure is sent to the supervisor
// as data and the process exits.
//
// init and the command share the supervisor's memory (CLONE_VM, see
// linux/clone.h): every system call is raw (errno is a supervisor thread's),
// and nothing but their own stacks is written.
#include "runtime/child.h"

#include <fcntl.h>
#include <linux/netlink.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "linux/clone.h"
#include "linux/loopback.h"
#include "linux/netns_sockets.h"
#include "linux/pty.h"
#include "linux/seccomp_filter.h"
#include "linux/syscalls.h"
#include "runtime/child_steps.h"
#include "runtime/sync_channel.h"

namespace pulsebox::runtime {
namespace {

using linux_api::kKernelSigsetBytes;
using linux_api::raw;
using linux_api::raw_error;

constexpr std::uint64_t signal_bit(int signal) {
  return std::uint64_t{1} << (signal - 1);
}

PULSEBOX_CHILD_CODE void mark(const LaunchPlan& plan, const char* label) noexcept {
  if (plan.trace != nullptr) plan.trace->mark(label);
}

// Drops the supplementary groups (where the plan says so), then takes `gid`
// and `uid`; the stages name each step in an error.
PULSEBOX_CHILD_CODE void switch_ids(const LaunchPlan& plan, uid_t uid, gid_t gid,
                                    const char* gid_stage, const char* uid_stage,
                                    const Failure& fail) noexcept {
  if (plan.clear_groups) {
    if (const int e = linux_api::sys_clear_groups(); e != 0)
      fail("dropping supplementary groups", e);
  }
  if (const int e = linux_api::sys_setresgid(gid); e != 0) fail(gid_stage, e);
  if (const int e = linux_api::sys_setresuid(uid); e != 0) fail(uid_stage, e);
}

[[noreturn]] PULSEBOX_CHILD_CODE void run_command(const LaunchPlan& plan, int channel, int out,
                                                  int err) noexcept {
  const Failure fail{channel};
  mark(plan, "command: started");
  switch_ids(plan, plan.command_uid, plan.command_gid, "switching to the sandbox gid",
             "switching to the sandbox uid", fail);
  if (const int e = linux_api::clear_process_capabilities(); e != 0)
    fail("dropping capabilities", e);
  if (const int e = raw_error(raw(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)); e != 0)
    fail("setting no_new_privs", e);
  if (const long sid = raw(SYS_setsid); sid < 0) fail("starting a new session", raw_error(sid));
  // Without a passed stdin, /dev/null (it lands on 0: init left it free).
  long in = plan.passed_stdin_fd;
  if (plan.terminal) {
    // -t: the terminal is the command's own, in the sandbox's devpts; the
    // supervisor gets the master and relays it.
    int master = -1, slave = -1;
    if (const int e = linux_api::open_controlling_pty(plan.window, &master, &slave); e != 0)
      fail("opening a pseudo-terminal", e);
    if (const int e = send_child_terminal(channel, master); e != 0)
      fail("handing over the pseudo-terminal", e);
    raw(SYS_close, master);
    in = out = err = slave;
  }
  if (in < 0) in = raw(SYS_openat, AT_FDCWD, "/dev/null", O_RDONLY);
  if (in < 0) fail("opening /dev/null", raw_error(in));
  // A descriptor already in place keeps its CLOEXEC through dup2: cleared
  // instead (the pty's slave may have landed on 0-2, init left them free).
  for (const auto& [from, to] : {std::pair<long, int>{in, 0}, {out, 1}, {err, 2}}) {
    const long rc = from == to ? raw(SYS_fcntl, to, F_SETFD, 0) : raw(SYS_dup2, from, to);
    if (rc < 0) fail("connecting stdin, stdout and stderr", raw_error(rc));
  }
  if (const int e = raw_error(raw(SYS_chdir, plan.cwd.c_str())); e != 0)
    fail("changing to the working directory", e, plan.cwd.c_str());
  const int keep[] = {channel};
  close_all_except(3, keep, 1);
  // init blocks SIGCHLD and SIGTERM to wait for them; the mask survives execve.
  const std::uint64_t none = 0;
  raw(SYS_rt_sigprocmask, SIG_SETMASK, &none, nullptr, kKernelSigsetBytes);
  mark(plan, "command: ids, capabilities, fds set");
  int listener = -1;
  if (plan.load_seccomp) {
    if (const int e = linux_api::install_seccomp_filter(plan.seccomp_program, plan.seccomp_listener,
                                                        &listener);
        e != 0) {
      fail("loading the seccomp filter", e);
    }
  }
  mark(plan, "command: seccomp filter loaded");
  // Under the filter now: the profile must allow sendmsg, close and execve.
  if (send_child_ready(channel, listener) != 0) exit_now(kSetupFailed);
  if (listener >= 0) raw(SYS_close, listener);

  // PATH was searched in the parent: try each candidate, keep the most
  // telling error (as execvp does: EACCES beats ENOENT).
  int error_number = ENOENT;
  for (const auto& candidate : plan.exec_candidates) {
    const int e = raw_error(raw(SYS_execve, candidate.c_str(), plan.argv.data(), plan.envp.data()));
    if (e != ENOENT && e != ENOTDIR) error_number = e;
    if (e != ENOENT && e != ENOTDIR && e != EACCES) break;
  }
  if (plan.exec_error != nullptr) *plan.exec_error = error_number;
  send_child_error(channel, kExecutingStage, plan.argv[0], error_number);
  exit_now(error_number == ENOENT ? 127 : 126);
}

// Sockets of the sandbox's network namespace for the supervisor
// (LaunchPlan::network_handover): made here, while init still holds its
// capabilities in the namespace's user namespace (netlink checks the
// opener's), and closed once sent.
PULSEBOX_CHILD_CODE void hand_over_network(const LaunchPlan& plan, const Failure& fail) noexcept {
  using Handover = LaunchPlan::NetworkHandover;
  if (plan.network_handover == Handover::None) return;
  int sockets[2] = {-1, -1};
  int count = 0;
  if (plan.network_handover == Handover::ProxyListener) {
    const long listener = linux_api::open_loopback_listener(plan.proxy_port);
    if (listener < 0)
      fail("listening on the sandbox's 127.0.0.1 for the proxy", raw_error(listener));
    sockets[count++] = static_cast<int>(listener);
  } else {
    for (const int protocol : {NETLINK_ROUTE, NETLINK_NETFILTER}) {
      const long fd = linux_api::open_netlink_socket(protocol);
      if (fd < 0) fail("opening a netlink socket in the sandbox's namespace", raw_error(fd));
      sockets[count++] = static_cast<int>(fd);
    }
  }
  if (const int e = send_child_network(plan.channel_fd, sockets, count); e != 0)
    fail("handing the network namespace's sockets over", e);
  for (int i = 0; i < count; ++i)
    raw(SYS_close, sockets[i]);
}

struct CommandStart {
  const LaunchPlan* plan;
  int channel;
};

PULSEBOX_CHILD_CODE int start_command(void* argument) {
  const auto* start = static_cast<const CommandStart*>(argument);
  run_command(*start->plan, start->channel, start->plan->stdout_fd, start->plan->stderr_fd);
}

}  // namespace

PULSEBOX_CHILD_CODE void run_sandbox_init(const LaunchPlan& plan) noexcept {
  const int channel = plan.channel_fd;
  const Failure fail{channel};
  mark(plan, "init: started");
  // If the supervisor dies, the sandbox dies with it (init's death kills the
  // whole pid namespace).
  raw(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  reset_signals();
  // The namespaces clone3 did not make, while the supervisor writes the id
  // maps and the base mount steps (creating a namespace needs capabilities
  // in the user namespace, not mapped ids). On a hybrid host this is before
  // the v1 cgroups are joined, so their kernel memory is not counted there.
  if (const std::uint64_t rest = plan.namespaces & ~LaunchPlan::kNamespacesAtClone; rest != 0) {
    if (const int e = raw_error(raw(SYS_unshare, rest)); e != 0)
      fail("creating the mount, network, ipc and uts namespaces", e);
  }
  mark(plan, "init: namespaces made");
  const int keep[] = {channel, plan.stdout_fd, plan.stderr_fd};
  close_all_except(0, keep, 3);
  int task_files[kMaxGoFds];
  if (!wait_for_go(channel, task_files)) exit_now(kSetupFailed);  // the supervisor is gone
  mark(plan, "init: go");
  // init moves itself into the v1 cgroups whose `tasks` files came with Go
  // (the files' opener, the supervisor, is who the kernel checks); nothing
  // runs before it.
  for (const int tasks : task_files) {
    if (tasks < 0) continue;
    const long written = raw(SYS_write, tasks, "0", 1);
    if (written != 1) fail("joining the sandbox's cgroups", written < 0 ? raw_error(written) : EIO);
    raw(SYS_close, tasks);
  }
  mark(plan, "init: in its cgroups");
  if (plan.new_cgroup_namespace) {
    if (const int e = raw_error(raw(SYS_unshare, CLONE_NEWCGROUP)); e != 0)
      fail("creating the cgroup namespace", e);
  }

  switch_ids(plan, plan.init_uid, plan.init_gid, "switching to the namespace's gid",
             "switching to the namespace's uid", fail);
  // A change of effective ids clears the parent-death signal (as root the
  // switch maps init to other host ids): armed again, or a killed supervisor
  // would leave the sandbox running. A supervisor gone in between is seen
  // at the next message init waits for (end of file: init exits).
  raw(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);

  // Mount propagation stops here: nothing below reaches the host.
  if (const int e = raw_error(raw(SYS_mount, nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr));
      e != 0) {
    fail("making the mount namespace private", e);
  }
  for (const auto& step : plan.base_mounts) {
    if (const int e = linux_api::apply_mount_step(step); e != 0) fail(step.stage.c_str(), e);
  }
  // Neither do the hostname, lo and the capability bounding set (which
  // limits what an execve could gain, not what init mounts with).
  if (!plan.hostname.empty()) {
    if (const int e = raw_error(raw(SYS_sethostname, plan.hostname.c_str(), plan.hostname.size()));
        e != 0) {
      fail("setting the hostname", e);
    }
  }
  if (plan.bring_up_loopback) {
    if (const int e = linux_api::bring_loopback_up(); e != 0) fail("bringing up lo", e);
  }
  hand_over_network(plan, fail);
  // init is not made undumpable (PR_SET_DUMPABLE is a property of the memory
  // it shares with the supervisor). Nothing in the sandbox can ptrace it or
  // read its memory anyway: that needs init's capabilities in its user
  // namespace, or CAP_SYS_PTRACE there, and the command has neither.
  if (const int e = linux_api::drop_bounding_and_ambient(plan.capabilities); e != 0)
    fail("dropping the bounding and ambient capability sets", e);
  mark(plan, "init: base mounts made, hostname, lo, bounding set");
  // Meanwhile the supervisor wrote the rest of the plan (staging, workspace).
  // The descriptors PlanReady carries, in order, go to their planned numbers
  // (above every descriptor init kept; received ones take the lowest free).
  int passed[kMaxPassedFds];
  if (!wait_for_plan_ready(channel, passed)) exit_now(kSetupFailed);  // the supervisor is gone
  mark(plan, "init: plan ready");
  const int planned[kMaxPassedFds] = {plan.passed_tree_fd, plan.passed_home_fd,
                                      plan.passed_stdin_fd};
  int slot = 0;
  for (const int received : passed) {
    if (received < 0) continue;
    while (slot < kMaxPassedFds && planned[slot] < 0)
      ++slot;
    if (slot == kMaxPassedFds) fail("receiving the workspace", EBADF);
    if (received != planned[slot]) {
      if (const long rc = raw(SYS_dup3, received, planned[slot], O_CLOEXEC); rc < 0)
        fail("receiving the workspace", raw_error(rc));
      raw(SYS_close, received);
    }
    ++slot;
  }
  for (const auto& step : plan.mounts) {
    if (const int e = linux_api::apply_mount_step(step); e != 0) fail(step.stage.c_str(), e);
  }
  if (!plan.send_changes_root.empty()) {
    const long changes = raw(SYS_openat, AT_FDCWD, plan.send_changes_root.c_str(),
                             O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (changes < 0) fail("opening the tmpfs for the run's changes", raw_error(changes));
    if (const int e = send_child_changes(channel, static_cast<int>(changes)); e != 0)
      fail("handing over the tmpfs for the run's changes", e);
    raw(SYS_close, changes);
  }
  mark(plan, "init: mounts made");
  // pivot_root(".", ".") stacks the old root under the new one; detaching it
  // leaves only the new root (runc's approach, no put_old directory needed).
  if (const int e = raw_error(raw(SYS_chdir, plan.new_root.c_str())); e != 0)
    fail("entering the new root", e);
  if (const int e = raw_error(raw(SYS_pivot_root, ".", ".")); e != 0) fail("pivot_root", e);
  if (const int e = raw_error(raw(SYS_umount2, ".", MNT_DETACH)); e != 0)
    fail("detaching the old root", e);
  if (const int e = raw_error(raw(SYS_chdir, "/")); e != 0) fail("entering /", e);
  mark(plan, "init: pivot_root, old root detached");
  mount_attr read_only{};
  read_only.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
  if (const int e =
          raw_error(raw(SYS_mount_setattr, AT_FDCWD, "/", 0, &read_only, sizeof read_only));
      e != 0) {
    fail("making / read-only", e);
  }
  for (const auto& [resource, limit] : plan.rlimits) {
    if (const int e = raw_error(raw(SYS_prlimit64, 0, resource, &limit, nullptr)); e != 0)
      fail("setting a resource limit", e);
  }
  mark(plan, "init: set up, waiting for start");
  // The supervisor made its last checks and audit records while this
  // process set up the workspace; the command starts only after them.
  if (!wait_for_start(channel)) exit_now(kSetupFailed);  // refused, or the supervisor is gone
  mark(plan, "init: start");
  // init waits for SIGCHLD and SIGTERM (blocked, taken with sigtimedwait: no
  // handler, which would need a signal trampoline of its own).
  const std::uint64_t waited = signal_bit(SIGCHLD) | signal_bit(SIGTERM);
  raw(SYS_rt_sigprocmask, SIG_BLOCK, &waited, nullptr, kKernelSigsetBytes);

  // The command shares init's memory (the supervisor's) until its execve,
  // and init is suspended meanwhile (CLONE_VFORK, as posix_spawn does).
  CommandStart start{&plan, channel};
  const long command = linux_api::clone_on_stack(
      CLONE_VM | CLONE_VFORK | SIGCHLD, plan.command_stack.top(), nullptr, start_command, &start);
  if (command < 0) fail("creating the command process", raw_error(command));
  mark(plan, "init: resumed (the command called execve)");

  // init: hold no output pipe (EOF then means the command's tree is done),
  // forward SIGTERM to everything inside, reap everything, and when the
  // command has exited end the rest and report the command's status.
  raw(SYS_close, plan.stdout_fd);
  raw(SYS_close, plan.stderr_fd);
  // Nor stdin: a writer then sees EPIPE once the command's tree is done.
  if (plan.passed_stdin_fd >= 0) raw(SYS_close, plan.passed_stdin_fd);
  for (;;) {
    siginfo_t info{};
    const long signal = raw(SYS_rt_sigtimedwait, &waited, &info, nullptr, kKernelSigsetBytes);
    if (signal == SIGTERM) raw(SYS_kill, -1, SIGTERM);
    for (;;) {
      int status = 0;
      const long pid = raw(SYS_wait4, -1, &status, WNOHANG, nullptr);
      if (pid == command) {
        mark(plan, "init: the command exited");
        // Everything else in the namespace goes before the report, so that
        // once the supervisor has it no process of the sandbox can write to
        // the workspace or hold its output open: it reads the result and the
        // changes while the kernel still tears this init's namespaces down.
        raw(SYS_kill, -1, SIGKILL);
        for (long reaped = 0; reaped >= 0 || reaped == -EINTR;)
          reaped = raw(SYS_wait4, -1, nullptr, __WALL, nullptr);
        mark(plan, "init: the sandbox's other processes reaped");
        send_child_exited(channel, status);
        exit_now(0);
      }
      if (pid == -ECHILD) exit_now(kSetupFailed);  // cannot happen before the command is reaped
      if (pid <= 0) break;
    }
  }
}

void LaunchPlan::seal() {
  argv.clear();
  for (auto& arg : argv_storage)
    argv.push_back(arg.data());
  argv.push_back(nullptr);
  envp.clear();
  for (auto& entry : env_storage)
    envp.push_back(entry.data());
  envp.push_back(nullptr);
}

}  // namespace pulsebox::runtime
