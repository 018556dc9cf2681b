#include "core/libexec_helper.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "pulsebox_config.h"

namespace pulsebox::core {
namespace {

namespace fs = std::filesystem;

// In a user namespace that does not map root, root's files show as the
// overflow uid: that owner is root's there. Outside one, no owner is.
uid_t unmapped_owner() {
  std::ifstream map("/proc/self/uid_map");
  std::string inside, outside, count;
  map >> inside >> outside >> count;
  if (inside == "0" && outside == "0") return static_cast<uid_t>(-2);  // the initial namespace
  std::ifstream overflow("/proc/sys/kernel/overflowuid");
  long uid = -1;
  return overflow >> uid ? static_cast<uid_t>(uid) : static_cast<uid_t>(-2);
}

}  // namespace

Result<std::string> find_libexec_helper(std::string_view name, std::string_view build_subdir,
                                        std::string_view stage) {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  std::vector<fs::path> candidates;
  if (!ec) {
    candidates.push_back(self.parent_path() / name);
    if (!build_subdir.empty())
      candidates.push_back(self.parent_path().parent_path() / build_subdir / name);
  }
  candidates.push_back(fs::path(PULSEBOX_LIBEXEC_DIR) / name);
  for (const fs::path& candidate : candidates) {
    struct stat st {};
    if (::stat(candidate.c_str(), &st) != 0) continue;
    const bool owner_trusted =
        st.st_uid == 0 || st.st_uid == ::geteuid() || st.st_uid == unmapped_owner();
    const bool trusted =
        owner_trusted && (st.st_mode & (S_IWGRP | S_IWOTH)) == 0 && S_ISREG(st.st_mode);
    if (!trusted) {
      return Error(ErrorKind::kSecurity, std::string(stage),
                   candidate.string() +
                       " is not owned by root or this user, or others may write it: not run");
    }
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  return Error(ErrorKind::kUnavailable, std::string(stage),
               "the " + std::string(name) + " helper is missing (looked beside " + self.string() +
                   " and in " + PULSEBOX_LIBEXEC_DIR + "): reinstall pulsebox");
}

void exec_program(std::vector<std::string> argv) {
  std::vector<char*> pointers;
  for (std::string& arg : argv)
    pointers.push_back(arg.data());
  pointers.push_back(nullptr);
  ::execv(pointers[0], pointers.data());
}

}  // namespace pulsebox::core
