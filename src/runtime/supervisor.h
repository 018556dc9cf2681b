// Supervising a started sandbox (any backend): pumps stdout/stderr to the
// caller, enforces the wall-clock limit (SIGTERM, grace, SIGKILL) and the
// output cap, and returns once the process has exited and the output is
// drained. It does not reap: the caller collects the exit status and usage.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>

#include "pulsebox/backend.h"

namespace pulsebox::runtime {

using Clock = std::chrono::steady_clock;

struct SupervisedProcess {
  pid_t pid = -1;
  // Readable once the process may have ended: its pidfd, or a channel it
  // reports its end on. -1: poll `pid` with waitid(WNOWAIT) instead.
  int exit_fd = -1;
  // Called when exit_fd is readable: has the process ended? (None: readable
  // means it has, as for a pidfd.)
  std::function<bool()> has_exited;
  int stdout_fd = -1;  // read ends, owned by the caller
  int stderr_fd = -1;
  // Delivers a signal to the whole sandbox (SIGTERM, then SIGKILL).
  std::function<void(int)> signal_sandbox;
  // Called once when the process has exited, before the output is drained.
  std::function<void()> on_exit;
  // An extra descriptor to watch (the seccomp listener): `on_watch` runs
  // when it is readable; it is dropped on hang-up.
  int watch_fd = -1;
  std::function<void()> on_watch;
  // Cancels the run (reason "cancelled") once readable or hung up: e.g. the
  // connection of a client that went away. -1: none.
  int cancel_fd = -1;
  // Called every `poll_interval` while the process runs (cgroup counters):
  // a reason ends the sandbox like the deadline does (SIGTERM, grace, SIGKILL).
  std::function<std::optional<TerminationReason>()> check_limits;
  std::chrono::milliseconds poll_interval{0};
};

struct SupervisionOutcome {
  bool timed_out = false;
  bool truncated = false;
  TerminationReason reason = TerminationReason::None;
  std::uint64_t output_bytes = 0;
};

SupervisionOutcome supervise(const SupervisedProcess& process, const ResourcePolicy& limits,
                             Clock::time_point start,
                             const std::function<void(OutputStream, std::string_view)>& on_output);

}  // namespace pulsebox::runtime
