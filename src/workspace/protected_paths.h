// Which workspace paths are protected: a path's names matched against the
// public patterns (protected_paths() and protected_in_git_directories() in
// include/pulsebox/workspace.h) at any depth. Pure name matching; what the
// tree holds (is there a HEAD file here?) is asked of the caller.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "workspace/tree.h"

namespace pulsebox::workspace {

// Whether directory `dir` (workspace-relative, "" for the root) holds an
// entry called `name`, now or after the transaction.
using HoldsEntry = std::function<bool(std::string_view dir, std::string_view name)>;

struct ProtectedMatch {
  // "protected path (<pattern>: <reason>)", or a sentence saying how the
  // change reaches a protected path.
  std::string why;
  // Lower-case names a policy rule may spell out to allow the change: the
  // names the pattern matched (".git"; ".github", "workflows"), or for a git
  // directory under another name, that name ("x.git"; at the root, the file's).
  std::vector<std::string> names;
};

// Why changing `path` (checked and normalised) so that it becomes `becomes`
// (Absent for a deletion, the unchanged type for a chmod) touches a
// protected path, or nullopt.
std::optional<ProtectedMatch> match_protected_path(std::string_view path, NodeType becomes,
                                                   const HoldsEntry& holds);

// The names of a '/'-separated path, without empty ones.
std::vector<std::string> path_names(std::string_view path);

// One name against one pattern name: ASCII case-insensitive, '*' matches any
// run of bytes and '?' one byte.
bool name_matches(std::string_view pattern, std::string_view name);

}  // namespace pulsebox::workspace
