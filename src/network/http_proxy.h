// The filtering HTTP proxy of `--net proxy`: the sandbox's one way out.
//
// The supervisor makes a TCP listener on 127.0.0.1 inside the sandbox's
// network namespace and hands it here; accept() works on it from any
// namespace, and outgoing connections are made from the supervisor's.
//
// What passes: `CONNECT host:port` (TLS tunnels) and plain-HTTP requests in
// absolute form (`GET http://host[:port]/path HTTP/1.1`), whose host
//   - matches one --allow-domain pattern, or is an IP literal inside a
//     --allow range, and
//   - resolves, at connect time, with the DNS-rebinding guard
//     (network/resolver.h): refused as a whole when any address is refused.
// Any port. A plain-HTTP request is forwarded in origin form with its Host
// set from the URL, its Proxy-*, Connection and Keep-Alive headers dropped
// and `Connection: close`; then bytes are relayed both ways until both sides
// are done (half-close passes through as shutdown(SHUT_WR)).
//
// Answers: 403 (not allowed, does not resolve, guard refused), 502 (no
// allowed address accepted the connection), 400 (a request that does not
// parse, an https:// URL, a head over 16 KiB), 408 (no full head within
// head_timeout), 503 (max_connections already open). Each has a one-line
// text body with the reason.
//
// Every decision yields one ProxyRecord (an allowed connection's when it
// closes, with its byte counts). Neither a record nor an answer holds the
// request's path, query or headers (they may carry secrets); method, host
// and reason pass through `scrub` before on_record sees them or the client
// is answered.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/result.h"
#include "core/unique_fd.h"
#include "network/address.h"
#include "network/domain_pattern.h"
#include "network/proxy_request.h"
#include "network/resolver.h"
#include "pulsebox/network.h"

namespace pulsebox::network {

// One decision: the run's result carries it as it is (pulsebox/network.h).
// bytes_up go to the destination, bytes_down come back to the client.
using ProxyRecord = NetworkAccess;

struct ProxyConfig {
  core::UniqueFd listener;             // listening, any namespace
  std::vector<DomainPattern> domains;  // --allow-domain
  std::vector<IpRange> listed;         // --allow ADDR: guard exceptions, and IP-literal targets
  std::function<void(const ProxyRecord&)> on_record;   // from proxy threads, one at a time
  std::function<std::string(std::string_view)> scrub;  // method/host/reason text; identity if empty
  std::function<core::Result<GuardedAddresses>(const std::string&, const std::vector<IpRange>&)>
      resolve;  // resolve_guarded if empty; tests inject
  std::size_t max_connections = 64;
  std::chrono::milliseconds head_timeout{10000};
  std::chrono::milliseconds connect_timeout{10000};
};

class HttpProxy {
 public:
  // Takes the listener and serves on it from a thread of its own.
  static core::Result<std::unique_ptr<HttpProxy>> start(ProxyConfig config);
  // Closes the listener and every connection (their records are emitted)
  // and joins every thread. Idempotent; the destructor calls it. A
  // connection waiting in getaddrinfo finishes that call first.
  void stop();
  ~HttpProxy();
  HttpProxy(const HttpProxy&) = delete;
  HttpProxy& operator=(const HttpProxy&) = delete;

  struct State;

 private:
  explicit HttpProxy(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace pulsebox::network
