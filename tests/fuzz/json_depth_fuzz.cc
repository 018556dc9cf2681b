// libFuzzer target: core::json_nesting, the scan that keeps deep documents
// away from the JSON library, must count the nesting the library itself
// meets in every document it accepts: never less (a document the scan
// underestimates would reach the recursive code it guards), and exactly as
// much when there is no NUL byte. parse_json must never crash or throw.
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string_view>

#include "core/json_parse.h"
#include "helpers/json_depth_reference.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  pulsebox::testing::SaxDepth sax;
  if (nlohmann::json::sax_parse(text, &sax)) {
    // The library ends the document at a NUL byte (found by this target);
    // the scan goes on, so past one it may count more, never less.
    const std::size_t depth = pulsebox::core::json_nesting(text).depth;
    const bool has_nul = text.find('\0') != std::string_view::npos;
    if (depth < sax.deepest || (!has_nul && depth != sax.deepest)) std::abort();
  }
  (void)pulsebox::core::parse_json(text, "fuzz", 8);
  return 0;
}
