// Making a commit's blobs durable before its write-ahead log names them.
#pragma once

#include <cstddef>
#include <filesystem>

#include "core/result.h"
#include "workspace/transactions.h"

namespace pulsebox::workspace {

// Up to this many blobs and new directories, each is fsynced with every
// directory above it (to the workspace's root); past it, one syncfs() of
// the file system. syncfs() also writes out every other process's dirty
// data there: on a file system a build is writing to, a one-file commit
// waited for all of it (tools/bench commit --busy). An fsync is a journal
// commit of its own, so past a few files one syncfs() is the cheaper on an
// idle file system.
inline constexpr std::size_t kFsyncEachUpTo = 16;
// Nor more directories than this (deep trees), which are fsynced one by one.
inline constexpr std::size_t kFsyncDirectoriesUpTo = 64;

// Makes every Write's blob of `draft` (in the transaction directory `dir`,
// beneath the workspace `root`, open as `root_fd`), each new directory a
// run left in place beneath blobs/ (moved whole by the commit), and their
// names durable. A commit that `leaves_pending` entries (the rest of a
// partial commit, whose blobs its manifest names again) syncs the file
// system, as does one where a blob or directory cannot be opened for
// reading (a mode the run gave it, a lease, ...).
core::Status make_blobs_durable(const Draft& draft, bool leaves_pending,
                                const std::filesystem::path& dir, const std::filesystem::path& root,
                                int root_fd);

}  // namespace pulsebox::workspace
