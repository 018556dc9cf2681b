// A native run from Start to init's report (NativeHost::start_and_supervise):
// the command's Ready, supervision by NativeMonitor, the final measures, and
// why the run ended.
#include <linux/seccomp.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <optional>

#include "backends/native/host.h"
#include "backends/native/memory_refusal.h"
#include "backends/native/staging.h"
#include "core/trace.h"
#include "linux/pty.h"
#include "linux/syscalls.h"
#include "runtime/child_steps.h"
#include "runtime/result_mapping.h"
#include "runtime/supervisor.h"
#include "runtime/sync_channel.h"
#include "seccomp/profile.h"

namespace pulsebox::backends::native {

using core::UniqueFd;

namespace {

// How often the supervisor reads the sandbox's CPU time for --cpu-time.
constexpr auto kCgroupPollInterval = std::chrono::milliseconds(100);

// What the command said up to its execve: Ready hands over the seccomp
// listener; anything else (a setup error, init's report) is kept for later.
// init's Changes, before it, hands over the run's tmpfs for its changes.
struct CommandStart {
  UniqueFd listener;
  UniqueFd changes_root;
  UniqueFd terminal;  // -t: the pseudo-terminal's master (the command's Terminal)
  std::vector<runtime::ChildMessage> messages;
  bool ready = false;  // Ready came: the command reached its execve
};

CommandStart wait_for_exec(int channel, const ResourcePolicy& limits) {
  CommandStart started;
  // Bounded to what poll takes; infinity (no wall-clock limit) is undefined to cast.
  const auto wall = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::duration<double>(std::min(limits.wall_time_seconds, 2e6)));
  for (;;) {
    int passed = -1;
    auto message = runtime::receive_message(
        channel, static_cast<int>(std::max<long>(wall.count(), 1)), &passed);
    if (message && message->kind == runtime::ChildMessageKind::Changes && !started.changes_root) {
      started.changes_root.reset(passed);
      continue;
    }
    if (message && message->kind == runtime::ChildMessageKind::Terminal && !started.terminal) {
      started.terminal.reset(passed);
      continue;
    }
    if (message && message->kind == runtime::ChildMessageKind::Ready) {
      started.listener.reset(passed);
      started.ready = true;
    } else if (passed >= 0) {
      ::close(passed);
    }
    if (message && message->kind != runtime::ChildMessageKind::Ready)
      started.messages.push_back(*message);
    return started;
  }
}

// The native variant: the sandbox is init's pid namespace and cgroup. The
// run ends with init's report (the command's status, every other process
// already reaped) or, if init dies first, the channel's end; init's own exit,
// the namespaces' teardown, is not waited for here.
class NativeMonitor final : public runtime::Monitor {
 public:
  // `terminal`: -t's master (-1: none), kept open by the caller.
  NativeMonitor(SandboxRun& run, const ExecutionRequest& request, CommandStart started,
                int terminal)
      : Monitor(run.sandbox.pid, descriptors(run, request, started.listener.get(), terminal),
                check_interval(run, request.limits)),
        run_(run),
        limits_(request.limits),
        listener_(std::move(started.listener)),
        messages_(std::move(started.messages)),
        command_ready_(started.ready) {
    for (const auto& message : messages_) {
      if (message.kind == runtime::ChildMessageKind::Exited) command_status_ = message.wait_status;
    }
  }

  // After run(): init's report of the command's wait status, if it sent one.
  std::optional<int> command_status() const { return command_status_; }
  // The command said Ready, the last thing it does before its execve.
  bool command_ready() const { return command_ready_; }
  // After run(): the syscall a kill action of the profile stopped.
  const std::optional<std::string>& forbidden_syscall() const { return forbidden_syscall_; }
  // After run(): the most processes seen at once, where the kernel keeps no
  // peak.
  std::uint64_t sampled_processes() const { return sampled_processes_; }
  // After run(): the first error the sandbox reported (a setup step, or the
  // execve), reading what is left in the channel.
  std::optional<runtime::ChildMessage> first_error() {
    for (const auto& message : runtime::drain_messages(run_.sandbox.channel.get()))
      messages_.push_back(message);
    for (const auto& message : messages_) {
      if (message.kind == runtime::ChildMessageKind::Error) return message;
    }
    return std::nullopt;
  }

 private:
  // With -t the command's output is the terminal's (its pipes end at once).
  static runtime::MonitoredFds descriptors(const SandboxRun& run, const ExecutionRequest& request,
                                           int listener, int terminal) {
    runtime::MonitoredFds fds;
    fds.exit_fd = run.sandbox.channel.get();
    fds.stdout_fd = terminal >= 0 ? terminal : run.out_read.get();
    fds.stderr_fd = run.err_read.get();
    fds.watch_fd = listener;
    fds.cancel_fd = request.cancel_fd;
    return fds;
  }

  // The cgroup is read while the sandbox runs only when something needs it:
  // CPU time against --cpu-time, the process count where the kernel keeps no
  // peak (before Linux 6.1).
  static runtime::Clock::duration check_interval(const SandboxRun& run,
                                                 const ResourcePolicy& limits) {
    const bool needed = run.cgroup && (limits.cpu_time_seconds ||
                                       (run.settings.pids_max && !run.cgroup->keeps_pids_peak()));
    return needed ? kCgroupPollInterval : runtime::Clock::duration::zero();
  }

  bool has_exited() override {
    if (command_status_ || init_gone_) return true;
    int passed = -1;
    auto message = runtime::receive_message(run_.sandbox.channel.get(), 0, &passed);
    if (passed >= 0) ::close(passed);
    if (!message) {
      init_gone_ = true;  // EOF (a message is never partial)
      return true;
    }
    messages_.push_back(*message);
    if (message->kind == runtime::ChildMessageKind::Exited) command_status_ = message->wait_status;
    return command_status_.has_value();
  }

  // SIGTERM reaches init, which forwards it to everything inside; SIGKILL
  // of init kills the whole pid namespace.
  void signal_sandbox(int signal) override {
    linux_api::sys_pidfd_send_signal(run_.sandbox.pidfd.get(), signal);
    if (signal == SIGKILL && run_.cgroup) run_.cgroup->kill();
  }

  // A kill action of the profile: learn the syscall, end the sandbox before
  // the call runs (the caller stays blocked in the kernel until then).
  void on_watch() override {
    seccomp_notif notification{};
    if (::ioctl(listener_.get(), SECCOMP_IOCTL_NOTIF_RECV, &notification) != 0) return;
    if (!forbidden_syscall_) {
      forbidden_syscall_ = seccomp::syscall_name(notification.data.arch, notification.data.nr);
    }
    linux_api::sys_pidfd_send_signal(run_.sandbox.pidfd.get(), SIGKILL);
  }

  std::optional<TerminationReason> check_limits() override {
    const linux_api::CgroupUsage usage = run_.cgroup->usage();
    sampled_processes_ = std::max(sampled_processes_, usage.pids_current.value_or(0));
    if (limits_.cpu_time_seconds && usage.cpu_usec &&
        static_cast<double>(*usage.cpu_usec) > *limits_.cpu_time_seconds * 1e6) {
      return TerminationReason::CpuTime;
    }
    return std::nullopt;
  }

  SandboxRun& run_;
  const ResourcePolicy& limits_;
  UniqueFd listener_;
  std::vector<runtime::ChildMessage> messages_;
  bool command_ready_ = false;
  std::optional<int> command_status_;
  bool init_gone_ = false;  // the channel's end: init exited without reporting
  std::optional<std::string> forbidden_syscall_;
  std::uint64_t sampled_processes_ = 0;
};

// What is left to measure once the run has ended.
struct Measures {
  int init_status = 0;  // when init had to be reaped
  linux_api::CgroupUsage cgroup;
};

// Without a report (init was killed, or failed) init's own status is the
// answer; without a cgroup its rusage is the only measure. Both need init
// reaped now; otherwise tear_down() reaps it. The cgroup's counters are final:
// only init is left in it, or nothing.
Measures measure(SandboxRun& run, const NativeMonitor& monitor, ExecutionMetrics& metrics) {
  Measures measures;
  if (!monitor.command_status() || !run.cgroup) {
    rusage usage{};
    measures.init_status = run.sandbox.wait(&usage);
    runtime::record_rusage(metrics, usage);
  }
  if (run.cgroup) {
    const linux_api::CgroupUsage& usage = measures.cgroup = run.cgroup->usage();
    if (usage.cpu_usec) metrics.cpu_time_ms = static_cast<double>(*usage.cpu_usec) / 1000.0;
    if (usage.memory_peak) metrics.peak_memory_bytes = *usage.memory_peak;
    // Less init.
    const std::uint64_t peak = usage.pids_peak.value_or(monitor.sampled_processes());
    metrics.process_count = peak > 0 ? peak - 1 : 0;
  }
  return measures;
}

// A failure the memory limit caused: `oom`, and the detail says so and what
// to do.
void blame_memory_limit(ProcessResult& result, const ResourcePolicy& limits, std::string_view why) {
  result.termination_reason = TerminationReason::Oom;
  result.termination_detail += " (the sandbox's memory limit of " +
                               format_size(limits.memory_bytes) + " " + std::string(why) +
                               ": raise --memory)";
}

void record_setup_error(ProcessResult& result, const runtime::ChildMessage& error,
                        const linux_api::CgroupUsage& usage, const ResourcePolicy& limits) {
  const bool limit_refused = usage.memory_limit_hits > 0 && is_memory_refusal(error);
  if (std::string_view(error.stage) == runtime::kExecutingStage) {
    runtime::record_exec_failure(result, error.detail, error.error_number);
    if (limit_refused) blame_memory_limit(result, limits, "was reached loading it");
    return;
  }
  result.exit_code = runtime::kSetupFailed;
  result.termination_detail = "sandbox setup failed: " + runtime::describe_child_error(error);
  if (limit_refused) {
    blame_memory_limit(result, limits, "is too small to set it up");
    return;
  }
  result.termination_reason = TerminationReason::LaunchError;
}

// A setup that ended without sending its report: init's (no status of the
// command at all), or the command's before its execve (kSetupFailed, never
// Ready). At the memory limit the report itself is refused too.
void record_unreported_setup(ProcessResult& result, const linux_api::CgroupUsage& usage,
                             const ResourcePolicy& limits, const std::string& who,
                             const std::string& without_limit) {
  result.exit_code = runtime::kSetupFailed;
  if (usage.memory_limit_hits > 0) {
    result.termination_reason = TerminationReason::Oom;
    result.termination_detail = who + " could not be set up within its memory limit of " +
                                format_size(limits.memory_bytes) + ": raise --memory";
  } else {
    result.termination_reason = TerminationReason::LaunchError;
    result.termination_detail = without_limit;
  }
}

void record_forbidden_syscall(ProcessResult& result, const std::string& profile,
                              const std::string& syscall) {
  result.termination_reason = TerminationReason::Seccomp;
  result.signal = SIGSYS;
  result.exit_code = 128 + SIGSYS;
  result.termination_detail =
      "the seccomp profile " + profile + " does not allow " + syscall + ": the sandbox was killed";
}

// The cgroup's counters say why a failing command failed.
void explain_failure(ProcessResult& result, int status, const linux_api::CgroupUsage& usage,
                     const ResourcePolicy& limits) {
  const bool failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  const bool reason_open = result.termination_reason == TerminationReason::None;
  if (failed && reason_open && usage.oom_kills > 0) {
    result.termination_reason = TerminationReason::Oom;
    result.termination_detail =
        "the sandbox reached its memory limit of " + format_size(limits.memory_bytes) +
        ": the kernel's OOM killer ended " + std::to_string(usage.oom_kills) + " process(es)";
  } else if (failed && reason_open && usage.pids_limit_hits > 0) {
    result.termination_reason = TerminationReason::Pids;
    result.termination_detail = "the sandbox reached its limit of " +
                                std::to_string(limits.max_processes) +
                                " processes: " + std::to_string(usage.pids_limit_hits) +
                                " fork()/clone() call(s) failed with EAGAIN";
  } else if (result.termination_reason == TerminationReason::CpuTime &&
             result.termination_detail.empty()) {
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%g", *limits.cpu_time_seconds);
    result.termination_detail =
        "the sandbox used up its CPU time limit of " + std::string(seconds) + " s";
  }
}

// The wait status of the command (init's report) or, without a report, of
// init itself.
void record_status(ProcessResult& result, int status, bool reported,
                   const linux_api::CgroupUsage& usage, const ExecutionRequest& request,
                   bool seccomp_loaded) {
  const bool unexplained = result.termination_reason == TerminationReason::None;
  runtime::record_wait_status(result, status);
  if (unexplained && WIFEXITED(status) && !reported) {
    record_unreported_setup(result, usage, request.limits, "the sandbox",
                            "the sandbox's init ended without a report");
  } else if (unexplained && WIFSIGNALED(status) && WTERMSIG(status) == SIGSYS && seccomp_loaded) {
    // SCMP_ACT_TRAP, or a syscall of an architecture the profile omits.
    result.termination_reason = TerminationReason::Seccomp;
    result.termination_detail = "killed by SIGSYS: a system call the seccomp profile " +
                                request.seccomp_profile + " forbids";
  }
}

// Why the run ended, the first that applies: a setup step or the execve
// failed, a kill action of the profile stopped a syscall, or the command's
// status with what the cgroup says about it.
void record_ending(ProcessResult& result, const SandboxRun& run, const ExecutionRequest& request,
                   NativeMonitor& monitor, const Measures& measures) {
  if (const auto error = monitor.first_error()) {
    record_setup_error(result, *error, measures.cgroup, request.limits);
  } else if (run.exec_error != 0) {
    // The execve failed and its report was refused (at the memory limit):
    // what the command wrote before it tried to send it.
    record_setup_error(
        result, runtime::child_error(runtime::kExecutingStage, run.plan.argv[0], run.exec_error),
        measures.cgroup, request.limits);
  } else if (const auto& syscall = monitor.forbidden_syscall()) {
    record_forbidden_syscall(result, request.seccomp_profile, *syscall);
  } else {
    const bool reported = monitor.command_status().has_value();
    const int status = monitor.command_status().value_or(measures.init_status);
    if (reported && !monitor.command_ready() && WIFEXITED(status) &&
        WEXITSTATUS(status) == runtime::kSetupFailed &&
        result.termination_reason == TerminationReason::None) {
      // Its status is not a command's: it never reached its execve.
      record_unreported_setup(result, measures.cgroup, request.limits, "the command",
                              "the command's setup ended before its execve, without a report");
      return;
    }
    explain_failure(result, status, measures.cgroup, request.limits);
    record_status(result, status, reported, measures.cgroup, request, run.plan.load_seccomp);
  }
}

}  // namespace

void NativeHost::start_and_supervise(SandboxRun& run, const ExecutionRequest& request,
                                     runtime::Clock::time_point start, ExecutionOutcome& outcome) {
  outcome.changes_dir = run.changes_dir;
  outcome.changes_dir_is_full_copy = false;
  ProcessResult& result = outcome.result;
  result.pid = run.sandbox.pid;
  // If init cannot take it, it has ended (a workspace mount failed: its
  // error waits in the channel and is reported below).
  (void)runtime::send_start(run.sandbox.channel.get());
  core::trace_phase("native: start sent");
  // While init starts the command: the idmapping helper a first run made
  // has exited by now, and reaping it costs ~0.15 ms (a teardown would
  // otherwise, on an in-process run's path).
  idmapping_.reap_exited();
  // While the sandbox sets up and runs, this process mostly waits. (With
  // prestart the runtime's own thread does it, between runs.)
  std::optional<TrashRemover> trash_remover;
  if (!prestarts())
    trash_remover.emplace(options_.state_dir / "trash", options_.state_dir / "pool");

  CommandStart started = wait_for_exec(run.sandbox.channel.get(), request.limits);
  started.messages.insert(started.messages.begin(), run.early_messages.begin(),
                          run.early_messages.end());
  if (!run.plan.send_changes_root.empty()) {
    // The changes live on the run's tmpfs; without it (setup failed) there are none.
    run.changes_root = std::move(started.changes_root);
    outcome.changes_dir = std::nullopt;
    if (run.changes_root) {
      run.changes_dir = "/proc/self/fd/" + std::to_string(run.changes_root.get()) + "/upper";
      outcome.changes_dir = run.changes_dir;
    }
  }
  // -t: what the user types goes to the master, the monitor reads it.
  const UniqueFd terminal = std::move(started.terminal);
  std::optional<linux_api::PtyInputRelay> typed;
  if (terminal)
    typed.emplace(request.terminal_input_fd, request.terminal_resize_fd, terminal.get());
  NativeMonitor monitor(run, request, std::move(started), terminal.get());
  core::trace_phase("native: command ready to execve");
  runtime::record_supervision(result, monitor.run(request.limits, start, request.on_output));
  typed.reset();
  core::trace_phase("native: supervision done");
  run.reported = monitor.command_status().has_value();
  const Measures measures = measure(run, monitor, result.metrics);
  if (run.trace) run.trace->print();
  core::trace_phase("native: result read");
  record_ending(result, run, request, monitor, measures);
  // The proxy's last connections close with the sandbox: their records last.
  stop_network(run);
  result.network = std::string(to_string(run.network->setup));
  result.network_accesses = take_accesses(*run.network);
  runtime::record_elapsed(result, start);
}

}  // namespace pulsebox::backends::native
