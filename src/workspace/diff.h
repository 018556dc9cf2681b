// Unified diffs for transaction previews.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace pulsebox::workspace {

struct DiffSide {
  bool exists = false;
  bool is_symlink = false;
  unsigned mode = 0;    // permission bits (and 0120000 added for symlinks on output)
  std::string content;  // file bytes, or the symlink target
  // The content could not be read (over the per-file limit, gone): shown
  // as one placeholder line without a sign (kNotShownLine), never as an
  // empty file, and the other side in full.
  bool unshown = false;
};

inline constexpr std::string_view kNotShownLine =
    "[content not shown: over the per-file limit, or unreadable]";

// A git-style file diff ("diff --git a/p b/p", mode lines, "--- a/p",
// "+++ b/p", hunks with 3 lines of context, "Binary files ... differ"); the
// names quoted like git's when they need it ("b/new\nline"), the content
// as it is.
std::string unified_file_diff(const std::string& path, const DiffSide& before,
                              const DiffSide& after, bool colour);

bool looks_binary(std::string_view bytes);

// What unified_file_diff would show as counts: lines added and removed, or
// binary when a side shown looks binary or neither is shown (then no lines
// are counted). The lines of a side not shown are not counted.
struct LineCounts {
  std::uint64_t added = 0;
  std::uint64_t removed = 0;
  bool binary = false;
  std::string_view not_shown;  // "before", "after", "both" or empty (DiffSide::unshown)
};
LineCounts count_changed_lines(const DiffSide& before, const DiffSide& after);

// "diff --git a/PATH b/PATH", each side quoted as git quotes a name that
// holds control characters, bytes that are not UTF-8 or invisible format
// characters (core::quote_name): the names come from the sandbox.
std::string diff_header(const std::string& path);

// A diff from unified_file_diff (or Workspace::diff) made safe for a
// terminal: the content of every line escaped (core::escape_for_terminal:
// control characters other than tab, bytes that are not UTF-8, invisible
// format characters), the colour codes of our own painted lines kept.
// Only for a terminal: piped, a diff stays byte for byte (git apply).
std::string escape_diff_for_terminal(std::string_view diff);

}  // namespace pulsebox::workspace
