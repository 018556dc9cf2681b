// The library's version, e.g. "0.1.0".
#pragma once

#include <string_view>

#include "pulsebox/export.h"

namespace pulsebox {
PULSEBOX_API std::string_view version();
}  // namespace pulsebox
