// The JSON library's own nesting depth of a document, the reference that
// core::parse_json's scan is checked against (tests/unit/bounded_input_test.cc
// and the fuzz target json_depth_fuzz).
#pragma once

#include <algorithm>
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

namespace pulsebox::testing {

// The JSON library's own depth count, through its SAX interface (which
// keeps its state on the heap, so any depth is safe to measure).
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
    deepest = std::max(deepest, ++depth_);
    return true;
  }
  bool close() {
    --depth_;
    return true;
  }
  std::size_t depth_ = 0;
};

}  // namespace pulsebox::testing
