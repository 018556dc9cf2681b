#include "http/listen_address.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <charconv>

namespace pulsebox::http {
namespace {

using core::Error;
using core::ErrorKind;

bool is_loopback(const std::string& host) {
  if (host == "localhost") return true;
  in_addr v4{};
  if (::inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (::inet_pton(AF_INET6, host.c_str(), &v6) == 1) return IN6_IS_ADDR_LOOPBACK(&v6);
  return false;  // a name other than localhost may resolve anywhere
}

Error bad(std::string_view text, const std::string& why) {
  return Error(ErrorKind::kInvalidInput, "--listen",
               "'" + std::string(text) + "': " + why +
                   " (use unix:/path/to/socket or HOST:PORT, e.g. 127.0.0.1:8700)");
}

}  // namespace

core::Result<ListenAddress> parse_listen_address(std::string_view text, bool tls) {
  ListenAddress address;
  if (text.starts_with("unix:")) {
    address.kind = ListenAddress::Kind::kUnix;
    address.path = std::string(text.substr(5));
    if (address.path.empty() || address.path.front() != '/')
      return bad(text, "a unix socket needs an absolute path");
    address.loopback = true;
    return address;
  }
  std::string_view rest = text.starts_with("tcp:") ? text.substr(4) : text;
  std::string_view host, port;
  if (rest.starts_with("[")) {
    const auto close = rest.find("]:");
    if (close == std::string_view::npos) return bad(text, "an IPv6 address needs [ADDRESS]:PORT");
    host = rest.substr(1, close - 1);
    port = rest.substr(close + 2);
  } else {
    const auto colon = rest.rfind(':');
    if (colon == std::string_view::npos) return bad(text, "no port");
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
  }
  unsigned value = 0;
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() || value > 65535)
    return bad(text, "the port must be a number from 0 to 65535");
  address.host = host.empty() ? "127.0.0.1" : std::string(host);
  address.port = static_cast<int>(value);
  address.loopback = is_loopback(address.host);
  if (!address.loopback && !tls) {
    return Error(ErrorKind::kSecurity, "--listen",
                 "'" + std::string(text) +
                     "' is not a loopback address: listening on a network needs TLS "
                     "(--tls-cert and --tls-key), so the bearer token never travels in clear");
  }
  return address;
}

}  // namespace pulsebox::http
