// One connection of the protocol's stream carriers (docs/protocol.md "Local
// socket"): newline-delimited JSON over a connected stream socket.
//
//   client -> server   one request line ({"v":1,"request":"run",...});
//                      during a run, answers to approval requests
//                      ({"v":1,"request":"approval","approval_id":...,
//                      "decision":"allow"})
//   server -> client   a run's events, one per line, ending with "result"
//                      or "error"; for any other request one reply line
//
// The client's hang-up (or the end of its writing side) cancels its run.
//
// Usage (a server's worker thread, the connection already accepted):
//   serve_json_connection(fd, context);
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "protocol/operations.h"
#include "pulsebox/backend.h"

namespace pulsebox::server {

struct JsonConnectionContext {
  protocol::Caller caller;
  // The backend for a run (the server's warm one); null: the facade's own.
  std::function<std::shared_ptr<Backend>()> backend;
  // The reply to "health".
  std::function<protocol::Json()> health;
  // Readable when the server stops: runs are cancelled then. -1: none.
  int stop_fd = -1;
};

// Serves the connection until its request is answered; never throws.
// Returns the run's exit status (125 when refused), 0 for other requests.
int serve_json_connection(int fd, const JsonConnectionContext& context);

}  // namespace pulsebox::server
