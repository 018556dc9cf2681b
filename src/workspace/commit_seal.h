// The seal on a commit point. A decided commit (READY and its write-ahead
// log) is replayed, unreviewed, by the next command that opens the store;
// so that only a commit this user's pulsebox decided is, READY holds an
// HMAC-SHA256, under the user's audit key (audit/key.h), of the
// transaction's id and the SHA-256 of its log. A workspace can arrive with
// a planted READY and log (a cloned repository's .agent/): without the key
// it cannot carry a seal that verifies.
//
// READY's one line: "pulsebox-commit 1 <key id> <mac>", or
// "pulsebox-commit 1 unkeyed" where the process had no place for a key
// (neither XDG_STATE_HOME nor HOME: its audit log is unkeyed too). An empty
// READY is one written before seals, or planted.
#pragma once

#include <filesystem>
#include <string>

#include "core/result.h"

namespace pulsebox::workspace {

// READY's content for transaction `id` whose log is the file `wal`, under
// the key this process's environment names (created if missing, as the
// audit log does).
core::Result<std::string> seal_commit_point(const std::string& id,
                                            const std::filesystem::path& wal);

// Whether `ready` (READY's content) is the seal of `id` and `wal` under this
// process's key. An error says why not (kSecurity): no seal, another key, a
// log changed since. An unkeyed seal verifies only where this process has
// no key either (nothing better can be checked there).
core::Status check_commit_seal(const std::string& id, const std::filesystem::path& wal,
                               const std::string& ready);

}  // namespace pulsebox::workspace
