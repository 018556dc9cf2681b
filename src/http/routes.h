// The protocol's routes on the HTTP carrier (docs/protocol.md "HTTP"):
//   POST /v1/runs                          a run, its events streamed (NDJSON)
//   POST /v1/runs/<run_id>/approvals       an answer to its approval_request
//   POST /v1/<request>                     capabilities, changes, diff,
//                                          commit, discard, read_file
//   GET  /v1/capabilities
//   GET, PUT /v1/workspaces/sha256:<hex>, POST /v1/export   (upload_routes.h)
//   GET  /v1/health                        (the server's own: http_server.h)
#pragma once

#include <filesystem>

#include "http/http_server.h"
#include "http/run_service.h"
#include "http/upload_store.h"

namespace pulsebox::http {

struct Services {
  std::filesystem::path state_dir;
  RunService* runs = nullptr;      // required
  UploadStore* uploads = nullptr;  // unset: no uploads (their routes are 404)
};

void register_routes(HttpServer& server, const Services& services);

}  // namespace pulsebox::http
