#include "server/local_server.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

#include "backends/native_runtime.h"
#include "cli/commands.h"
#include "cli/run_command.h"
#include "core/fs.h"
#include "core/text.h"
#include "core/trace.h"
#include "core/unique_fd.h"
#include "linux/syscalls.h"
#include "server/protocol.h"

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77  // Linux 6.5
#endif

namespace pulsebox::server {

using core::UniqueFd;
namespace fs = std::filesystem;

namespace {

constexpr int kExitCannotStart = 125;

void say(const std::string& line) {
  const std::string text = "pulsebox serve: " + line + "\n";
  (void)core::write_all(STDERR_FILENO, text, "a message");
}

// CapEff of /proc/<pid>/status (or of "self"), nullopt when unreadable.
std::optional<std::uint64_t> effective_capabilities(const std::string& pid) {
  std::ifstream status("/proc/" + pid + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("CapEff:", 0) == 0) return std::strtoull(line.c_str() + 7, nullptr, 16);
  }
  return std::nullopt;
}

bool same_namespace(const std::string& pid, const char* kind) {
  struct stat theirs {
  }, ours{};
  return ::stat(("/proc/" + pid + "/ns/" + kind).c_str(), &theirs) == 0 &&
         ::stat((std::string("/proc/self/ns/") + kind).c_str(), &ours) == 0 &&
         theirs.st_dev == ours.st_dev && theirs.st_ino == ours.st_ino;
}

// Why this client may not be served here ("" when it may): the server does
// only what the client could do itself. Same uid; same user and mount
// namespaces (paths mean the same); every capability the server has.
std::string refusal_for(int connection) {
  const auto uid = peer_uid(connection);
  if (!uid || *uid != ::geteuid()) return "the client is another user";
  ucred credentials{};
  socklen_t size = sizeof credentials;
  if (::getsockopt(connection, SOL_SOCKET, SO_PEERCRED, &credentials, &size) != 0) {
    return "no peer credentials";
  }
  // The peer as a pidfd taken at connect time (SO_PEERPIDFD): it is still
  // that process after /proc was read only if the pidfd still reaches it.
  int pidfd = -1;
  size = sizeof pidfd;
  UniqueFd peer;
  if (::getsockopt(connection, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &size) == 0) {
    peer.reset(pidfd);
  } else {
    peer.reset(linux_api::sys_pidfd_open(credentials.pid));
  }
  const std::string pid = std::to_string(credentials.pid);
  if (!same_namespace(pid, "user")) return "the client is in another user namespace";
  if (!same_namespace(pid, "mnt")) return "the client is in another mount namespace";
  const auto theirs = effective_capabilities(pid);
  const auto ours = effective_capabilities("self");
  if (!theirs || !ours || (*ours & ~*theirs) != 0) {
    return "the client lacks capabilities this server has";
  }
  if (!peer || linux_api::sys_pidfd_send_signal(peer.get(), 0) != 0) return "the client is gone";
  return "";
}

// The arguments of `run` parsed as the CLI does; nullopt (for a fallback)
// when they do not parse, or ask for help: the client's own parser then
// prints exactly what it prints without a server.
std::optional<cli::RunOptions> parse_run_arguments(const std::vector<std::string>& args) {
  CLI::App parser{"pulsebox run"};
  cli::RunOptions options;
  cli::add_run_options(parser, options);
  std::vector<std::string> flags;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--") {
      options.command.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      break;
    }
    flags.push_back(args[i]);
  }
  std::reverse(flags.begin(), flags.end());  // CLI11 takes the arguments reversed
  try {
    parser.parse(flags);
  } catch (const CLI::Error&) {
    return std::nullopt;
  }
  return options;
}

class Server {
 public:
  explicit Server(const LocalServerOptions& options)
      : options_(options), binary_(binary_identity()) {}

  int serve();

 private:
  void handle(UniqueFd connection);
  // Serves one request; returns the reply.
  RunReply serve_request(int connection);
  backends::NativeRuntime& runtime_for(bool subordinate_ids);

  const LocalServerOptions& options_;
  const std::string binary_;
  std::mutex runtimes_mutex_;
  std::map<bool, std::shared_ptr<backends::NativeRuntime>> runtimes_;
  std::mutex active_mutex_;
  std::condition_variable active_changed_;
  int active_ = 0;
};

backends::NativeRuntime& Server::runtime_for(bool subordinate_ids) {
  const std::lock_guard lock(runtimes_mutex_);
  auto& runtime = runtimes_[subordinate_ids];
  if (!runtime) {
    NativeBackendOptions native;
    native.state_dir = options_.state_dir;
    native.subordinate_ids = subordinate_ids;
    runtime = backends::make_native_runtime(native, options_.prestart);
  }
  return *runtime;
}

RunReply Server::serve_request(int connection) {
  auto fallback = [](std::string reason) {
    return RunReply{ReplyKind::Fallback, 0, std::move(reason)};
  };
  core::trace_restart();
  core::trace_phase("server: connection");
  // Read first, whatever the answer: a socket closed with a message unread
  // would reset the client's end before it reads the reply.
  auto message = receive_message(connection, kMaxRequestBytes + 4096, 3);
  if (!message) return fallback("the request was not read: " + core::describe_errno(errno));
  if (const std::string refused = refusal_for(connection); !refused.empty()) {
    return fallback(refused);
  }
  core::trace_phase("server: client checked");
  auto decoded = decode_request(message->bytes);
  if (!decoded) return fallback(decoded.error().to_string());
  const RunRequest& request = decoded.value();
  if (request.client_binary != binary_ || binary_.empty()) {
    return fallback("the client runs another pulsebox binary than this server");
  }
  if (message->fds.size() != 3)
    return fallback("the request carried no working directory and output");
  core::trace_phase("server: request read");
  auto options = parse_run_arguments(request.args);
  if (!options) return fallback("the arguments are for the client's own parser");
  std::map<std::string, std::string> environment;
  for (const auto& entry : request.environment) {
    const auto eq = entry.find('=');
    if (eq != std::string::npos) environment.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  // Only the native backend chosen the way the client would choose it.
  const auto remote = environment.find("PULSE_REMOTE_URL");
  if ((!options->backend.empty() && options->backend != "native") || options->unsafe_host ||
      (options->backend.empty() && remote != environment.end() && !remote->second.empty())) {
    return fallback("only native runs go through the server");
  }
  // The client's working directory and umask, for this thread only (it has
  // its own after unshare(CLONE_FS)).
  if (::fchdir(message->fds[0].get()) != 0) {
    return fallback("cannot enter the client's working directory: " + core::describe_errno(errno));
  }
  ::umask(static_cast<mode_t>(request.umask & 0777));

  cli::RunIo io;
  io.out_fd = message->fds[1].get();
  io.err_fd = message->fds[2].get();
  io.environment = &environment;
  io.native_backend = runtime_for(options->subordinate_ids).make_backend();
  io.cancel_fd = connection;
  const auto start = std::chrono::steady_clock::now();
  int code = cli::kExitUsage;
  try {
    code = cli::execute_run(*options, io);
  } catch (const std::exception& error) {
    (void)core::write_all(io.err_fd, "pulsebox: " + std::string(error.what()) + "\n", "an error");
  }
  core::trace_phase("server: run done");
  if (options_.verbose) {
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    char timing[48];
    std::snprintf(timing, sizeof timing, "%.1f ms", ms);
    std::string command;
    for (const auto& arg : options->command)
      command += (command.empty() ? "" : " ") + arg;
    say("run in " + request.cwd + ": " + command + ": exit " + std::to_string(code) + " in " +
        timing);
  }
  return RunReply{ReplyKind::Done, code, ""};
}

void Server::handle(UniqueFd connection) {
  // The client's working directory and umask belong to this thread alone.
  if (::unshare(CLONE_FS) == 0) {
    const RunReply reply = serve_request(connection.get());
    if (reply.kind == ReplyKind::Fallback && options_.verbose) say("fallback: " + reply.reason);
    (void)send_message(connection.get(), encode(reply));
    core::trace_phase("server: replied");
    core::trace_flush();
  } else {
    (void)send_message(connection.get(),
                       encode(RunReply{ReplyKind::Fallback, 0, "unshare(CLONE_FS) failed"}));
  }
  connection.reset();
  {
    const std::lock_guard lock(active_mutex_);
    --active_;
  }
  active_changed_.notify_all();
}

int Server::serve() {
  const fs::path socket_path =
      options_.socket_path.empty() ? default_socket_path(options_.state_dir) : options_.socket_path;
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (socket_path.string().size() >= sizeof address.sun_path) {
    say("the socket path " + socket_path.string() + " is longer than " +
        std::to_string(sizeof address.sun_path - 1) +
        " bytes; choose a shorter one with --socket (the clients look for <state "
        "directory>/server.sock, or PULSEBOX_SERVER=PATH)");
    return kExitCannotStart;
  }
  std::memcpy(address.sun_path, socket_path.c_str(), socket_path.string().size());
  std::error_code ec;
  fs::create_directories(socket_path.parent_path(), ec);
  ::chmod(options_.state_dir.c_str(), ::geteuid() == 0 ? 0711 : 0700);

  // One server per socket: the lock beside it says who has it.
  const fs::path lock_path = socket_path.string() + ".lock";
  UniqueFd lock(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!lock) {
    say("cannot open " + lock_path.string() + ": " + core::describe_errno(errno));
    return kExitCannotStart;
  }
  if (::flock(lock.get(), LOCK_EX | LOCK_NB) != 0) {
    char pid[32] = {};
    (void)::pread(lock.get(), pid, sizeof pid - 1, 0);
    say("another pulsebox server already serves " + socket_path.string() + " (pid " +
        std::string(pid, strnlen(pid, sizeof pid)) + "); stop it first");
    return kExitCannotStart;
  }
  const std::string own_pid = std::to_string(::getpid());
  if (::ftruncate(lock.get(), 0) != 0 ||
      ::pwrite(lock.get(), own_pid.data(), own_pid.size(), 0) < 0) {
    say("cannot write " + lock_path.string() + ": " + core::describe_errno(errno));
    return kExitCannotStart;
  }

  // Signals are taken from a signalfd; every thread (and so every sandbox's
  // init, which resets its mask) inherits this mask. A client's closed
  // stdout is an EPIPE for that run, never the server's end.
  ::signal(SIGPIPE, SIG_IGN);
  sigset_t stops;
  sigemptyset(&stops);
  for (int signal : {SIGTERM, SIGINT, SIGHUP})
    sigaddset(&stops, signal);
  ::pthread_sigmask(SIG_BLOCK, &stops, nullptr);
  UniqueFd signals(::signalfd(-1, &stops, SFD_CLOEXEC));

  UniqueFd listener(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  ::unlink(socket_path.c_str());          // a crashed server's: the lock above is ours
  const mode_t previous = ::umask(0177);  // the socket: 0600 from the start
  const int bound =
      listener ? ::bind(listener.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) : -1;
  ::umask(previous);
  if (!signals || bound != 0 || ::listen(listener.get(), 128) != 0) {
    say("cannot listen on " + socket_path.string() + ": " + core::describe_errno(errno));
    return kExitCannotStart;
  }

  // The default run's sandbox, started ahead: the first run is warm too.
  runtime_for(false).start_ahead(NetworkPolicy{}, ResourcePolicy{});
  say("serving pulsebox runs of uid " + std::to_string(::geteuid()) + " on " +
      socket_path.string() + " (pid " + own_pid + ")" +
      (options_.prestart ? ", each sandbox started ahead" : ""));

  bool draining = false;
  for (;;) {
    pollfd fds[] = {{draining ? -1 : listener.get(), POLLIN, 0}, {signals.get(), POLLIN, 0}};
    if (draining) {
      std::unique_lock guard(active_mutex_);
      if (active_ == 0) break;
      guard.unlock();
      if (::poll(fds, 2, 100) < 0 && errno != EINTR) break;
    } else if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      say("poll: " + core::describe_errno(errno));
      break;
    }
    if ((fds[1].revents & POLLIN) != 0) {
      signalfd_siginfo info{};
      if (::read(signals.get(), &info, sizeof info) != sizeof info) continue;
      if (draining) {
        say("second signal: ending the runs still going");
        ::unlink(socket_path.c_str());
        std::_Exit(1);  // every sandbox's init dies with its creating thread
      }
      draining = true;
      ::unlink(socket_path.c_str());
      listener.reset();
      say(std::string("got ") + strsignal(static_cast<int>(info.ssi_signo)) +
          ": no new runs; waiting for the runs still going (signal again to end them)");
      continue;
    }
    if (draining || (fds[0].revents & POLLIN) == 0) continue;
    UniqueFd connection(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!connection) continue;
    {
      const std::lock_guard guard(active_mutex_);
      ++active_;
    }
    std::thread([this, c = std::move(connection)]() mutable { handle(std::move(c)); }).detach();
  }
  {
    std::unique_lock guard(active_mutex_);
    active_changed_.wait(guard, [&] { return active_ == 0; });
  }
  runtimes_.clear();  // the sandboxes started ahead are torn down
  ::unlink(socket_path.c_str());
  say("stopped");
  return 0;
}

}  // namespace

fs::path default_socket_path(const fs::path& state_dir) {
  return state_dir / "server.sock";
}

int serve_locally(const LocalServerOptions& options) {
  Server server(options);
  return server.serve();
}

}  // namespace pulsebox::server
