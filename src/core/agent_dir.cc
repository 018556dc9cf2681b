#include "core/agent_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "core/fs.h"
#include "core/system_dirs.h"
#include "core/unique_fd.h"

namespace pulsebox::core {

namespace fs = std::filesystem;

namespace {

// What ensure_agent_dir writes to .agent/.gitignore, also how a .agent/ is
// known to be pulsebox's.
constexpr std::string_view kAgentIgnore = "# pulsebox's own state: never part of the project\n*\n";

}  // namespace

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
  if (::write(fd.get(), kAgentIgnore.data(), kAgentIgnore.size()) !=
      static_cast<ssize_t>(kAgentIgnore.size()))
    return Error::from_errno("workspace", "writing " + ignore.string());
  return ok_status();
}

namespace {

constexpr std::size_t kMaxNestedListBytes = 256 << 10;
constexpr std::size_t kMaxNestedWorkspaces = 1000;

bool is_agent_dir(const fs::path& dir) {
  struct stat st {};
  return ::lstat((dir / ".agent").c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// The lines of <workspace>/.agent/nested, read without following a link;
// none when there is no list. A list that is there but cannot be read whole
// (a symlink or another planted thing in its place, one past the limit) is
// an error: read as empty, it would unmask every nested workspace.
Result<std::vector<std::string>> nested_lines(const fs::path& workspace) {
  std::vector<std::string> lines;
  const fs::path list = workspace / ".agent" / "nested";
  UniqueFd fd(::open(list.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd && errno == ENOENT) return lines;
  struct stat st {};
  if (!fd || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return Error(ErrorKind::kSecurity, "workspace",
                 list.string() + " (the list of nested workspaces, whose .agent/ runs hide) is " +
                     "not a regular file pulsebox can read: remove it, pulsebox makes it again");
  }
  PB_TRY(text, read_all(fd.get(), kMaxNestedListBytes, "the list of nested workspaces"));
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    if (end > start) lines.emplace_back(text, start, end - start);
    start = end + 1;
  }
  return lines;
}

// Whether `agent` (a directory named .agent) is pulsebox's: the .gitignore
// ensure_agent_dir writes, or a file only pulsebox makes there (a user may
// have changed the .gitignore; workspaces older than it have none).
bool is_pulsebox_agent_dir(const fs::path& agent) {
  UniqueFd ignore(
      ::open((agent / ".gitignore").c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  char head[kAgentIgnore.size()] = {};
  if (ignore && ::read(ignore.get(), head, sizeof head) == static_cast<ssize_t>(sizeof head) &&
      std::string_view(head, sizeof head) == kAgentIgnore)
    return true;
  struct stat st {};
  for (const char* own : {"clock", "transactions", "logs/audit.jsonl", "nested"}) {
    if (::lstat((agent / own).c_str(), &st) == 0) return true;
  }
  return false;
}

// Appends `lines` (each ending in a newline) to <workspace>/.agent/nested.
bool append_nested(const fs::path& workspace, const std::string& lines) {
  UniqueFd fd(::open((workspace / ".agent" / "nested").c_str(),
                     O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600));
  return fd && write_all(fd.get(), lines, "the list of nested workspaces").ok();
}

}  // namespace

void register_with_enclosing_workspaces(const fs::path& given, const fs::path& home) {
  // Resolved once: its ancestors are then canonical too.
  std::error_code ec;
  const fs::path workspace = fs::weakly_canonical(given, ec);
  if (ec) return;
  const SystemDirectoryCheck system(home);
  for (fs::path dir = workspace.parent_path(); dir != dir.parent_path(); dir = dir.parent_path()) {
    if (system.reason_for_canonical(dir)) return;
    if (!is_agent_dir(dir)) continue;
    const std::string relative = workspace.lexically_relative(dir).string();
    if (relative.empty() || relative.find('\n') != std::string::npos) continue;
    const auto listed = nested_lines(dir);
    if (!listed) continue;  // the enclosing workspace's runs refuse to start then
    if (std::find(listed->begin(), listed->end(), relative) != listed->end()) continue;
    (void)append_nested(dir, relative + "\n");
  }
}

void find_nested_workspaces_once(const fs::path& workspace) {
  const fs::path marker = workspace / ".agent" / "nested-found";
  struct stat st {};
  if (::lstat(marker.c_str(), &st) == 0) return;
  struct stat root {};
  if (::stat(workspace.c_str(), &root) != 0) return;
  std::vector<std::string> found;
  std::error_code ec;
  fs::recursive_directory_iterator it(workspace, fs::directory_options::skip_permission_denied, ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code status_ec;
    if (!fs::is_directory(it->symlink_status(status_ec))) continue;
    const fs::path& path = it->path();
    const fs::path name = path.filename();
    // Not into .git/ or any .agent/; nor onto another file system, which
    // the sandbox's overlay of the workspace does not show.
    const bool same_fs = ::lstat(path.c_str(), &st) == 0 && st.st_dev == root.st_dev;
    if (name == ".git" || name == ".agent" || !same_fs) it.disable_recursion_pending();
    if (name != ".agent" || path.parent_path() == workspace || !same_fs ||
        !is_pulsebox_agent_dir(path))
      continue;
    const std::string relative = path.parent_path().lexically_relative(workspace).string();
    if (!relative.empty() && relative.find('\n') == std::string::npos) found.push_back(relative);
  }
  if (ec) return;  // unfinished: looked for again when next opened
  const auto listed = nested_lines(workspace);
  if (!listed) return;  // the runs refuse to start, saying why
  std::string lines;
  for (const std::string& relative : found) {
    if (std::find(listed->begin(), listed->end(), relative) == listed->end())
      lines += relative + "\n";
  }
  if (!lines.empty() && !append_nested(workspace, lines)) return;
  UniqueFd done(::open(marker.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
}

Result<std::vector<std::string>> nested_workspaces(const fs::path& workspace) {
  std::vector<std::string> nested;
  PB_TRY(lines, nested_lines(workspace));
  for (const std::string& line : lines) {
    // Relative, normal, beneath the workspace, and not one already taken.
    if (line.empty() || line.front() == '/' || line.find('\0') != std::string::npos) continue;
    const fs::path path = fs::path(line).lexically_normal();
    if (path.string() != line || line == "." || line.starts_with("../") || line == "..") continue;
    if (std::find(nested.begin(), nested.end(), line) != nested.end()) continue;
    // No symlink on the way: the mask must land on that very directory.
    std::error_code ec;
    if (fs::canonical(workspace / line, ec) != workspace / line || ec) continue;
    if (is_agent_dir(workspace / line)) nested.push_back(line);
  }
  // Each is a mount of every run: a list past this is planted, not made.
  if (nested.size() > kMaxNestedWorkspaces) {
    return Error(ErrorKind::kSecurity, "workspace",
                 workspace.string() + "/.agent/nested lists " + std::to_string(nested.size()) +
                     " nested workspaces, more than the " + std::to_string(kMaxNestedWorkspaces) +
                     " a run hides: remove the directories that are not workspaces (or their "
                     ".agent/), then the list (pulsebox makes it again)");
  }
  return nested;
}

std::optional<FoundWorkspace> find_workspace_root(const fs::path& start, const fs::path& home) {
  std::error_code ec;
  const fs::path from = fs::canonical(start, ec);
  if (ec) return std::nullopt;
  const SystemDirectoryCheck system(home);
  for (fs::path dir = from;; dir = dir.parent_path()) {
    if (system.reason_for_canonical(dir)) return std::nullopt;
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
