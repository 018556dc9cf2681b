#include "http/http_server.h"

#include <openssl/ssl.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <limits>
#include <nlohmann/json.hpp>

#include "core/unique_fd.h"
#include "http/peer_aware_server.h"
#include "http/unix_socket_path.h"
#include "protocol/messages.h"
#include "pulsebox_config.h"

namespace pulsebox::http {
namespace {

using core::Error;
using core::ErrorKind;
using Clock = std::chrono::steady_clock;

// How long runs get to end after their cancel_fd fired at shutdown.
constexpr auto kCancelledRunsEnd = std::chrono::seconds(10);
constexpr std::size_t kMaxRequestBody = 64 << 20;

// The request this thread is handling: who sent it, on which socket, since when.
struct RequestScope {
  ClientIdentity client;
  int socket = -1;
  Clock::time_point start;
};
thread_local RequestScope this_request;

void scope_request(const httplib::Request& request) {
  this_request.start = Clock::now();
  if (const Connection* connection = current_connection()) {
    this_request.client = connection->client;
    this_request.socket = connection->socket;
    return;
  }
  // TLS (httplib::SSLServer): the peer's address, and its socket for hang-ups.
  this_request.client =
      ClientIdentity{.transport = "tls",
                     .address = request.remote_addr + ":" + std::to_string(request.remote_port)};
  this_request.socket = request.ssl != nullptr ? SSL_get_fd(request.ssl) : -1;
}

// The path as logged: no query (httplib keeps it apart), no control bytes
// (the path is already percent-decoded), bounded.
std::string loggable_path(const std::string& path) {
  std::string text = path.substr(0, 200);
  for (char& c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  return path.size() > text.size() ? text + "..." : text;
}

bool peer_hung_up(int socket) {
  if (socket < 0) return false;
  pollfd entry{.fd = socket, .events = POLLRDHUP, .revents = 0};
  return ::poll(&entry, 1, 0) > 0;
}

void fire(int event_fd) {
  const std::uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(event_fd, &one, sizeof one);
}

// The protocol's error object (protocol/messages.h), with the HTTP status
// the transport answers.
void answer_error(httplib::Response& response, int status, protocol::ErrorCode code,
                  std::string message, std::string field = {}) {
  response.status = status;
  response.set_content(protocol::error_response({code, std::move(message), std::move(field), {}}),
                       "application/json");
}

// The compiled library listens with a backlog of 5: on a unix socket a
// sixth client connecting at once is refused (EAGAIN) rather than queued.
// listen() again on the bound socket raises it; svr_sock_ is httplib's
// protected listening socket.
template <class Base>
class Backlogged : public Base {
 public:
  using Base::Base;
  void raise_backlog() { (void)::listen(this->svr_sock_, SOMAXCONN); }
};

void raise_backlog(httplib::Server& server) {
  if (auto* plain = dynamic_cast<Backlogged<PeerAwareServer>*>(&server)) plain->raise_backlog();
  if (auto* tls = dynamic_cast<Backlogged<httplib::SSLServer>*>(&server)) tls->raise_backlog();
}

}  // namespace

// One admitted run: its slot, its cancel eventfd, and a thread that fires
// the eventfd when the client hangs up (POLLRDHUP on the connection).
class HttpServer::ActiveRun {
 public:
  ActiveRun(HttpServer& server, int client_socket)
      : server_(server),
        cancel_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
        ended_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
    {
      std::lock_guard lock(server_.runs_mutex_);
      server_.runs_.insert(this);
    }
    watcher_ = std::thread([this, client_socket] { watch(client_socket); });
  }
  ~ActiveRun() { end(); }
  ActiveRun(const ActiveRun&) = delete;
  ActiveRun& operator=(const ActiveRun&) = delete;

  int cancel_fd() const { return cancel_.get(); }
  void cancel() { fire(cancel_.get()); }

  // Gives the slot back; the run's last line has been written by then.
  void end() {
    std::call_once(ended_once_, [this] {
      fire(ended_.get());
      watcher_.join();
      {
        std::lock_guard lock(server_.runs_mutex_);
        server_.runs_.erase(this);
      }
      server_.slots_.release();
    });
  }

 private:
  void watch(int client_socket) {
    pollfd entries[2] = {{.fd = ended_.get(), .events = POLLIN, .revents = 0},
                         {.fd = client_socket, .events = POLLRDHUP, .revents = 0}};
    while (true) {
      const int ready = ::poll(entries, client_socket >= 0 ? 2 : 1, -1);
      if (ready < 0 && errno == EINTR) continue;
      if (ready < 0 || entries[0].revents != 0) return;
      if (entries[1].revents != 0) {
        spdlog::info("run of {}: the client hung up; cancelling", this_client_);
        cancel();
        return;
      }
    }
  }

  HttpServer& server_;
  core::UniqueFd cancel_;
  core::UniqueFd ended_;
  std::string this_client_ = this_request.client.describe();
  std::thread watcher_;
  std::once_flag ended_once_;
};

HttpServer::HttpServer(const ServerConfig& config, BearerToken token, ListenAddress listen)
    : config_(config),
      token_(std::move(token)),
      listen_(std::move(listen)),
      slots_(std::max(1u, config.max_runs), config.max_queue) {}

HttpServer::~HttpServer() {
  serving_done_ = true;
  if (shutdown_thread_.joinable()) shutdown_thread_.join();
}

core::Result<std::unique_ptr<HttpServer>> HttpServer::create(const ServerConfig& config) {
  if (config.tls_cert.has_value() != config.tls_key.has_value()) {
    return Error(ErrorKind::kInvalidInput, config.tls_cert ? "--tls-key" : "--tls-cert",
                 "TLS needs both --tls-cert and --tls-key");
  }
  PB_TRY(token, BearerToken::load(config.token_file));
  PB_TRY(listen, parse_listen_address(config.listen, config.tls_cert.has_value()));
  if (listen.kind == ListenAddress::Kind::kUnix && config.tls_cert) {
    return Error(ErrorKind::kInvalidInput, "--tls-cert",
                 "TLS is for TCP; a unix socket is protected by its directory and mode");
  }
  std::unique_ptr<HttpServer> server(new HttpServer(config, std::move(token), std::move(listen)));
  if (config.tls_cert) {
    auto tls = std::make_unique<Backlogged<httplib::SSLServer>>(config.tls_cert->c_str(),
                                                                config.tls_key->c_str());
    if (!tls->is_valid()) {
      return Error(ErrorKind::kInvalidInput, "--tls-cert",
                   "cannot use the certificate " + *config.tls_cert + " with the key " +
                       *config.tls_key + " (PEM files, the key matching the certificate)");
    }
    server->server_ = std::move(tls);
  } else {
    server->server_ = std::make_unique<Backlogged<PeerAwareServer>>(
        server->listen_.kind == ListenAddress::Kind::kUnix ? server->listen_.path : "");
  }
  // Responses go out in pieces (headers, then event chunks): each at once.
  server->server_->set_tcp_nodelay(true);
  server->install_common_handlers();
  PB_CHECK(server->bind());
  return server;
}

core::Status HttpServer::bind() {
  if (listen_.kind == ListenAddress::Kind::kUnix) {
    PB_CHECK(prepare_unix_socket_path(listen_.path));
    server_->set_address_family(AF_UNIX);
    // The socket file is made 0600 from the start: no moment where another
    // user could connect.
    const mode_t previous = ::umask(0177);
    const bool bound = server_->bind_to_port(listen_.path, 1);  // (the port is unused)
    ::umask(previous);
    if (!bound) return Error::from_errno("--listen", "cannot listen on " + listen_.path);
    raise_backlog(*server_);
    ::chmod(listen_.path.c_str(), 0600);
    address_ = "unix:" + listen_.path;
    return core::Status();
  }
  const int port = listen_.port == 0
                       ? server_->bind_to_any_port(listen_.host)
                       : (server_->bind_to_port(listen_.host, listen_.port) ? listen_.port : -1);
  if (port >= 0) raise_backlog(*server_);
  const std::string host =
      listen_.host.find(':') != std::string::npos ? "[" + listen_.host + "]" : listen_.host;
  if (port < 0) {
    return Error::from_errno("--listen",
                             "cannot listen on " + host + ":" + std::to_string(listen_.port));
  }
  address_ = host + ":" + std::to_string(port);
  return core::Status();
}

void HttpServer::install_common_handlers() {
  // Every connection may wait for a run slot: enough threads for all the
  // runs and the queue, and some for health checks and refusals.
  const std::size_t threads = std::size_t{slots_.counts().max} + config_.max_queue + 8;
  server_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  // httplib's one limit applies to streamed bodies too: it is lifted, and
  // the routes that read whole bodies are held to kMaxRequestBody below.
  server_->set_payload_max_length(std::numeric_limits<std::size_t>::max());
  server_->set_pre_routing_handler([this](const httplib::Request& request,
                                          httplib::Response& response) {
    scope_request(request);
    if (!token_.accepts(request.get_header_value("Authorization"))) {
      spdlog::warn("audit: unauthorized request from {} ({} {}): {} bearer token",
                   this_request.client.describe(), request.method, loggable_path(request.path),
                   request.has_header("Authorization") ? "wrong" : "no");
      audit("http_auth", request, "deny",
            request.has_header("Authorization") ? "wrong bearer token" : "no bearer token");
      answer_error(response, 401, protocol::ErrorCode::Unauthorized,
                   "a valid bearer token is required (Authorization: Bearer <token>)",
                   "Authorization");
      response.set_header("WWW-Authenticate", "Bearer");
      return httplib::Server::HandlerResponse::Handled;
    }
    if (shutting_down_) {
      answer_error(response, 503, protocol::ErrorCode::ShuttingDown, "the server is shutting down");
      return httplib::Server::HandlerResponse::Handled;
    }
    // Only PUT routes stream their bodies (put_streaming); any other
    // body is read whole, so it must say its length up front.
    if (request.method != "PUT" && request.has_header("Transfer-Encoding")) {
      answer_error(response, 411, protocol::ErrorCode::TooLarge,
                   "a request body other than an upload needs a Content-Length (at most " +
                       std::to_string(kMaxRequestBody) + " bytes), not chunked encoding");
      response.set_header("Connection", "close");
      return httplib::Server::HandlerResponse::Handled;
    }
    if (request.method != "PUT" && request.has_header("Content-Length") &&
        request.get_header_value<std::uint64_t>("Content-Length") > kMaxRequestBody) {
      answer_error(response, 413, protocol::ErrorCode::TooLarge,
                   "a request body is at most " + std::to_string(kMaxRequestBody) + " bytes");
      response.set_header("Connection", "close");
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  server_->set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request&,
                                                                     httplib::Response& response) {
    if (!response.body.empty() || response.content_length_ > 0)
      return httplib::Server::HandlerResponse::Unhandled;
    answer_error(response, response.status,
                 response.status == 404 ? protocol::ErrorCode::NotFound
                                        : protocol::ErrorCode::InvalidRequest,
                 response.status == 404 ? "no such endpoint" : "the request was not understood");
    return httplib::Server::HandlerResponse::Handled;
  }));
  server_->set_exception_handler(
      [](const httplib::Request&, httplib::Response& response, std::exception_ptr) {
        answer_error(response, 500, protocol::ErrorCode::Internal,
                     "the server failed to handle the request");
      });
  server_->set_logger([](const httplib::Request& request, const httplib::Response& response) {
    const auto elapsed =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - this_request.start);
    spdlog::info("{} {} {} {} {}ms", this_request.client.describe(), request.method,
                 loggable_path(request.path), response.status, elapsed.count());
  });
  get("/v1/health",
      [this](const httplib::Request&, httplib::Response& response, const ClientIdentity&) {
        const RunSlots::Counts runs = slots_.counts();
        const nlohmann::json body = {
            {"v", 1},
            {"status", "ok"},
            {"version", PULSEBOX_VERSION},
            {"runs", {{"active", runs.active}, {"queued", runs.queued}, {"max", runs.max}}}};
        response.set_content(body.dump(), "application/json");
      });
}

void HttpServer::get(const std::string& pattern, RouteHandler handler) {
  server_->Get(pattern, [handler = std::move(handler)](const httplib::Request& request,
                                                       httplib::Response& response) {
    handler(request, response, this_request.client);
  });
}

void HttpServer::post(const std::string& pattern, RouteHandler handler) {
  server_->Post(pattern, [handler = std::move(handler)](const httplib::Request& request,
                                                        httplib::Response& response) {
    handler(request, response, this_request.client);
  });
}

void HttpServer::put_streaming(const std::string& pattern, StreamingHandler handler) {
  server_->Put(pattern, [handler = std::move(handler)](const httplib::Request& request,
                                                       httplib::Response& response,
                                                       const httplib::ContentReader& reader) {
    handler(request, response, this_request.client, reader);
  });
}

void HttpServer::post_run(const std::string& pattern, RunHandler handler) {
  server_->Post(pattern, [this, handler = std::move(handler)](const httplib::Request& request,
                                                              httplib::Response& response) {
    const int socket = this_request.socket;
    switch (slots_.acquire([socket] { return peer_hung_up(socket); })) {
      case RunSlots::Admission::kRun:
        audit("http_run", request, "allow", "");
        break;
      case RunSlots::Admission::kBusy:
        audit("http_run", request, "busy", "every run slot is taken and the queue is full");
        answer_error(response, 503, protocol::ErrorCode::Busy,
                     "every run slot is taken and the queue is full; retry later");
        response.set_header("Retry-After", "1");
        return;
      case RunSlots::Admission::kShuttingDown:
        audit("http_run", request, "shutting_down", "");
        answer_error(response, 503, protocol::ErrorCode::ShuttingDown,
                     "the server is shutting down");
        return;
      case RunSlots::Admission::kClientGone:
        // Nobody reads it: the client is gone. The status says so in the log.
        answer_error(response, 499, protocol::ErrorCode::Busy, "the client left while queued");
        return;
    }
    auto run = std::make_shared<ActiveRun>(*this, socket);
    ClientIdentity client = this_request.client;
    response.set_chunked_content_provider(
        "application/x-ndjson", [run, &request, client, &handler](size_t, httplib::DataSink& sink) {
          std::mutex write_mutex;  // a run may write from several threads
          RunStream stream{.request = request,
                           .client = client,
                           .cancel_fd = run->cancel_fd(),
                           .write_line = [&sink, &write_mutex](std::string_view json_line) {
                             std::string line(json_line);
                             line += '\n';
                             const std::lock_guard lock(write_mutex);
                             return sink.is_writable() && sink.write(line.data(), line.size());
                           }};
          try {
            handler(stream);
          } catch (const std::exception& e) {
            spdlog::error("run of {}: the handler failed: {}", client.describe(), e.what());
            stream.write_line(protocol::error_event(
                "", {protocol::ErrorCode::Internal, "the run failed inside the server", "", {}}));
          }
          sink.done();
          run->end();
          return true;
        });
  });
}

void HttpServer::audit(std::string_view action, const httplib::Request& request,
                       std::string_view decision, std::string_view detail) {
  if (!auditor_) return;
  const std::string target = request.method + " " + loggable_path(request.path);
  auditor_(AuditEvent{.client = this_request.client,
                      .action = action,
                      .target = target,
                      .decision = decision,
                      .detail = detail});
}

void HttpServer::cancel_all_runs() {
  std::lock_guard lock(runs_mutex_);
  for (ActiveRun* run : runs_)
    run->cancel();
}

void HttpServer::begin_shutdown() {
  std::call_once(shutdown_once_, [this] {
    spdlog::info("shutting down: no new requests; runs have {}s to finish",
                 config_.shutdown_grace.count());
    shutting_down_ = true;
    slots_.close();
    shutdown_thread_ = std::thread([this] { finish_shutdown(); });
  });
}

void HttpServer::finish_shutdown() {
  if (!slots_.wait_idle_until(Clock::now() + config_.shutdown_grace)) {
    spdlog::warn("shutdown grace over with {} run(s) still running: cancelling them",
                 slots_.counts().active);
    cancel_all_runs();
    if (!slots_.wait_idle_until(Clock::now() + kCancelledRunsEnd))
      spdlog::error("{} cancelled run(s) did not end; stopping anyway", slots_.counts().active);
  }
  // stop() acts only once the listener runs: repeat until serve() is done.
  while (!serving_done_) {
    server_->stop();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

core::Status HttpServer::serve() {
  spdlog::info("listening on {} (runs: {} at once, {} queued)", address_, slots_.counts().max,
               config_.max_queue);
  const bool ok = shutting_down_ || server_->listen_after_bind();
  serving_done_ = true;
  if (shutdown_thread_.joinable()) shutdown_thread_.join();
  if (listen_.kind == ListenAddress::Kind::kUnix) ::unlink(listen_.path.c_str());
  if (!ok && !shutting_down_) return Error(ErrorKind::kIo, "serve", "the listener failed");
  spdlog::info("stopped");
  return core::Status();
}

}  // namespace pulsebox::http
