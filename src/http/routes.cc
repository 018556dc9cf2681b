// The protocol's routes (routes.h).
#include "http/routes.h"

#include "core/json_parse.h"
#include "http/upload_routes.h"
#include "protocol/operations.h"

namespace pulsebox::http {
namespace {

void reply(httplib::Response& response, const protocol::OperationResult& result) {
  if (result.error) {
    response.status = protocol::http_status(result.error->code);
    response.set_content(protocol::error_response(*result.error), "application/json");
    return;
  }
  response.set_content(result.body.dump(-1, ' ', false, protocol::Json::error_handler_t::replace),
                       "application/json");
}

protocol::OperationResult refusal(protocol::ErrorCode code, std::string message,
                                  std::string field) {
  return {{}, protocol::ProtocolError{code, std::move(message), std::move(field), {}}};
}

// A review request naming an upload instead of a path: any caller with the
// token may (the upload names no path of the server's); the tree is the
// server's own, so commit is refused: the caller exports the changes.
protocol::OperationResult upload_operation(const std::string& name, nlohmann::json body,
                                           const ClientIdentity& client, UploadStore* uploads) {
  using protocol::ErrorCode;
  if (body.contains("workspace")) {
    return refusal(ErrorCode::InvalidField,
                   "workspace_upload: name a workspace or an upload, not both", "workspace_upload");
  }
  const auto hex = body["workspace_upload"].is_string()
                       ? upload_hex(body["workspace_upload"].get<std::string>())
                       : std::nullopt;
  if (!hex) {
    return refusal(ErrorCode::InvalidField,
                   "workspace_upload: expected sha256:<64 lowercase hex digits>",
                   "workspace_upload");
  }
  if (name == "commit") {
    return refusal(ErrorCode::Forbidden,
                   "an upload is not committed on the server: export its changes "
                   "(POST /v1/export) and commit them where the workspace is",
                   "workspace_upload");
  }
  const auto lease = uploads != nullptr ? uploads->acquire(*hex) : std::nullopt;
  if (!lease) {
    return refusal(ErrorCode::NotFound, "workspace_upload: no upload sha256:" + *hex,
                   "workspace_upload");
  }
  body.erase("workspace_upload");
  body["workspace"] = lease->root().string();
  // The tree belongs to the server's uid, whoever the caller is.
  const protocol::Caller caller{.identity = client.describe(), .uid = std::nullopt};
  return protocol::handle_operation(name, body, caller);
}

// A review request names a workspace path: only a caller whose uid the
// transport knows (the unix socket) may, and only its own.
void operation(const std::string& name, const httplib::Request& request,
               httplib::Response& response, const ClientIdentity& client, UploadStore* uploads) {
  auto body = core::parse_json(request.body.empty() ? "{\"v\":1}" : request.body, "the request");
  if (!body) {
    return reply(response,
                 {{},
                  protocol::ProtocolError{
                      protocol::ErrorCode::InvalidRequest, body.error().to_string(), "", {}}});
  }
  if (name != "capabilities" && body.value().is_object() &&
      body.value().contains("workspace_upload")) {
    return reply(response, upload_operation(name, body.value(), client, uploads));
  }
  if (name != "capabilities" && !client.uid) {
    return reply(response, {{},
                            protocol::ProtocolError{protocol::ErrorCode::Forbidden,
                                                    name + ": over " + client.transport +
                                                        " nobody's uid is known, so no workspace "
                                                        "path may be named (use the unix socket)",
                                                    "workspace",
                                                    {}}});
  }
  const protocol::Caller caller{.identity = client.describe(), .uid = client.uid};
  reply(response, protocol::handle_operation(name, body.value(), caller));
}

}  // namespace

void register_routes(HttpServer& server, const Services& services) {
  server.post_run("/v1/runs", [runs = services.runs](RunStream& stream) { runs->run(stream); });
  server.post(R"(/v1/runs/([A-Za-z0-9._-]{1,64})/approvals)",
              [runs = services.runs](const httplib::Request& request, httplib::Response& response,
                                     const ClientIdentity& client) {
                runs->answer(request, response, client);
              });
  for (const char* name : {"capabilities", "changes", "diff", "commit", "discard", "read_file",
                           "create_transaction", "stage_write", "stage_delete"}) {
    server.post(
        std::string("/v1/") + name,
        [name = std::string(name), uploads = services.uploads](
            const httplib::Request& request, httplib::Response& response,
            const ClientIdentity& client) { operation(name, request, response, client, uploads); });
  }
  server.get("/v1/capabilities", [](const httplib::Request& request, httplib::Response& response,
                                    const ClientIdentity& client) {
    operation("capabilities", request, response, client, nullptr);
  });
  if (services.uploads != nullptr) register_upload_routes(server, *services.uploads);
}

}  // namespace pulsebox::http
