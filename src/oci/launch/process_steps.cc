#include "oci/launch/process_steps.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include <cerrno>
#include <cstdint>

#include "core/decimal_text.h"
#include "linux/pty.h"
#include "linux/rooted_mounts.h"
#include "linux/syscalls.h"
#include "runtime/sync_channel.h"

namespace pulsebox::oci::launch {

using linux_api::raw;

PULSEBOX_CHILD_CODE void connect_stdio(const ContainerPlan& plan,
                                       const runtime::Failure& fail) noexcept {
  for (int fd = 0; fd < 3; ++fd) {
    if (plan.stdio[fd] >= 0 && plan.stdio[fd] != fd)
      check(fail, "connecting stdin, stdout and stderr", raw(SYS_dup2, plan.stdio[fd], fd));
    else if (plan.stdio[fd] == fd)
      raw(SYS_fcntl, fd, F_SETFD, 0);
  }
}

PULSEBOX_CHILD_CODE long write_oom_score_adj(int value) noexcept {
  char text[core::kMaxDecimalChars];
  const int n = core::write_signed_decimal(value, text);
  const long fd = raw(SYS_openat, AT_FDCWD, "/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return fd;
  const long written = raw(SYS_write, fd, text, n);
  raw(SYS_close, fd);
  return written < 0 ? written : 0;
}

PULSEBOX_CHILD_CODE void set_up_terminal(const ContainerPlan& plan, const TerminalStages& stages,
                                         int console_root_fd,
                                         const runtime::Failure& fail) noexcept {
  check(fail, stages.session, raw(SYS_setsid));
  winsize size{};
  size.ws_row = plan.console_rows;
  size.ws_col = plan.console_columns;
  int master = -1;
  int slave = -1;
  if (const int e = linux_api::open_controlling_pty(size, &master, &slave); e != 0)
    fail(stages.opening, e);
  unsigned number = 0;
  check(fail, stages.naming, raw(SYS_ioctl, master, TIOCGPTN, &number));
  char name[32] = "/dev/pts/";
  const int n = 9 + core::write_decimal(number, name + 9);
  name[n] = '\0';
  if (console_root_fd >= 0) {
    if (const int e = linux_api::bind_fd_in_root(console_root_fd, slave, "/dev/console"); e != 0)
      fail(stages.binding, e, name);
  }
  for (int fd = 0; fd < 3; ++fd)
    check(fail, stages.connecting, raw(SYS_dup2, slave, fd));
  if (const int e = linux_api::send_console_master(plan.console_socket_fd, master, name); e != 0)
    fail(stages.sending, e);
  raw(SYS_close, master);
  raw(SYS_close, slave);
  raw(SYS_close, plan.console_socket_fd);
}

PULSEBOX_CHILD_CODE void join_cgroups(const ContainerPlan& plan,
                                      const runtime::Failure& fail) noexcept {
  for (int i = 0; i < plan.cgroup_task_fd_count; ++i) {
    const int tasks = plan.cgroup_task_fds[i];
    const long written = raw(SYS_write, tasks, "0", 1);
    if (written != 1)
      fail("joining the container's cgroups", written < 0 ? linux_api::raw_error(written) : EIO);
    raw(SYS_close, tasks);
  }
}

PULSEBOX_CHILD_CODE int keep_cgroup_task_fds(const ContainerPlan& plan, int* keep,
                                             int kept) noexcept {
  for (int i = 0; i < plan.cgroup_task_fd_count; ++i)
    keep[kept++] = plan.cgroup_task_fds[i];
  return kept;
}

PULSEBOX_CHILD_CODE void set_rlimits(const ContainerPlan& plan,
                                     const runtime::Failure& fail) noexcept {
  for (const auto& limit : plan.rlimits) {
    const std::uint64_t values[2] = {limit.soft, limit.hard};
    check(fail, "setting a resource limit", raw(SYS_prlimit64, 0, limit.resource, values, nullptr));
  }
}

PULSEBOX_CHILD_CODE void report_ready_and_detach(int channel) noexcept {
  if (runtime::send_child_ready(channel, -1) != 0) runtime::exit_now(runtime::kSetupFailed);
  // create is gone
  if (!runtime::wait_for_detach(channel)) runtime::exit_now(runtime::kSetupFailed);
  raw(SYS_prctl, PR_SET_PDEATHSIG, 0, 0, 0, 0);
  runtime::send_child_detached(channel);
}

[[noreturn]] PULSEBOX_CHILD_CODE void exec_program(const ContainerPlan& plan,
                                                   int channel) noexcept {
  const int keep_for_exec[] = {channel, plan.exec_fifo_fd};
  runtime::close_all_except(3U + static_cast<unsigned>(plan.preserved_fds), keep_for_exec, 2);
  if (plan.stop_before_exec) raw(SYS_kill, raw(SYS_getpid), SIGSTOP);
  int error_number = ENOENT;
  for (const auto& candidate : plan.exec_candidates) {
    const int e = linux_api::raw_error(
        raw(SYS_execve, candidate.c_str(), plan.argv.data(), plan.envp.data()));
    if (e != ENOENT && e != ENOTDIR) error_number = e;
    if (e != ENOENT && e != ENOTDIR && e != EACCES) break;
  }
  runtime::send_child_error(channel, runtime::kExecutingStage,
                            plan.args.empty() ? "" : plan.args[0].c_str(), error_number);
  runtime::exit_now(error_number == ENOENT ? 127 : 126);
}

}  // namespace pulsebox::oci::launch
