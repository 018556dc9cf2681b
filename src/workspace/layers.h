// Overlay layers of a session: merging a run's upper directory into the
// session's layer below it, and describing what a run's layer changed.
//
// A layer is a directory in overlayfs's format: a whiteout (character device
// 0/0) hides the path below it, a directory with the xattr
// user.overlay.opaque = "y" hides everything below it. Merging the upper
// layer U into the lower layer L gives one layer with the same view over
// whatever lies beneath L (the workspace), and works by renames within one
// file system, so it costs what U holds, not what L holds. Each step keeps
// the view of U over L unchanged, so a merge stopped half way (a crash, an
// error) leaves two layers that still show the right files; merging again
// finishes it.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "core/result.h"
#include "pulsebox/result.h"

namespace pulsebox::workspace {

// Moves everything of `upper` into `lower` (both layer directories of one
// file system); `upper` is left empty. Never follows a symlink.
core::Status merge_layer(const std::filesystem::path& upper, const std::filesystem::path& lower);

// What a path is in the view below a layer.
enum class KindBelow { kAbsent, kDirectory, kOther };

// What a run's layer changed, path by path: a whiteout is a deletion, a file
// is added or modified as `kind_below(path)` says, a symlink is a symlink,
// a new directory is added (and what it holds; one where a file was is a
// modification), and a directory that hides the one below (opaque, or
// beneath an opaque one) deletes each of `names_below(dir)` it does not
// hold again. At most `max_entries`. Copied-up files whose content did not
// change show as modified: a session's net changes are found at review,
// against the workspace.
std::vector<Change> describe_layer(
    const std::filesystem::path& layer,
    const std::function<KindBelow(const std::string& path)>& kind_below,
    const std::function<std::vector<std::string>(const std::string& dir)>& names_below,
    std::size_t max_entries);

// What `path` (relative) is in the view of `layers` (top first) over `base`.
KindBelow kind_in_view(const std::vector<std::filesystem::path>& layers,
                       const std::filesystem::path& base, const std::string& path);

// The names directory `dir` (relative; "" for the top) holds in the view of
// `layers` (top first) over `base`.
std::vector<std::string> names_in_view(const std::vector<std::filesystem::path>& layers,
                                       const std::filesystem::path& base, const std::string& dir);

// Whether `path` (relative) exists in the view of `layers` (top first)
// over `base`, honouring whiteouts and opaque directories.
bool exists_in_view(const std::vector<std::filesystem::path>& layers,
                    const std::filesystem::path& base, const std::string& path);

// Whether a directory tree is nested deeper than `limit` directories
// (never following a symlink).
bool layer_deeper_than(const std::filesystem::path& layer, int limit);

// Moves the directory `from` to `to` (which must not exist): a rename, or
// where they are on different file systems (a run's changes on a tmpfs of
// its own, --disk) a copy that keeps what a layer is made of: contents,
// modes, times, symlinks, whiteouts, opaque directories, FIFOs, and as root
// the owners. Never follows a symlink.
core::Status move_layer(const std::filesystem::path& from, const std::filesystem::path& to);

// Replaces each regular file of the layer that has another link by a copy
// of its own (content, mode, times; as root, its directory's owner, since
// a file moved into the workspace lost the layer's): a session kept after
// a commit that may have moved its files into the workspace then shares
// none of them. Each copy is made in the layer's parent directory (the
// session's own) and renamed in. Never follows a symlink. How many were
// copied.
core::Result<std::size_t> unshare_layer_files(const std::filesystem::path& layer);

// Removes a directory tree written by a sandbox: never follows a symlink,
// and makes directories the caller owns accessible before entering them
// (an overlay work directory is mode 000, a command may chmod its own).
core::Status remove_layer_tree(const std::filesystem::path& path);

}  // namespace pulsebox::workspace
