#include "helpers/recording_launch_syscalls.h"

#include <signal.h>
#include <sys/eventfd.h>

#include <unistd.h>
#include <atomic>

#include <cerrno>
#include <utility>

namespace pulsebox::testing {
namespace {

// The catchable signals the calling thread has not blocked: a clone with
// CLONE_VM starts its child with them, on this process's memory.
std::vector<int> unblocked_signals() {
  sigset_t blocked;
  ::pthread_sigmask(SIG_BLOCK, nullptr, &blocked);
  std::vector<int> out;
  for (int signal = 1; signal < NSIG; ++signal) {
    // (32 up to SIGRTMIN are the C library's own, which it never blocks.)
    if (signal >= 32 && signal < SIGRTMIN) continue;
    if (signal != SIGKILL && signal != SIGSTOP && sigismember(&blocked, signal) == 0)
      out.push_back(signal);
  }
  return out;
}

}  // namespace

RecordingLaunchSyscalls::~RecordingLaunchSyscalls() = default;

void RecordingLaunchSyscalls::fail(const std::string& step, int error_number) {
  const std::lock_guard hold(mutex_);
  failures_[step] = error_number;
}

int RecordingLaunchSyscalls::failure(const std::string& step) const {
  const std::lock_guard hold(mutex_);
  const auto it = failures_.find(step);
  return it == failures_.end() ? 0 : it->second;
}

void RecordingLaunchSyscalls::record(Call call) {
  const std::lock_guard hold(mutex_);
  calls_.push_back(std::move(call));
}

std::vector<RecordingLaunchSyscalls::Call> RecordingLaunchSyscalls::calls() const {
  const std::lock_guard hold(mutex_);
  return calls_;
}

std::vector<std::string> RecordingLaunchSyscalls::steps() const {
  std::vector<std::string> names;
  for (const auto& call : calls())
    names.push_back(call.step);
  return names;
}

RecordingLaunchSyscalls::Call RecordingLaunchSyscalls::first(const std::string& step) const {
  for (auto& call : calls()) {
    if (call.step == step) return call;
  }
  return Call{};
}

runtime::BeforeGo RecordingLaunchSyscalls::before_go() {
  return [this](pid_t pid, bool in_cgroup) -> core::Status {
    Call call;
    call.step = "before_go";
    call.pid = pid;
    call.in_cgroup = in_cgroup;
    record(std::move(call));
    if (const int error = failure("before_go")) {
      return core::Error::from_errno("recording", "before_go", error);
    }
    return core::ok_status();
  };
}

long RecordingLaunchSyscalls::start_init(runtime::InitClone& init, bool store_pid) {
  // What the kernel stores before init runs (the pid last, as kernel_clone
  // does after copy_process).
  const int pidfd = ::eventfd(0, EFD_CLOEXEC);
  if (pidfd < 0) return -errno;
  std::atomic_ref<int>(init.pidfd).store(pidfd, std::memory_order_release);
  if (store_pid) std::atomic_ref<int>(init.pid).store(init_pid, std::memory_order_release);
  // The parent's clone returns when init has exited.
  std::unique_lock hold(mutex_);
  if (!reaped_changed_.wait_for(hold, reap_patience, [this] { return reaped_; })) {
    Call call;
    call.step = "init never reaped";
    calls_.push_back(std::move(call));
  }
  return init_pid;
}

void RecordingLaunchSyscalls::mark_reaped() {
  {
    const std::lock_guard hold(mutex_);
    reaped_ = true;
  }
  reaped_changed_.notify_all();
}

long RecordingLaunchSyscalls::clone3_init(runtime::InitClone& init) {
  Call call;
  call.step = "clone3";
  call.flags = init.args.flags;
  call.cgroup = init.args.cgroup;
  call.exit_signal = init.args.exit_signal;
  call.has_stack = init.args.stack != 0 && init.args.stack_size != 0;
  call.stack = init.args.stack;
  call.unblocked = unblocked_signals();
  record(std::move(call));
  if (const int error = failure("clone3")) return -error;
  return start_init(init, (init.args.flags & CLONE_PARENT_SETTID) != 0);
}

long RecordingLaunchSyscalls::clone_init(runtime::InitClone& init) {
  Call call;
  call.step = "clone";
  call.flags = init.clone_flags;
  call.has_stack = init.stack_top != nullptr;
  call.unblocked = unblocked_signals();
  record(std::move(call));
  if (const int error = failure("clone")) return -error;
  // clone() shares one argument between CLONE_PIDFD and CLONE_PARENT_SETTID:
  // the launcher learns the pid from the pidfd.
  return start_init(init, false);
}

long RecordingLaunchSyscalls::pid_of_pidfd(int pidfd) {
  Call call;
  call.step = "pid_of_pidfd";
  call.fd = pidfd;
  record(std::move(call));
  if (const int error = failure("pid_of_pidfd")) return -error;
  return init_pid;
}

core::Status RecordingLaunchSyscalls::write_id_maps(pid_t pid, const linux_api::IdMaps& maps) {
  Call call;
  call.step = "write_id_maps";
  call.pid = pid;
  call.id_maps = maps;
  record(std::move(call));
  if (const int error = failure("write_id_maps")) {
    return core::Error::from_errno("recording", "write_id_maps", error);
  }
  return core::ok_status();
}

core::Status RecordingLaunchSyscalls::send_go(int channel, const int* fds, int count) {
  Call call;
  call.step = "send_go";
  call.fd = channel;
  call.passed_fds.assign(fds, fds + count);
  record(std::move(call));
  if (const int error = failure("send_go")) {
    return core::Error::from_errno("recording", "send_go", error);
  }
  return core::ok_status();
}

void RecordingLaunchSyscalls::kill_init(pid_t pid) {
  Call call;
  call.step = "kill_init";
  call.pid = pid;
  record(std::move(call));
}

int RecordingLaunchSyscalls::reap_init(pid_t pid, rusage* /*usage*/) {
  Call call;
  call.step = "reap_init";
  call.pid = pid;
  record(std::move(call));
  mark_reaped();
  return wait_status;
}

void RecordingLaunchSyscalls::kill_and_reap_pidfd(int pidfd) {
  Call call;
  call.step = "kill_and_reap_pidfd";
  call.fd = pidfd;
  record(std::move(call));
  mark_reaped();
}

}  // namespace pulsebox::testing
