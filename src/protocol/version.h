// The protocol's version (docs/protocol.md): every message carries it as
// "v". A change that an existing client could misread raises it.
#pragma once

namespace pulsebox::protocol {

inline constexpr int kProtocolVersion = 1;

}  // namespace pulsebox::protocol
