// A run's staging directory (<state>/runs/<id>/ with the overlay's upper/
// and work/) and what happens to it after the run.
//
// Finished runs' staging trees are renamed into <state>/trash/ at once; later,
// in the background, each is made reusable into <state>/pool/ (when the run
// changed nothing and the overlay left nothing behind) or removed. The next
// runs take their staging from the pool. Every directory removed is a block
// freed, which on a disk mounted with -o discard is a synchronous discard
// (docs/benchmarks.md measures it), and the overlay makes three directories
// per run that it must lose again: reuse spares the others. Concurrent runs
// may race on the same tree: every step tolerates the other having done it.
#pragma once

#include <atomic>
#include <filesystem>
#include <memory>

#include "core/result.h"

namespace pulsebox::backends::native {

// Removes a staging tree. The overlay leaves a mode-000 "work" directory, so
// directories are made accessible before they are entered. Stops early (the
// tree partly removed) once *stop is set.
void remove_tree(const std::filesystem::path& path, const std::atomic<bool>* stop = nullptr);

// A run's staging directory with empty upper/ and work/: a reusable tree
// from the pool (renamed: atomic, so concurrent runs never share one), or
// new directories.
core::Status make_staging(const std::filesystem::path& pool, const std::filesystem::path& run_dir);

// Makes each tree in trash/ reusable into pool/ (up to a few) or removes it,
// until `stop` is set.
void empty_trash(const std::filesystem::path& trash, const std::filesystem::path& pool,
                 const std::atomic<bool>& stop);

// empty_trash() on a thread of its own while a run goes on (in a process
// without a resident runtime's own thread). Destroyed, it tells the thread
// to stop after the tree in hand and does not wait for it: the run's result
// is not held up by a removal, the thread ends on its own soon after (or
// with the process), and whatever is left waits for the next run.
class TrashRemover {
 public:
  TrashRemover(std::filesystem::path trash, std::filesystem::path pool);
  TrashRemover(const TrashRemover&) = delete;
  TrashRemover& operator=(const TrashRemover&) = delete;
  ~TrashRemover();

 private:
  std::shared_ptr<std::atomic<bool>> stop_;  // shared with the thread, which may outlive this
};

}  // namespace pulsebox::backends::native
