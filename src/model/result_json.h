// The result as a JSON object (what `pulsebox run --json` prints and the
// protocol's result event carries; pulsebox::to_json dumps it).
#pragma once

#include <nlohmann/json.hpp>

#include "pulsebox/result.h"

namespace pulsebox::model {

nlohmann::ordered_json result_object(const ProcessResult& result);

}  // namespace pulsebox::model
