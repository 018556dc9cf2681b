// What the transaction store's two halves share (transactions.cc: the
// store and staging; commit.cc: committing and replay): the files of a
// transaction directory, read and written, and the small file operations
// both need.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/fs.h"
#include "core/result.h"
#include "workspace/transactions.h"

namespace pulsebox::workspace {

// Temporary files a commit leaves beside their targets until renamed.
inline constexpr const char* kTempPrefix = ".pulsebox-tmp-";
// What a commit that ends a session's layer (SharedBlobs::kMovedIn) leaves
// of its transaction's directory: the evidence, for the session's next
// opening, that it was committed and not discarded (session_store.cc).
inline constexpr const char* kCommittedMarker = "COMMITTED";
// A manifest takes a few hundred bytes per staged path.
inline constexpr std::uint64_t kMaxTransactionFileBytes = core::kDefaultReadLimit;

timespec to_timespec(std::int64_t ns);
// Sets the modification time of `name` in `dir` itself, never of what a
// symlink points to. 0: leaves it.
core::Status set_mtime_at(int dir, const std::string& name, std::int64_t mtime_ns,
                          const std::string& path);
// Calls commit_failpoint (tests) with the step's name.
void failpoint(std::string_view step);

StagedOp op_from_string(std::string_view text);
Snapshot snapshot_from_json(const nlohmann::json& json);
Entry entry_from_json(const nlohmann::json& json);
// "" or why a loaded entry cannot be used (a bad blob name, ...).
std::string entry_problem(const Entry& entry);
core::Error corrupt(const std::filesystem::path& file, const std::string& why);
// A manifest or write-ahead log, bounded and depth-checked.
core::Result<nlohmann::json> read_json(const std::filesystem::path& file);
// Reads a manifest or log like read_json, handing each entry of its array
// `key` to `each` as soon as it is parsed (checked with entry_problem; the
// first problem makes the file corrupt): the returned document lacks them,
// so 100,000 entries are never one document in memory.
core::Result<nlohmann::json> read_entries(const std::filesystem::path& file, std::string_view key,
                                          const std::function<void(Entry&&)>& each);
// read_entries for a file pulsebox wrote: `key` must be one array of
// nothing but entry objects (which `each` got, in path order). Anything
// else under `key` (an object of entries, a number) would be entries that
// the order check never saw, or none at all.
core::Result<nlohmann::json> read_only_entries(const std::filesystem::path& file,
                                               std::string_view key,
                                               const std::function<void(Entry&&)>& each);
// Writes the object `head` with `entries` as its array `key` to `file`
// (write_file_atomic), one entry's text at a time.
core::Status write_entries(const std::filesystem::path& file, const nlohmann::json& head,
                           std::string_view key, const Entries& entries);
core::Status fsync_path(const std::filesystem::path& path);
// `name` in `dir` replaced by a copy of the file open as `fd` (described by
// `st`), written under a temporary name with `mode`, `st`'s times and, with
// `with_owner`, its owner, then renamed: the file's other links keep what
// they have. `durable`: synced before the rename. Its inode number in
// `*inode`. `temp_dir` (on the same file system) holds the copy until its
// rename instead of `dir`, so that a crash leaves nothing in `dir`.
core::Status replace_with_copy(int dir, const std::string& name, int fd, const struct stat& st,
                               unsigned mode, const std::string& path, bool with_owner,
                               bool durable, ino_t* inode = nullptr, int temp_dir = -1);
// As root, a new entry takes the owner of the entry it replaced, or of the
// directory it is made in (`dir_stat`, when the caller has it: one stat a
// directory, not one a file); `now`, when known, is its stat (no chown
// when it has that owner already).
void adopt_owner(int dir, const std::string& name, const struct stat* replaced,
                 const struct stat* now = nullptr, const struct stat* dir_stat = nullptr);

}  // namespace pulsebox::workspace
