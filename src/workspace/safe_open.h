// Resolving untrusted relative paths beneath a directory fd.
// Used by the path validator and (later) by workspace transactions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/result.h"
#include "core/unique_fd.h"

namespace pulsebox::workspace {

// Lexical check of an agent-supplied path: relative, no "..", no NUL, no
// backslash, not empty. Returns it normalised ("./a//b/" -> "a/b").
core::Result<std::string> check_relative_path(std::string_view path);

enum class ResolveMode {
  kAuto,           // openat2 if the kernel has it, else the component walk
  kComponentWalk,  // always the O_NOFOLLOW walk
};

// Opens `relative` (already checked) beneath `root_fd` with `flags`
// (O_CLOEXEC is added; O_PATH works). The result never refers to anything
// outside root_fd.
core::Result<core::UniqueFd> open_beneath(int root_fd, const std::string& relative, int flags,
                                          ResolveMode mode = ResolveMode::kAuto);

// True when openat2 works on this kernel (probed once).
bool openat2_supported();

// Reads a regular file (fstat-checked) of at most `max_size` bytes.
core::Result<std::string> read_regular_file(int fd, std::uint64_t max_size, std::string_view name);

// A file's bytes (as read_regular_file reads them) or a symlink's target,
// by `name` in `parent_fd`, never through a symlink; `what` names it in
// errors.
core::Result<std::string> read_file_or_link(int parent_fd, const std::string& name, bool is_symlink,
                                            std::uint64_t max_size, std::string_view what);

}  // namespace pulsebox::workspace
