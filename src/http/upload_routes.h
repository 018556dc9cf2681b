// The routes of workspaces that travel (docs/protocol.md "Workspaces that
// travel"), over every transport (they name no path of the server's):
//   GET  /v1/workspaces/sha256:<hex>   200 {"workspace_upload"} if kept, else 404
//   PUT  /v1/workspaces/sha256:<hex>   the tar stream: 201 (new) or 200 (kept already)
//   POST /v1/export                    a transaction of an upload as a tar of its
//                                      upper tree; the transaction is then discarded
#pragma once

#include "http/http_server.h"
#include "http/upload_store.h"

namespace pulsebox::http {

void register_upload_routes(HttpServer& server, UploadStore& uploads);

}  // namespace pulsebox::http
