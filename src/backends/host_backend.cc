// The host backend: runs the command directly on the host. Unsafe and opt-in.
//
// What it does enforce: a new session and process group (killed as a whole
// at timeout and when the command exits), a minimal environment from the
// secret policy, rlimits, the wall-clock limit, the output cap. The command
// runs in a private copy of the workspace, so its workspace changes still
// become a transaction instead of landing on the user's files; but it can
// read and write everything else the invoking user can. Capabilities say so.
//
// Internal functions return core::Result; execute() is the one place where
// an error becomes an exception (as in the native backend's backend.cc).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>

#include "backends/capability_texts.h"
#include "core/fs.h"
#include "core/sandbox_home.h"
#include "core/throw_error.h"
#include "linux/syscalls.h"
#include "pulsebox/backend.h"
#include "pulsebox/error.h"
#include "runtime/result_mapping.h"
#include "runtime/supervisor.h"

extern char** environ;

namespace pulsebox {

using core::Error;
using core::ErrorKind;
using core::UniqueFd;

Backend::~Backend() = default;
PreparedRun::~PreparedRun() = default;

std::unique_ptr<PreparedRun> Backend::prepare(const ExecutionRequest& request) {
  (void)request;
  return nullptr;
}

namespace {

using Clock = runtime::Clock;
namespace fs = std::filesystem;

std::string host_reason() {
  return "the host backend runs the command directly on this host as the invoking user";
}

// Copies the workspace (except .agent/) into `target`, keeping modes and
// symlinks. FIFOs are recreated; sockets and device nodes are not copied.
core::Status copy_workspace(const fs::path& from, const fs::path& target) {
  try {
    fs::create_directories(target);
    for (auto it = fs::recursive_directory_iterator(from); it != fs::recursive_directory_iterator();
         ++it) {
      const fs::path relative = it->path().lexically_relative(from);
      if (it.depth() == 0 && relative == ".agent") {
        it.disable_recursion_pending();
        continue;
      }
      const fs::path destination = target / relative;
      const auto status = it->symlink_status();
      if (fs::is_symlink(status)) {
        fs::copy_symlink(it->path(), destination);
      } else if (fs::is_directory(status)) {
        fs::create_directory(destination);
        fs::permissions(destination, status.permissions());
      } else if (fs::is_regular_file(status)) {
        fs::copy_file(it->path(), destination);
      } else if (fs::is_fifo(status)) {
        ::mkfifo(destination.c_str(), static_cast<mode_t>(status.permissions()));
      }
    }
  } catch (const fs::filesystem_error& error) {
    return Error(ErrorKind::kIo, "host", std::string("copying the workspace: ") + error.what());
  }
  return core::ok_status();
}

class HostBackend final : public Backend {
 public:
  std::string name() const override { return "host"; }
  bool is_unsafe() const override { return true; }
  std::string isolation_level() const override { return "host_unsafe"; }
  Availability availability() const override {
    return {true, "available, but it isolates nothing: opt in with --unsafe-host"};
  }

  std::vector<std::string> reconcile() override { return {}; }
  void cleanup() override {
    std::error_code ec;
    for (const auto& dir : run_dirs_) {
      std::filesystem::remove_all(dir, ec);
      ::unlink(core::run_lock_path(dir).c_str());  // while still holding it
    }
    run_dirs_.clear();
    run_locks_.clear();
  }

  // The one place where the host backend's errors become exceptions.
  using Backend::execute;
  ExecutionOutcome execute(const ExecutionRequest& request,
                           std::unique_ptr<PreparedRun> prepared) override {
    (void)prepared;  // prepare() makes none
    return core::value_or_throw(run(request));
  }

  Capability network_capability(const NetworkPolicy& policy) const override {
    if (policy.mode == NetworkMode::AllowAll) {
      return {EnforcementLevel::StronglyEnforced,
              "the command has the host's network, as requested", ""};
    }
    return {EnforcementLevel::Unsupported,
            host_reason() + ", in the host's network namespace: it can reach whatever the host can",
            "use the native backend (--backend native)"};
  }
  Capability secrets_capability(const SecretPolicy& policy) const override {
    if (policy.mode == SecretMode::AllowAll) return backends::all_secrets_passed_capability();
    return {EnforcementLevel::PartiallyEnforced,
            "the environment is built from the secret policy, but the command can read the "
            "invoking user's credential files (~/.ssh, ~/.aws, ~/.config, ...)",
            "use the native backend, which hides the host's home directories"};
  }
  Capability filesystem_capability() const override {
    return {EnforcementLevel::Unsupported,
            host_reason() +
                ": it can read and write everything that user can; only its changes to the "
                "workspace copy become a transaction",
            "use the native backend (overlay workspace, read-only system, no host home)"};
  }
  Capability limit_capability(LimitKind kind) const override {
    const std::string fix = "use the native backend, which limits the whole sandbox with cgroups";
    switch (kind) {
      case LimitKind::Memory:
        return backends::per_process_memory_capability("", fix);
      case LimitKind::CpuTime:
        return backends::per_process_cpu_time_capability("", fix);
      case LimitKind::WallTime:
        return {EnforcementLevel::PartiallyEnforced,
                "the process group is killed at the deadline, but a process that starts its own "
                "session (a daemon) escapes it",
                fix};
      case LimitKind::Output:
        return backends::output_capability("the command");
      case LimitKind::OpenFiles:
        return backends::open_files_capability();
      case LimitKind::Swap:
      case LimitKind::Processes:
      case LimitKind::Cpu:
      case LimitKind::Disk:
        break;
    }
    return {EnforcementLevel::Unsupported,
            "the host backend has no way to limit " + std::string(to_string(kind)), fix};
  }
  Capability syscall_capability(const std::string&) const override {
    return {EnforcementLevel::Unsupported, "the host backend loads no seccomp filter",
            "use the native backend"};
  }
  Capability process_containment_capability() const override {
    return {EnforcementLevel::PartiallyEnforced,
            "a new session and process group, killed as a whole; a daemon that calls setsid() "
            "escapes it",
            "use the native backend (pid namespace and cgroup)"};
  }

 private:
  core::Result<ExecutionOutcome> run(const ExecutionRequest& request);
  core::Result<fs::path> make_run_copy(const ExecutionRequest& request);

  std::vector<std::filesystem::path> run_dirs_;
  std::vector<UniqueFd> run_locks_;
};

struct ChildPlan {
  std::vector<std::string> argv_storage;
  std::vector<std::string> env_storage;
  std::vector<char*> argv;
  std::vector<char*> envp;
  std::string cwd;
  std::vector<std::pair<int, rlimit>> rlimits;
  int stdin_fd = -1;  // -1: /dev/null
};

[[noreturn]] void report_and_exit(int report_fd, int err) {
  (void)!::write(report_fd, &err, sizeof err);
  ::_exit(127);
}

// Everything is prepared in the parent: the child only makes syscalls and
// reports a failure as an errno on the CLOEXEC report pipe.
[[noreturn]] void run_child(const ChildPlan& plan, int out_fd, int err_fd, int report_fd) {
  auto fail = [&](int err) { report_and_exit(report_fd, err); };
  if (::setsid() < 0) fail(errno);
  const int in_fd = plan.stdin_fd >= 0 ? plan.stdin_fd : ::open("/dev/null", O_RDONLY);
  if (in_fd < 0 || ::dup2(in_fd, 0) < 0 || ::dup2(out_fd, 1) < 0 || ::dup2(err_fd, 2) < 0) {
    fail(errno);
  }
  for (const auto& [resource, limit] : plan.rlimits) {
    if (::setrlimit(resource, &limit) != 0) fail(errno);
  }
  if (::chdir(plan.cwd.c_str()) != 0) fail(errno);
  // Close every other descriptor except the CLOEXEC report pipe.
  ::syscall(SYS_close_range, 3, report_fd - 1, 0);
  ::syscall(SYS_close_range, report_fd + 1, ~0U, 0);
  environ = const_cast<char**>(plan.envp.data());
  ::execvp(plan.argv[0], plan.argv.data());
  report_and_exit(report_fd, errno);
}

// The host variant: the sandbox is the command's process group.
class HostMonitor final : public runtime::Monitor {
 public:
  HostMonitor(pid_t pid, const runtime::MonitoredFds& fds) : Monitor(pid, fds), pid_(pid) {}

 private:
  void signal_sandbox(int signal) override { ::kill(-pid_, signal); }
  // The sandbox ends with its command: background processes left in its
  // group go too.
  void on_exit() override { ::kill(-pid_, SIGKILL); }

  pid_t pid_;
};

// The run's private copy of the workspace, <workspace>/.agent/runs/<id>/root.
// Its lock, <id>.lock beside the run's directory, is taken before the
// directory exists, so a concurrent reconcile never removes a live run's copy
// (workspace/transactions.cc). cleanup() removes both.
core::Result<fs::path> HostBackend::make_run_copy(const ExecutionRequest& request) {
  const auto runs = request.workspace / ".agent" / "runs";
  const auto run_dir = runs / request.execution_id;
  std::error_code ec;
  fs::create_directories(runs, ec);
  if (ec) return Error(ErrorKind::kIo, "host", "cannot create " + runs.string(), ec.value());
  PB_TRY(lock, core::create_locked_file(core::run_lock_path(run_dir)));
  run_locks_.push_back(std::move(lock));
  run_dirs_.push_back(run_dir);
  if (::mkdir(run_dir.c_str(), 0700) != 0) {
    return Error::from_errno("host", "cannot create " + run_dir.string());
  }
  const auto root = run_dir / "root";
  PB_CHECK(copy_workspace(request.workspace, root));
  if (::mkdir((run_dir / "home").c_str(), 0700) != 0) {
    return Error::from_errno("host", "cannot create " + (run_dir / "home").string());
  }
  return root;
}

// The command's argv, environment, working directory and rlimits, in the
// copy at `root`.
ChildPlan plan_child(const ExecutionRequest& request, const fs::path& root) {
  ChildPlan plan;
  plan.stdin_fd = request.stdin_fd;
  plan.argv_storage = request.argv;
  for (auto& arg : plan.argv_storage)
    plan.argv.push_back(arg.data());
  plan.argv.push_back(nullptr);
  for (const auto& [key, value] : request.environment) {
    // /workspace exists only inside a real sandbox; here it is the copy.
    const bool is_workspace = value == "/workspace" || value.rfind("/workspace/", 0) == 0;
    // The sandbox's private HOME: a directory of the run's own beside the copy.
    const bool is_home = key == "HOME" && value == core::kSandboxHome;
    plan.env_storage.push_back(key + "=" +
                               (is_home        ? (root.parent_path() / "home").string()
                                : is_workspace ? root.string() + value.substr(10)
                                               : value));
  }
  for (auto& entry : plan.env_storage)
    plan.envp.push_back(entry.data());
  plan.envp.push_back(nullptr);
  plan.cwd = (root / request.cwd).string();
  const ResourcePolicy& limits = request.limits;
  auto add_limit = [&](int resource, std::uint64_t value) {
    plan.rlimits.push_back({resource, rlimit{value, value}});
  };
  // not RLIMIT_AS: see native/launch.cc
  if (limits.memory_rlimit_fallback) add_limit(RLIMIT_DATA, limits.memory_bytes);
  add_limit(RLIMIT_NOFILE, limits.max_open_files);
  add_limit(RLIMIT_CORE, 0);
  if (limits.cpu_time_seconds) {
    add_limit(RLIMIT_CPU, static_cast<std::uint64_t>(std::ceil(*limits.cpu_time_seconds)));
  }
  return plan;
}

struct Pipe {
  UniqueFd read, write;
};

core::Result<Pipe> make_pipe(const char* what) {
  int ends[2];
  if (::pipe2(ends, O_CLOEXEC) != 0) {
    return Error::from_errno("host", std::string("creating the command's ") + what + " pipe");
  }
  return Pipe{UniqueFd(ends[0]), UniqueFd(ends[1])};
}

core::Result<ExecutionOutcome> HostBackend::run(const ExecutionRequest& request) {
  if (request.terminal) {
    return Error(core::ErrorKind::kUnsupported, "host",
                 "-t (a pseudo-terminal) needs the native backend");
  }
  const auto start = Clock::now();
  ExecutionOutcome outcome;
  ProcessResult& result = outcome.result;
  PB_TRY(root, make_run_copy(request));
  outcome.changes_dir = root;
  outcome.changes_dir_is_full_copy = true;
  const ChildPlan plan = plan_child(request, root);

  PB_TRY(out, make_pipe("output"));
  PB_TRY(err, make_pipe("error output"));
  PB_TRY(report, make_pipe("report"));
  const pid_t pid = ::fork();
  if (pid < 0) return Error::from_errno("host", "fork");
  if (pid == 0) run_child(plan, out.write.get(), err.write.get(), report.write.get());
  result.pid = pid;
  out.write.reset();
  err.write.reset();
  report.write.reset();
  UniqueFd pidfd(linux_api::sys_pidfd_open(pid));

  int exec_errno = 0;
  if (::read(report.read.get(), &exec_errno, sizeof exec_errno) == sizeof exec_errno) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    runtime::record_exec_failure(result, request.argv[0], exec_errno);
    runtime::record_elapsed(result, start);
    return outcome;
  }

  runtime::MonitoredFds fds;
  fds.exit_fd = pidfd.get();
  fds.stdout_fd = out.read.get();
  fds.stderr_fd = err.read.get();
  fds.cancel_fd = request.cancel_fd;
  HostMonitor monitor(pid, fds);
  runtime::record_supervision(result, monitor.run(request.limits, start, request.on_output));

  // Kill what is left of the group before reaping: until the leader is reaped
  // its zombie holds the process-group id, so the id cannot name anyone else.
  ::kill(-pid, SIGKILL);
  int status = 0;
  rusage usage{};
  ::wait4(pid, &status, 0, &usage);
  runtime::record_rusage(result.metrics, usage);
  runtime::record_wait_status(result, status);
  runtime::record_elapsed(result, start);
  return outcome;
}

}  // namespace

std::shared_ptr<Backend> make_host_backend() {
  return std::make_shared<HostBackend>();
}

}  // namespace pulsebox
