// File helpers returning Result: whole-file reads with a size cap and atomic
// replacement (temp file, fsync, rename, directory fsync).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "core/unique_fd.h"

namespace pulsebox::core {

inline constexpr std::uint64_t kDefaultReadLimit = 64ull << 20;

// Reads all of `fd` (from its current offset) up to `limit` bytes; more is an
// error of kind kResource, so a file that grows while read is never truncated
// silently.
Result<std::string> read_all(int fd, std::uint64_t limit, std::string_view what);

// Reads the regular file at `path` (symlinks followed), of at most
// `max_bytes`. A FIFO, device, socket or directory is refused before it is
// opened for reading, so it can neither block the caller nor feed it
// endlessly (/dev/zero) nor see an open with side effects (a watchdog).
// Errors name `what` ("policy file") and the path, and say what was found:
// kInvalidInput for a missing or non-regular file, kResource past the
// limit, kIo for other failures; their stage is "io", which tells an input
// that could not be read from one that was read and found invalid.
Result<std::string> read_regular_file(const std::filesystem::path& path, std::uint64_t max_bytes,
                                      std::string_view what);
// The checks of read_regular_file, without the read: the file opened for
// reading (O_NONBLOCK), for a reader that takes it in pieces. It may still
// grow past `max_bytes` after the check: the reader must bound what it reads.
Result<UniqueFd> open_regular_file(const std::filesystem::path& path, std::uint64_t max_bytes,
                                   std::string_view what);

// Writes `bytes` to a temporary file next to `path`, fsyncs it, renames it
// over `path` and fsyncs the directory: readers see the old or the new file.
Status write_file_atomic(const std::filesystem::path& path, std::string_view bytes,
                         unsigned mode = 0644);
// The same, with the content written by `write` to the temporary file's
// descriptor (in pieces, for a file too large to build in memory first).
Status write_file_atomic(const std::filesystem::path& path, unsigned mode,
                         const std::function<Status(int fd)>& write);

Status write_all(int fd, std::string_view bytes, std::string_view what);

// A new file in `dir` that has no name (O_TMPFILE; where the file system
// lacks it, made and unlinked at once), open for reading and writing: it
// goes with its last descriptor, crash or not.
Result<UniqueFd> unnamed_temp_file(const std::filesystem::path& dir);

// The first line of a small kernel file (/proc/sys, /proc/PID): one read(2),
// for files read on every launch; "" when it cannot be read.
std::string first_line_of_file(const char* path);

// A file in memory holding `bytes`, opened read-only (a run's stdin given as
// data: the sandbox may read it, never write it). Invalid on failure.
UniqueFd read_only_memory_file(std::string_view bytes, const char* name);

Result<UniqueFd> open_directory(const std::filesystem::path& path);

// Creates `path` if needed and takes an exclusive flock on it. A run's lock
// sits beside its directory and is taken before the directory is made, so a
// concurrent reconcile never sees a live run's directory unlocked. A new
// file is made unnamed, locked, then linked in (O_TMPFILE), so nobody sees
// it unlocked either; where that cannot be done (an existing file, no
// O_TMPFILE or /proc) it is opened, then locked, and if a reconcile removed
// it in between (it unlinks lock files it can take), taken again.
Result<UniqueFd> create_locked_file(const std::filesystem::path& path);

// Whether `entry` (a run's directory or its lock file, as listed in runs/)
// is what a crashed run left: a lock file nobody holds, or a directory
// without one. An entry gone since it was listed, or a lock file unlinked by
// the run that held it, is a run that finished, not a crash.
bool left_by_crashed_run(const std::filesystem::path& entry);

// The lock of a run's directory: <dir>.lock beside it.
std::filesystem::path run_lock_path(const std::filesystem::path& run_dir);

// For reconcile: removes the runs under `runs_dir` whose owner died, each a
// directory whose lock beside it nobody holds (`remove_dir` removes it, then
// the lock file goes), unless `still_live(dir)` says otherwise. A lock file
// nobody holds without its directory (a run that died before its mkdir) is
// removed quietly. Returns the removed directories.
std::vector<std::filesystem::path> remove_crashed_runs(
    const std::filesystem::path& runs_dir,
    const std::function<void(const std::filesystem::path&)>& remove_dir,
    const std::function<bool(const std::filesystem::path&)>& still_live = {});

// Moves `fd` to a number of at least 3 (a CLOEXEC duplicate), so a child
// can set up its stdio without clobbering it.
void move_above_stdio(UniqueFd& fd);

}  // namespace pulsebox::core
