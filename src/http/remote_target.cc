// The remote run's target (remote_target.h).
#include "http/remote_target.h"

#include <sys/socket.h>

#include <cstdlib>

namespace pulsebox::http {
namespace {

using core::Error;
using core::ErrorKind;

std::string from_environment(const char* name) {
  const char* value = std::getenv(name);
  std::string text = value != nullptr ? value : "";
  while (!text.empty() && (text.back() == ' ' || text.back() == '\n'))
    text.pop_back();
  while (!text.empty() && text.front() == ' ')
    text.erase(0, 1);
  return text;
}

}  // namespace

core::Result<RemoteTarget> remote_target_from_environment() {
  RemoteTarget target{from_environment("PULSE_REMOTE_URL"), from_environment("PULSE_REMOTE_TOKEN"),
                      from_environment("PULSE_REMOTE_CA")};
  if (target.url.empty()) {
    return Error(ErrorKind::kInvalidInput, "remote",
                 "PULSE_REMOTE_URL is not set: the remote backend needs the server's address "
                 "(http://HOST:PORT, https://HOST:PORT or unix:/PATH)");
  }
  if (target.token.empty()) {
    return Error(ErrorKind::kInvalidInput, "remote",
                 "PULSE_REMOTE_TOKEN is not set: the server at " + target.url +
                     " needs its bearer token (a missing token is an error, never a local run)");
  }
  return target;
}

core::Result<std::unique_ptr<httplib::Client>> make_remote_client(const RemoteTarget& target) {
  std::unique_ptr<httplib::Client> client;
  if (target.url.rfind("unix:", 0) == 0) {
    const std::string path = target.url.substr(5);
    if (path.empty() || path.front() != '/') {
      return Error(ErrorKind::kInvalidInput, "remote",
                   "PULSE_REMOTE_URL=" + target.url + ": expected unix:/ABSOLUTE/PATH");
    }
    client = std::make_unique<httplib::Client>(path, 80);
    client->set_address_family(AF_UNIX);
  } else if (target.url.rfind("http://", 0) == 0 || target.url.rfind("https://", 0) == 0) {
    client = std::make_unique<httplib::Client>(target.url);
    if (!client->is_valid()) {
      return Error(ErrorKind::kInvalidInput, "remote",
                   "PULSE_REMOTE_URL=" + target.url + ": not a usable http(s)://HOST:PORT");
    }
    if (target.url.rfind("https://", 0) == 0) {
      client->enable_server_certificate_verification(true);
      if (!target.ca_file.empty()) client->set_ca_cert_path(target.ca_file.c_str());
    }
  } else {
    return Error(ErrorKind::kInvalidInput, "remote",
                 "PULSE_REMOTE_URL=" + target.url +
                     ": expected http://HOST:PORT, https://HOST:PORT or unix:/PATH");
  }
  client->set_bearer_token_auth(target.token);
  client->set_connection_timeout(5, 0);
  client->set_read_timeout(24 * 3600, 0);  // a run may be silent for long
  client->set_write_timeout(300, 0);
  client->set_keep_alive(true);
  // A request goes as headers then body in two writes: without this, Nagle's
  // algorithm holds the body until the server's delayed ACK.
  client->set_tcp_nodelay(true);
  return client;
}

}  // namespace pulsebox::http
