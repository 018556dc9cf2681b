#include "backends/native/staging.h"

#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cstring>
#include <thread>

namespace pulsebox::backends::native {

using core::Error;
namespace fs = std::filesystem;

// Removes a staging tree. The overlay leaves a mode-000 "work" directory, so
// directories are made accessible before they are entered. Stops early (the
// tree partly removed) once *stop is set.
void remove_tree(const fs::path& path, const std::atomic<bool>* stop) {
  if (stop != nullptr && stop->load()) return;
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return;
  if (S_ISDIR(st.st_mode)) {
    ::chmod(path.c_str(), 0700);
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(path, ec))
      remove_tree(entry.path(), stop);
    ::rmdir(path.c_str());
  } else {
    ::unlink(path.c_str());
  }
}

namespace {

// At most this many finished staging trees wait in <state>/pool/ for reuse.
constexpr int kPoolCapacity = 8;

bool is_empty_directory(const fs::path& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) && fs::is_empty(path, ec) && !ec;
}

// Entries in `dir` (none when it cannot be read).
int count_entries(const fs::path& dir) {
  std::error_code ec;
  int entries = 0;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    ++entries;
  }
  return entries;
}

// Clears the overlay's instance id from an upper root (the next mount sets
// a new one), then says whether no other overlay attribute is left
// ("opaque", "impure", ...): only then may it be another run's upper root.
bool clear_overlay_id(const fs::path& upper) {
  for (const char* uuid : {"user.overlay.uuid", "trusted.overlay.uuid"})
    ::lremovexattr(upper.c_str(), uuid);
  char names[4096];
  const ssize_t size = ::llistxattr(upper.c_str(), names, sizeof names);
  if (size < 0) return errno == ENOTSUP;  // unknown: do not reuse
  for (ssize_t at = 0; at < size; at += static_cast<ssize_t>(std::strlen(names + at)) + 1) {
    const std::string_view name(names + at);
    if (name.starts_with("user.overlay.") || name.starts_with("trusted.overlay.")) return false;
  }
  return true;
}

// Makes a finished run's staging tree (run/upper, run/work) reusable: the
// overlay's own directories in work/ go (work/work and, for a volatile mount,
// work/work/incompat/volatile/dirty); what is left must be an empty upper
// (nothing changed, no overlay attribute) and an empty work directory.
bool make_reusable(const fs::path& tree) {
  const fs::path inner = tree / "work" / "work";
  for (const fs::path& dir : {inner, inner / "incompat", inner / "incompat" / "volatile"})
    ::chmod(dir.c_str(), 0700);  // the overlay makes them mode 000
  ::unlink((inner / "incompat" / "volatile" / "dirty").c_str());
  ::rmdir((inner / "incompat" / "volatile").c_str());
  ::rmdir((inner / "incompat").c_str());
  ::rmdir(inner.c_str());
  return count_entries(tree) == 2 && is_empty_directory(tree / "work") &&
         is_empty_directory(tree / "upper") && clear_overlay_id(tree / "upper");
}

}  // namespace

void empty_trash(const fs::path& trash, const fs::path& pool, const std::atomic<bool>& stop) {
  std::error_code error;
  int pooled = count_entries(pool);
  for (const auto& entry : fs::directory_iterator(trash, error)) {
    if (stop.load()) break;
    if (pooled < kPoolCapacity && make_reusable(entry.path()) &&
        ::rename(entry.path().c_str(), (pool / entry.path().filename()).c_str()) == 0) {
      ++pooled;
      continue;
    }
    remove_tree(entry.path(), &stop);
  }
}

// A run's staging directory with empty upper/ and work/: a reusable tree
// from the pool (renamed: atomic, so concurrent runs never share one), or
// new directories.
core::Status make_staging(const fs::path& pool, const fs::path& run_dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(pool, ec)) {
    if (::rename(entry.path().c_str(), run_dir.c_str()) != 0) continue;  // another run's now
    // Modes as if new; owners are set by prepare_staging.
    if (::chmod(run_dir.c_str(), 0700) == 0 && ::chmod((run_dir / "upper").c_str(), 0755) == 0 &&
        ::chmod((run_dir / "work").c_str(), 0755) == 0) {
      return core::ok_status();
    }
    remove_tree(run_dir);  // not what it should be: start afresh
    break;
  }
  if (::mkdir(run_dir.c_str(), 0700) != 0) {
    return Error::from_errno("native", "creating the run directory " + run_dir.string());
  }
  for (const char* dir : {"upper", "work"}) {
    if (::mkdir((run_dir / dir).c_str(), 0755) != 0) {
      return Error::from_errno("native", "creating " + (run_dir / dir).string());
    }
  }
  return core::ok_status();
}

TrashRemover::TrashRemover(fs::path trash, fs::path pool) {
  std::error_code ec;
  if (fs::is_empty(trash, ec) || ec) return;  // the usual case: nothing to do
  stop_ = std::make_shared<std::atomic<bool>>(false);
  std::thread([stop = stop_, trash = std::move(trash), pool = std::move(pool)] {
    empty_trash(trash, pool, *stop);
  }).detach();
}

TrashRemover::~TrashRemover() {
  if (stop_) stop_->store(true);
}

}  // namespace pulsebox::backends::native
