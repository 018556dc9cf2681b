// HOME inside the sandbox: a private directory outside the workspace, so
// that dotfiles and tool caches never land in the run's changes. It is a
// tmpfs of the run's own unless a host directory is kept there between runs
// (SandboxOptions::home, the CLI's --home).
#pragma once

#include <filesystem>
#include <string_view>

#include "core/result.h"

namespace pulsebox::core {

// The sandbox's HOME (the environment's HOME, and where the home is mounted).
inline constexpr std::string_view kSandboxHome = "/home/sandbox";

// Checks a host directory to keep as the sandbox's HOME and makes it (0700)
// when missing; returns it canonical. kInvalidInput (naming `flag`) when it
// is inside the workspace (its files would be changes, and the sandbox could
// reach them twice), a system directory or not a directory.
Result<std::filesystem::path> prepare_home_dir(const std::filesystem::path& dir,
                                               const std::filesystem::path& workspace,
                                               std::string_view flag);

}  // namespace pulsebox::core
