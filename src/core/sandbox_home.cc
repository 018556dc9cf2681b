#include "core/sandbox_home.h"

#include <sys/stat.h>

#include "core/system_dirs.h"

namespace pulsebox::core {

namespace fs = std::filesystem;

Result<fs::path> prepare_home_dir(const fs::path& dir, const fs::path& workspace,
                                  std::string_view flag) {
  const std::string named = std::string(flag) + " " + dir.string();
  auto refuse = [&](const std::string& why) {
    return Error(ErrorKind::kInvalidInput, "home", named + ": " + why);
  };
  if (dir.empty()) return refuse("an empty path");
  std::error_code ec;
  const fs::path absolute = fs::absolute(dir, ec).lexically_normal();
  if (const auto reason = system_directory_reason(absolute)) {
    return refuse("a system directory (" + *reason + "); choose a directory of its own");
  }
  const fs::path ws = fs::weakly_canonical(workspace, ec);
  const fs::path wanted = fs::weakly_canonical(absolute, ec);
  const fs::path relative = wanted.lexically_relative(ws);
  if (!relative.empty() && *relative.begin() != "..") {
    return refuse("inside the workspace " + ws.string() +
                  " (its files would be the run's changes); choose a directory outside it");
  }
  if (::mkdir(absolute.c_str(), 0700) != 0 && errno != EEXIST)
    return Error::from_errno("home", "creating " + named).with_kind(ErrorKind::kInvalidInput);
  const fs::path canonical = fs::canonical(absolute, ec);
  if (ec || !fs::is_directory(canonical, ec)) return refuse("not a directory");
  // Checked again once links are resolved: a link into the workspace is the workspace.
  const fs::path resolved = canonical.lexically_relative(ws);
  if (!resolved.empty() && *resolved.begin() != "..") {
    return refuse("resolves inside the workspace " + ws.string() +
                  "; choose a directory outside it");
  }
  if (const auto reason = system_directory_reason(canonical)) {
    return refuse("resolves to a system directory (" + *reason + ")");
  }
  return canonical;
}

}  // namespace pulsebox::core
