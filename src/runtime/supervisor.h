// Supervising a started sandbox (any backend): pumps stdout/stderr to the
// caller, enforces the wall-clock limit (SIGTERM, grace, SIGKILL), the output
// cap, a cancel and the backend's own limits, and returns once the process
// has exited and the output is drained. It does not reap: the caller collects
// the exit status and usage (runtime/result_mapping.h maps them).
//
// Two parts, as in sandbox2's MonitorBase and its variants:
//   Watchdog  the decisions as data: what to do at a time, how much output to
//             keep, when to wake up. No clock reads, no processes: unit tests
//             drive it with times of their own.
//   Monitor   the poll loop that acts on them. A backend derives its variant
//             and overrides the hooks (how to signal the sandbox, how to tell
//             it has ended, what to do with the watched descriptor, which
//             counters end it), then calls run() once.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>

#include "pulsebox/backend.h"

namespace pulsebox::runtime {

using Clock = std::chrono::steady_clock;

// How a supervised run ended, as far as the supervisor saw it.
struct SupervisionOutcome {
  bool timed_out = false;
  bool truncated = false;
  // The first reason a stop was asked for (None: the process ended by itself).
  TerminationReason reason = TerminationReason::None;
  std::uint64_t output_bytes = 0;  // kept, at most the cap
};

// The supervisor's decisions for one run. Call order, at every wake-up:
// on_time(now), then check_due(now) (and stop() with check_limits' reason),
// then drain_over(now) and poll_timeout_ms(now); take_output() for each read,
// stop() for a cancel, exited() once the process has ended.
class Watchdog {
 public:
  // What the monitor has to do to the sandbox.
  enum class Action {
    None,
    Terminate,  // SIGTERM to the whole sandbox
    Kill,       // SIGKILL to the whole sandbox
  };

  // How many bytes of a read to pass on; `stop`: the read went past the cap.
  struct KeptOutput {
    std::size_t bytes = 0;
    bool stop = false;
  };

  // After the exit, output is drained this long only: a straggler that
  // escaped the sandbox's kill could hold a pipe open.
  static constexpr Clock::duration kDrainTime = std::chrono::milliseconds(200);
  // The longest poll() wait, so that a process watched without an exit
  // descriptor (waitid) is seen to end.
  static constexpr std::chrono::milliseconds kLongestWait{1000};

  // `check_interval`: how often check_due() says yes while the process runs;
  // zero: never.
  Watchdog(const ResourcePolicy& limits, Clock::time_point start,
           Clock::duration check_interval = Clock::duration::zero());

  // The timers at `now`: Terminate at the deadline (reason Timeout; timed_out
  // is set even when another stop came first), Kill once the grace after the
  // first Terminate has passed. At most one action a call.
  Action on_time(Clock::time_point now);
  // Whether the backend's limits are due to be checked at `now` (then the
  // next check is one interval later).
  bool check_due(Clock::time_point now);
  // A stop for `reason` (a limit, a cancel, the output cap): Terminate the
  // first time while the process runs, None after (the first reason wins).
  Action stop(TerminationReason reason, Clock::time_point now);
  // Of `n` new bytes of output, how many to keep: up to the cap, counted;
  // going past it marks the outcome truncated and asks for a stop.
  KeptOutput take_output(std::size_t n);
  // The process has ended at `now`: no more stops, the drain begins.
  void exited(Clock::time_point now);
  bool has_exited() const { return exited_; }
  // Whether the drain after the exit is over at `now`.
  bool drain_over(Clock::time_point now) const { return exited_ && now >= drain_until_; }
  // When something is due next: the deadline (until it has passed), the
  // kill, the next check, or the end of the drain.
  Clock::time_point next_wake() const;
  // How long poll() may wait at `now` for next_wake(), in milliseconds: the
  // whole milliseconds left plus one, so that it never wakes just before;
  // at least one, at most kLongestWait.
  int poll_timeout_ms(Clock::time_point now) const;

  const SupervisionOutcome& outcome() const { return outcome_; }

 private:
  Clock::time_point deadline_;
  Clock::duration grace_;
  std::uint64_t max_output_bytes_;
  bool stop_at_output_limit_;
  Clock::duration check_interval_;
  Clock::time_point next_check_;
  std::optional<Clock::time_point> kill_at_;  // set by the first Terminate
  bool killed_ = false;
  bool exited_ = false;
  Clock::time_point drain_until_ = Clock::time_point::max();
  SupervisionOutcome outcome_;
};

// The descriptors a monitor watches, owned by the caller; -1 where there is
// none.
struct MonitoredFds {
  // Readable once the process may have ended: its pidfd, or a channel it
  // reports its end on (has_exited() then says). -1: the monitor asks
  // waitid(WNOWAIT) about the pid instead.
  int exit_fd = -1;
  int stdout_fd = -1;  // read ends of the output pipes
  int stderr_fd = -1;
  // An extra descriptor (the seccomp listener): on_watch() runs when it is
  // readable; it is dropped on hang-up.
  int watch_fd = -1;
  // Cancels the run (reason Cancelled) once readable or hung up: e.g. the
  // connection of a client that went away.
  int cancel_fd = -1;
};

using OutputSink = std::function<void(OutputStream, std::string_view)>;

// The poll loop. A variant overrides the hooks; run() calls them on this
// thread only.
class Monitor {
 public:
  virtual ~Monitor() = default;
  Monitor(const Monitor&) = delete;
  Monitor& operator=(const Monitor&) = delete;

  // Supervises the process from `start` (the wall-clock limit counts from
  // there) until it has exited and its output is drained.
  SupervisionOutcome run(const ResourcePolicy& limits, Clock::time_point start,
                         const OutputSink& on_output);

 protected:
  // `check_interval`: how often check_limits() runs while the process runs;
  // zero: never.
  Monitor(pid_t pid, MonitoredFds fds, Clock::duration check_interval = Clock::duration::zero())
      : pid_(pid), fds_(fds), check_interval_(check_interval) {}

  // exit_fd is readable: has the process ended? (By default readable means
  // it has, as for a pidfd.)
  virtual bool has_exited() { return true; }
  // Delivers a signal to the whole sandbox (SIGTERM, then SIGKILL).
  virtual void signal_sandbox(int signal) = 0;
  // Once, when the process has ended, before the output is drained.
  virtual void on_exit() {}
  // watch_fd is readable.
  virtual void on_watch() {}
  // Every check interval while the process runs: a reason ends the sandbox
  // as the deadline does (SIGTERM, grace, SIGKILL).
  virtual std::optional<TerminationReason> check_limits() { return std::nullopt; }

 private:
  void act(Watchdog::Action action);

  pid_t pid_;
  MonitoredFds fds_;
  Clock::duration check_interval_;
};

}  // namespace pulsebox::runtime
