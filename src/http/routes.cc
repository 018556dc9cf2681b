#include "http/routes.h"

namespace pulsebox::http {

void register_routes(HttpServer& server, const Services& services) {
  if (services.run) {
    server.post_run("/v1/runs", services.run);
  } else {
    server.post("/v1/runs",
                [](const httplib::Request&, httplib::Response& response, const ClientIdentity&) {
                  response.status = 501;
                  response.set_content(error_body("not_implemented",
                                                  "runs over HTTP are not part of this build yet"),
                                       "application/json");
                });
  }
}

}  // namespace pulsebox::http
