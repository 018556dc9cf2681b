#include "helpers/test_support.h"

#include "core/sha256.h"

namespace pulsebox::testing {

std::map<std::string, std::string> listing(const std::filesystem::path& root) {
  std::map<std::string, std::string> out;
  for (auto it = std::filesystem::recursive_directory_iterator(root);
       it != std::filesystem::recursive_directory_iterator(); ++it) {
    // lexically_relative: relative() would resolve a symlink to its target.
    const auto relative = it->path().lexically_relative(root).string();
    if (relative == ".agent") {
      it.disable_recursion_pending();
      continue;
    }
    struct stat st {};
    ::lstat(it->path().c_str(), &st);
    char mode[16];
    std::snprintf(mode, sizeof mode, "%06o", st.st_mode);
    std::string description = mode;
    if (S_ISREG(st.st_mode)) description += " " + core::sha256_hex(read_file(it->path()));
    if (S_ISLNK(st.st_mode)) {
      description += " -> " + std::filesystem::read_symlink(it->path()).string();
    }
    out[relative] = description;
  }
  return out;
}

}  // namespace pulsebox::testing
