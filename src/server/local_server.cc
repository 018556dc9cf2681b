#include "server/local_server.h"

#include "protocol/messages.h"
#include "pulsebox/version.h"
#include "server/json_connection.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <malloc.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "backends/native_runtime.h"
#include "core/fs.h"
#include "core/text.h"
#include "core/trace.h"
#include "core/unique_fd.h"
#include "linux/syscalls.h"
#include "run/run_command.h"
#include "server/protocol.h"

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77  // Linux 6.5
#endif

namespace pulsebox::server {

using core::UniqueFd;
namespace fs = std::filesystem;

namespace {

constexpr int kExitCannotStart = 125;

constexpr std::size_t kSocketPathBytes = sizeof(sockaddr_un{}.sun_path);

// A unix socket of this user's alone (0600 from the start: no moment
// another user could connect) listening at `path`, which fits sun_path;
// a crashed server's socket there is replaced (the caller holds the lock
// beside it). It is bound under a temporary name beside `path` and renamed
// into place once it listens: a client that finds the name can connect
// (one refused would quietly run in its own process). The temporary name is
// fixed, so a server that died before the rename leaves nothing the next
// one (holding the same lock) does not replace. Invalid, with errno set, on
// failure.
UniqueFd listen_private(const fs::path& path, int type) {
  fs::path bound_at = path.parent_path() / ("." + path.filename().string() + ".bind");
  if (bound_at.string().size() >= kSocketPathBytes) bound_at = path;  // no room: bound in place
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, bound_at.c_str(), bound_at.string().size());
  UniqueFd listener(::socket(AF_UNIX, type | SOCK_CLOEXEC, 0));
  if (!listener) return listener;
  ::unlink(bound_at.c_str());
  const mode_t previous = ::umask(0177);
  const int bound = ::bind(listener.get(), reinterpret_cast<sockaddr*>(&address), sizeof address);
  const int bind_errno = errno;
  ::umask(previous);
  if (bound != 0) {
    errno = bind_errno;
    return UniqueFd();
  }
  if (::listen(listener.get(), 128) != 0 ||
      (bound_at != path && ::rename(bound_at.c_str(), path.c_str()) != 0)) {
    const int failed = errno;
    ::unlink(bound_at.c_str());
    errno = failed;
    return UniqueFd();
  }
  return listener;
}

void say(const std::string& line) {
  const std::string text = "pulsebox serve: " + line + "\n";
  (void)core::write_all(STDERR_FILENO, text, "a message");
}

// The effective capabilities of `pid` (0: this process), by capget(2): far
// cheaper than formatting /proc/<pid>/status.
std::optional<std::uint64_t> effective_capabilities(pid_t pid) {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, pid};
  __user_cap_data_struct data[2] = {};
  if (::syscall(SYS_capget, &header, data) != 0) return std::nullopt;
  return (static_cast<std::uint64_t>(data[1].effective) << 32) | data[0].effective;
}

struct NamespaceId {
  dev_t dev = 0;
  ino_t ino = 0;
  bool operator==(const NamespaceId&) const = default;
};

std::optional<NamespaceId> namespace_of(const std::string& pid, const char* kind) {
  struct stat st {};
  if (::stat(("/proc/" + pid + "/ns/" + kind).c_str(), &st) != 0) return std::nullopt;
  return NamespaceId{st.st_dev, st.st_ino};
}

// Linux 6.11's pidfd ioctls (<linux/pidfd.h>): a namespace of the process
// behind a pidfd, without looking it up in /proc (the first lookup of a
// pid there is slow).
constexpr unsigned long kPidfdGetMountNamespace = _IO(0xFF, 3);
constexpr unsigned long kPidfdGetUserNamespace = _IO(0xFF, 9);

std::optional<NamespaceId> namespace_of(int pidfd, unsigned long request, const std::string& pid,
                                        const char* kind) {
  const UniqueFd ns(pidfd >= 0 ? ::ioctl(pidfd, request, 0) : -1);
  struct stat st {};
  if (ns && ::fstat(ns.get(), &st) == 0) return NamespaceId{st.st_dev, st.st_ino};
  return namespace_of(pid, kind);  // an older kernel
}

// This process's side of the comparison, read once.
struct ServerIdentity {
  std::optional<NamespaceId> user_namespace = namespace_of("self", "user");
  std::optional<NamespaceId> mount_namespace = namespace_of("self", "mnt");
  std::optional<std::uint64_t> capabilities = effective_capabilities(0);
};

// Why this client may not be served here ("" when it may): the server does
// only what the client could do itself. Same uid; same user and mount
// namespaces (paths mean the same); every capability the server has.
std::string refusal_for(int connection, const ServerIdentity& self) {
  ucred credentials{};
  socklen_t size = sizeof credentials;
  if (::getsockopt(connection, SOL_SOCKET, SO_PEERCRED, &credentials, &size) != 0) {
    return "no peer credentials";
  }
  if (credentials.uid != ::geteuid()) return "the client is another user";
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
  const auto user = namespace_of(peer.get(), kPidfdGetUserNamespace, pid, "user");
  if (!user || user != self.user_namespace) return "the client is in another user namespace";
  const auto mount = namespace_of(peer.get(), kPidfdGetMountNamespace, pid, "mnt");
  if (!mount || mount != self.mount_namespace) return "the client is in another mount namespace";
  const auto theirs = effective_capabilities(credentials.pid);
  if (!theirs || !self.capabilities || (*self.capabilities & ~*theirs) != 0) {
    return "the client lacks capabilities this server has";
  }
  if (!peer || linux_api::sys_pidfd_send_signal(peer.get(), 0) != 0) return "the client is gone";
  return "";
}

// The parser of `run`'s arguments, built once per worker thread (building
// CLI11's options for each request showed in the served run's time) and
// reset for each.
class RunParser {
 public:
  RunParser() { run::add_run_options(parser_, options_); }

  // The arguments parsed as the CLI does; nullopt (for a fallback) when
  // they do not parse or ask for help: the client's own parser then prints
  // exactly what it prints without a server.
  std::optional<run::RunOptions> parse(const std::vector<std::string>& args) {
    options_ = run::RunOptions{};
    parser_.clear();
    std::vector<std::string> flags;
    std::optional<std::vector<std::string>> command;
    for (std::size_t i = 0; i < args.size(); ++i) {
      if (args[i] == "--") {
        command.emplace(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
        break;
      }
      flags.push_back(args[i]);
    }
    std::reverse(flags.begin(), flags.end());  // CLI11 takes the arguments reversed
    run::RunOptions parsed;
    try {
      parser_.parse(flags);
      parsed = options_;
      parsed.command = run::run_command_line(parser_.remaining(), command);
    } catch (const CLI::Error&) {
      return std::nullopt;
    }
    return parsed;
  }

 private:
  CLI::App parser_{"pulsebox run"};
  run::RunOptions options_;
};

class Server {
 public:
  explicit Server(const LocalServerOptions& options)
      : options_(options), binary_(binary_identity()) {}
  ~Server();

  int serve();

 private:
  // Takes connections from the queue until the server stops. Workers stay:
  // a run's sandbox launched on one (when none was started ahead) has it as
  // its parent thread, and each keeps its own working directory and parser.
  void work();
  void handle(UniqueFd connection, RunParser& parser);
  void handle_json(UniqueFd connection);
  protocol::Json health();
  // Serves one request; returns the reply.
  RunReply serve_request(int connection, RunParser& parser);
  backends::NativeRuntime& runtime_for(bool subordinate_ids);

  const LocalServerOptions& options_;
  const std::string binary_;
  const ServerIdentity identity_;
  std::mutex runtimes_mutex_;
  std::map<bool, std::shared_ptr<backends::NativeRuntime>> runtimes_;
  // The connections waiting for a worker, and the workers.
  std::mutex queue_mutex_;
  std::condition_variable queue_changed_;
  struct Pending {
    UniqueFd connection;
    bool json = false;  // the protocol socket's (json_connection.h)
  };
  std::vector<Pending> queue_;
  std::vector<std::thread> workers_;
  int idle_workers_ = 0;
  int active_ = 0;  // connections taken and not yet answered
  bool stopping_ = false;
};

Server::~Server() {
  {
    const std::lock_guard lock(queue_mutex_);
    stopping_ = true;
  }
  queue_changed_.notify_all();
  for (auto& worker : workers_)
    worker.join();
}

void Server::work() {
  // The client's working directory and umask belong to this thread alone.
  const bool own_fs = ::unshare(CLONE_FS) == 0;
  RunParser parser;
  std::unique_lock lock(queue_mutex_);
  for (;;) {
    ++idle_workers_;
    queue_changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    --idle_workers_;
    if (queue_.empty()) return;  // stopping, nothing left
    Pending pending = std::move(queue_.back());
    queue_.pop_back();
    lock.unlock();
    UniqueFd connection = std::move(pending.connection);
    if (pending.json) {
      ::umask(022);
      handle_json(std::move(connection));
    } else if (own_fs) {
      handle(std::move(connection), parser);
    } else {
      (void)send_message(connection.get(),
                         encode(RunReply{ReplyKind::Fallback, 0, "unshare(CLONE_FS) failed"}));
    }
    lock.lock();
    --active_;
    queue_changed_.notify_all();
  }
}

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

RunReply Server::serve_request(int connection, RunParser& parser) {
  auto fallback = [](std::string reason) {
    return RunReply{ReplyKind::Fallback, 0, std::move(reason)};
  };
  core::trace_restart();
  core::trace_phase("server: connection");
  // Read first, whatever the answer: a socket closed with a message unread
  // would reset the client's end before it reads the reply.
  auto message = receive_message(connection, kMaxRequestBytes + 4096, 4);
  if (!message) return fallback("the request was not read: " + core::describe_errno(errno));
  core::trace_phase("server: request received");
  if (const std::string refused = refusal_for(connection, identity_); !refused.empty()) {
    return fallback(refused);
  }
  core::trace_phase("server: client checked");
  auto decoded = decode_request(message->bytes);
  if (!decoded) return fallback(decoded.error().to_string());
  const RunRequest& request = decoded.value();
  // Never a run without the client's stdin: it would read /dev/null instead.
  if (message->fds.size() != 4)
    return fallback("the request carried no working directory, output and stdin");
  if (request.client_binary != binary_ || binary_.empty()) {
    return fallback("the client is another pulsebox release than this server");
  }
  core::trace_phase("server: request read");
  auto options = parser.parse(request.args);
  if (!options) return fallback("the arguments are for the client's own parser");
  // Raw mode and resizes are the user's terminal's, in the client's process.
  if (options->terminal) return fallback("-t runs in the client's process");
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

  run::RunIo io;
  io.in_fd = message->fds[3].get();
  io.out_fd = message->fds[1].get();
  io.err_fd = message->fds[2].get();
  io.environment = &environment;
  io.native_backend = runtime_for(options->subordinate_ids).make_backend();
  io.cancel_fd = connection;
  const auto start = std::chrono::steady_clock::now();
  int code = run::kExitRefused;
  try {
    code = run::execute_run(*options, io);
  } catch (const std::exception& error) {
    (void)core::write_all(io.err_fd, "pulsebox: " + std::string(error.what()) + "\n", "an error");
  }
  core::trace_phase("server: run done");
  if (options_.verbose) {
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    char timing[48];
    std::snprintf(timing, sizeof timing, "%.1f ms", ms);
    // Not the command line: it may hold a secret (the audit log has it, scrubbed).
    say("run in " + request.cwd + ": exit " + std::to_string(code) + " in " + timing);
  }
  return RunReply{ReplyKind::Done, code, ""};
}

void Server::handle(UniqueFd connection, RunParser& parser) {
  const RunReply reply = serve_request(connection.get(), parser);
  if (reply.kind == ReplyKind::Fallback && options_.verbose) say("fallback: " + reply.reason);
  (void)send_message(connection.get(), encode(reply));
  core::trace_phase("server: replied");
  core::trace_flush();
}

protocol::Json Server::health() {
  protocol::Json out;
  out["v"] = protocol::kProtocolVersion;
  out["status"] = "ok";
  out["version"] = std::string(version());
  const std::lock_guard guard(queue_mutex_);
  out["runs"] = {{"active", active_ - static_cast<int>(queue_.size())}, {"queued", queue_.size()}};
  return out;
}

void Server::handle_json(UniqueFd connection) {
  if (const std::string refused = refusal_for(connection.get(), identity_); !refused.empty()) {
    const protocol::ProtocolError error{
        protocol::ErrorCode::Forbidden,
        "this server serves its own user's clients only: " + refused,
        "",
        {}};
    (void)core::write_all(connection.get(), protocol::error_response(error) + "\n", "a reply");
    if (options_.verbose) say("refused a protocol client: " + refused);
    return;
  }
  JsonConnectionContext context;
  context.caller = {.identity = "uid " + std::to_string(::geteuid()), .uid = ::geteuid()};
  context.backend = [this] { return runtime_for(false).make_backend(); };
  context.health = [this] { return health(); };
  const int code = serve_json_connection(connection.get(), context);
  if (options_.verbose) say("protocol request: exit " + std::to_string(code));
}

int Server::serve() {
  const fs::path socket_path =
      options_.socket_path.empty() ? default_socket_path(options_.state_dir) : options_.socket_path;
  if (socket_path.string().size() >= kSocketPathBytes) {
    say("the socket path " + socket_path.string() + " is longer than " +
        std::to_string(kSocketPathBytes - 1) +
        " bytes; choose a shorter one with --socket (the clients look for <state "
        "directory>/server.sock, or PULSEBOX_SERVER=PATH)");
    return kExitCannotStart;
  }
  // The socket's directory is this user's alone (the state directory's
  // rules), so nobody else can put a socket of theirs in its place.
  try {
    backends::ensure_state_dir(options_.state_dir);
  } catch (const std::exception& error) {
    say(error.what());
    return kExitCannotStart;
  }
  // A directory given with --socket is only checked, never changed.
  if (const fs::path dir = socket_path.parent_path(); dir != options_.state_dir) {
    struct stat st {};
    if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid() ||
        (st.st_mode & 022) != 0) {
      say("the socket's directory " + dir.string() +
          " must be a directory of this user's that nobody else can write to (another user "
          "could put a socket of theirs in its place); choose another with --socket");
      return kExitCannotStart;
    }
  }

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

  UniqueFd listener = listen_private(socket_path, SOCK_SEQPACKET);
  if (!signals || !listener) {
    say("cannot listen on " + socket_path.string() + ": " + core::describe_errno(errno));
    return kExitCannotStart;
  }

  // The protocol's socket beside it (docs/protocol.md), for any client of
  // this user: newline-delimited JSON.
  const fs::path json_path = protocol_socket_path(socket_path);
  if (json_path.string().size() >= kSocketPathBytes) {
    say("the protocol socket path " + json_path.string() +
        " is too long; choose a shorter --socket");
    return kExitCannotStart;
  }
  UniqueFd json_listener = listen_private(json_path, SOCK_STREAM);
  if (!json_listener) {
    say("cannot listen on " + json_path.string() + ": " + core::describe_errno(errno));
    return kExitCannotStart;
  }

  // The default run's sandbox, started ahead: the first run is warm too.
  runtime_for(false).start_ahead(NetworkPolicy{}, ResourcePolicy{});
  say("serving pulsebox runs of uid " + std::to_string(::geteuid()) + " on " +
      socket_path.string() + " (pid " + own_pid + ")" +
      (options_.prestart ? ", each sandbox started ahead" : ""));

  bool draining = false;
  for (;;) {
    pollfd fds[] = {{draining ? -1 : listener.get(), POLLIN, 0},
                    {signals.get(), POLLIN, 0},
                    {draining ? -1 : json_listener.get(), POLLIN, 0}};
    if (draining) {
      std::unique_lock guard(queue_mutex_);
      if (active_ == 0) break;
      guard.unlock();
      if (::poll(fds, 3, 100) < 0 && errno != EINTR) break;
    } else if (::poll(fds, 3, -1) < 0) {
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
      ::unlink(json_path.c_str());
      listener.reset();
      json_listener.reset();
      say(std::string("got ") + strsignal(static_cast<int>(info.ssi_signo)) +
          ": no new runs; waiting for the runs still going (signal again to end them)");
      continue;
    }
    if (draining) continue;
    const bool json = (fds[2].revents & POLLIN) != 0;
    if (!json && (fds[0].revents & POLLIN) == 0) continue;
    UniqueFd connection(
        ::accept4(json ? json_listener.get() : listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!connection) continue;
    {
      const std::lock_guard guard(queue_mutex_);
      ++active_;
      queue_.push_back({std::move(connection), json});
      // A worker for each connection no idle one will take.
      if (queue_.size() > static_cast<std::size_t>(idle_workers_)) {
        workers_.emplace_back([this] { work(); });
      }
    }
    queue_changed_.notify_one();
  }
  {
    std::unique_lock guard(queue_mutex_);
    queue_changed_.wait(guard, [&] { return active_ == 0; });
  }
  runtimes_.clear();  // the sandboxes started ahead are torn down
  ::unlink(socket_path.c_str());
  ::unlink(json_path.c_str());
  say("stopped");
  return 0;
}

}  // namespace

fs::path default_socket_path(const fs::path& state_dir) {
  return state_dir / "server.sock";
}

fs::path protocol_socket_path(const fs::path& socket_path) {
  std::string path = socket_path.string();
  if (path.size() > 5 && path.compare(path.size() - 5, 5, ".sock") == 0) {
    return path.substr(0, path.size() - 5) + ".json.sock";
  }
  return path + ".json";
}

int serve_locally(const LocalServerOptions& options) {
  // One malloc arena for every thread: each worker's own arena grew the
  // server's RSS, and a run allocates little.
  ::mallopt(M_ARENA_MAX, 1);
  Server server(options);
  return server.serve();
}

}  // namespace pulsebox::server
