// libFuzzer target: the workspace archive reader (src/archive/). Each input
// is extracted into a fresh directory under /tmp, with a sentinel beside
// it; whatever the input, nothing may appear beside the destination and
// no symlink extracted may point out of it. The directory goes after each
// input.
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

#include "archive/workspace_archive.h"

namespace {

namespace fs = std::filesystem;

// Extracted directories may be mode 0 or 0500: made writable before they
// are emptied, so an ordinary user can remove them too.
void remove_tree(const fs::path& path) {
  std::error_code error;
  if (fs::symlink_status(path, error).type() == fs::file_type::directory) {
    ::chmod(path.c_str(), 0700);
    for (const auto& child : fs::directory_iterator(path, error))
      remove_tree(child.path());
  }
  fs::remove(path, error);
}

void check_symlinks(const fs::path& dir) {
  std::error_code error;
  for (auto it = fs::recursive_directory_iterator(dir, error);
       it != fs::recursive_directory_iterator(); it.increment(error)) {
    if (error) break;
    if (!it->is_symlink(error)) continue;
    const std::string target = fs::read_symlink(it->path(), error).string();
    if (!target.empty() && target.front() == '/') std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  char pattern[] = "/tmp/pulsebox-archive-fuzz-XXXXXX";
  if (::mkdtemp(pattern) == nullptr) std::abort();
  const fs::path base(pattern);
  fs::create_directory(base / "dest");
  fs::create_directory(base / "sentinel");

  std::string_view input(reinterpret_cast<const char*>(data), size);
  bool given = false;
  const pulsebox::archive::ArchiveSource source =
      [&]() -> pulsebox::core::Result<std::string_view> {
    if (given) return std::string_view();
    given = true;
    return input;
  };
  const pulsebox::archive::ExtractLimits limits{
      .max_total_bytes = 1 << 20, .max_entries = 1000, .max_path_bytes = 1024, .max_depth = 32};
  auto result = pulsebox::archive::extract_archive(source, base / "dest", limits);
  if (result.ok()) {
    if (result->bytes > limits.max_total_bytes) std::abort();
    if (result->files + result->directories + result->symlinks > limits.max_entries) std::abort();
    check_symlinks(base / "dest");
  }
  std::size_t beside = 0;
  for (const auto& child : fs::directory_iterator(base)) {
    (void)child;
    ++beside;
  }
  if (beside != 2 || !fs::is_empty(base / "sentinel")) std::abort();
  remove_tree(base);
  return 0;
}
