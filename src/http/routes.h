// The protocol's routes on the HTTP carrier. The services behind them are
// the owner's: the run service streams a run's events (docs/protocol.md).
#pragma once

#include <filesystem>

#include "http/http_server.h"

namespace pulsebox::http {

struct Services {
  std::filesystem::path state_dir;
  // POST /v1/runs; unset, the route answers 501 not_implemented.
  RunHandler run;
};

// GET /v1/health is the server's own (http_server.h); these are the rest.
void register_routes(HttpServer& server, const Services& services);

}  // namespace pulsebox::http
