// The local server protocol's constants, apart from server/protocol.h so
// that the pre-libc client (cli/fast_client.cc) shares them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "pulsebox_config.h"

namespace pulsebox::server {

inline constexpr std::uint32_t kProtocolVersion = 1;
// A request above this is refused by the client itself (it runs the
// command in-process): SOCK_SEQPACKET messages must fit the socket buffer.
inline constexpr std::size_t kMaxRequestBytes = 192 * 1024;

// What a client and the server must share to be served: the release (its
// `run` flags mean the same) and this protocol's version. Any binary of that
// release qualifies, whatever its path or build.
#define PULSEBOX_CLIENT_IDENTITY "pulsebox " PULSEBOX_VERSION " local protocol 1"

enum class ReplyKind : std::uint32_t { Done = 1, Fallback = 2 };

}  // namespace pulsebox::server
