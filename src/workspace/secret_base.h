// What a session's run replaced in the workspace, checked for registered
// secret values while the run still knows them: the session's review later
// shows each such path's old content redacted, or not at all
// (ImportOptions::known_bases), as a run's own transaction does.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "pulsebox/workspace.h"

namespace pulsebox::workspace {

// The workspace's `path` (beneath root_fd) as a base: nullopt when it is
// no file or symlink, or holds no registered value; `redacted` unset when
// it is a file over `max_bytes` (it could not be checked).
std::optional<ImportOptions::KnownBase> check_base(int root_fd, const std::string& path,
                                                   const SecretScrubber& secrets,
                                                   std::uint64_t max_bytes);

}  // namespace pulsebox::workspace
