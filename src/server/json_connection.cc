// One newline-delimited JSON connection (json_connection.h).
#include "server/json_connection.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "core/fs.h"
#include "core/json_parse.h"
#include "core/unique_fd.h"
#include "protocol/run_request.h"
#include "run/run_command.h"

namespace pulsebox::server {
namespace {

using core::UniqueFd;
using protocol::ErrorCode;
using protocol::ProtocolError;

// A request line: the run's stdin travels in it, so it may be large.
constexpr std::size_t kMaxLineBytes = 16 * 1024 * 1024;
constexpr int kFirstLineTimeoutMs = 30'000;

bool send_line(int fd, std::string_view message) {
  std::string line(message);
  line.push_back('\n');
  std::size_t sent = 0;
  while (sent < line.size()) {
    const ssize_t n = ::send(fd, line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    sent += static_cast<std::size_t>(n);
  }
  return true;
}

// Reads up to the first newline; what came after it stays in `rest`.
std::optional<std::string> read_first_line(int fd, std::string& rest, std::string& why) {
  std::string buffer;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(kFirstLineTimeoutMs);
  char chunk[65536];
  for (;;) {
    if (const auto end = buffer.find('\n'); end != std::string::npos) {
      rest = buffer.substr(end + 1);
      buffer.resize(end);
      return buffer;
    }
    if (buffer.size() > kMaxLineBytes) {
      why = "the request line is over " + std::to_string(kMaxLineBytes) + " bytes";
      return std::nullopt;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    pollfd item{fd, POLLIN, 0};
    if (left <= 0 || ::poll(&item, 1, static_cast<int>(left)) == 0) {
      why = "no request line within " + std::to_string(kFirstLineTimeoutMs / 1000) + " s";
      return std::nullopt;
    }
    const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      why = "the connection ended before a whole request line";
      return std::nullopt;
    }
    buffer.append(chunk, static_cast<std::size_t>(n));
  }
}

// The approvals a client sends during its run, and its hang-up.
class ClientListener {
 public:
  ClientListener(int fd, std::string already_read, int stop_fd)
      : fd_(fd),
        stop_fd_(stop_fd),
        cancel_(::eventfd(0, EFD_CLOEXEC)),
        done_(::eventfd(0, EFD_CLOEXEC)) {
    pending_ = std::move(already_read);
    take_lines();
    thread_ = std::thread([this] { listen(); });
  }
  ~ClientListener() {
    const std::uint64_t one = 1;
    (void)::write(done_.get(), &one, sizeof one);
    thread_.join();
  }
  int cancel_fd() const { return cancel_.get(); }

  std::optional<bool> wait_for(const std::string& approval_id, unsigned timeout_seconds) {
    std::unique_lock lock(mutex_);
    changed_.wait_for(lock, std::chrono::seconds(timeout_seconds),
                      [&] { return answers_.count(approval_id) != 0 || gone_; });
    const auto it = answers_.find(approval_id);
    if (it == answers_.end()) return std::nullopt;
    return it->second;
  }

 private:
  void listen() {
    char chunk[4096];
    for (;;) {
      pollfd fds[3] = {
          {fd_, POLLIN | POLLRDHUP, 0}, {done_.get(), POLLIN, 0}, {stop_fd_, POLLIN, 0}};
      if (::poll(fds, stop_fd_ >= 0 ? 3 : 2, -1) < 0) {
        if (errno == EINTR) continue;
        return cancel();
      }
      if (fds[1].revents != 0) return;
      if (stop_fd_ >= 0 && fds[2].revents != 0) return cancel();
      const ssize_t n = ::recv(fd_, chunk, sizeof chunk, MSG_DONTWAIT);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) return cancel();  // hang-up: the run is cancelled
      pending_.append(chunk, static_cast<std::size_t>(n));
      if (pending_.size() > kMaxLineBytes) return cancel();
      take_lines();
    }
  }

  // {"v":1,"request":"approval","approval_id":"approval-1","decision":"allow"}
  void take_lines() {
    for (auto end = pending_.find('\n'); end != std::string::npos; end = pending_.find('\n')) {
      const std::string line = pending_.substr(0, end);
      pending_.erase(0, end + 1);
      auto parsed = core::parse_json(line, "an approval");
      if (!parsed) continue;
      const auto& answer = parsed.value();
      if (!answer.is_object() || answer.value("request", "") != "approval") continue;
      const std::string id = answer.value("approval_id", "");
      const std::string decision = answer.value("decision", "");
      if (id.empty() || (decision != "allow" && decision != "deny")) continue;
      const std::lock_guard lock(mutex_);
      answers_.emplace(id, decision == "allow");  // the first answer counts
      changed_.notify_all();
    }
  }

  void cancel() {
    const std::uint64_t one = 1;
    (void)::write(cancel_.get(), &one, sizeof one);
    const std::lock_guard lock(mutex_);
    gone_ = true;
    changed_.notify_all();
  }

  int fd_;
  int stop_fd_;
  UniqueFd cancel_;
  UniqueFd done_;
  std::string pending_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, bool> answers_;
  bool gone_ = false;
  std::thread thread_;
};

int serve_run(int fd, const nlohmann::json& body, std::string rest,
              const JsonConnectionContext& context) {
  auto refuse = [fd](const ProtocolError& error) {
    (void)send_line(fd, protocol::error_event("", error));
    return run::kExitRefused;
  };
  auto parsed = protocol::parse_run_request(body);
  if (!parsed) return refuse(parsed.error);
  protocol::RunRequest& request = *parsed.request;
  if (!request.workspace_upload.empty()) {
    return refuse({ErrorCode::InvalidField,
                   "workspace_upload: uploads travel over HTTP (pulsebox serve --listen); here "
                   "name the workspace's path",
                   "workspace_upload",
                   {}});
  }
  auto workspace = protocol::caller_workspace(body, context.caller);
  if (auto* refused = std::get_if<ProtocolError>(&workspace)) return refuse(*refused);
  run::RunOptions options = std::move(request.options);
  options.workspace = std::get<std::filesystem::path>(workspace).string();
  UniqueFd stdin_file;
  auto io = protocol::carrier_io(request, stdin_file);
  if (!io) return refuse({ErrorCode::Internal, "cannot hold the run's stdin", "stdin", {}});

  ClientListener listener(fd, std::move(rest), context.stop_fd);
  std::mutex write_mutex;
  run::RunEvents events;
  events.execution_id = request.execution_id;
  events.write = [&](std::string_view message) {
    const std::lock_guard lock(write_mutex);
    return send_line(fd, message);
  };
  if (request.approvals == protocol::ApprovalMode::Ask) {
    events.wait_for_answer = [&listener](const std::string& id, unsigned timeout) {
      return listener.wait_for(id, timeout);
    };
  }
  if (context.backend) io->native_backend = context.backend();
  io->cancel_fd = listener.cancel_fd();
  io->events = &events;
  return run::execute_run(options, *io);
}

}  // namespace

int serve_json_connection(int fd, const JsonConnectionContext& context) {
  std::string rest;
  std::string why;
  const auto line = read_first_line(fd, rest, why);
  if (!line) {
    (void)send_line(fd, protocol::error_response({ErrorCode::InvalidRequest, why, "", {}}));
    return run::kExitRefused;
  }
  auto body = core::parse_json(*line, "the request");
  if (!body) {
    (void)send_line(fd, protocol::error_response(
                            {ErrorCode::InvalidRequest, body.error().to_string(), "", {}}));
    return run::kExitRefused;
  }
  const nlohmann::json& request = body.value();
  const std::string name =
      request.is_object() && request.contains("request") && request["request"].is_string()
          ? request["request"].get<std::string>()
          : "";
  try {
    if (name == "run") return serve_run(fd, request, std::move(rest), context);
    if (name == "health" && context.health) {
      (void)send_line(fd, context.health().dump());
      return 0;
    }
    const auto answer = protocol::handle_operation(name, request, context.caller);
    (void)send_line(fd, answer.error ? protocol::error_response(*answer.error)
                                     : answer.body.dump(-1, ' ', false,
                                                        protocol::Json::error_handler_t::replace));
    return answer.error ? run::kExitRefused : 0;
  } catch (const std::exception& error) {
    (void)send_line(fd, protocol::error_response(protocol::error_from_exception(error)));
    return run::kExitRefused;
  }
}

}  // namespace pulsebox::server
