#include "core/agent_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "core/system_dirs.h"
#include "core/unique_fd.h"

namespace pulsebox::core {

namespace fs = std::filesystem;

Status ensure_agent_dir(const fs::path& workspace) {
  const fs::path agent = workspace / ".agent";
  if (::mkdir(agent.c_str(), 0700) != 0 && errno != EEXIST)
    return Error::from_errno("workspace", "creating " + agent.string());
  struct stat st {};
  if (::lstat(agent.c_str(), &st) != 0) return Error::from_errno("workspace", agent.string());
  if (!S_ISDIR(st.st_mode)) {
    return Error(ErrorKind::kSecurity, "workspace",
                 agent.string() + " is not a directory (a symlink?); remove it, pulsebox makes it");
  }
  const fs::path ignore = agent / ".gitignore";
  UniqueFd fd(::open(ignore.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd) {
    if (errno == EEXIST) return ok_status();  // the user's own content is left alone
    return Error::from_errno("workspace", "creating " + ignore.string());
  }
  constexpr std::string_view kContent = "# pulsebox's own state: never part of the project\n*\n";
  if (::write(fd.get(), kContent.data(), kContent.size()) != static_cast<ssize_t>(kContent.size()))
    return Error::from_errno("workspace", "writing " + ignore.string());
  return ok_status();
}

std::optional<FoundWorkspace> find_workspace_root(const fs::path& start, const fs::path& home) {
  std::error_code ec;
  const fs::path from = fs::canonical(start, ec);
  if (ec) return std::nullopt;
  for (fs::path dir = from;; dir = dir.parent_path()) {
    if (system_directory_reason(dir, home)) return std::nullopt;
    struct stat st {};
    // lstat: a symlink named .agent is nobody's workspace.
    if (::lstat((dir / ".agent").c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      return FoundWorkspace{dir, dir == from ? fs::path() : from.lexically_relative(dir)};
    }
    if (dir == dir.parent_path()) return std::nullopt;
  }
}

std::optional<FoundWorkspace> find_workspace_root(const fs::path& start) {
  const char* home = std::getenv("HOME");
  return find_workspace_root(start, home != nullptr ? fs::path(home) : fs::path());
}

}  // namespace pulsebox::core
