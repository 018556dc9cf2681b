// The request head the --net proxy reads from the sandbox: parsed strictly
// (it is hostile input) and rewritten in origin form for a plain-HTTP
// destination. A libFuzzer target calls the parser (tests/fuzz).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pulsebox::network {

// A request head the proxy understood. `head` given to the parser is
// everything up to and including the blank line ("\r\n\r\n").
struct ProxyRequest {
  std::string method;  // "CONNECT", "GET", ... (uppercase letters)
  std::string host;    // as written, IPv6 without brackets
  int port = 0;
  std::string target;   // origin form ("/path?query") for plain HTTP; "" for CONNECT
  std::string version;  // "HTTP/1.1" or "HTTP/1.0"
  std::vector<std::pair<std::string, std::string>> headers;  // in order, values trimmed
};

// Strict and bounded: CRLF line ends only, no folded or malformed header
// lines, no control characters, http:// absolute form or CONNECT authority
// form only, no userinfo in URLs. nullopt for anything else.
std::optional<ProxyRequest> parse_proxy_request(std::string_view head);

constexpr std::size_t kMaxRequestHead = 16 * 1024;

// The head a plain-HTTP destination gets: the request line in origin form,
// Host from the URL (never the client's Host), the client's headers but
// Host, Connection, Keep-Alive and Proxy-*, then `Connection: close`.
std::string origin_form_head(const ProxyRequest& request);

}  // namespace pulsebox::network
