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

namespace {

// The library's own depth, from its SAX interface (its parser keeps its
// state on the heap, so it measures any depth safely).
class SaxDepth : public nlohmann::json_sax<nlohmann::json> {
 public:
  std::size_t deepest = 0;
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return open(); }
  bool key(string_t&) override { return true; }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

 private:
  bool open() {
    if (++depth_ > deepest) deepest = depth_;
    return true;
  }
  bool close() {
    --depth_;
    return true;
  }
  std::size_t depth_ = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  SaxDepth sax;
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
