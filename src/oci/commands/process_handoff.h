// What `create` and `exec` share when they hand a process its descriptors
// and wait for its setup.
#pragma once

#include <string>

#include "core/result.h"
#include "core/unique_fd.h"

namespace pulsebox::oci::commands {

// How long each step of the process's setup handshake may take.
inline constexpr int kHandshakeMs = 30000;

// `fd` itself when it is above fds 0 .. 2 + preserved (the ones the process
// inherits, which the launch plan leaves alone), else a close-on-exec
// duplicate above them. An invalid `fd` is reported as the open that failed.
core::Result<core::UniqueFd> above_preserved(core::UniqueFd fd, int preserved);

// A connection to the --console-socket at `path` (the engine's, which
// receives the terminal's descriptor).
core::Result<core::UniqueFd> connect_console(const std::string& path);

}  // namespace pulsebox::oci::commands
