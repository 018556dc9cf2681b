// Result-returning parsers behind the public parse_size/parse_duration.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/result.h"
#include "pulsebox/limits.h"

namespace pulsebox::model {

core::Result<std::uint64_t> parse_size(std::string_view text, std::string_view what);
core::Result<double> parse_duration_seconds(std::string_view text, std::string_view what);
core::Status validate(const ResourcePolicy& policy);

}  // namespace pulsebox::model
