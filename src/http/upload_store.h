// Uploaded workspaces (docs/protocol.md "Workspaces that travel"): a remote
// caller's tree arrives as a tar stream, is checked and unpacked once, and
// is kept under the SHA-256 of its stream, so an unchanged workspace is not
// sent again. On disk, under <state>/uploads/ (0711: sandboxes reach the
// trees through it, nobody lists it):
//   <hex>/          the tree (0700), a run's workspace; its .agent/ holds
//                   the transactions of runs on it
//   <hex>.lock      flock shared while a run or a request uses the tree,
//                   exclusive to evict it; its mtime is the last use
//   .incoming-*     an upload being received or unpacked (gone after it)
//
// Usage:
//   PB_TRY(store, UploadStore::open(state_dir / "uploads", limits));
//   auto stored = store->receive(hex, [&](const archive::ArchiveSink& sink) {
//     return read_request_body_into(sink);  // false: the client went away
//   });
//   if (auto lease = store->acquire(hex)) run_in(lease->root());  // kept while held
//   store->evict();
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "archive/workspace_archive.h"
#include "core/result.h"
#include "core/unique_fd.h"

namespace pulsebox::http {

struct UploadLimits {
  std::uint64_t max_bytes = 1ULL << 30;  // of file content (--max-upload)
  std::uint64_t max_files = 200000;      // entries (--max-upload-files)
  unsigned max_uploads = 16;             // trees kept (--max-uploads)
};

// "sha256:<64 lowercase hex>" -> the hex, or nullopt.
std::optional<std::string> upload_hex(std::string_view name);

// A tree in use: it is not evicted while this lives.
class UploadLease {
 public:
  UploadLease(core::UniqueFd lock, std::filesystem::path root)
      : lock_(std::move(lock)), root_(std::move(root)) {}
  const std::filesystem::path& root() const { return root_; }

 private:
  core::UniqueFd lock_;
  std::filesystem::path root_;
};

class UploadStore {
 public:
  // Creates `dir` (0711) if needed and removes what an interrupted upload
  // or eviction left there.
  static core::Result<std::unique_ptr<UploadStore>> open(const std::filesystem::path& dir,
                                                         UploadLimits limits);

  // Whether the tree named `hex` is here (without marking it used).
  bool has(const std::string& hex) const;

  struct Stored {
    bool created = false;  // false: it was here already (a concurrent or repeated upload)
    std::uint64_t files = 0;
    std::uint64_t bytes = 0;
  };
  // Feeds the archive's bytes, in order, to the sink it is given; returns
  // false to stop (the client went away).
  using BodyReader = std::function<bool(const archive::ArchiveSink& sink)>;
  // Receives the archive into a temporary file, unpacks it with the
  // limits, checks that its SHA-256 is `hex`, and keeps the tree under that
  // name. Errors (nothing is left behind): kSecurity or kInvalidInput for a
  // hostile or damaged archive, a wrong hash or a top-level .agent/, naming
  // the entry; kResource beyond the limits; kIo otherwise.
  core::Result<Stored> receive(const std::string& hex, const BodyReader& read_body);

  // The tree named `hex`, marked used and held until the lease ends;
  // nullopt when it is not here.
  std::optional<UploadLease> acquire(const std::string& hex) const;

  // Removes the least recently used trees beyond max_uploads, skipping
  // any in use. Returns how many went.
  std::size_t evict();

  const std::filesystem::path& dir() const { return dir_; }

 private:
  UploadStore(std::filesystem::path dir, UploadLimits limits)
      : dir_(std::move(dir)), limits_(limits) {}
  core::Result<Stored> unpack(const std::string& hex, int archive_fd,
                              const std::filesystem::path& temp_tree);

  std::filesystem::path dir_;
  UploadLimits limits_;
};

}  // namespace pulsebox::http
