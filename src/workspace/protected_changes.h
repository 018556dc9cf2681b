// Whether committing one staged entry would change a protected path
// (workspace/protected_paths.h), judged with what the workspace and the
// transaction hold: the entry's own path, where it really lands when a
// directory on the way is a symlink, and everything a deletion (or the
// replacement of a directory) removes.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/result.h"
#include "workspace/protected_paths.h"
#include "workspace/transactions.h"

namespace pulsebox::workspace {

struct ProtectedChange {
  enum class Via {
    kItself,    // the entry's own path is protected
    kResolves,  // a symlinked directory on the way makes it land on a protected path
    kRemoves,   // deleting or replacing a directory removes a protected path in it
  };
  Via via = Via::kItself;
  std::string path;  // the protected path: the entry's, where it resolves, or one beneath it
  ProtectedMatch match;
};

// The protected path that committing `entry` (a member of `draft`, or about to
// be) would change, or nullopt. A directory holding HEAD in the workspace or
// in `draft` counts as a git directory. Fails with kSecurity when an ancestor
// of the entry is staged as a symlink in the same transaction: applying it
// would write through that symlink, wherever it points.
core::Result<std::optional<ProtectedChange>> find_protected_change(int root_fd, const Draft& draft,
                                                                   const Entry& entry);

// Whether a policy rule with this pattern names the change: one of the
// pattern's names, spelled without wildcards, is a name the protection
// matched (ProtectedMatch::names) or, when the protected path lies beneath
// or behind the entry, the entry's last name. "*", "*/*", "**/config" or
// "*.json" never do.
bool rule_names_change(std::string_view rule_pattern, const Entry& entry,
                       const ProtectedChange& change);

// "refusing to <action> <path>: ...; to allow it, add a policy rule naming
// it, e.g. {...}".
std::string describe_protected_refusal(std::string_view action, const Entry& entry,
                                       const ProtectedChange& change);

}  // namespace pulsebox::workspace
