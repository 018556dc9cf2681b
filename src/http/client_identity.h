// Who sent a request, as the transport knows it (never what the request
// claims about itself).
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

namespace pulsebox::http {

struct ClientIdentity {
  std::string transport;     // "unix" | "tcp" | "tls"
  std::string address;       // the socket path, or "IP:PORT"
  std::optional<uid_t> uid;  // unix: SO_PEERCRED of the accepted socket
  std::optional<pid_t> pid;  // unix: at connect time; informative only (pids are reused)

  // "unix uid=1000 pid=42 /run/x.sock", "tcp 127.0.0.1:50000": for logs.
  std::string describe() const;
};

}  // namespace pulsebox::http
