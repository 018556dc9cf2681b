#include "runtime/supervisor.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <vector>

namespace pulsebox::runtime {

SupervisionOutcome supervise(const SupervisedProcess& process, const ResourcePolicy& limits,
                             Clock::time_point start,
                             const std::function<void(OutputStream, std::string_view)>& on_output) {
  SupervisionOutcome outcome;
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(limits.wall_time_seconds));
  const auto grace = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(limits.termination_grace_seconds));
  std::optional<Clock::time_point> kill_at;
  bool killed = false;
  bool exited = false;
  auto terminate = [&](TerminationReason reason) {
    if (kill_at || exited) return;
    outcome.reason = reason;
    process.signal_sandbox(SIGTERM);
    kill_at = Clock::now() + grace;
  };

  std::vector<pollfd> fds = {{process.stdout_fd, POLLIN, 0},
                             {process.stderr_fd, POLLIN, 0},
                             {process.exit_fd, POLLIN, 0},
                             {process.watch_fd, POLLIN, 0},
                             {process.cancel_fd, POLLIN | POLLRDHUP, 0}};
  // A straggler that escaped the sandbox's kill could hold a pipe open: after
  // the exit, output is drained for a moment only.
  Clock::time_point drain_until = Clock::time_point::max();
  Clock::time_point next_check = start;
  while (fds[0].fd >= 0 || fds[1].fd >= 0 || !exited) {
    const auto now = Clock::now();
    if (!exited && now >= deadline && !outcome.timed_out) {
      outcome.timed_out = true;
      terminate(TerminationReason::Timeout);
    }
    if (!exited && process.check_limits && now >= next_check) {
      next_check = now + process.poll_interval;
      if (const auto reason = process.check_limits()) terminate(*reason);
    }
    if (kill_at && !killed && now >= *kill_at) {
      process.signal_sandbox(SIGKILL);
      killed = true;
    }
    if (now >= drain_until) break;
    Clock::time_point wake = exited ? drain_until : deadline;
    if (kill_at && !killed && *kill_at < wake) wake = *kill_at;
    if (outcome.timed_out && !kill_at) wake = now + std::chrono::milliseconds(50);
    if (!exited && process.check_limits && next_check < wake) wake = next_check;
    const long wait_ms = std::chrono::duration_cast<std::chrono::milliseconds>(wake - now).count();
    const int timeout_ms = static_cast<int>(std::clamp<long>(wait_ms + 1, 1, 1000));
    if (::poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buffer[65536];
      const ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
      if (n <= 0) {
        fds[i].fd = -1;
        continue;
      }
      std::size_t keep = static_cast<std::size_t>(n);
      if (outcome.output_bytes + keep > limits.max_output_bytes) {
        keep = static_cast<std::size_t>(limits.max_output_bytes - outcome.output_bytes);
        outcome.truncated = true;
        terminate(TerminationReason::OutputLimit);
      }
      outcome.output_bytes += keep;
      if (keep > 0 && on_output) {
        on_output(i == 0 ? OutputStream::Stdout : OutputStream::Stderr, {buffer, keep});
      }
    }
    if (fds[3].fd >= 0 && fds[3].revents != 0) {
      if ((fds[3].revents & POLLIN) != 0 && process.on_watch) process.on_watch();
      if ((fds[3].revents & (POLLHUP | POLLERR | POLLNVAL)) != 0) fds[3].fd = -1;
    }
    if (fds[4].fd >= 0 && fds[4].revents != 0) {
      fds[4].fd = -1;
      terminate(TerminationReason::Cancelled);
    }
    bool child_done =
        fds[2].fd >= 0 && fds[2].revents != 0 && (!process.has_exited || process.has_exited());
    if (process.exit_fd < 0 && !exited) {
      siginfo_t info{};
      child_done = ::waitid(P_PID, static_cast<id_t>(process.pid), &info,
                            WEXITED | WNOHANG | WNOWAIT) == 0 &&
                   info.si_pid == process.pid;
    }
    if (!exited && child_done) {
      exited = true;
      fds[2].fd = -1;
      if (process.on_exit) process.on_exit();
      drain_until = Clock::now() + std::chrono::milliseconds(200);
    }
  }
  return outcome;
}

}  // namespace pulsebox::runtime
