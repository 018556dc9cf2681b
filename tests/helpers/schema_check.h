// Validating protocol messages against docs/schema/ with Debian's
// python3-jsonschema (tests/protocol/validate_messages.py).
#pragma once

#include <string>
#include <vector>

namespace pulsebox::testing {

// "" when every message matches docs/schema/<kind>.schema.json (kind:
// event, request, reply, result), else the validator's report.
std::string schema_problems(const std::string& kind, const std::vector<std::string>& messages);

// The lines of `text`, without empty ones.
std::vector<std::string> lines_of(const std::string& text);

}  // namespace pulsebox::testing
