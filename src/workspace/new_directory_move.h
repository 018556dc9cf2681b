// Committing a new directory of files kept in place (kInPlaceBlob) as one
// rename: the run's directory, already whole beneath blobs/u, moves into
// the workspace instead of each file being renamed into a directory made
// for it (100,000 renames were most of a large commit's time).
#pragma once

#include <sys/stat.h>

#include <string>

#include "core/result.h"
#include "workspace/transactions.h"

namespace pulsebox::workspace {

// Moves `top` (a Mkdir of a path absent from the workspace) from
// blobs/u/<path> to `name` in `dir` when that directory holds exactly the
// entries `draft` stages beneath it, each a file kept in place (the very
// inode check_blobs_are_files recorded, one link, its staged mode) or a
// directory (no extended attributes); directories get their staged mode
// with the owner's rwx (apply sets the staged modes last) and, as root, all
// their owner from `dir_stat`, where they lie.
// The rename never replaces anything (RENAME_NOREPLACE).
// true: moved, the entries beneath are in place. false: not eligible, or
// the rename did not happen; the caller applies them one by one, which
// the preparation here leaves correct.
core::Result<bool> move_new_directory(const Draft& draft, const Entry& top, int blobs_fd, int dir,
                                      const std::string& name, const struct stat* dir_stat);

}  // namespace pulsebox::workspace
