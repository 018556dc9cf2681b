// Makes a unix socket's path ready for bind(): its directory exists (made
// 0700 when missing), and nothing but a stale socket is in the way.
#pragma once

#include <filesystem>

#include "core/result.h"

namespace pulsebox::http {

// Refuses a path that exists and is not a socket, or a socket a live server
// still listens on; removes a stale socket.
core::Status prepare_unix_socket_path(const std::filesystem::path& path);

}  // namespace pulsebox::http
