// Whose a session's storage is. A session's record is in its workspace,
// where a repository or a copy (`cp -a`, a shared or committed .agent/)
// can bring one naming another session's storage; the storage is in the
// user's private kept directory, which only pulsebox writes. So each
// storage holds an owner file naming the workspace (its canonical root)
// and session it was made for, written before the record names it and
// removed last, and what may be done to storage through a record depends
// on what that file says (OpenSession::remove, recover, commit_session).
#pragma once

#include <filesystem>
#include <string>

#include "core/result.h"
#include "pulsebox/workspace.h"

namespace pulsebox::workspace {

enum class StorageOwner {
  kThisSession,  // made for this workspace and session
  kUnstated,     // no owner file: an earlier pulsebox's (or no storage)
  kAnother,      // made for another workspace or session (or unreadable)
};

// The owner file's text for session `name` of `ws`.
std::string owner_stamp(const Workspace& ws, const std::string& name);
// Writes `storage`'s owner file.
core::Status write_owner(const std::filesystem::path& storage, const std::string& stamp);
// What `storage`'s owner file says, against `stamp` (owner_stamp).
StorageOwner storage_owner(const std::filesystem::path& storage, const std::string& stamp);
// Whether the session `storage`'s owner file names still has a record
// naming `storage` (this record is then a copy's). After a move or a
// removal of that workspace it has none. An owner file that cannot be
// read or a record that cannot be read counts as still used.
bool still_used_by_its_owner(const std::filesystem::path& storage);
// Removes `storage`, its owner file last (a crash leaves storage that
// still says whose it is). Missing storage is no error.
core::Status remove_storage(const std::filesystem::path& storage);

}  // namespace pulsebox::workspace
