// Where a value of a JSON document starts, for error messages that name
// the line as well as the field ("p.json:14: syscalls[3].action: ...").
// nlohmann::json keeps no positions, so valid text is scanned once more.
#pragma once

#include <optional>
#include <string_view>

namespace pulsebox::core {

// The line on which the value at `path` starts; paths look like
// "syscalls[3].args[0].op" and the root is "". Only the way to that value
// is followed and nothing is kept of the rest, so the cost is one pass over
// the text whatever its shape (a table of every value's path grew with the
// length of the paths times the number of values: a long key over a long
// array took gigabytes). nullopt when there is no such value. Only for text
// that already parsed as JSON (core::parse_json bounds its depth).
std::optional<int> json_value_line(std::string_view text, std::string_view path);

}  // namespace pulsebox::core
