// The workspace's own directory, .agent/ (transactions, the audit log, run
// state): made with a .gitignore of its own so that `git status` in the
// workspace never lists it, and found from anywhere beneath the workspace.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"

namespace pulsebox::core {

// Makes <workspace>/.agent (0700) when missing and adds .agent/.gitignore
// ("*": git ignores the directory and the file itself) when missing. A
// .agent that is not a directory (a symlink planted there) is kSecurity.
Status ensure_agent_dir(const std::filesystem::path& workspace);

// Nested workspaces. A sandbox of an enclosing workspace would see a nested
// one's .agent/ (its pending changes, its audit log) as ordinary files, and
// finding every .agent/ below a workspace would mean walking its whole tree
// at each run. So each workspace, whenever a Sandbox opens it, adds its path
// (relative, one line) to <enclosing>/.agent/nested of every workspace that
// encloses it, and a run hides the .agent/ of each path listed there.
// Best effort: an enclosing .agent/ this user cannot write is another
// user's, whose sandboxes cannot read this one's .agent/ (mode 0700) either.
void register_with_enclosing_workspaces(const std::filesystem::path& workspace,
                                        const std::filesystem::path& home);
// Once per workspace (until .agent/nested-found exists): lists in
// <workspace>/.agent/nested the workspaces already nested in it, found by
// walking its tree (not into any .agent/ or .git/, nor through a symlink or
// onto another file system); a workspace made before the one enclosing it
// and not opened since would not be listed otherwise. A .agent/ counts when
// its .gitignore is the one ensure_agent_dir writes or it holds a file only
// pulsebox makes (clock, transactions, logs/audit.jsonl, nested), so
// another tool's .agent/ stays the project's. A walk that fails part-way is
// repeated at the next open.
void find_nested_workspaces_once(const std::filesystem::path& workspace);

// The nested workspaces listed in <workspace>/.agent/nested that still hold
// a .agent/ directory, relative to `workspace`: normal relative paths
// beneath it, reached without a symlink. Anything else in the file is
// ignored (a planted list can only ask to hide more). An error (kSecurity)
// when the list cannot be read whole (not a regular file, over 256 KiB) or
// names more than 1,000 of them: a run must not start with them unmasked.
Result<std::vector<std::string>> nested_workspaces(const std::filesystem::path& workspace);

struct FoundWorkspace {
  std::filesystem::path root;      // the directory holding .agent/ (canonical)
  std::filesystem::path relative;  // `start` below it ("" when start is the root)
};

// The workspace `start` lies in: the nearest directory from `start` upwards
// that holds a .agent/ directory. The walk never looks at a system
// directory (core::system_directory_reason: /, /home, the user's home
// itself, ...) nor above one, so it stops below the user's home. nullopt
// when none is found (or `start` does not exist).
std::optional<FoundWorkspace> find_workspace_root(const std::filesystem::path& start,
                                                  const std::filesystem::path& home);
// The same, with `home` from $HOME.
std::optional<FoundWorkspace> find_workspace_root(const std::filesystem::path& start);

}  // namespace pulsebox::core
