// libFuzzer target: the local server's protocol decoders must never crash,
// and whatever they accept must encode back to the very same bytes.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "server/protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  if (auto request = pulsebox::server::decode_request(bytes); request.ok()) {
    if (pulsebox::server::encode(*request) != bytes) std::abort();
  }
  if (auto reply = pulsebox::server::decode_reply(bytes); reply.ok()) {
    if (pulsebox::server::encode(*reply) != bytes) std::abort();
  }
  return 0;
}
