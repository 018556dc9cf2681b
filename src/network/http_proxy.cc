#include "network/http_proxy.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <list>
#include <mutex>
#include <thread>

namespace pulsebox::network {

namespace {

using Clock = std::chrono::steady_clock;

struct Answer {
  int status;
  std::string_view text;
};

constexpr Answer kBadRequest{400, "Bad Request"};
constexpr Answer kForbidden{403, "Forbidden"};
constexpr Answer kTimeout{408, "Request Timeout"};
constexpr Answer kBadGateway{502, "Bad Gateway"};
constexpr Answer kUnavailable{503, "Service Unavailable"};

// Sends all of `data` on a non-blocking socket, waiting at most `deadline`
// and returning early when `stop_fd` fires.
bool send_all(int fd, std::string_view data, int stop_fd, Clock::time_point deadline) {
  while (!data.empty()) {
    const ssize_t sent = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (sent > 0) {
      data.remove_prefix(static_cast<std::size_t>(sent));
      continue;
    }
    if (sent < 0 && errno == EINTR) continue;
    if (sent < 0 && errno != EAGAIN) return false;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    pollfd fds[2] = {{fd, POLLOUT, 0}, {stop_fd, POLLIN, 0}};
    if (::poll(fds, 2, static_cast<int>(left.count())) < 0 && errno != EINTR) return false;
    if (fds[1].revents != 0) return false;
  }
  return true;
}

void answer(int fd, Answer answer, const std::string& reason, int stop_fd) {
  const std::string body = reason + "\n";
  const std::string response = "HTTP/1.1 " + std::to_string(answer.status) + " " +
                               std::string(answer.text) +
                               "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: " +
                               std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
  send_all(fd, response, stop_fd, Clock::now() + std::chrono::seconds(2));
}

}  // namespace

struct HttpProxy::State {
  ProxyConfig config;
  core::UniqueFd stop_fd;  // an eventfd: readable once stop() began, for every poll
  std::thread acceptor;
  std::mutex record_mutex;
  std::atomic<std::size_t> active{0};
  bool stopped = false;

  struct Connection {
    std::thread thread;
    std::atomic<bool> done{false};
  };
  std::list<Connection> connections;  // touched by the acceptor, then by stop()

  void emit(ProxyRecord record) {
    record.method = scrub(record.method);
    record.host = scrub(record.host);
    record.reason = scrub(record.reason);
    if (!config.on_record) return;
    const std::lock_guard lock(record_mutex);
    config.on_record(record);
  }

  std::string scrub(std::string_view text) const {
    return config.scrub ? config.scrub(text) : std::string(text);
  }

  bool stopping() const {
    pollfd fd{stop_fd.get(), POLLIN, 0};
    return ::poll(&fd, 1, 0) > 0;
  }

  void refuse(int client, ProxyRecord record, Answer status) {
    record.allowed = false;
    emit(record);
    answer(client, status, "pulsebox proxy: " + scrub(record.reason), stop_fd.get());
  }

  void accept_loop();
  void serve(core::UniqueFd client);
  // The request head and whatever followed it; nullopt after answering.
  std::optional<std::pair<ProxyRequest, std::string>> read_request(int client);
  core::UniqueFd connect_to(const std::vector<IpAddress>& addresses, int port,
                            std::string& connected);
  void relay(int client, int upstream, std::string up, ProxyRecord& record);
};

void HttpProxy::State::accept_loop() {
  while (true) {
    for (auto it = connections.begin(); it != connections.end();) {
      if (it->done) {
        it->thread.join();
        it = connections.erase(it);
      } else {
        ++it;
      }
    }
    pollfd fds[2] = {{config.listener.get(), POLLIN, 0}, {stop_fd.get(), POLLIN, 0}};
    // Wakes now and then so finished connections are joined while idle.
    if (::poll(fds, 2, 1000) < 0 && errno != EINTR) return;
    if (fds[1].revents != 0) return;
    if (fds[0].revents == 0) continue;
    core::UniqueFd client(
        ::accept4(config.listener.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!client) {
      if (errno == EMFILE || errno == ENFILE) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      continue;
    }
    if (active.load() >= config.max_connections) {
      ProxyRecord record;
      record.reason =
          "too many connections (at most " + std::to_string(config.max_connections) + " at once)";
      refuse(client.get(), std::move(record), kUnavailable);
      continue;
    }
    ++active;
    auto& connection = connections.emplace_back();
    connection.thread = std::thread([this, &connection, fd = client.release()] {
      serve(core::UniqueFd(fd));
      --active;
      connection.done = true;
    });
  }
}

std::optional<std::pair<ProxyRequest, std::string>> HttpProxy::State::read_request(int client) {
  const auto deadline = Clock::now() + config.head_timeout;
  std::string buffer;
  std::size_t scanned = 0;
  char chunk[4096];
  while (true) {
    const auto end = buffer.find("\r\n\r\n", scanned >= 3 ? scanned - 3 : 0);
    if (end != std::string::npos) {
      const auto request = parse_proxy_request(std::string_view(buffer).substr(0, end + 4));
      if (!request) {
        refuse(client, ProxyRecord{.reason = "malformed request"}, kBadRequest);
        return std::nullopt;
      }
      return std::make_pair(*request, buffer.substr(end + 4));
    }
    scanned = buffer.size();
    if (buffer.size() >= kMaxRequestHead) {
      refuse(client, ProxyRecord{.reason = "request head over 16 KiB"}, kBadRequest);
      return std::nullopt;
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      refuse(client, ProxyRecord{.reason = "no complete request head in time"}, kTimeout);
      return std::nullopt;
    }
    pollfd fds[2] = {{client, POLLIN, 0}, {stop_fd.get(), POLLIN, 0}};
    if (::poll(fds, 2, static_cast<int>(left.count())) < 0 && errno != EINTR) return std::nullopt;
    if (fds[1].revents != 0) {
      emit(ProxyRecord{.reason = "proxy stopped before a complete request head"});
      return std::nullopt;
    }
    if (fds[0].revents == 0) continue;
    const std::size_t room = std::min(sizeof chunk, kMaxRequestHead - buffer.size());
    const ssize_t got = ::recv(client, chunk, room, 0);
    if (got < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (got <= 0) {
      emit(ProxyRecord{.reason = "client closed before a complete request head"});
      return std::nullopt;
    }
    buffer.append(chunk, static_cast<std::size_t>(got));
  }
}

core::UniqueFd HttpProxy::State::connect_to(const std::vector<IpAddress>& addresses, int port,
                                            std::string& connected) {
  for (const auto& address : addresses) {
    socklen_t length = 0;
    sockaddr_storage storage = socket_address(address, port, &length);
    core::UniqueFd fd(::socket(address.family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd) continue;
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&storage), length) != 0) {
      if (errno != EINPROGRESS) continue;
      pollfd fds[2] = {{fd.get(), POLLOUT, 0}, {stop_fd.get(), POLLIN, 0}};
      const int ready = ::poll(fds, 2, static_cast<int>(config.connect_timeout.count()));
      if (ready <= 0 || fds[1].revents != 0) {
        if (fds[1].revents != 0) return {};
        continue;
      }
      int error = 0;
      socklen_t size = sizeof error;
      if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &size) != 0 || error != 0) continue;
    }
    connected = to_string(address);
    return fd;
  }
  return {};
}

void HttpProxy::State::relay(int client, int upstream, std::string up, ProxyRecord& record) {
  // One buffer per direction; a side's EOF is passed on as shutdown(SHUT_WR)
  // once its buffer is drained.
  struct Direction {
    int from;
    int to;
    std::string buffer;
    bool eof = false;
    bool closed = false;
    std::uint64_t* count;
  };
  Direction directions[2] = {{client, upstream, std::move(up), false, false, &record.bytes_up},
                             {upstream, client, {}, false, false, &record.bytes_down}};
  char chunk[64 * 1024];
  while (!(directions[0].closed && directions[1].closed)) {
    pollfd fds[3] = {{client, 0, 0}, {upstream, 0, 0}, {stop_fd.get(), POLLIN, 0}};
    for (auto& d : directions) {
      pollfd& from = fds[d.from == client ? 0 : 1];
      pollfd& to = fds[d.to == client ? 0 : 1];
      if (!d.eof && d.buffer.empty()) from.events |= POLLIN;
      if (!d.buffer.empty()) to.events |= POLLOUT;
    }
    // A side with nothing to wait for stays out of poll: its hang-up or
    // error would otherwise wake this loop again and again.
    for (int i = 0; i < 2; ++i) {
      if (fds[i].events == 0) fds[i].fd = -1;
    }
    if (::poll(fds, 3, -1) < 0) {
      if (errno == EINTR) continue;
      record.reason += "; the relay failed";
      return;
    }
    if (fds[2].revents != 0) {
      record.reason += "; closed when the proxy stopped";
      return;
    }
    for (auto& d : directions) {
      if (!d.eof && d.buffer.empty()) {
        const ssize_t got = ::recv(d.from, chunk, sizeof chunk, 0);
        if (got > 0) {
          d.buffer.assign(chunk, static_cast<std::size_t>(got));
        } else if (got == 0 || (errno != EAGAIN && errno != EINTR)) {
          d.eof = true;
        }
      }
      if (!d.buffer.empty()) {
        const ssize_t sent = ::send(d.to, d.buffer.data(), d.buffer.size(), MSG_NOSIGNAL);
        if (sent > 0) {
          d.buffer.erase(0, static_cast<std::size_t>(sent));
          *d.count += static_cast<std::uint64_t>(sent);
        } else if (sent < 0 && errno != EAGAIN && errno != EINTR) {
          // The receiver is gone: nothing more can go this way.
          d.buffer.clear();
          d.eof = true;
        }
      }
      if (d.eof && d.buffer.empty() && !d.closed) {
        ::shutdown(d.to, SHUT_WR);
        d.closed = true;
      }
    }
  }
}

void HttpProxy::State::serve(core::UniqueFd client) {
  auto head = read_request(client.get());
  if (!head) return;
  auto& [request, rest] = *head;
  ProxyRecord record{.method = request.method, .host = request.host, .port = request.port};

  // Which rule lets the host through: a domain pattern, or a listed literal.
  std::string allowed_by;
  if (const auto literal = parse_ip_address(request.host)) {
    for (const auto& range : config.listed) {
      if (contains(range, *literal)) allowed_by = "--allow " + to_string(range);
    }
  } else if (const auto name = normalise_host_name(request.host)) {
    record.host = *name;
    for (const auto& pattern : config.domains) {
      if (pattern.matches(*name)) allowed_by = "--allow-domain " + pattern.text();
    }
  }
  if (allowed_by.empty()) {
    record.reason = record.host + " is not an allowed destination";
    return refuse(client.get(), std::move(record), kForbidden);
  }

  auto resolved = config.resolve ? config.resolve(record.host, config.listed)
                                 : resolve_guarded(record.host, config.listed);
  if (resolved) {
    if (auto own = refuse_own_addresses(*resolved, config.listed); !own) resolved = own.error();
  }
  if (!resolved) {
    record.reason = resolved.error().message();
    return refuse(client.get(), std::move(record), kForbidden);
  }
  if (!destination_allowed(*resolved)) {
    std::string refused;
    for (const auto& [address, kind] : resolved->refused) {
      record.addresses.push_back(to_string(address));
      refused += (refused.empty() ? "" : ", ") + to_string(address) + " (" +
                 std::string(to_string(kind)) + ")";
    }
    record.reason = record.host + " resolves to " +
                    (refused.empty() ? std::string("no address") : refused) +
                    ", not listed with --allow";
    return refuse(client.get(), std::move(record), kForbidden);
  }

  std::string connected;
  core::UniqueFd upstream = connect_to(resolved->allowed, request.port, connected);
  if (!upstream) {
    for (const auto& address : resolved->allowed)
      record.addresses.push_back(to_string(address));
    record.reason = stopping() ? "proxy stopped while connecting"
                               : "could not connect to " + record.host + " port " +
                                     std::to_string(request.port);
    return refuse(client.get(), std::move(record), kBadGateway);
  }
  record.addresses.push_back(connected);
  record.allowed = true;
  record.reason = "allowed by " + allowed_by;

  std::string up;
  if (request.method == "CONNECT") {
    const auto deadline = Clock::now() + std::chrono::seconds(5);
    if (!send_all(client.get(), "HTTP/1.1 200 Connection established\r\n\r\n", stop_fd.get(),
                  deadline)) {
      record.reason += "; the client went away";
      return emit(std::move(record));
    }
    up = std::move(rest);
  } else {
    up = origin_form_head(request) + rest;
  }
  relay(client.get(), upstream.get(), std::move(up), record);
  emit(std::move(record));
}

HttpProxy::HttpProxy(std::unique_ptr<State> state) : state_(std::move(state)) {}

core::Result<std::unique_ptr<HttpProxy>> HttpProxy::start(ProxyConfig config) {
  if (!config.listener) {
    return core::Error(core::ErrorKind::kInternal, "network", "the proxy was given no listener");
  }
  const int flags = ::fcntl(config.listener.get(), F_GETFL);
  if (flags < 0 || ::fcntl(config.listener.get(), F_SETFL, flags | O_NONBLOCK) != 0)
    return core::Error::from_errno("network", "making the proxy's listener non-blocking");
  auto state = std::make_unique<State>();
  state->config = std::move(config);
  state->stop_fd.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!state->stop_fd) return core::Error::from_errno("network", "eventfd for the proxy");
  State* raw = state.get();
  state->acceptor = std::thread([raw] { raw->accept_loop(); });
  return std::unique_ptr<HttpProxy>(new HttpProxy(std::move(state)));
}

void HttpProxy::stop() {
  if (!state_ || state_->stopped) return;
  state_->stopped = true;
  const std::uint64_t one = 1;
  // An eventfd write of 1 cannot fail short of overflow; it wakes every poll.
  [[maybe_unused]] const auto written = ::write(state_->stop_fd.get(), &one, sizeof one);
  state_->acceptor.join();
  state_->config.listener.reset();
  for (auto& connection : state_->connections)
    connection.thread.join();
  state_->connections.clear();
}

HttpProxy::~HttpProxy() {
  stop();
}

}  // namespace pulsebox::network
