// What a session's run replaced in the workspace, checked for registered
// secret values while the run still knows them: the session's review later
// shows each such path's old content redacted, or not at all
// (ImportOptions::known_bases), as a run's own transaction does.
#pragma once

#include <cstdint>
#include <string>

namespace pulsebox {
class SecretScrubber;
}

namespace pulsebox::workspace {

struct CheckedBase {
  enum class Kind {
    kNone,       // nothing, or a special file: a diff shows no content
    kDirectory,  // a directory: what it holds is checked path by path
    kClean,      // holds no registered value
    kHolds,      // holds one: `redacted` is what a diff may show
    kUnchecked,  // a file over the size limit, or one that cannot be read: never shown
  };
  Kind kind = Kind::kNone;
  std::string sha256;  // of the file's bytes or the link's target (kClean, kHolds)
  std::string redacted;
  std::uint64_t bytes_read = 0;
};

// The workspace's `path` (beneath root_fd) as a base, checked.
CheckedBase check_base(int root_fd, const std::string& path, const SecretScrubber& secrets,
                       std::uint64_t max_bytes);

}  // namespace pulsebox::workspace
