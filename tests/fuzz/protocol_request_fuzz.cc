// libFuzzer target: the protocol's run-request decoder (protocol/run_request.h)
// must never crash on any bytes, must refuse with a code and a message, and
// a request it accepts must name a command.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "protocol/messages.h"
#include "protocol/run_request.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const auto parsed = pulsebox::protocol::parse_run_request(bytes);
  if (parsed) {
    if (parsed.request->options.command.empty()) std::abort();
  } else {
    if (parsed.error.message.empty()) std::abort();
    // The refusal must always be a valid JSON reply.
    (void)pulsebox::protocol::error_response(parsed.error);
  }
  return 0;
}
