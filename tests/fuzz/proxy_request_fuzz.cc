// libFuzzer target: the proxy's request-head parser must never crash, and
// what it accepts holds no line break or control character a forwarded
// head or an audit record could carry on.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "network/proxy_request.h"

namespace {

bool clean(std::string_view text) {
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if ((byte < 0x20 && c != '\t') || byte == 0x7f) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view head(reinterpret_cast<const char*>(data), size);
  const auto request = pulsebox::network::parse_proxy_request(head);
  if (!request) return 0;
  if (request->port < 1 || request->port > 65535 || request->host.empty()) std::abort();
  if (request->method.empty() || request->version.empty()) std::abort();
  if (request->method == "CONNECT" ? !request->target.empty()
                                   : (request->target.empty() || request->target[0] != '/')) {
    std::abort();
  }
  if (request->target.find_first_of(" \t") != std::string_view::npos) std::abort();
  if (!clean(request->method) || !clean(request->host) || !clean(request->target)) std::abort();
  for (const auto& [name, value] : request->headers) {
    if (name.empty() || !clean(name) || !clean(value)) std::abort();
  }
  return 0;
}
