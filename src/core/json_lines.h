// Where each value of a JSON document starts, for error messages that name
// the line as well as the field ("p.json:14: syscalls[3].action: ...").
// nlohmann::json keeps no positions, so valid text is scanned once more.
#pragma once

#include <map>
#include <string>
#include <string_view>

namespace pulsebox::core {

// Paths look like "syscalls[3].args[0].op"; the root is "". Only for text
// that already parsed as JSON.
std::map<std::string, int> json_value_lines(std::string_view text);

}  // namespace pulsebox::core
