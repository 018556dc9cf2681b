// libFuzzer target: the scrubber. A registered value never survives
// redaction, and streaming the input in fuzzer-chosen chunks gives exactly
// the whole-text result (inputs stay below the stream's 64 KiB carry limit).
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/text.h"
#include "pulsebox/secrets.h"

namespace {
// No proper prefix equals a suffix, and no character of it occurs in
// "[REDACTED_SECRET]", so a replacement can never create a new occurrence.
constexpr std::string_view kSecret = "zq9xw7";
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1 || size > 16384) return 0;
  static const pulsebox::SecretScrubber scrubber({std::string(kSecret)});
  const std::size_t split_seed = data[0];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);

  const std::string whole = scrubber.redact(text);
  if (pulsebox::core::ascii_lower(whole).find(kSecret) != std::string::npos) std::abort();

  auto stream = scrubber.stream();
  std::string streamed;
  const std::size_t chunk = 1 + split_seed % 37;
  for (std::size_t pos = 0; pos < text.size(); pos += chunk) {
    streamed += stream.feed(text.substr(pos, chunk));
  }
  streamed += stream.finish();
  if (streamed != whole) std::abort();
  return 0;
}
