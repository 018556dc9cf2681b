// The OCI runtime's refusal of bad input (a flag, a config field, a state
// record): every such error has the stage "oci", as runc's messages have no
// stage of their own.
#pragma once

#include <string>

#include "core/result.h"

namespace pulsebox::oci {

inline core::Error invalid(std::string message) {
  return core::Error(core::ErrorKind::kInvalidInput, "oci", std::move(message));
}

}  // namespace pulsebox::oci
