#include "core/system_dirs.h"

#include <array>
#include <cstdlib>
#include <string_view>

namespace pulsebox::core {
namespace {

namespace fs = std::filesystem;

struct Rule {
  std::string_view path;
  std::string_view reason;
};

constexpr std::string_view kPrograms =
    "the system's programs and libraries: a change there runs as every user";

// These and everything below them.
constexpr std::array<Rule, 15> kSubtrees = {{
    {"/etc",
     "the system's configuration: a change there runs code as root or changes who may "
     "log in"},
    {"/usr", kPrograms},
    {"/bin", kPrograms},
    {"/sbin", kPrograms},
    {"/lib", kPrograms},
    {"/lib32", kPrograms},
    {"/lib64", kPrograms},
    {"/libx32", kPrograms},
    {"/boot", "the kernel and the boot loader"},
    {"/dev", "device files, the kernel's interface to hardware"},
    {"/proc", "the kernel's view of processes"},
    {"/sys", "the kernel's view of devices and settings"},
    {"/run", "the runtime state of the system's services"},
    {"/var/log", "the system's logs"},
    {"/var/spool", "the system's queues: cron and at jobs there run as their owner"},
}};

constexpr std::string_view kShared =
    "a directory shared by the system's users and services: the sandbox would see all of it, "
    "and .agent/ or staging would land beside their files";

// These directories themselves; what is below them may be a user's project.
constexpr std::array<Rule, 12> kExact = {{
    {"/", "the root of the file system"},
    {"/var", kShared},
    {"/var/lib", kShared},
    {"/var/cache", kShared},
    {"/tmp", kShared},
    {"/var/tmp", kShared},
    {"/home", kShared},
    {"/srv", kShared},
    {"/opt", kShared},
    {"/mnt", kShared},
    {"/media", kShared},
    {"/run/user", "the runtime directories of logged-in users"},
}};

constexpr std::string_view kHome =
    "a home directory: the sandbox would see its keys and credentials (.ssh, .gnupg, cloud "
    "tokens), and its dotfiles (.bashrc, .profile, .gitconfig) run code at the next login";

bool is_within(const fs::path& path, const fs::path& dir) {
  auto p = path.begin();
  for (auto d = dir.begin(); d != dir.end(); ++d, ++p) {
    if (p == path.end() || *p != *d) return false;
  }
  return true;
}

fs::path resolve(const fs::path& path) {
  std::error_code ec;
  fs::path resolved = fs::weakly_canonical(fs::absolute(path, ec), ec);
  if (ec) resolved = fs::absolute(path, ec).lexically_normal();
  // "/a/b/" and "/a/b" name one directory.
  if (resolved.has_relative_path() && !resolved.has_filename()) resolved = resolved.parent_path();
  return resolved;
}

}  // namespace

SystemDirectoryCheck::SystemDirectoryCheck(const fs::path& home)
    : resolved_home_(home.empty() ? fs::path() : resolve(home)) {}

std::optional<std::string> SystemDirectoryCheck::reason_for_canonical(
    const fs::path& resolved) const {
  for (const Rule& rule : kExact) {
    if (resolved == rule.path) return std::string(rule.reason);
  }
  if (resolved == "/root" || resolved.parent_path() == "/home" ||
      (!resolved_home_.empty() && resolved == resolved_home_)) {
    return std::string(kHome);
  }
  for (const Rule& rule : kSubtrees) {
    if (!is_within(resolved, rule.path)) continue;
    // A logged-in user's runtime directory ($XDG_RUNTIME_DIR) is theirs:
    // what is below it is not the system's.
    const fs::path relative = resolved.lexically_relative("/run/user");
    if (rule.path == "/run" && is_within(resolved, "/run/user") &&
        std::distance(relative.begin(), relative.end()) >= 2) {
      continue;
    }
    return std::string(rule.reason);
  }
  return std::nullopt;
}

std::optional<std::string> system_directory_reason(const fs::path& path, const fs::path& home) {
  return SystemDirectoryCheck(home).reason_for_canonical(resolve(path));
}

std::optional<std::string> system_directory_reason(const fs::path& path) {
  const char* home = std::getenv("HOME");
  return system_directory_reason(path, home != nullptr ? fs::path(home) : fs::path());
}

}  // namespace pulsebox::core
