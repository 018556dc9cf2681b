// The supervisor's decisions as data (runtime::Watchdog): times go in,
// actions come out; no process and no clock. Then Monitor's loop with a
// variant of its own over an ordinary child (no privileges): which hooks it
// calls, and when. Last, what a finished process becomes in its result
// (runtime/result_mapping.h), from wait statuses and usage made up here;
// and which failed setup steps a memory limit can have caused.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "backends/native/memory_refusal.h"
#include "core/unique_fd.h"
#include "linux/syscalls.h"
#include "runtime/result_mapping.h"
#include "runtime/supervisor.h"
#include "runtime/sync_channel.h"

namespace pulsebox::runtime {
namespace {

using std::chrono::milliseconds;
using Action = Watchdog::Action;

// Any fixed point: the watchdog only compares and adds.
const Clock::time_point t0 = Clock::time_point{} + std::chrono::hours(1);

ResourcePolicy limits(double wall_seconds = 10, double grace_seconds = 1.5,
                      std::uint64_t max_output = 1000) {
  ResourcePolicy policy;
  policy.wall_time_seconds = wall_seconds;
  policy.termination_grace_seconds = grace_seconds;
  policy.max_output_bytes = max_output;
  return policy;
}

TEST(Watchdog, NothingBeforeTheDeadline) {
  Watchdog watchdog(limits(), t0);
  EXPECT_EQ(watchdog.on_time(t0), Action::None);
  EXPECT_EQ(watchdog.on_time(t0 + milliseconds(9999)), Action::None);
  EXPECT_FALSE(watchdog.outcome().timed_out);
  EXPECT_EQ(watchdog.outcome().reason, TerminationReason::None);
}

TEST(Watchdog, NoWallTimeLimitNeverComesDue) {
  Watchdog watchdog(limits(kNoWallTimeLimit), t0);
  EXPECT_EQ(watchdog.on_time(t0 + std::chrono::hours(24 * 365 * 50)), Action::None);
  EXPECT_FALSE(watchdog.outcome().timed_out);
  EXPECT_GT(watchdog.poll_timeout_ms(t0), 0);
}

TEST(Watchdog, DeadlineTerminatesThenTheGraceKills) {
  Watchdog watchdog(limits(10, 1.5), t0);
  EXPECT_EQ(watchdog.on_time(t0 + milliseconds(10000)), Action::Terminate);
  EXPECT_TRUE(watchdog.outcome().timed_out);
  EXPECT_EQ(watchdog.outcome().reason, TerminationReason::Timeout);
  // Once only.
  EXPECT_EQ(watchdog.on_time(t0 + milliseconds(10001)), Action::None);
  EXPECT_EQ(watchdog.on_time(t0 + milliseconds(11499)), Action::None);
  EXPECT_EQ(watchdog.on_time(t0 + milliseconds(11500)), Action::Kill);
  EXPECT_EQ(watchdog.on_time(t0 + milliseconds(11501)), Action::None);
  EXPECT_EQ(watchdog.on_time(t0 + milliseconds(20000)), Action::None);
}

TEST(Watchdog, TheGraceCountsFromWhenTheDeadlineWasSeen) {
  Watchdog watchdog(limits(10, 1.5), t0);
  // A late wake-up: the sandbox still gets its whole grace.
  EXPECT_EQ(watchdog.on_time(t0 + milliseconds(10300)), Action::Terminate);
  EXPECT_EQ(watchdog.on_time(t0 + milliseconds(11700)), Action::None);
  EXPECT_EQ(watchdog.on_time(t0 + milliseconds(11800)), Action::Kill);
}

TEST(Watchdog, OutputCapKeepsExactlyTheCapAndAsksToStop) {
  Watchdog watchdog(limits(10, 1.5, 1000), t0);
  auto kept = watchdog.take_output(600);
  EXPECT_EQ(kept.bytes, 600u);
  EXPECT_FALSE(kept.stop);
  EXPECT_FALSE(watchdog.outcome().truncated);
  kept = watchdog.take_output(400);  // exactly the cap is not past it
  EXPECT_EQ(kept.bytes, 400u);
  EXPECT_FALSE(kept.stop);
  EXPECT_FALSE(watchdog.outcome().truncated);
  kept = watchdog.take_output(1);
  EXPECT_EQ(kept.bytes, 0u);
  EXPECT_TRUE(kept.stop);
  EXPECT_TRUE(watchdog.outcome().truncated);
  EXPECT_EQ(watchdog.outcome().output_bytes, 1000u);
  // The stop it asks for.
  EXPECT_EQ(watchdog.stop(TerminationReason::OutputLimit, t0 + milliseconds(5)), Action::Terminate);
  EXPECT_EQ(watchdog.outcome().reason, TerminationReason::OutputLimit);
  EXPECT_EQ(watchdog.on_time(t0 + milliseconds(1505)), Action::Kill);
}

TEST(Watchdog, OneReadPastTheCapKeepsTheRestOfTheCap) {
  Watchdog watchdog(limits(10, 1.5, 1000), t0);
  EXPECT_EQ(watchdog.take_output(999).bytes, 999u);
  const auto kept = watchdog.take_output(65536);
  EXPECT_EQ(kept.bytes, 1u);
  EXPECT_TRUE(kept.stop);
  EXPECT_EQ(watchdog.outcome().output_bytes, 1000u);
}

TEST(Watchdog, ACancelTerminatesAndKillsAfterTheGrace) {
  Watchdog watchdog(limits(10, 1.5), t0);
  EXPECT_EQ(watchdog.stop(TerminationReason::Cancelled, t0 + milliseconds(2000)),
            Action::Terminate);
  EXPECT_EQ(watchdog.outcome().reason, TerminationReason::Cancelled);
  EXPECT_FALSE(watchdog.outcome().timed_out);
  EXPECT_EQ(watchdog.on_time(t0 + milliseconds(3499)), Action::None);
  EXPECT_EQ(watchdog.on_time(t0 + milliseconds(3500)), Action::Kill);
}

TEST(Watchdog, TheFirstReasonWins) {
  Watchdog watchdog(limits(10, 1.5), t0);
  EXPECT_EQ(watchdog.stop(TerminationReason::CpuTime, t0 + milliseconds(9000)), Action::Terminate);
  EXPECT_EQ(watchdog.stop(TerminationReason::Cancelled, t0 + milliseconds(9100)), Action::None);
  EXPECT_EQ(watchdog.stop(TerminationReason::OutputLimit, t0 + milliseconds(9200)), Action::None);
  // The deadline still says it was reached, but sends no second SIGTERM and
  // does not move the kill.
  EXPECT_EQ(watchdog.on_time(t0 + milliseconds(10000)), Action::None);
  EXPECT_TRUE(watchdog.outcome().timed_out);
  EXPECT_EQ(watchdog.outcome().reason, TerminationReason::CpuTime);
  EXPECT_EQ(watchdog.on_time(t0 + milliseconds(10500)), Action::Kill);
}

TEST(Watchdog, NothingIsStoppedOnceTheProcessHasEnded) {
  Watchdog watchdog(limits(10, 1.5, 1000), t0);
  watchdog.exited(t0 + milliseconds(100));
  EXPECT_TRUE(watchdog.has_exited());
  EXPECT_EQ(watchdog.stop(TerminationReason::Cancelled, t0 + milliseconds(150)), Action::None);
  EXPECT_EQ(watchdog.on_time(t0 + milliseconds(10000)), Action::None);
  EXPECT_FALSE(watchdog.outcome().timed_out);
  EXPECT_EQ(watchdog.outcome().reason, TerminationReason::None);
  // Output drained after the end still counts against the cap.
  EXPECT_EQ(watchdog.take_output(1200).bytes, 1000u);
  EXPECT_TRUE(watchdog.outcome().truncated);
  EXPECT_EQ(watchdog.outcome().reason, TerminationReason::None);
}

TEST(Watchdog, TheDrainEndsAfterItsTime) {
  Watchdog watchdog(limits(), t0);
  EXPECT_FALSE(watchdog.drain_over(t0 + milliseconds(20000)));  // still running
  watchdog.exited(t0 + milliseconds(100));
  EXPECT_FALSE(
      watchdog.drain_over(t0 + milliseconds(100) + Watchdog::kDrainTime - milliseconds(1)));
  EXPECT_TRUE(watchdog.drain_over(t0 + milliseconds(100) + Watchdog::kDrainTime));
}

TEST(Watchdog, LimitsAreCheckedEveryIntervalWhileTheProcessRuns) {
  Watchdog watchdog(limits(), t0, milliseconds(100));
  EXPECT_TRUE(watchdog.check_due(t0));
  EXPECT_FALSE(watchdog.check_due(t0 + milliseconds(50)));
  EXPECT_TRUE(watchdog.check_due(t0 + milliseconds(130)));
  // The next one is an interval after the last check, not on a fixed grid.
  EXPECT_FALSE(watchdog.check_due(t0 + milliseconds(229)));
  EXPECT_TRUE(watchdog.check_due(t0 + milliseconds(230)));
  watchdog.exited(t0 + milliseconds(300));
  EXPECT_FALSE(watchdog.check_due(t0 + milliseconds(400)));
}

TEST(Watchdog, WithoutAnIntervalLimitsAreNeverChecked) {
  Watchdog watchdog(limits(), t0);
  EXPECT_FALSE(watchdog.check_due(t0));
  EXPECT_FALSE(watchdog.check_due(t0 + milliseconds(5000)));
}

TEST(Watchdog, TheNextWakeUpIsTheNextThingDue) {
  Watchdog watchdog(limits(10, 1.5), t0, milliseconds(100));
  ASSERT_TRUE(watchdog.check_due(t0));
  EXPECT_EQ(watchdog.next_wake(), t0 + milliseconds(100));  // the next check
  Watchdog unchecked(limits(10, 1.5), t0);
  EXPECT_EQ(unchecked.next_wake(), t0 + milliseconds(10000));  // the deadline
  ASSERT_EQ(unchecked.stop(TerminationReason::Cancelled, t0 + milliseconds(1000)),
            Action::Terminate);
  EXPECT_EQ(unchecked.next_wake(), t0 + milliseconds(2500));  // the kill
  unchecked.exited(t0 + milliseconds(1200));
  EXPECT_EQ(unchecked.next_wake(), t0 + milliseconds(1200) + Watchdog::kDrainTime);
}

TEST(Watchdog, DuringTheGraceAfterATimeoutPollWaitsForTheKill) {
  Watchdog watchdog(limits(10, 0.5), t0);
  ASSERT_EQ(watchdog.on_time(t0 + milliseconds(10000)), Action::Terminate);
  // The deadline has passed: the next thing due is the kill, not a poll
  // every millisecond until then.
  EXPECT_EQ(watchdog.next_wake(), t0 + milliseconds(10500));
  EXPECT_EQ(watchdog.poll_timeout_ms(t0 + milliseconds(10000)), 501);
  EXPECT_EQ(watchdog.poll_timeout_ms(t0 + milliseconds(10200)), 301);
  ASSERT_EQ(watchdog.on_time(t0 + milliseconds(10500)), Action::Kill);
  // Nothing timed is left until the exit: the longest wait.
  EXPECT_EQ(watchdog.poll_timeout_ms(t0 + milliseconds(10500)), Watchdog::kLongestWait.count());
}

TEST(Watchdog, PollWaitsAreRoundedUpAndBounded) {
  Watchdog watchdog(limits(10, 1.5), t0);
  const auto deadline = t0 + milliseconds(10000);
  // Rounded up: poll() never returns just before the deadline.
  EXPECT_EQ(watchdog.poll_timeout_ms(deadline - std::chrono::microseconds(10300)), 11);
  EXPECT_EQ(watchdog.poll_timeout_ms(deadline - milliseconds(10)), 11);
  EXPECT_EQ(watchdog.poll_timeout_ms(deadline), 1);
  EXPECT_EQ(watchdog.poll_timeout_ms(deadline + milliseconds(5)), 1);
  // Never longer than a second, so that waitid() is asked again.
  EXPECT_EQ(watchdog.poll_timeout_ms(t0), Watchdog::kLongestWait.count());
}

// --- Monitor's loop, with a variant of the test's own ------------------------

// A child running `script` under sh, its output on pipes; reaped by the
// destructor.
class Child {
 public:
  explicit Child(const std::string& script) {
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) std::abort();
    pid_ = ::fork();
    if (pid_ < 0) std::abort();
    if (pid_ == 0) {
      ::dup2(out[1], 1);
      ::execl("/bin/sh", "sh", "-c", script.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(out[1]);
    out_.reset(out[0]);
    pidfd_.reset(linux_api::sys_pidfd_open(pid_));
  }
  ~Child() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }
  MonitoredFds fds() const {
    MonitoredFds fds;
    fds.exit_fd = pidfd_.get();
    fds.stdout_fd = out_.get();
    return fds;
  }

 private:
  pid_t pid_ = -1;
  core::UniqueFd out_, pidfd_;
};

class RecordingMonitor final : public Monitor {
 public:
  RecordingMonitor(pid_t pid, MonitoredFds fds, Clock::duration check_interval,
                   std::optional<TerminationReason> limit_reason = std::nullopt)
      : Monitor(pid, fds, check_interval), pid_(pid), limit_reason_(limit_reason) {}

  std::vector<int> signals;
  int exits = 0;
  int checks = 0;
  bool limit_reached = true;  // check_limits() gives its reason from now on

 private:
  void signal_sandbox(int signal) override {
    signals.push_back(signal);
    ::kill(pid_, signal);
  }
  void on_exit() override { ++exits; }
  std::optional<TerminationReason> check_limits() override {
    ++checks;
    return limit_reached ? limit_reason_ : std::nullopt;
  }

  pid_t pid_;
  std::optional<TerminationReason> limit_reason_;
};

TEST(Monitor, AProcessThatEndsByItselfIsNotSignalled) {
  Child child("echo hello");
  RecordingMonitor monitor(child.pid(), child.fds(), Clock::duration::zero());
  std::string output;
  const auto outcome = monitor.run(limits(10, 1.5, 1000), Clock::now(),
                                   [&](OutputStream, std::string_view bytes) { output += bytes; });
  EXPECT_EQ(output, "hello\n");
  EXPECT_EQ(outcome.reason, TerminationReason::None);
  EXPECT_EQ(outcome.output_bytes, 6u);
  EXPECT_TRUE(monitor.signals.empty());
  EXPECT_EQ(monitor.exits, 1);
  EXPECT_EQ(monitor.checks, 0);  // no interval: never
}

TEST(Monitor, AReasonFromCheckLimitsEndsItWithSigtermThenSigkill) {
  // It says when it ignores SIGTERM: the limit is reached only then.
  Child child("trap '' TERM; echo ready; exec sleep 10");
  RecordingMonitor monitor(child.pid(), child.fds(), milliseconds(10), TerminationReason::CpuTime);
  monitor.limit_reached = false;
  const auto start = Clock::now();
  const auto outcome =
      monitor.run(limits(10, 0.2, 1000), start,
                  [&](OutputStream, std::string_view) { monitor.limit_reached = true; });
  EXPECT_EQ(outcome.reason, TerminationReason::CpuTime);
  EXPECT_FALSE(outcome.timed_out);
  EXPECT_EQ(monitor.signals, (std::vector<int>{SIGTERM, SIGKILL}));
  EXPECT_EQ(monitor.exits, 1);
  EXPECT_GE(monitor.checks, 1);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
}

TEST(Monitor, TheOutputCapStopsItAndPassesOnExactlyTheCap) {
  Child child("head -c 200000 /dev/zero; exec sleep 10");
  RecordingMonitor monitor(child.pid(), child.fds(), Clock::duration::zero());
  std::size_t passed = 0;
  const auto outcome =
      monitor.run(limits(10, 0.2, 1000), Clock::now(),
                  [&](OutputStream, std::string_view bytes) { passed += bytes.size(); });
  EXPECT_EQ(passed, 1000u);
  EXPECT_TRUE(outcome.truncated);
  EXPECT_EQ(outcome.reason, TerminationReason::OutputLimit);
  ASSERT_FALSE(monitor.signals.empty());
  EXPECT_EQ(monitor.signals.front(), SIGTERM);
}

TEST(Monitor, ACancelDescriptorThatHangsUpCancels) {
  Child child("exec sleep 10");
  int cancel[2];
  ASSERT_EQ(::pipe2(cancel, O_CLOEXEC), 0);
  core::UniqueFd cancel_read(cancel[0]);
  ::close(cancel[1]);  // the client went away
  MonitoredFds fds = child.fds();
  fds.cancel_fd = cancel_read.get();
  RecordingMonitor monitor(child.pid(), fds, Clock::duration::zero());
  const auto outcome = monitor.run(limits(10, 0.2, 1000), Clock::now(), nullptr);
  EXPECT_EQ(outcome.reason, TerminationReason::Cancelled);
  ASSERT_FALSE(monitor.signals.empty());
  EXPECT_EQ(monitor.signals.front(), SIGTERM);
}

// --- what a finished process becomes in its result --------------------------

TEST(ResultMapping, AnExitGivesItsCode) {
  ProcessResult result;
  record_wait_status(result, W_EXITCODE(3, 0));
  EXPECT_EQ(result.exit_code, 3);
  EXPECT_EQ(result.signal, std::nullopt);
  EXPECT_EQ(result.termination_reason, TerminationReason::None);
}

TEST(ResultMapping, ASignalGivesItsNumberAndTheReason) {
  ProcessResult result;
  record_wait_status(result, W_EXITCODE(0, SIGKILL));
  EXPECT_EQ(result.exit_code, 128 + SIGKILL);
  EXPECT_EQ(result.signal, std::optional<int>(SIGKILL));
  EXPECT_EQ(result.termination_reason, TerminationReason::Signal);
}

TEST(ResultMapping, SigxcpuIsTheCpuTimeLimit) {
  ProcessResult result;
  record_wait_status(result, W_EXITCODE(0, SIGXCPU));
  EXPECT_EQ(result.exit_code, 128 + SIGXCPU);
  EXPECT_EQ(result.signal, std::optional<int>(SIGXCPU));
  EXPECT_EQ(result.termination_reason, TerminationReason::CpuTime);
}

TEST(ResultMapping, TheSupervisorsReasonStaysBeforeTheSignals) {
  ProcessResult result;
  SupervisionOutcome supervision;
  supervision.timed_out = true;
  supervision.reason = TerminationReason::Timeout;
  supervision.output_bytes = 42;
  record_supervision(result, supervision);
  record_wait_status(result, W_EXITCODE(0, SIGTERM));
  EXPECT_TRUE(result.timed_out);
  EXPECT_FALSE(result.truncated);
  EXPECT_EQ(result.termination_reason, TerminationReason::Timeout);
  EXPECT_EQ(result.signal, std::optional<int>(SIGTERM));
  EXPECT_EQ(result.exit_code, 128 + SIGTERM);
  EXPECT_EQ(result.metrics.output_bytes, 42u);
}

TEST(ResultMapping, TruncationIsRecorded) {
  ProcessResult result;
  SupervisionOutcome supervision;
  supervision.truncated = true;
  supervision.reason = TerminationReason::OutputLimit;
  supervision.output_bytes = 1000;
  record_supervision(result, supervision);
  EXPECT_TRUE(result.truncated);
  EXPECT_FALSE(result.timed_out);
  EXPECT_EQ(result.termination_reason, TerminationReason::OutputLimit);
  EXPECT_EQ(result.metrics.output_bytes, 1000u);
}

TEST(ResultMapping, RusageGivesCpuTimeAndPeakMemory) {
  rusage usage{};
  usage.ru_utime = {1, 600000};  // 1.6 s
  usage.ru_stime = {0, 700000};  // 0.7 s: the microseconds carry over
  usage.ru_maxrss = 2048;        // KiB
  ExecutionMetrics metrics;
  record_rusage(metrics, usage);
  EXPECT_DOUBLE_EQ(metrics.cpu_time_ms, 2300.0);
  EXPECT_EQ(metrics.peak_memory_bytes, 2u << 20);
}

TEST(ResultMapping, AMissingProgramIs127AndAnUnrunnableOne126) {
  ProcessResult missing;
  record_exec_failure(missing, "/no/such/program", ENOENT);
  EXPECT_EQ(missing.termination_reason, TerminationReason::LaunchError);
  EXPECT_EQ(missing.exit_code, 127);
  EXPECT_EQ(missing.termination_detail,
            "cannot execute /no/such/program: ENOENT (No such file or directory)");
  ProcessResult denied;
  record_exec_failure(denied, "./script", EACCES);
  EXPECT_EQ(denied.exit_code, 126);
  EXPECT_EQ(denied.termination_detail, "cannot execute ./script: EACCES (Permission denied)");
}

TEST(ResultMapping, ElapsedTimeIsTheDuration) {
  ProcessResult result;
  record_elapsed(result, t0, t0 + std::chrono::microseconds(1500250));
  EXPECT_DOUBLE_EQ(result.metrics.elapsed_ms, 1500.25);
  EXPECT_DOUBLE_EQ(result.duration_ms, 1500.25);
}

ChildMessage failed_step(const char* stage, int error_number) {
  return child_error(stage, "", error_number);
}

// Each step's own way of saying that the cgroup refused its memory, and
// the same errors where they mean something else.
TEST(MemoryRefusal, EachStepsWayOfSayingItHadNoMemory) {
  using backends::native::is_memory_refusal;
  EXPECT_TRUE(is_memory_refusal(failed_step("executing", ENOMEM)));
  EXPECT_TRUE(is_memory_refusal(failed_step("executing", E2BIG)));
  EXPECT_FALSE(is_memory_refusal(failed_step("executing", ENOSPC)));
  EXPECT_FALSE(is_memory_refusal(failed_step("executing", EINVAL)));
  EXPECT_TRUE(is_memory_refusal(failed_step("creating /dev", ENOSPC)));
  EXPECT_TRUE(is_memory_refusal(failed_step("cloning the command", ENOMEM)));
  EXPECT_TRUE(is_memory_refusal(failed_step("linking /dev/stdin", ENOBUFS)));
  // overlayfs's clone of a layer's mount says EINVAL for its allocation.
  EXPECT_TRUE(is_memory_refusal(failed_step("mounting overlay on /workspace", EINVAL)));
  EXPECT_FALSE(is_memory_refusal(failed_step("mounting tmpfs on /tmp", EINVAL)));
  EXPECT_FALSE(is_memory_refusal(failed_step("mounting overlay on /workspace", EPERM)));
  EXPECT_FALSE(is_memory_refusal(failed_step("pivot_root", EINVAL)));
}

}  // namespace
}  // namespace pulsebox::runtime
