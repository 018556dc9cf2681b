// The address `pulsebox-http serve --listen` takes: "unix:/path" or
// "HOST:PORT" ("tcp:HOST:PORT" too; "[::1]:PORT" for IPv6).
#pragma once

#include <string>
#include <string_view>

#include "core/result.h"

namespace pulsebox::http {

struct ListenAddress {
  enum class Kind { kUnix, kTcp };
  Kind kind = Kind::kTcp;
  std::string path;  // kUnix
  std::string host;  // kTcp, without brackets
  int port = 0;      // kTcp; 0 lets the kernel choose
  bool loopback = false;
};

// A TCP host that is not loopback is refused unless `tls` is set: the bearer
// token must never cross a network in clear text.
core::Result<ListenAddress> parse_listen_address(std::string_view text, bool tls);

}  // namespace pulsebox::http
