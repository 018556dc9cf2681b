#include "pulsebox/version.h"

#include "pulsebox_config.h"

namespace pulsebox {
std::string_view version() {
  return PULSEBOX_VERSION;
}
}  // namespace pulsebox
