// A commit's blobs made durable (blob_durability.h).
#include "workspace/blob_durability.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <set>
#include <string>

#include "core/fs.h"
#include "workspace/safe_open.h"

namespace pulsebox::workspace {
namespace {

using core::Error;
using core::UniqueFd;

// What stopped the fsyncs: an error, or only a permission this user lacks.
struct Outcome {
  core::Status status = core::ok_status();
  bool not_permitted = false;
};

Outcome fsync_opened(core::Result<UniqueFd> opened, const std::string& what) {
  if (!opened) {
    if (opened.error().error_number() == EACCES) return {core::ok_status(), true};
    return {opened.error(), false};
  }
  if (::fsync(opened->get()) != 0) return {Error::from_errno("workspace", "fsync " + what), false};
  return {};
}

// Every directory `relative` (a path beneath a directory) is in, deepest
// first, "" (that directory) last.
void add_parents(const std::string& relative, std::set<std::string, std::greater<>>* out) {
  for (std::size_t slash = relative.rfind('/'); slash != std::string::npos && slash > 0;
       slash = relative.rfind('/', slash - 1)) {
    if (!out->insert(relative.substr(0, slash)).second) break;  // its parents are in too
  }
}

Outcome fsync_each(const Draft& draft, const std::filesystem::path& dir,
                   const std::filesystem::path& root, int root_fd) {
  const auto blobs = dir / "blobs";
  auto blob_dir = core::open_directory(blobs);
  if (!blob_dir) return {blob_dir.error(), false};
  BlobShards shards(blob_dir->get());
  std::set<std::string, std::greater<>> directories;  // beneath blobs/
  for (const auto& [path, entry] : draft.entries) {
    if (entry.op != StagedOp::Write) continue;
    const std::string relative = blob_relative_path(entry);
    auto blob = shards.locate(relative);
    if (!blob) return {blob.error(), false};
    UniqueFd fd(::openat(blob->dir, blob->name.c_str(),
                         O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    auto opened = fd ? core::Result<UniqueFd>(std::move(fd))
                     : core::Result<UniqueFd>(
                           Error::from_errno("workspace", "open " + (blobs / relative).string()));
    if (auto done = fsync_opened(std::move(opened), (blobs / relative).string());
        !done.status.ok() || done.not_permitted) {
      return done;
    }
    add_parents(relative, &directories);
  }
  // Deepest first: a directory's name is written after what it holds.
  for (const std::string& relative : directories) {
    auto done = fsync_opened(open_beneath(blob_dir->get(), relative, O_RDONLY | O_DIRECTORY,
                                          ResolveMode::kComponentWalk),
                             (blobs / relative).string());
    if (!done.status.ok() || done.not_permitted) return done;
  }
  if (::fsync(blob_dir->get()) != 0) return {Error::from_errno("workspace", "fsync " + blobs.string()), false};
  // The transaction's directory and each above it, to the workspace's root.
  const auto beneath_root = dir.lexically_relative(root);
  if (beneath_root.empty() || *beneath_root.begin() == "..") {
    return {Error(core::ErrorKind::kInternal, "workspace",
                  dir.string() + " is not beneath " + root.string()),
            false};
  }
  for (auto above = beneath_root; !above.empty() && above != "."; above = above.parent_path()) {
    auto done = fsync_opened(open_beneath(root_fd, above.string(), O_RDONLY | O_DIRECTORY,
                                          ResolveMode::kComponentWalk),
                             (root / above).string());
    if (!done.status.ok() || done.not_permitted) return done;
  }
  if (::fsync(root_fd) != 0) return {Error::from_errno("workspace", "fsync " + root.string()), false};
  return {};
}

}  // namespace

core::Status make_blobs_durable(const Draft& draft, const std::filesystem::path& dir,
                                const std::filesystem::path& root, int root_fd) {
  std::size_t writes = 0;
  for (const auto& [path, entry] : draft.entries)
    writes += entry.op == StagedOp::Write ? 1 : 0;
  if (writes <= kFsyncEachBlobUpTo) {
    Outcome each = fsync_each(draft, dir, root, root_fd);
    if (!each.not_permitted) return each.status;
  }
  if (::syncfs(root_fd) != 0) return Error::from_errno("workspace", "syncfs (blobs)");
  return core::ok_status();
}

}  // namespace pulsebox::workspace
