// Making a commit's blobs durable before its write-ahead log names them.
#pragma once

#include <cstddef>
#include <filesystem>

#include "core/result.h"
#include "workspace/transactions.h"

namespace pulsebox::workspace {

// Up to this many blobs, each is fsynced with every directory above it
// (to the workspace's root); past it, one syncfs() of the file system.
// syncfs() also writes out every other process's dirty data there: on a
// file system a build is writing to, a one-file commit waited for all of
// it (tools/bench commit --busy). An fsync is a journal commit of its own,
// so past a few files one syncfs() is the cheaper on an idle file system.
inline constexpr std::size_t kFsyncEachBlobUpTo = 16;

// Makes every Write's blob of `draft` (in the transaction directory `dir`,
// beneath the workspace `root`, open as `root_fd`) and its name durable.
// A blob or directory this user cannot open for reading (a mode the run
// gave it) is made durable by the syncfs() instead.
core::Status make_blobs_durable(const Draft& draft, const std::filesystem::path& dir,
                                const std::filesystem::path& root, int root_fd);

}  // namespace pulsebox::workspace
