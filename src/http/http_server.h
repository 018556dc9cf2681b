// The HTTP carrier of the protocol (`pulsebox-http serve`): a route table its
// owner fills, served on a unix socket, loopback TCP, or TLS, with a bearer
// token on every request, a bounded number of concurrent runs behind a FIFO
// queue, streamed NDJSON responses, one log line per request and a graceful
// shutdown. The owner (http/routes.h) decides what the routes do.
//
//   PB_TRY(server, HttpServer::create(config));
//   server->post_run("/v1/runs", [](RunStream& run) { run.write_line(R"({"v":1})"); });
//   watch_shutdown_signals([&] { server->begin_shutdown(); });
//   return server->serve();
#pragma once

#include <httplib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>

#include "core/result.h"
#include "http/bearer_token.h"
#include "http/client_identity.h"
#include "http/listen_address.h"
#include "http/run_slots.h"

namespace pulsebox::http {

struct ServerConfig {
  // "unix:/path" or "HOST:PORT" (HOST defaults to 127.0.0.1); a host that is
  // not loopback needs TLS (http/listen_address.h).
  std::string listen;
  std::string token_file;
  std::optional<std::string> tls_cert, tls_key;
  unsigned max_runs = std::max(1u, std::thread::hardware_concurrency());
  unsigned max_queue = 64;
  std::chrono::seconds shutdown_grace{30};
};

// What a run handler gets. write_line() sends one JSON value, which must not
// contain a newline (it adds one), from any thread, and returns false once
// the client is gone; once the handler returns, the response ends. cancel_fd becomes
// readable when the client hangs up or the server's shutdown grace is over:
// the handler must then stop its run and return.
struct RunStream {
  const httplib::Request& request;
  const ClientIdentity& client;
  int cancel_fd;
  std::function<bool(std::string_view json_line)> write_line;
};

using RouteHandler =
    std::function<void(const httplib::Request&, httplib::Response&, const ClientIdentity&)>;
using RunHandler = std::function<void(RunStream&)>;
// A request whose body is not read before the handler: it reads it in
// pieces through the reader (an upload, too large to hold in memory).
using StreamingHandler = std::function<void(const httplib::Request&, httplib::Response&,
                                            const ClientIdentity&, const httplib::ContentReader&)>;

// What the server itself audits: requests refused for their token, and runs
// admitted or turned away. The owner writes them to its audit log.
struct AuditEvent {
  const ClientIdentity& client;
  std::string_view action;    // "http_auth" | "http_run" | "http_upload" | "http_export"
  std::string_view target;    // "METHOD /path" (no query)
  std::string_view decision;  // "deny" | "allow" | "busy" | "shutting_down" | "refused"
  std::string_view detail;
};
using Auditor = std::function<void(const AuditEvent&)>;

class HttpServer {
 public:
  // Reads the token, checks the address, binds (a unix socket is made 0600
  // in a directory made 0700 when missing; a stale socket is replaced).
  static core::Result<std::unique_ptr<HttpServer>> create(const ServerConfig& config);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  void get(const std::string& pattern, RouteHandler handler);
  void post(const std::string& pattern, RouteHandler handler);
  // PUT with the body streamed to the handler, after the token check (a
  // refused request's body is never read). Its size is the handler's to
  // bound; every other route's body is at most 64 MiB.
  void put_streaming(const std::string& pattern, StreamingHandler handler);
  // A streamed run: admitted into a run slot (or queued, or refused 503),
  // answered as chunked application/x-ndjson.
  void post_run(const std::string& pattern, RunHandler handler);
  // Before serve(); unset, nothing is audited (only logged).
  void set_auditor(Auditor auditor) { auditor_ = std::move(auditor); }
  // What a route audits itself (an upload, an export), with the client's identity.
  void audit(const AuditEvent& event) const {
    if (auditor_) auditor_(event);
  }

  // Serves until a shutdown completes.
  core::Status serve();
  // Thread-safe and idempotent: new requests get 503 shutting_down, running
  // runs have shutdown_grace to finish, then their cancel_fd fires; serve()
  // returns once they have all ended.
  void begin_shutdown();

  // "unix:/path" or "HOST:PORT" with the port actually bound.
  const std::string& address() const { return address_; }
  RunSlots::Counts run_counts() const { return slots_.counts(); }

 private:
  class ActiveRun;
  HttpServer(const ServerConfig& config, BearerToken token, ListenAddress listen);
  core::Status bind();
  void install_common_handlers();
  void cancel_all_runs();
  void finish_shutdown();
  void audit(std::string_view action, const httplib::Request& request, std::string_view decision,
             std::string_view detail);

  ServerConfig config_;
  BearerToken token_;
  ListenAddress listen_;
  std::string address_;
  std::unique_ptr<httplib::Server> server_;
  Auditor auditor_;
  RunSlots slots_;
  std::atomic<bool> shutting_down_{false};
  std::atomic<bool> serving_done_{false};
  std::mutex runs_mutex_;
  std::set<ActiveRun*> runs_;
  std::once_flag shutdown_once_;
  std::thread shutdown_thread_;
};

}  // namespace pulsebox::http
