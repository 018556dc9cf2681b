// The anchor of a keyed audit log: where its chain ended (record count,
// byte length, last hash), kept beside the key and MACed with it, so that a
// log truncated, emptied, replaced by another chain or deleted shows. Its
// file holds two copies, written in turn (a torn write leaves the other).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "audit/key.h"
#include "core/result.h"
#include "core/unique_fd.h"

namespace pulsebox::audit {

struct Anchor {
  std::uint64_t generation = 0;  // counts the anchor's writes: the newer copy wins
  std::uint64_t records = 0;     // the seq of the log's last record
  std::uint64_t bytes = 0;       // the log's length after that record
  std::string tip;               // that record's hash
  std::uint64_t keyed_from = 0;  // every record from this seq on is keyed
};

// A log's name for its anchor: the SHA-256 of its canonical path (its
// directory resolved, its own name as it is; the file need not exist).
std::string log_identity(const std::filesystem::path& log);
std::filesystem::path anchor_path(const Key& key, const std::string& log_id);

class AnchorFile {
 public:
  // With `create`, makes the anchor (and its directory, 0700) if missing;
  // without, a missing anchor is an error with errno ENOENT. Refuses a
  // symbolic link and anything but a small regular file of this user that
  // only this user can read.
  static core::Result<AnchorFile> open(const std::filesystem::path& path, bool create);

  // The newer copy with a valid MAC for `log_id` (empty: for any log);
  // nullopt for an empty (new) anchor. An error if no copy is valid.
  core::Result<std::optional<Anchor>> read(const Key& key, const std::string& log_id) const;
  // Writes `anchor` over the older copy; with `sync`, fdatasync.
  core::Status write(const Key& key, const std::string& log_id, const Anchor& anchor,
                     bool sync) const;

  const std::filesystem::path& path() const { return path_; }

 private:
  core::UniqueFd fd_;
  std::filesystem::path path_;
};

}  // namespace pulsebox::audit
