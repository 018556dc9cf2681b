// The protocol's routes (routes.h).
#include "http/routes.h"

#include "core/json_parse.h"
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

// A review request names a workspace path: only a caller whose uid the
// transport knows (the unix socket) may, and only its own.
void operation(const std::string& name, const httplib::Request& request,
               httplib::Response& response, const ClientIdentity& client) {
  auto body = core::parse_json(request.body.empty() ? "{\"v\":1}" : request.body, "the request");
  if (!body) {
    return reply(response,
                 {{},
                  protocol::ProtocolError{
                      protocol::ErrorCode::InvalidRequest, body.error().to_string(), "", {}}});
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
  if (services.runs != nullptr) {
    server.post_run("/v1/runs", [runs = services.runs](RunStream& stream) { runs->run(stream); });
    server.post(R"(/v1/runs/([A-Za-z0-9._-]{1,64})/approvals)",
                [runs = services.runs](const httplib::Request& request, httplib::Response& response,
                                       const ClientIdentity& client) {
                  runs->answer(request, response, client);
                });
  } else {
    server.post("/v1/runs",
                [](const httplib::Request&, httplib::Response& response, const ClientIdentity&) {
                  response.status = 501;
                  response.set_content(error_body("not_implemented",
                                                  "runs over HTTP are not part of this build yet"),
                                       "application/json");
                });
  }
  for (const char* name : {"capabilities", "changes", "diff", "commit", "discard", "read_file"}) {
    server.post(std::string("/v1/") + name,
                [name = std::string(name)](
                    const httplib::Request& request, httplib::Response& response,
                    const ClientIdentity& client) { operation(name, request, response, client); });
  }
  server.get("/v1/capabilities", [](const httplib::Request& request, httplib::Response& response,
                                    const ClientIdentity& client) {
    operation("capabilities", request, response, client);
  });
}

}  // namespace pulsebox::http
