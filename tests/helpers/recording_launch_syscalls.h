// A LaunchSyscalls (runtime/launch_syscalls.h) that starts nothing: each call
// is logged as data, with its arguments, and any step can be made to fail
// with an errno. It never signals or waits for a real process, so a test can
// drive runtime::launch_sandbox() without privileges.
//
// init "starts" as the kernel reports it: clone3 stores the pid and the
// pidfd where the launcher asked, clone() only the pidfd; then init's first
// step, 1 added to the launcher's eventfd. Like the real call, clone3 (or
// clone) returns only when init has exited, that is when it is reaped
// (reap_init or kill_and_reap_pidfd), or after a bounded wait, logged as the
// step "init never reaped". The pidfd is a descriptor of its own (an
// eventfd), so the LaunchedSandbox can close it.
//
//   RecordingLaunchSyscalls fake;
//   fake.fail("write_id_maps", EPERM);
//   auto launched = runtime::launch_sandbox(plan, std::move(end), fake.before_go(), fake);
//   EXPECT_EQ(fake.steps(), (std::vector<std::string>{"clone3", "write_id_maps",
//                                                     "kill_init", "reap_init"}));
//
// One launch per fake; it must outlive the LaunchedSandbox it launched.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "linux/userns.h"
#include "runtime/launch_syscalls.h"
#include "runtime/launcher.h"

namespace pulsebox::testing {

class RecordingLaunchSyscalls final : public runtime::LaunchSyscalls {
 public:
  // One call, as the launcher made it. Fields a step does not have keep
  // their defaults.
  struct Call {
    std::string step;               // "clone3", "clone", "pid_of_pidfd", "write_id_maps",
                                    // "before_go", "send_go", "kill_init", "reap_init",
                                    // "kill_and_reap_pidfd", "init never reaped"
    std::uint64_t flags = 0;        // clone3's args.flags, clone()'s flags
    std::uint64_t cgroup = 0;       // clone3's args.cgroup
    std::uint64_t exit_signal = 0;  // clone3's args.exit_signal
    bool has_stack = false;         // clone3: a stack and its size; clone: a stack top
    std::uint64_t stack = 0;        // clone3: the stack's lowest address
    long pid = 0;                   // the pid the step was given
    int fd = -1;                    // the pidfd or channel it was given
    bool in_cgroup = false;         // before_go's argument
    linux_api::IdMaps id_maps;      // write_id_maps's argument
    std::vector<int> unblocked;     // clone3, clone: signals the calling thread left unblocked
    std::vector<int> passed_fds;    // send_go: the descriptors Go carries
  };

  RecordingLaunchSyscalls() = default;
  RecordingLaunchSyscalls(const RecordingLaunchSyscalls&) = delete;
  RecordingLaunchSyscalls& operator=(const RecordingLaunchSyscalls&) = delete;
  ~RecordingLaunchSyscalls() override;

  // `step` (a Call::step name, or "before_go") fails with `error_number`.
  void fail(const std::string& step, int error_number);
  // A before_go that logs its call and fails when fail("before_go", ...) says.
  runtime::BeforeGo before_go();

  std::vector<Call> calls() const;
  std::vector<std::string> steps() const;  // the steps' names, in order
  // The first call of `step` (a default Call with an empty step if none).
  Call first(const std::string& step) const;

  // What the kernel reports for the init it started: above the kernel's
  // PID_MAX_LIMIT, so that if a real kill(2) or wait4(2) ever got it (a
  // LaunchedSandbox that lost its fake), it could reach no process.
  pid_t init_pid = 1 << 30;
  int wait_status = 0;  // reap_init's result
  // How long a started init waits to be reaped before its clone returns.
  std::chrono::milliseconds reap_patience{2000};

  long clone3_init(runtime::InitClone& init) override;
  long clone_init(runtime::InitClone& init) override;
  long pid_of_pidfd(int pidfd) override;
  core::Status write_id_maps(pid_t pid, const linux_api::IdMaps& maps) override;
  core::Status send_go(int channel, const int* fds, int count) override;
  void kill_init(pid_t pid) override;
  int reap_init(pid_t pid, rusage* usage) override;
  void kill_and_reap_pidfd(int pidfd) override;

 private:
  void record(Call call);
  int failure(const std::string& step) const;  // 0 or the errno
  // init's life: the kernel's part of a clone that succeeded.
  long start_init(runtime::InitClone& init, bool store_pid);
  void mark_reaped();

  mutable std::mutex mutex_;
  std::condition_variable reaped_changed_;
  bool reaped_ = false;
  std::vector<Call> calls_;
  std::map<std::string, int> failures_;
};

}  // namespace pulsebox::testing
