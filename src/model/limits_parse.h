// Result-returning parsers behind the public parse_size/parse_duration.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "core/result.h"
#include "pulsebox/limits.h"

namespace pulsebox::model {

core::Result<std::uint64_t> parse_size(std::string_view text, std::string_view what);
core::Result<double> parse_duration_seconds(std::string_view text, std::string_view what);
core::Result<std::optional<double>> parse_duration_limit(std::string_view text,
                                                         std::string_view what);
core::Result<std::optional<std::uint64_t>> parse_size_limit(std::string_view text,
                                                            std::string_view what);
core::Status validate(const ResourcePolicy& policy);

}  // namespace pulsebox::model
