// httplib::Server for unix sockets and plain TCP that knows who is on each
// connection: the peer's uid and pid from SO_PEERCRED of the accepted socket
// (httplib 0.11.4 reports only the pid, in Request::remote_port, and a pid
// may be reused), and the socket itself, so a handler can watch for the
// client's hang-up.
#pragma once

#include <httplib.h>

#include <atomic>

#include "http/client_identity.h"

namespace pulsebox::http {

struct Connection {
  ClientIdentity client;
  int socket = -1;
};

// The connection whose request this thread is handling, or nullptr (httplib
// handles each connection on one thread of its pool, start to end).
const Connection* current_connection();

class PeerAwareServer : public httplib::Server {
 public:
  explicit PeerAwareServer(std::string unix_path) : unix_path_(std::move(unix_path)) {}

 private:
  // Replaces httplib's keep-alive loop (process_server_socket in httplib.h)
  // with the same loop over a PeerStream, after reading the peer's
  // credentials. Overriding a private virtual is legal, and the library
  // calls it for each accepted socket.
  bool process_and_close_socket(socket_t sock) override;

  std::string unix_path_;  // empty for TCP
};

}  // namespace pulsebox::http
