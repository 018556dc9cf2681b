// The steps follow design §2.1 in order; every error reaches `create`
// because the fifo comes last. The process is a fork-style copy of create
// (no CLONE_VM): it owns its memory and its errno, but it still allocates
// nothing, since the copy of a multi-threaded parent may hold an allocator
// lock no thread will ever release.
#include "oci/launch/container_init.h"

#include <fcntl.h>
#include <linux/keyctl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <linux/sched.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>

#include "core/decimal_text.h"
#include "linux/caps.h"
#include "linux/rooted_mounts.h"
#include "linux/seccomp_filter.h"
#include "linux/syscalls.h"
#include "oci/launch/process_steps.h"
#include "runtime/child_steps.h"
#include "runtime/sync_channel.h"

namespace pulsebox::oci::launch {
namespace {

using linux_api::raw;
using runtime::exit_now;
using runtime::Failure;
using runtime::kSetupFailed;

PULSEBOX_CHILD_CODE void load_seccomp(const ContainerPlan& plan, const Failure& fail) noexcept {
  sock_fprog program{};
  program.len = static_cast<unsigned short>(plan.seccomp_program.size());
  program.filter = const_cast<sock_filter*>(plan.seccomp_program.data());
  if (const int e = linux_api::install_seccomp_filter(program, false, nullptr, plan.seccomp_flags);
      e != 0)
    fail("loading the seccomp filter", e);
}

// Blocks until `start` writes its byte. The process's own write end keeps
// the fifo from reporting end-of-file when a writer leaves without writing.
PULSEBOX_CHILD_CODE void wait_for_start_byte(const ContainerPlan& plan,
                                             const Failure& fail) noexcept {
  for (;;) {
    pollfd readable{plan.exec_fifo_fd, POLLIN, 0};
    const long ready = raw(SYS_ppoll, &readable, 1, nullptr, nullptr, 8);
    if (ready == -EINTR) continue;
    check(fail, "waiting on the exec fifo", ready);
    char byte = 0;
    const long n = raw(SYS_read, plan.exec_fifo_fd, &byte, 1);
    if (n == 1) return;
    if (n == 0 || n == -EAGAIN || n == -EINTR) continue;
    check(fail, "reading the exec fifo", n);
  }
}

// The console (design §2.5): bound on /dev/console too.
constexpr TerminalStages kConsoleStages{"starting a session for the console",
                                        "opening the console's pseudo-terminal",
                                        "naming the console's pseudo-terminal",
                                        "binding the console on /dev/console",
                                        "connecting the console to stdin, stdout and stderr",
                                        "sending the console to the console socket"};

// linux.sysctl: each value goes through the root's own proc mount. /proc is
// resolved in the root with no symlink at all and must be procfs, so a
// hostile image's /proc (a symlink to a host path, or a plain directory
// with nothing mounted on it) fails create instead of leading the write to
// another file. Below it no mount may be crossed: a config's bind mount
// inside /proc/sys (of another namespace's directory, or the host's) would
// take a key classified for one namespace to a file of another.
PULSEBOX_CHILD_CODE void write_sysctls(const ContainerPlan& plan, int root_fd,
                                       const Failure& fail) noexcept {
  constexpr char kProc[] = "proc/";  // plan_builder's prefix of every directory
  for (const auto& sysctl : plan.sysctls) {
    open_how how{};
    how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
    how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    const long proc = raw(SYS_openat2, root_fd, "proc", &how, sizeof how);
    check(fail, sysctl.stage.c_str(), proc,
          "(the root's /proc, which must be a proc mount and no symlink)");
    struct statfs filesystem {};
    const long stat_result = raw(SYS_fstatfs, proc, &filesystem);
    check(fail, sysctl.stage.c_str(), stat_result);
    if (filesystem.f_type != PROC_SUPER_MAGIC)
      fail(sysctl.stage.c_str(), EXDEV, "(the root's /proc is not a proc mount)");
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_XDEV | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    const long directory =
        raw(SYS_openat2, proc, sysctl.directory.c_str() + sizeof kProc - 1, &how, sizeof how);
    raw(SYS_close, proc);
    check(fail, sysctl.stage.c_str(), directory,
          "(its directory in the root's /proc, with no mount on the way)");
    how.flags = O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
    const long fd = raw(SYS_openat2, directory, sysctl.name.c_str(), &how, sizeof how);
    raw(SYS_close, directory);
    check(fail, sysctl.stage.c_str(), fd, "(no mount on the way)");
    const long written = raw(SYS_write, fd, sysctl.value.data(), sysctl.value.size());
    raw(SYS_close, fd);
    check(fail, sysctl.stage.c_str(), written, sysctl.value.c_str());
    if (static_cast<std::size_t>(written) != sysctl.value.size())
      fail(sysctl.stage.c_str(), EIO, sysctl.value.c_str());
  }
}

// Text built in a fixed buffer (the process allocates nothing).
struct Text {
  char data[128] = {};
  std::size_t size = 0;
  PULSEBOX_CHILD_CODE void add(const char* text, std::size_t length) noexcept {
    for (std::size_t i = 0; i < length && size + 1 < sizeof data; ++i)
      data[size++] = text[i];
    data[size] = '\0';
  }
  PULSEBOX_CHILD_CODE void add(const char* text) noexcept {
    std::size_t length = 0;
    while (text[length] != '\0')
      ++length;
    add(text, length);
  }
  PULSEBOX_CHILD_CODE void add_number(long value) noexcept {
    char digits[core::kMaxDecimalChars];
    add(digits, static_cast<std::size_t>(core::write_signed_decimal(value, digits)));
  }
};

// This process's pid as the host sees it, for the hooks' state: the link
// /proc/self of the host's procfs, which is still at /proc before
// pivot_root. Empty if it cannot be read as a number.
PULSEBOX_CHILD_CODE void read_host_pid(Text& pid) noexcept {
  char link[24] = {};
  const long n = raw(SYS_readlinkat, AT_FDCWD, "/proc/self", link, sizeof link - 1);
  for (long i = 0; i < n; ++i) {
    if (link[i] < '0' || link[i] > '9') return;
  }
  if (n > 0) pid.add(link, static_cast<std::size_t>(n));
}

PULSEBOX_CHILD_CODE long monotonic_ms() noexcept {
  timespec now{};
  raw(SYS_clock_gettime, CLOCK_MONOTONIC, &now);
  return now.tv_sec * 1000L + now.tv_nsec / 1000000L;
}

// Runs `hook` as a child of this process, in a process group of its own
// (killed whole at the timeout), with exactly its argv and envp, the state
// (`state` + `pid` + "}") on stdin through a socket (sent with
// MSG_NOSIGNAL: a hook that does not read cannot kill this process), and
// stdout and stderr into a pipe whose last bytes an error shows. Returns
// true when it exited 0; otherwise `why` says how it ended.
PULSEBOX_CHILD_CODE bool run_container_hook(const ContainerHook& hook, const std::string& state,
                                            const Text& pid, Text& why) noexcept {
  int input[2] = {-1, -1};
  int output[2] = {-1, -1};
  long result = raw(SYS_socketpair, AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, input);
  if (result >= 0) result = raw(SYS_pipe2, output, O_CLOEXEC);
  if (result < 0) {
    why.add("could not be started: no socket or pipe");
    return false;
  }
  int pidfd = -1;
  clone_args args{};
  args.flags = CLONE_PIDFD;
  args.pidfd = reinterpret_cast<std::uint64_t>(&pidfd);
  args.exit_signal = SIGCHLD;
  long child = raw(SYS_clone3, &args, sizeof args);
  // Engines' seccomp profiles (podman's, Docker's) make clone3 fail with
  // ENOSYS so that libc falls back to clone: so does this.
  if (child == -ENOSYS) child = raw(SYS_clone, CLONE_PIDFD | SIGCHLD, 0, &pidfd, nullptr, 0);
  if (child == 0) {
    raw(SYS_setpgid, 0, 0);
    raw(SYS_dup2, input[0], 0);
    raw(SYS_dup2, output[1], 1);
    raw(SYS_dup2, output[1], 2);
    raw(SYS_close_range, 3, ~0U, 0);
    const long e = raw(SYS_execve, hook.path.c_str(), hook.argv.data(), hook.envp.data());
    Text reason;
    reason.add("cannot execute it: errno ");
    reason.add_number(-e);
    raw(SYS_write, 2, reason.data, reason.size);
    exit_now(127);
  }
  raw(SYS_close, input[0]);
  raw(SYS_close, output[1]);
  if (child < 0) {
    raw(SYS_close, input[1]);
    raw(SYS_close, output[0]);
    why.add("could not be started: clone failed with errno ");
    why.add_number(-child);
    return false;
  }
  raw(SYS_fcntl, output[0], F_SETFL, O_NONBLOCK);
  const char closing = '}';
  const struct {
    const char* data;
    std::size_t size;
  } pieces[3] = {{state.data(), state.size()}, {pid.data, pid.size}, {&closing, 1}};
  int piece = 0;
  std::size_t sent = 0;  // of pieces[piece]
  char tail[96];
  std::size_t tail_size = 0;
  // Keeps the last bytes the hook wrote; false once nothing more is there.
  const auto read_output = [&]() noexcept {
    char buffer[256];
    const long n = raw(SYS_read, output[0], buffer, sizeof buffer);
    if (n <= 0 && n != -EAGAIN && n != -EINTR) {
      raw(SYS_close, output[0]);
      output[0] = -1;
    }
    for (long i = 0; i < n; ++i) {
      if (tail_size == sizeof tail) {
        for (std::size_t j = 1; j < sizeof tail; ++j)
          tail[j - 1] = tail[j];
        --tail_size;
      }
      tail[tail_size++] = buffer[i];
    }
    return n > 0;
  };
  bool timed_out = false;
  const long deadline = monotonic_ms() + hook.timeout_seconds * 1000L;
  for (;;) {
    const long left = deadline - monotonic_ms();
    if (left <= 0) {
      raw(SYS_kill, -child, SIGKILL);  // the hook and whatever it started
      timed_out = true;
      break;
    }
    pollfd fds[3] = {
        {pidfd, POLLIN, 0}, {output[0], POLLIN, 0}, {piece < 3 ? input[1] : -1, POLLOUT, 0}};
    timespec wait{left / 1000, (left % 1000) * 1000000L};
    const long ready = raw(SYS_ppoll, fds, 3, &wait, nullptr, 8);
    if (ready < 0 && ready != -EINTR) break;
    if (fds[1].revents != 0) read_output();
    if (fds[2].revents != 0) {
      const long n = raw(SYS_sendto, input[1], pieces[piece].data + sent, pieces[piece].size - sent,
                         MSG_NOSIGNAL | MSG_DONTWAIT, nullptr, 0);
      if (n > 0) sent += static_cast<std::size_t>(n);
      if (n < 0 && n != -EAGAIN && n != -EINTR) piece = 3;  // it stopped reading
      while (piece < 3 && sent == pieces[piece].size) {
        ++piece;
        sent = 0;
      }
      if (piece == 3) raw(SYS_shutdown, input[1], SHUT_WR);
    }
    if (fds[0].revents != 0) break;
  }
  // What it wrote just before it exited is still in the pipe: its last
  // words are the ones that explain a failure. Bounded, and never waiting
  // (a process it left behind may hold the pipe open).
  for (int reads = 0; !timed_out && output[0] >= 0 && reads < 256 && read_output(); ++reads) {
  }
  siginfo_t info{};
  while (raw(SYS_waitid, P_PIDFD, pidfd, &info, WEXITED, nullptr) == -EINTR) {
  }
  raw(SYS_close, pidfd);
  raw(SYS_close, input[1]);
  if (output[0] >= 0) raw(SYS_close, output[0]);
  if (!timed_out && info.si_code == CLD_EXITED && info.si_status == 0) return true;
  if (timed_out) {
    why.add("killed (with its process group) after its timeout of ");
    why.add_number(hook.timeout_seconds);
    why.add(" s");
  } else if (info.si_code == CLD_EXITED) {
    why.add("exited with status ");
    why.add_number(info.si_status);
  } else {
    why.add("killed by signal ");
    why.add_number(info.si_status);
  }
  while (tail_size > 0 && (tail[tail_size - 1] == '\n' || tail[tail_size - 1] == ' '))
    --tail_size;
  if (tail_size > 0) {
    why.add(": ");
    why.add(tail, tail_size);
  }
  return false;
}

PULSEBOX_CHILD_CODE bool joins_user_namespace(const ContainerPlan& plan) noexcept {
  if ((plan.join_pidfd_namespaces & CLONE_NEWUSER) != 0) return true;
  for (const auto& ns : plan.join_namespaces) {
    if (ns.type == CLONE_NEWUSER) return true;
  }
  return false;
}

// createContainer: a failure fails create through the channel.
PULSEBOX_CHILD_CODE void run_create_container_hooks(const ContainerPlan& plan, const Text& pid,
                                                    const Failure& fail) noexcept {
  for (const auto& hook : plan.create_container_hooks) {
    Text why;
    if (!run_container_hook(hook, plan.create_container_state, pid, why))
      fail(hook.stage.c_str(), 0, why.data);
  }
}

// startContainer: `start` waits for the program but cannot tell a hook's
// failure from a program that ended at once, so a failure is written on the
// process's stderr, where the engine reads the container's output, and the
// process exits without running the program.
PULSEBOX_CHILD_CODE void run_start_container_hooks(const ContainerPlan& plan,
                                                   const Text& pid) noexcept {
  for (const auto& hook : plan.start_container_hooks) {
    Text why;
    if (run_container_hook(hook, plan.start_container_state, pid, why)) continue;
    Text line;
    line.add("pulsebox oci: ");
    line.add(hook.stage.c_str());
    line.add(" ");
    line.add(why.data);
    line.add("\n");
    raw(SYS_write, 2, line.data, line.size);
    exit_now(kSetupFailed);
  }
}

}  // namespace

// Identity, capabilities and seccomp, in runc's order (design §2.2); the
// container's process and exec's (join.h) both end their setup with it.
PULSEBOX_CHILD_CODE void apply_identity(const ContainerPlan& plan, int channel) noexcept {
  const Failure fail{channel};
  // Without no_new_privs the filter needs CAP_SYS_ADMIN: loaded while held.
  const bool seccomp = !plan.seccomp_program.empty();
  if (seccomp && !plan.no_new_privileges) load_seccomp(plan, fail);
  if (const int e =
          linux_api::drop_bounding_except(plan.capabilities.bounding, plan.last_capability);
      e != 0) {
    fail("dropping the bounding capability set", e);
  }
  check(fail, "keeping capabilities across the id switch",
        raw(SYS_prctl, PR_SET_KEEPCAPS, 1, 0, 0, 0));
  if (plan.set_groups) {
    const long grouped =
        raw(SYS_setgroups, plan.additional_gids.size(), plan.additional_gids.data());
    // A joined user namespace may deny setgroups (an ordinary user's): the
    // groups it was made with then stay, as the kernel means them to.
    if (!(grouped == -EPERM && plan.additional_gids.empty() && joins_user_namespace(plan)))
      check(fail, "setting the additional groups", grouped);
  }
  if (const int e = linux_api::sys_setresgid(plan.gid); e != 0) fail("switching to the gid", e);
  if (const int e = linux_api::sys_setresuid(plan.uid); e != 0) fail("switching to the uid", e);
  if (const int e = linux_api::apply_process_capabilities(plan.capabilities, plan.last_capability);
      e != 0) {
    fail("setting the capability sets", e);
  }
  check(fail, "clearing keepcaps", raw(SYS_prctl, PR_SET_KEEPCAPS, 0, 0, 0, 0));
  // A change of ids clears the parent-death signal: armed again until Detach.
  raw(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  if (plan.no_new_privileges) {
    check(fail, "setting no_new_privs", raw(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0));
    if (seccomp) load_seccomp(plan, fail);
  }
}

[[noreturn]] PULSEBOX_CHILD_CODE void run_container_init(const ContainerPlan& plan,
                                                         int channel) noexcept {
  const Failure fail{channel};
  // 1. Die with create; nothing inherited.
  raw(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  runtime::reset_signals();
  connect_stdio(plan, fail);
  // The detached trees the mount steps attach stay open too (spawn checked
  // there are at most kMaxAttachFds).
  constexpr int kMaxKept = 4 + kMaxAttachFds + ContainerPlan::kMaxCgroupTaskFiles;
  static_assert(kMaxKept <= runtime::kMaxKeptFds);
  int keep[kMaxKept] = {channel, plan.exec_fifo_fd, plan.exec_fifo_writer_fd,
                        plan.console_socket_fd};
  int kept = 4;
  for (const auto& step : plan.mounts) {
    if (step.op == linux_api::MountOp::AttachFd && kept < 4 + kMaxAttachFds) keep[kept++] = step.fd;
  }
  kept = keep_cgroup_task_fds(plan, keep, kept);
  runtime::close_all_except(3U + static_cast<unsigned>(plan.preserved_fds), keep, kept);

  // 2. The parent has written the id maps (and v1 cgroups): the rest of
  // the namespaces, the cgroup namespace once the cgroups are joined.
  if (!runtime::wait_for_go(channel)) exit_now(kSetupFailed);  // create is gone
  join_cgroups(plan, fail);
  // While the process is still dumpable: an undumpable one's /proc files
  // belong to the host's root, which an ordinary user's container is not.
  if (plan.oom_score_adj)
    check(fail, "setting oom_score_adj", write_oom_score_adj(*plan.oom_score_adj));
  // Keeps /proc/<pid>/exe (the pulsebox binary) and /proc/<pid>/mem out of
  // reach of anything in the container until execve. Not before Go: an
  // ordinary user's create could not write the id maps of an undumpable
  // process (its /proc files belong to root then).
  raw(SYS_prctl, PR_SET_DUMPABLE, 0, 0, 0, 0);
  // In a new user namespace, its root (as runc): a root parent's ids are
  // not mapped there (0 -> 100000), and files an unmapped id creates on
  // the container's own mounts fail with EOVERFLOW.
  if ((plan.clone_namespaces & CLONE_NEWUSER) != 0) {
    if (const int e = linux_api::sys_setresgid(0); e != 0)
      fail("becoming the user namespace's root (gid 0 must be mapped)", e);
    if (const int e = linux_api::sys_setresuid(0); e != 0)
      fail("becoming the user namespace's root (uid 0 must be mapped)", e);
  }
  if (plan.unshare_namespaces != 0) {
    check(fail, "creating the mount, network, ipc and uts namespaces",
          raw(SYS_unshare, plan.unshare_namespaces));
  }
  if (plan.new_cgroup_namespace)
    check(fail, "creating the cgroup namespace", raw(SYS_unshare, CLONE_NEWCGROUP));
  if (plan.new_session_keyring) {
    check(fail, "joining a new session keyring",
          raw(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, nullptr));
  }

  // 3-4. Nothing below propagates back to the host; the root is a mount
  // of its own (pivot_root needs one), opened as root_fd.
  check(fail, "setting the propagation of /",
        raw(SYS_mount, nullptr, "/", nullptr, MS_SLAVE | MS_REC, nullptr));
  const long root_tree = raw(SYS_open_tree, AT_FDCWD, plan.rootfs.c_str(),
                             OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
  check(fail, "binding the root on itself", root_tree, plan.rootfs.c_str());
  check(fail, "binding the root on itself",
        raw(SYS_move_mount, root_tree, "", AT_FDCWD, plan.rootfs.c_str(), MOVE_MOUNT_F_EMPTY_PATH),
        plan.rootfs.c_str());
  raw(SYS_close, root_tree);
  const long root_fd =
      raw(SYS_openat, AT_FDCWD, plan.rootfs.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  check(fail, "opening the root", root_fd, plan.rootfs.c_str());

  // 5. Every step relative to root_fd (the image is hostile).
  for (const auto& step : plan.mounts) {
    if (const int e = linux_api::apply_rooted_mount_step(static_cast<int>(root_fd), step); e != 0)
      fail(step.stage.empty() ? "mounting" : step.stage.c_str(), e, step.target.c_str());
  }
  // After the mounts: the container's /proc exists and shows its namespaces.
  write_sysctls(plan, static_cast<int>(root_fd), fail);
  if (plan.pause_for_runtime_hooks) {
    if (runtime::send_child_ready(channel, -1) != 0) exit_now(kSetupFailed);
    if (!runtime::wait_for_go(channel)) exit_now(kSetupFailed);  // create is gone
  }
  // In the container's namespaces, before pivot_root: the hook's path is
  // still resolved in the runtime's view of the filesystem (as runc does).
  Text host_pid;
  if (!plan.create_container_hooks.empty() || !plan.start_container_hooks.empty())
    read_host_pid(host_pid);
  run_create_container_hooks(plan, host_pid, fail);

  // 6. The root becomes / and the old one is detached.
  check(fail, "entering the root", raw(SYS_fchdir, root_fd));
  check(fail, "pivot_root", raw(SYS_pivot_root, ".", "."));
  check(fail, "detaching the old root", raw(SYS_umount2, ".", MNT_DETACH));
  check(fail, "entering /", raw(SYS_chdir, "/"));
  // linux.rootfsPropagation on the container's own root only (runc applies
  // it after pivot_root too), never on the host's tree.
  if (plan.root_propagation != 0) {
    if (const int e = linux_api::set_propagation(root_fd, plan.root_propagation); e != 0)
      fail("setting linux.rootfsPropagation", e);
  }
  // Before root.readonly, which would forbid making /dev/console.
  if (plan.console_socket_fd >= 0)
    set_up_terminal(plan, kConsoleStages, static_cast<int>(root_fd), fail);

  // 7. maskedPaths, readonlyPaths, root.readonly (root_fd is / now).
  for (const auto& path : plan.masked_paths) {
    if (const int e = linux_api::mask_path_in_root(static_cast<int>(root_fd), path.c_str()); e != 0)
      fail("masking a path", e, path.c_str());
  }
  for (const auto& path : plan.readonly_paths) {
    if (const int e = linux_api::make_read_only_in_root(static_cast<int>(root_fd), path.c_str());
        e != 0) {
      fail("making a path read-only", e, path.c_str());
    }
  }
  if (plan.root_readonly) {
    mount_attr read_only{};
    read_only.attr_set = MOUNT_ATTR_RDONLY;
    check(fail, "making / read-only",
          raw(SYS_mount_setattr, root_fd, "", AT_EMPTY_PATH, &read_only, sizeof read_only));
  }
  raw(SYS_close, root_fd);

  // 8. The process's own settings.
  if (!plan.hostname.empty()) {
    check(fail, "setting the hostname",
          raw(SYS_sethostname, plan.hostname.c_str(), plan.hostname.size()));
  }
  if (!plan.domainname.empty()) {
    check(fail, "setting the domain name",
          raw(SYS_setdomainname, plan.domainname.c_str(), plan.domainname.size()));
  }
  set_rlimits(plan, fail);
  if (plan.personality)
    check(fail, "setting the personality", raw(SYS_personality, *plan.personality));
  if (plan.umask) raw(SYS_umask, *plan.umask);
  check(fail, "changing to the working directory", raw(SYS_chdir, plan.cwd.c_str()),
        plan.cwd.c_str());

  // 9. Identity, capabilities, seccomp, in runc's order (design §2.2).
  apply_identity(plan, channel);
  report_ready_and_detach(channel);

  // 10. Wait for `start`, then only stdio, preserved fds, the fifo's read
  // end and the channel (CLOEXEC, to report a failed execve) are left.
  if (plan.exec_fifo_fd >= 0) {
    wait_for_start_byte(plan, fail);
    // The read end stays open to execve (close-on-exec): start waits for
    // its last reader to go, so it returns once the program runs.
    raw(SYS_close, plan.exec_fifo_writer_fd);
  }
  run_start_container_hooks(plan, host_pid);
  // The planner searched PATH: each candidate in turn.
  exec_program(plan, channel);
}

}  // namespace pulsebox::oci::launch
