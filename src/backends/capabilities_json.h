// What a backend enforces, row by row ("network.allowlist", "limits.memory",
// ...), for `pulsebox capabilities` and the protocol's capabilities request.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "pulsebox/backend.h"

namespace pulsebox::backends {

struct CapabilityRow {
  std::string what;
  Capability capability;
};

std::vector<CapabilityRow> capability_rows(const Backend& backend);

// {"available", "reason", "unsafe", "capabilities": {row: {"level", "reason", "fix"}}}
nlohmann::json capabilities_json(const Backend& backend);

}  // namespace pulsebox::backends
