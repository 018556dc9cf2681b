// A remote run's changes brought home: the tar the server's POST /v1/export
// answers (an overlay-style upper tree plus `.pulsebox-changes.json` naming
// the deletions) becomes a new transaction of the local workspace, through
// the same import as a local run's (protected paths, conflict detection
// against `run_started`, refusals and notes). Nothing of the server's is
// trusted: the archive is extracted with every entry checked.
#pragma once

#include <filesystem>

#include "core/result.h"
#include "pulsebox/workspace.h"

namespace pulsebox::http {

struct ChangesArchive {
  std::filesystem::path tar;       // the export, received into a file
  std::filesystem::path work_dir;  // empty scratch directory on the workspace's file system
};

core::Result<ImportResult> import_remote_changes(const ChangesArchive& archive,
                                                 const std::filesystem::path& workspace,
                                                 const ImportOptions& options);

}  // namespace pulsebox::http
