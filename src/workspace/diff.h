// Unified diffs for transaction previews.
#pragma once

#include <string>
#include <string_view>

namespace pulsebox::workspace {

struct DiffSide {
  bool exists = false;
  bool is_symlink = false;
  unsigned mode = 0;    // permission bits (and 0120000 added for symlinks on output)
  std::string content;  // file bytes, or the symlink target
};

// A git-style file diff ("diff --git a/p b/p", mode lines, "--- a/p",
// "+++ b/p", hunks with 3 lines of context, "Binary files ... differ").
std::string unified_file_diff(const std::string& path, const DiffSide& before,
                              const DiffSide& after, bool colour);

bool looks_binary(std::string_view bytes);

}  // namespace pulsebox::workspace
