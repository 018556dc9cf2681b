// Reading an overlayfs upper directory into a transaction draft.
#pragma once

#include <cstdint>
#include <filesystem>

#include <string>
#include <vector>
#include "core/result.h"

#include "workspace/transactions.h"

namespace pulsebox::workspace {

// What may become of the upper directory's files (ImportOptions).
enum class UpperFiles {
  kCopied,  // staged as copies
  kTaken,   // take_upper_files: linked as blobs, their names then released
  kShared,  // share_upper_files: linked as blobs, left as they are
};

// `own_paths` (Workspace::own_paths): a change at or beneath one, or a
// non-directory or deletion on the way to one, is refused.
// With UpperFiles::kTaken, `linked` receives
// the upper files that became their blobs as they are (hard links): once
// the transaction is saved, release_linked() removes their names from the
// upper directory. Until then, a failed import leaves the upper directory
// whole (it may be kept as held changes).
// With `in_place` too, such files (with UTF-8 paths) are staged as
// kInPlaceBlob instead, left where they are: the caller then moves the upper
// directory whole to the transaction's blobs/u before saving the draft.
core::Status import_upper_directory(TransactionStore& store, Draft& draft,
                                    const std::filesystem::path& upper,
                                    const std::filesystem::path& lower,
                                    std::uint64_t max_file_bytes, bool full_copy, UpperFiles files,
                                    const std::vector<std::string>& own_paths,
                                    std::vector<std::string>& linked, bool in_place = false);

// Whether a directory of an upper layer hides what lies beneath it (an
// opaque directory: trusted.overlay.opaque or user.overlay.opaque "y"), as
// the import reads it.
bool is_opaque(int dirfd);

// Removes the `linked` names from `upper`, so that deleting the run's
// directory later never touches the committed file (it would move its
// ctime, which the next run's conflict check reads as a host change).
// Best effort: a name left behind costs only that.
void release_linked(const std::filesystem::path& upper, const std::vector<std::string>& linked);

}  // namespace pulsebox::workspace
