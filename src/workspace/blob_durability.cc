// A commit's blobs made durable (blob_durability.h).
#include "workspace/blob_durability.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "core/fs.h"
#include "workspace/safe_open.h"
#include "workspace/store_files.h"

namespace pulsebox::workspace {
namespace {

using core::Error;
using core::UniqueFd;

// Deepest first along each chain: a directory's name is synced after what
// it holds.
using Directories = std::set<std::string, std::greater<>>;

// What the fsyncs came to: done, an error (an fsync that failed), or a
// file they could not open, for syncfs() to cover instead.
struct Outcome {
  core::Status status = core::ok_status();
  bool fall_back = false;
};

Outcome use_syncfs() {
  return {core::ok_status(), true};
}

// Tests see each file synced as the failpoint "synced <path>".
Outcome fsync_fd(int fd, const std::string& what) {
  if (::fsync(fd) != 0) {
    const int err = errno;  // before the message's allocation
    return {Error::from_errno("workspace", "fsync " + what, err), false};
  }
  failpoint("synced " + what);
  return {};
}

struct Blob {
  std::string relative;     // beneath blobs/
  std::uint64_t inode = 0;  // what the blob check found there
};

// Every directory `relative` (beneath blobs/) is in, "" (blobs/) excluded.
void add_parents(const std::string& relative, Directories* out) {
  for (std::size_t slash = relative.rfind('/'); slash != std::string::npos && slash > 0;
       slash = relative.rfind('/', slash - 1)) {
    if (!out->insert(relative.substr(0, slash)).second) break;  // its parents are in too
  }
}

// The Write blobs of `draft` and the directories above them, and the new
// directories it makes as they would lie in place beneath blobs/; false
// when there are too many to fsync each.
bool collect(const Draft& draft, std::vector<Blob>* blobs, Directories* directories,
             std::vector<std::string>* new_directories) {
  for (const auto& [path, entry] : draft.entries) {
    if (entry.op == StagedOp::Write) {
      blobs->push_back({blob_relative_path(entry), entry.blob_inode});
      add_parents(blobs->back().relative, directories);
    } else if (entry.op == StagedOp::Mkdir) {
      new_directories->push_back(std::string(kInPlaceBlob) + "/" + path);
    }
    if (blobs->size() + new_directories->size() > kFsyncEachUpTo ||
        directories->size() > kFsyncDirectoriesUpTo) {
      return false;
    }
  }
  return true;
}

Outcome fsync_each(const Draft& draft, const std::filesystem::path& dir,
                   const std::filesystem::path& root, int root_fd) {
  std::vector<Blob> blobs;
  Directories directories;
  std::vector<std::string> new_directories;
  if (!collect(draft, &blobs, &directories, &new_directories)) return use_syncfs();
  const auto blobs_path = dir / "blobs";
  UniqueFd blob_dir(::open(blobs_path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!blob_dir) return use_syncfs();
  BlobShards shards(blob_dir.get());
  for (const Blob& each : blobs) {
    auto blob = shards.locate(each.relative);
    if (!blob) return use_syncfs();
    UniqueFd fd(
        ::openat(blob->dir, blob->name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    // The file the blob check saw (and the log will name), or syncfs.
    struct stat st {};
    if (!fd || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) ||
        (each.inode != 0 && static_cast<std::uint64_t>(st.st_ino) != each.inode)) {
      return use_syncfs();
    }
    if (auto done = fsync_fd(fd.get(), (blobs_path / each.relative).string()); !done.status.ok())
      return done;
  }
  // A new directory the run made stays in place and is moved whole, with
  // any directory in it that holds no file; one the commit makes is not
  // there.
  for (const std::string& relative : new_directories) {
    auto opened =
        open_beneath(blob_dir.get(), relative, O_PATH | O_DIRECTORY, ResolveMode::kComponentWalk);
    if (!opened && opened.error().error_number() == ENOENT) continue;
    if (!opened) return use_syncfs();
    directories.insert(relative);
    add_parents(relative, &directories);
  }
  if (directories.size() > kFsyncDirectoriesUpTo) return use_syncfs();
  for (const std::string& relative : directories) {
    auto opened =
        open_beneath(blob_dir.get(), relative, O_RDONLY | O_DIRECTORY, ResolveMode::kComponentWalk);
    if (!opened) return use_syncfs();
    if (auto done = fsync_fd(opened->get(), (blobs_path / relative).string()); !done.status.ok())
      return done;
  }
  if (auto done = fsync_fd(blob_dir.get(), blobs_path.string()); !done.status.ok()) return done;
  // The transaction's directory and each above it, to the workspace's root.
  const auto beneath_root = dir.lexically_relative(root);
  if (beneath_root.empty() || *beneath_root.begin() == "..") return use_syncfs();
  for (auto above = beneath_root; !above.empty() && above != "."; above = above.parent_path()) {
    auto opened =
        open_beneath(root_fd, above.string(), O_RDONLY | O_DIRECTORY, ResolveMode::kComponentWalk);
    if (!opened) return use_syncfs();
    if (auto done = fsync_fd(opened->get(), (root / above).string()); !done.status.ok())
      return done;
  }
  return fsync_fd(root_fd, root.string());
}

}  // namespace

core::Status make_blobs_durable(const Draft& draft, bool leaves_pending,
                                const std::filesystem::path& dir, const std::filesystem::path& root,
                                int root_fd) {
  if (!leaves_pending) {
    Outcome each = fsync_each(draft, dir, root, root_fd);
    if (!each.fall_back) return each.status;
  }
  if (::syncfs(root_fd) != 0) return Error::from_errno("workspace", "syncfs (blobs)");
  return core::ok_status();
}

}  // namespace pulsebox::workspace
