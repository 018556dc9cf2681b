// The seal on a commit point. A decided commit (READY and its write-ahead
// log) is replayed, unreviewed, by the next command that opens the store;
// so that only a commit this user's pulsebox decided is, READY holds an
// HMAC-SHA256, under the user's audit key (audit/key.h), of the
// transaction's id, the workspace's root and the SHA-256 of its log (whose
// steps name each blob's inode and size). A workspace can arrive with a
// planted READY and log (a cloned repository's .agent/): without the key it
// cannot carry a seal that verifies; a sealed log copied elsewhere names
// another workspace, and blobs put in place of its own have other inodes.
//
// READY's one line: "pulsebox-commit 1 <key id> <mac>", or
// "pulsebox-commit 1 unkeyed" where no key could be had (no place for one,
// or it could not be made): that one never verifies, so a crash there needs
// `reconcile --accept-unsealed`. An empty READY is one written before seals,
// or planted.
#pragma once

#include <filesystem>
#include <string>

#include "core/result.h"
#include "pulsebox/audit.h"

namespace pulsebox::workspace {

// READY's content for transaction `id` of the workspace at `root` whose log
// is the file `wal`, under `key` (created if missing, as the audit log does).
core::Result<std::string> seal_commit_point(const AuditKeyLocation& key, const std::string& id,
                                            const std::filesystem::path& root,
                                            const std::filesystem::path& wal);

// Whether `ready` (READY's content) is that seal under `key`. An error says
// why not (kSecurity): no seal, unkeyed, another key, another workspace, a
// log changed since.
core::Status check_commit_seal(const AuditKeyLocation& key, const std::string& id,
                               const std::filesystem::path& root, const std::filesystem::path& wal,
                               const std::string& ready);

}  // namespace pulsebox::workspace
