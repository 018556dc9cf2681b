// Runs a hook with posix_spawn: its own process group (killed whole at the
// timeout), stdin a socket carrying the state (sent with MSG_NOSIGNAL, so a
// hook that exits without reading cannot kill the runtime with SIGPIPE),
// stdout and stderr pipes read into the log, every other descriptor closed.
#include "oci/hooks.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

#include "core/text.h"
#include "core/unique_fd.h"
#include "linux/syscalls.h"

namespace pulsebox::oci {
namespace {

using Clock = std::chrono::steady_clock;

// What is kept of each output stream, and how much of stderr an error shows.
constexpr std::size_t kMaxOutputBytes = 64 * 1024;
constexpr std::size_t kErrorTailBytes = 512;

const Log* g_hook_log = nullptr;

void log_line(LogLevel level, const std::string& message) {
  if (g_hook_log != nullptr) g_hook_log->write(level, message);
}

struct Outcome {
  bool ran = false;
  int spawn_error = 0;
  bool timed_out = false;
  siginfo_t info{};
  std::string out, err;
};

void append_bounded(std::string& into, const char* data, std::size_t size) {
  into.append(data, size);
  if (into.size() > kMaxOutputBytes) into.erase(0, into.size() - kMaxOutputBytes);
}

// Reads what `fd` has now into `into`, at most 64 reads (a writer that
// keeps the pipe full must not keep the caller from its deadline); false at
// end of file or error.
bool drain(int fd, std::string& into) {
  char buffer[4096];
  for (int reads = 0; reads < 64;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n > 0) {
      append_bounded(into, buffer, static_cast<std::size_t>(n));
      ++reads;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return n < 0 && errno == EAGAIN;
  }
  return true;
}

Outcome spawn_and_wait(const spec::Hook& hook, const std::string& state) {
  Outcome outcome;
  int input[2], out[2], err[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, input) != 0) {
    outcome.spawn_error = errno;
    return outcome;
  }
  core::UniqueFd input_child(input[0]), input_ours(input[1]);
  if (::pipe2(out, O_CLOEXEC) != 0) {
    outcome.spawn_error = errno;
    return outcome;
  }
  core::UniqueFd out_ours(out[0]), out_child(out[1]);
  if (::pipe2(err, O_CLOEXEC) != 0) {
    outcome.spawn_error = errno;
    return outcome;
  }
  core::UniqueFd err_ours(err[0]), err_child(err[1]);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, input_child.get(), 0);
  posix_spawn_file_actions_adddup2(&actions, out_child.get(), 1);
  posix_spawn_file_actions_adddup2(&actions, err_child.get(), 2);
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setsigdefault(&attributes, &all);
  posix_spawnattr_setpgroup(&attributes, 0);
  posix_spawnattr_setflags(&attributes,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  // args[0] is argv[0]; with no args, the path (as runc runs it).
  std::vector<std::string> args =
      hook.args.empty() ? std::vector<std::string>{hook.path} : hook.args;
  std::vector<char*> argv, envp;
  for (auto& arg : args)
    argv.push_back(arg.data());
  argv.push_back(nullptr);
  std::vector<std::string> env = hook.env;
  for (auto& entry : env)
    envp.push_back(entry.data());
  envp.push_back(nullptr);
  pid_t pid = -1;
  const int spawned =
      ::posix_spawn(&pid, hook.path.c_str(), &actions, &attributes, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (spawned != 0) {
    outcome.spawn_error = spawned;
    return outcome;
  }
  outcome.ran = true;
  input_child.reset();
  out_child.reset();
  err_child.reset();
  core::UniqueFd pidfd(linux_api::sys_pidfd_open(pid));
  for (int fd : {input_ours.get(), out_ours.get(), err_ours.get()})
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);

  const int seconds = hook.timeout.value_or(kDefaultHookTimeoutSeconds);
  const auto deadline = Clock::now() + std::chrono::seconds(seconds);
  std::size_t sent = 0;
  if (state.empty()) ::shutdown(input_ours.get(), SHUT_WR);
  bool exited = false;
  while (!exited) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      // The whole group: whatever the hook started goes with it; and the
      // hook itself by its pidfd, in case it left the group (waitid below
      // waits for it alone).
      ::kill(-pid, SIGKILL);
      if (pidfd) (void)linux_api::sys_pidfd_send_signal(pidfd.get(), SIGKILL);
      outcome.timed_out = true;
      break;
    }
    pollfd fds[4] = {{pidfd.get(), POLLIN, 0},
                     {out_ours ? out_ours.get() : -1, POLLIN, 0},
                     {err_ours ? err_ours.get() : -1, POLLIN, 0},
                     {sent < state.size() ? input_ours.get() : -1, POLLOUT, 0}};
    const int ready = ::poll(fds, 4, static_cast<int>(left));
    if (ready < 0 && errno != EINTR) break;
    if (fds[1].revents != 0 && !drain(out_ours.get(), outcome.out)) out_ours.reset();
    if (fds[2].revents != 0 && !drain(err_ours.get(), outcome.err)) err_ours.reset();
    if (fds[3].revents != 0) {
      const ssize_t n = ::send(input_ours.get(), state.data() + sent, state.size() - sent,
                               MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) sent += static_cast<std::size_t>(n);
      if (n < 0 && errno != EAGAIN && errno != EINTR) sent = state.size();  // it stopped reading
      if (sent == state.size()) ::shutdown(input_ours.get(), SHUT_WR);
    }
    if (fds[0].revents != 0) exited = true;
  }
  // What is left in the pipes now; a child the hook left running may hold
  // them open, so this does not wait for their end.
  if (out_ours) drain(out_ours.get(), outcome.out);
  if (err_ours) drain(err_ours.get(), outcome.err);
  while (::waitid(P_PID, static_cast<id_t>(pid), &outcome.info, WEXITED) != 0 && errno == EINTR) {
  }
  return outcome;
}

std::string tail(const std::string& text) {
  std::string end =
      text.size() > kErrorTailBytes ? text.substr(text.size() - kErrorTailBytes) : text;
  while (!end.empty() && (end.back() == '\n' || end.back() == ' '))
    end.pop_back();
  return end;
}

// Runs one hook; its output goes to the log. An error describes the failure.
core::Status run_one(const spec::Hook& hook, const std::string& state) {
  const Outcome outcome = spawn_and_wait(hook, state);
  const std::string who = hook.name + " (" + hook.path + ")";
  // Into a --log file only: on stderr it would mix with what create and
  // start print (nothing on success, as runc).
  if (g_hook_log != nullptr && !g_hook_log->to_stderr()) {
    if (!outcome.out.empty()) log_line(LogLevel::Info, who + " stdout: " + tail(outcome.out));
    if (!outcome.err.empty()) log_line(LogLevel::Info, who + " stderr: " + tail(outcome.err));
  }
  std::string why;
  if (!outcome.ran) {
    why = "could not be run: " + core::describe_errno(outcome.spawn_error);
  } else if (outcome.timed_out) {
    why = "killed (with its process group) after its timeout of " +
          std::to_string(hook.timeout.value_or(kDefaultHookTimeoutSeconds)) + " s";
  } else if (outcome.info.si_code == CLD_EXITED && outcome.info.si_status == 0) {
    return core::ok_status();
  } else if (outcome.info.si_code == CLD_EXITED) {
    why = "exited with status " + std::to_string(outcome.info.si_status);
  } else {
    why = "killed by signal " + std::to_string(outcome.info.si_status);
  }
  if (const std::string end = tail(outcome.err); !end.empty()) why += ": " + end;
  return core::Error(core::ErrorKind::kIo, "oci", who + ": " + why);
}

nlohmann::json hook_to_json(const spec::Hook& hook) {
  nlohmann::json out = {{"path", hook.path}};
  if (!hook.args.empty()) out["args"] = hook.args;
  if (!hook.env.empty()) out["env"] = hook.env;
  if (hook.timeout) out["timeout"] = *hook.timeout;
  return out;
}

}  // namespace

std::string hook_state_json(const HookState& state) {
  nlohmann::json document = {
      {"ociVersion", std::string(spec::kOciVersionMax)},
      {"id", state.id},
      {"status", state.status},
      {"bundle", state.bundle},
  };
  if (state.pid > 0) document["pid"] = state.pid;
  if (!state.annotations.empty()) document["annotations"] = state.annotations;
  return document.dump();
}

void set_hook_log(const Log* log) {
  g_hook_log = log;
}

core::Status run_hooks(const std::vector<spec::Hook>& hooks, const HookState& state) {
  if (hooks.empty()) return core::ok_status();
  const std::string text = hook_state_json(state);
  for (const auto& hook : hooks)
    PB_CHECK(run_one(hook, text));
  return core::ok_status();
}

void run_hooks_warning_on_failure(const std::vector<spec::Hook>& hooks, const HookState& state) {
  if (hooks.empty()) return;
  const std::string text = hook_state_json(state);
  for (const auto& hook : hooks) {
    if (auto status = run_one(hook, text); !status.ok())
      log_line(LogLevel::Warn, "container " + state.id + ": " + status.error().to_string());
  }
}

void run_recorded_hooks(const ContainerRecord& record, std::string_view kind,
                        std::string_view status) {
  if (record.runtime_hooks.is_null()) return;
  auto hooks = runtime_hooks_from_json(record.runtime_hooks, "state.json of " + record.id);
  if (!hooks) {
    log_line(LogLevel::Warn, "container " + record.id + ": " + hooks.error().to_string() +
                                 "; its " + std::string(kind) + " hooks were not run");
    return;
  }
  const HookState state{record.id, std::string(status), record.process.pid, record.bundle,
                        record.annotations};
  run_hooks_warning_on_failure(kind == "poststart" ? hooks->poststart : hooks->poststop, state);
}

nlohmann::json runtime_hooks_to_json(const spec::Hooks& hooks) {
  nlohmann::json out = nlohmann::json::object();
  const std::pair<const char*, const std::vector<spec::Hook>*> kKinds[] = {
      {"poststart", &hooks.poststart}, {"poststop", &hooks.poststop}};
  for (const auto& [kind, list] : kKinds) {
    if (list->empty()) continue;
    out[kind] = nlohmann::json::array();
    for (const auto& hook : *list)
      out[kind].push_back(hook_to_json(hook));
  }
  return out;
}

core::Result<spec::Hooks> runtime_hooks_from_json(const nlohmann::json& value,
                                                  std::string_view source) {
  return spec::parse_hooks(value, source);
}

}  // namespace pulsebox::oci
