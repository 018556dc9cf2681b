// A transaction of an uploaded workspace, sent back to the caller that
// uploaded it (POST /v1/export, docs/protocol.md "Workspaces that travel"):
// its changes as an overlay-style upper tree, plus a root file
// .pulsebox-changes.json listing what it deletes, for write_tree_archive.
//
//   const fs::path upper = temp_dir / "upper";  // must not exist
//   PB_CHECK(materialise_changes(upload_root, "tx-...", upper));
//   archive::write_tree_archive(upper, sink);
#pragma once

#include <filesystem>
#include <string>

#include "core/result.h"

namespace pulsebox::http {

inline constexpr const char* kChangesManifest = ".pulsebox-changes.json";

// Writes transaction `id` of the workspace at `root` into `upper` (created
// 0755; it must not exist), each path created beneath it without following
// symlinks:
//   Write    the staged content (hard-linked, else copied) with its mode
//   Mkdir    a directory with its mode
//   Symlink  a symlink with its target
//   Chmod    a file: its content in `root` with the new mode; a directory:
//            a directory with that mode
//   Delete   {"path"[, "path_hex"]} in the manifest's "deleted"
// Parent directories no entry names get the mode they have in `root`
// (0755 when not there). Errors: kInvalidInput when there is no such
// transaction, when it changes a top-level .pulsebox-changes.json, or when
// a mode change concerns something no longer in `root`.
core::Status materialise_changes(const std::filesystem::path& root, const std::string& id,
                                 const std::filesystem::path& upper);

// Whether the workspace at `root` has transaction `id`.
bool has_transaction(const std::filesystem::path& root, const std::string& id);

}  // namespace pulsebox::http
