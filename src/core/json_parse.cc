#include "core/json_parse.h"

#include <nlohmann/json.hpp>

#include "core/text.h"

namespace pulsebox::core {

JsonNesting json_nesting(std::string_view text, std::size_t limit) {
  JsonNesting nesting;
  std::size_t depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character, which may be a quote
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        break;
      case '[':
      case '{':
        ++depth;
        if (depth > nesting.depth) {
          nesting.depth = depth;
          if (depth == limit + 1) nesting.offset_past_limit = i;
        }
        break;
      case ']':
      case '}':
        // An unmatched closer is a syntax error the parser reports.
        if (depth > 0) --depth;
        break;
      default:
        break;
    }
  }
  return nesting;
}

Result<nlohmann::json> parse_json(std::string_view text, std::string_view source,
                                  std::size_t max_depth) {
  return parse_json_streaming(text, source, {}, {}, max_depth);
}

Result<nlohmann::json> parse_json_streaming(std::string_view text, std::string_view source,
                                            std::string_view stream_key,
                                            const std::function<void(nlohmann::json&)>& each,
                                            std::size_t max_depth) {
  const std::string name(source);
  if (const JsonNesting nesting = json_nesting(text, max_depth); nesting.depth > max_depth) {
    const TextPosition at = position_of_offset(text, nesting.offset_past_limit);
    return Error(ErrorKind::kInvalidInput, "json",
                 name + ":" + std::to_string(at.line) + ":" + std::to_string(at.column) +
                     ": JSON nested " + std::to_string(nesting.depth) +
                     " levels deep, over the limit of " + std::to_string(max_depth) +
                     " (this document needs only a few)");
  }
  try {
    if (!each) return nlohmann::json::parse(text.begin(), text.end());
    // Events at depth 1 are the top-level object's keys and values; an
    // object ending at depth 2 is an element of one of its arrays.
    bool in_array = false;
    const nlohmann::json::parser_callback_t callback =
        [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
          using Event = nlohmann::json::parse_event_t;
          if (depth == 1 && event == Event::key) in_array = parsed == stream_key;
          if (depth == 2 && event == Event::object_end && in_array) {
            each(parsed);
            return false;  // handed over: not kept in the document
          }
          return true;
        };
    return nlohmann::json::parse(text.begin(), text.end(), callback);
  } catch (const nlohmann::json::parse_error& error) {
    const TextPosition at = position_of_offset(text, error.byte > 0 ? error.byte - 1 : 0);
    std::string what = error.what();
    // nlohmann prefixes "[json.exception.parse_error.101] parse error at line 1, column 2: ".
    if (auto cut = what.find("syntax error"); cut != std::string::npos) what = what.substr(cut);
    return Error(ErrorKind::kInvalidInput, "json",
                 name + ":" + std::to_string(at.line) + ":" + std::to_string(at.column) +
                     ": invalid JSON: " + what);
  } catch (const nlohmann::json::out_of_range&) {
    // A number too large for any C++ type (found by the fuzzer).
    return Error(ErrorKind::kInvalidInput, "json",
                 name + ": invalid JSON: a number is out of range");
  } catch (const nlohmann::json::exception& error) {
    std::string what = error.what();
    if (auto cut = what.find("] "); cut != std::string::npos) what = what.substr(cut + 2);
    return Error(ErrorKind::kInvalidInput, "json", name + ": invalid JSON: " + what);
  }
}

}  // namespace pulsebox::core
