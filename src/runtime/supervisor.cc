#include "runtime/supervisor.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>

namespace pulsebox::runtime {

namespace {

Clock::duration seconds(double value) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(value));
}

// No wall-clock limit (or one beyond a century) never comes due; converting
// infinity to a clock duration would be undefined.
Clock::time_point deadline_after(Clock::time_point start, double wall_seconds) {
  constexpr double kCentury = 100.0 * 365 * 24 * 3600;
  if (!(wall_seconds < kCentury)) return Clock::time_point::max();
  return start + seconds(wall_seconds);
}

}  // namespace

Watchdog::Watchdog(const ResourcePolicy& limits, Clock::time_point start,
                   Clock::duration check_interval)
    : deadline_(deadline_after(start, limits.wall_time_seconds)),
      grace_(seconds(limits.termination_grace_seconds)),
      max_output_bytes_(limits.max_output_bytes),
      stop_at_output_limit_(limits.stop_at_output_limit),
      check_interval_(check_interval),
      next_check_(start) {}

Watchdog::Action Watchdog::on_time(Clock::time_point now) {
  if (!exited_ && now >= deadline_ && !outcome_.timed_out) {
    outcome_.timed_out = true;
    if (stop(TerminationReason::Timeout, now) == Action::Terminate) return Action::Terminate;
  }
  if (kill_at_ && !killed_ && now >= *kill_at_) {
    killed_ = true;
    return Action::Kill;
  }
  return Action::None;
}

bool Watchdog::check_due(Clock::time_point now) {
  if (exited_ || check_interval_ == Clock::duration::zero() || now < next_check_) return false;
  next_check_ = now + check_interval_;
  return true;
}

Watchdog::Action Watchdog::stop(TerminationReason reason, Clock::time_point now) {
  if (kill_at_ || exited_) return Action::None;
  outcome_.reason = reason;
  kill_at_ = now + grace_;
  return Action::Terminate;
}

Watchdog::KeptOutput Watchdog::take_output(std::size_t n) {
  KeptOutput kept{n, false};
  if (outcome_.output_bytes + n > max_output_bytes_) {
    kept = {static_cast<std::size_t>(max_output_bytes_ - outcome_.output_bytes),
            stop_at_output_limit_};
    outcome_.truncated = true;
  }
  outcome_.output_bytes += kept.bytes;
  return kept;
}

void Watchdog::exited(Clock::time_point now) {
  exited_ = true;
  drain_until_ = now + kDrainTime;
}

Clock::time_point Watchdog::next_wake() const {
  // A deadline already seen is not due again: waking for it would poll
  // without waiting until the kill.
  Clock::time_point wake = exited_              ? drain_until_
                           : outcome_.timed_out ? Clock::time_point::max()
                                                : deadline_;
  if (kill_at_ && !killed_ && *kill_at_ < wake) wake = *kill_at_;
  if (!exited_ && check_interval_ != Clock::duration::zero() && next_check_ < wake) {
    wake = next_check_;
  }
  return wake;
}

int Watchdog::poll_timeout_ms(Clock::time_point now) const {
  const long wait_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(next_wake() - now).count();
  return static_cast<int>(std::clamp<long>(wait_ms + 1, 1, kLongestWait.count()));
}

void Monitor::act(Watchdog::Action action) {
  if (action == Watchdog::Action::Terminate) signal_sandbox(SIGTERM);
  if (action == Watchdog::Action::Kill) signal_sandbox(SIGKILL);
}

SupervisionOutcome Monitor::run(const ResourcePolicy& limits, Clock::time_point start,
                                const OutputSink& on_output) {
  Watchdog watchdog(limits, start, check_interval_);
  std::array<pollfd, 5> fds = {{{fds_.stdout_fd, POLLIN, 0},
                                {fds_.stderr_fd, POLLIN, 0},
                                {fds_.exit_fd, POLLIN, 0},
                                {fds_.watch_fd, POLLIN, 0},
                                {fds_.cancel_fd, POLLIN | POLLRDHUP, 0}}};
  pollfd& exit = fds[2];
  pollfd& watch = fds[3];
  pollfd& cancel = fds[4];
  while (fds[0].fd >= 0 || fds[1].fd >= 0 || !watchdog.has_exited()) {
    const auto now = Clock::now();
    act(watchdog.on_time(now));
    if (watchdog.check_due(now)) {
      if (const auto reason = check_limits()) act(watchdog.stop(*reason, Clock::now()));
    }
    if (watchdog.drain_over(now)) break;
    if (::poll(fds.data(), fds.size(), watchdog.poll_timeout_ms(now)) < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buffer[65536];
      const ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
      if (n <= 0) {
        fds[i].fd = -1;
        continue;
      }
      const Watchdog::KeptOutput kept = watchdog.take_output(static_cast<std::size_t>(n));
      if (kept.stop) act(watchdog.stop(TerminationReason::OutputLimit, Clock::now()));
      if (kept.bytes > 0 && on_output) {
        on_output(i == 0 ? OutputStream::Stdout : OutputStream::Stderr, {buffer, kept.bytes});
      }
    }
    if (watch.fd >= 0 && watch.revents != 0) {
      if ((watch.revents & POLLIN) != 0) on_watch();
      if ((watch.revents & (POLLHUP | POLLERR | POLLNVAL)) != 0) watch.fd = -1;
    }
    if (cancel.fd >= 0 && cancel.revents != 0) {
      cancel.fd = -1;
      act(watchdog.stop(TerminationReason::Cancelled, Clock::now()));
    }
    bool ended = exit.fd >= 0 && exit.revents != 0 && has_exited();
    if (fds_.exit_fd < 0 && !watchdog.has_exited()) {
      siginfo_t info{};
      ended = ::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
              info.si_pid == pid_;
    }
    if (!watchdog.has_exited() && ended) {
      exit.fd = -1;
      on_exit();
      watchdog.exited(Clock::now());
    }
  }
  return watchdog.outcome();
}

}  // namespace pulsebox::runtime
