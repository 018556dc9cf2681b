// Parsing untrusted JSON text with bounded nesting. nlohmann::json builds
// its values iteratively, but much of what then walks them recurses (dump,
// copies, comparisons, our own readers): a document nested 100,000 levels
// deep overflows the stack there. So the depth is measured first, by a scan
// that needs no stack, and a document past the limit never reaches the
// JSON library. Every parse of input pulsebox did not just write itself goes
// through parse_json.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string_view>

#include "core/result.h"

NLOHMANN_JSON_NAMESPACE_BEGIN
template <typename BasicJsonType>
struct json_sax;
NLOHMANN_JSON_NAMESPACE_END

namespace pulsebox::core {

// Policies, seccomp profiles and transaction manifests need fewer than ten
// levels; this leaves room for any legitimate document.
inline constexpr std::size_t kMaxJsonDepth = 64;

struct JsonNesting {
  std::size_t depth = 0;  // the deepest nesting of arrays and objects
  // Where an array or object first opened past `limit` (when depth > limit).
  std::size_t offset_past_limit = 0;
};

// Measures nesting the way a JSON parser meets it: brackets inside strings
// do not count. Meant for text about to be parsed; past a syntax error or a
// NUL byte (where nlohmann ends the document) the count may be higher,
// never lower, than what the parser meets.
JsonNesting json_nesting(std::string_view text, std::size_t limit = kMaxJsonDepth);

// Parses one JSON document. Errors are kInvalidInput with stage "json":
//   "<source>:<line>:<column>: invalid JSON: syntax error ..."
//   "<source>:<line>:<column>: JSON nested 100000 levels deep, over the limit of 64 ..."
//   "<source>: invalid JSON: a number is out of range"
Result<nlohmann::json> parse_json(std::string_view text, std::string_view source,
                                  std::size_t max_depth = kMaxJsonDepth);

// Like parse_json, but each object in the top-level object's array
// `stream_key` is passed to `each` as soon as it is parsed and left out of
// the result (the array stays, without those objects; anything else in it
// stays too). A manifest of 100,000 entries is then never held as one
// document: the caller keeps only what it converts each entry into. `each`
// records what is wrong with an object rather than throw (a JSON exception
// from it would be reported as the text's own syntax error).
Result<nlohmann::json> parse_json_streaming(std::string_view text, std::string_view source,
                                            std::string_view stream_key,
                                            const std::function<void(nlohmann::json&)>& each,
                                            std::size_t max_depth = kMaxJsonDepth);

// parse_json_streaming of what `fd` reads from its offset (at most
// `max_bytes`; more is kResource), in pieces: the text is never held whole.
// The depth limit is checked as the parser meets each array and object, so
// a document past it stops there. A failed document (too deep, a syntax
// error) is then read again as text from where `fd` started, for the
// errors parse_json gives (line, column, the whole depth); where `fd`
// cannot seek, the error says the byte or the parser's line and column.
Result<nlohmann::json> parse_json_fd_streaming(int fd, std::uint64_t max_bytes,
                                               std::string_view source, std::string_view stream_key,
                                               const std::function<void(nlohmann::json&)>& each,
                                               std::size_t max_depth = kMaxJsonDepth);

// Runs nlohmann's SAX `handler` over what `fd` reads from its offset (at
// most `max_bytes`; more is kResource, as is a read error kIo), without
// building a document: for files read by the hundred thousand entries,
// where a document of each entry cost more than reading it. true: the
// whole text parsed and the handler took every event. false: the text or
// the handler stopped it (a syntax error, a depth the handler refused, a
// value it rejected); read the file again with parse_json_fd_streaming for
// the exact diagnostic of a syntax or depth error.
Result<bool> sax_parse_fd(int fd, std::uint64_t max_bytes, std::string_view source,
                          nlohmann::json_sax<nlohmann::json>& handler);

}  // namespace pulsebox::core
