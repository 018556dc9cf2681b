#include "workspace/ignore_rules.h"

#include <fcntl.h>
#include <fnmatch.h>
#include <unistd.h>

#include <cstring>
#include <memory>

#include "core/text.h"
#include "workspace/protected_paths.h"
#include "workspace/safe_open.h"

namespace pulsebox::workspace {
namespace {

std::string join_names(const std::vector<std::string>& names, std::size_t count) {
  std::string out;
  for (std::size_t i = 0; i < count; ++i) {
    if (i > 0) out += '/';
    out += names[i];
  }
  return out;
}

bool name_matches(const std::string& pattern, const std::string& name) {
  return ::fnmatch(pattern.c_str(), name.c_str(), 0) == 0;
}

// Whether `names` matches `pattern` name by name, "**" standing for any
// number of names (at least one when it ends the pattern: "foo/**" is what
// is inside foo, not foo). Memoised: at most pattern x path steps.
bool names_match(const std::vector<std::string>& pattern, const std::vector<std::string>& names) {
  const std::size_t np = pattern.size();
  const std::size_t ns = names.size();
  // 0 unknown, 1 no, 2 yes
  std::vector<unsigned char> memo((np + 1) * (ns + 1), 0);
  std::function<bool(std::size_t, std::size_t)> match = [&](std::size_t p, std::size_t s) {
    unsigned char& known = memo[p * (ns + 1) + s];
    if (known != 0) return known == 2;
    bool result;
    if (p == np) {
      result = s == ns;
    } else if (pattern[p] == "**") {
      result = p + 1 == np ? s < ns : (match(p + 1, s) || (s < ns && match(p, s + 1)));
    } else {
      result = s < ns && name_matches(pattern[p], names[s]) && match(p + 1, s + 1);
    }
    known = result ? 2 : 1;
    return result;
  };
  return match(0, 0);
}

// Drops the trailing spaces of a line that no backslash escapes.
void trim_trailing_spaces(std::string& line) {
  while (!line.empty() && line.back() == ' ') {
    std::size_t backslashes = 0;
    for (std::size_t i = line.size() - 1; i > 0 && line[i - 1] == '\\'; --i)
      ++backslashes;
    if (backslashes % 2 == 1) break;  // "\ " keeps its space (fnmatch unescapes it)
    line.pop_back();
  }
}

}  // namespace

void IgnoreRules::add(const std::string& dir, std::string_view text) {
  std::vector<Pattern>& patterns = rules_[dir];
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string line(text.substr(start, end - start));
    start = end + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    trim_trailing_spaces(line);
    if (line.empty() || line.front() == '#') continue;
    Pattern pattern;
    if (line.front() == '!') {
      pattern.negated = true;
      line.erase(0, 1);
    }
    if (!line.empty() && line.back() == '/') {
      pattern.directory_only = true;
      line.pop_back();
    }
    pattern.anchored = line.find('/') != std::string::npos;
    pattern.names = path_names(line);
    if (pattern.names.empty()) continue;
    if (!pattern.anchored && pattern.names.size() != 1) continue;
    patterns.push_back(std::move(pattern));
  }
}

const std::vector<IgnoreRules::Pattern>& IgnoreRules::rules_of(const std::string& dir) {
  if (read_.insert(dir).second && reader_) {
    if (auto text = reader_(dir, warnings_)) add(dir, *text);
  }
  return rules_[dir];
}

std::optional<bool> IgnoreRules::decide(const std::string& dir,
                                        const std::vector<std::string>& relative,
                                        bool is_directory) {
  const auto& patterns = rules_of(dir);
  for (auto it = patterns.rbegin(); it != patterns.rend(); ++it) {
    if (it->directory_only && !is_directory) continue;
    const bool matched = it->anchored ? names_match(it->names, relative)
                                      : name_matches(it->names.front(), relative.back());
    if (matched) return !it->negated;
  }
  return std::nullopt;
}

std::optional<std::string> IgnoreRules::ignored_at(std::string_view path, bool is_directory) {
  const std::vector<std::string> names = path_names(path);
  // The directories above the name being decided whose files hold rules,
  // by how many names they have: deeper ones are asked first.
  std::vector<std::size_t> with_rules;
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::string dir = join_names(names, i);
    if (!rules_of(dir).empty()) with_rules.push_back(i);
    const bool directory = i + 1 < names.size() || is_directory;
    for (auto depth = with_rules.rbegin(); depth != with_rules.rend(); ++depth) {
      const std::vector<std::string> relative(names.begin() + static_cast<long>(*depth),
                                              names.begin() + static_cast<long>(i) + 1);
      if (auto ignored = decide(join_names(names, *depth), relative, directory)) {
        // Nothing beneath an ignored directory can be re-included.
        if (*ignored) return join_names(names, i + 1);
        break;
      }
    }
  }
  return std::nullopt;
}

IgnoreRules workspace_ignore_rules(int root_fd) {
  // Directories found missing: nothing below them is looked for.
  auto missing = std::make_shared<std::set<std::string>>();
  auto read_file = [root_fd](int dir_fd, const char* name, const std::string& shown,
                             std::vector<std::string>& warnings) -> std::optional<std::string> {
    core::UniqueFd fd(::openat(dir_fd >= 0 ? dir_fd : root_fd, name,
                               O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    if (!fd) {
      if (errno == ELOOP) {
        warnings.push_back(core::quote_name(shown) + " is a symlink: not read (as git does)");
      } else if (errno != ENOENT && errno != ENOTDIR) {
        warnings.push_back(core::quote_name(shown) + " not read: " + std::strerror(errno));
      }
      return std::nullopt;
    }
    auto text = read_regular_file(fd.get(), kMaxIgnoreFileBytes, shown);
    if (!text) {
      warnings.push_back(core::quote_name(shown) + " not read: " + text.error().message());
      return std::nullopt;
    }
    return std::move(text).value();
  };
  IgnoreRules rules([root_fd, missing, read_file](
                        const std::string& dir,
                        std::vector<std::string>& warnings) -> std::optional<std::string> {
    if (dir.empty()) return read_file(-1, ".gitignore", ".gitignore", warnings);
    const auto slash = dir.rfind('/');
    if (slash != std::string::npos && missing->count(dir.substr(0, slash)) != 0) {
      missing->insert(dir);
      return std::nullopt;
    }
    // Every name on the way is opened without following a symlink.
    auto dir_fd = open_beneath(root_fd, dir, O_PATH | O_DIRECTORY, ResolveMode::kComponentWalk);
    if (!dir_fd) {
      missing->insert(dir);
      return std::nullopt;
    }
    return read_file(dir_fd->get(), ".gitignore", dir + "/.gitignore", warnings);
  });
  // .git/info/exclude: the lowest precedence, before the root's .gitignore.
  auto info = open_beneath(root_fd, ".git/info", O_PATH | O_DIRECTORY, ResolveMode::kComponentWalk);
  if (info) {
    std::vector<std::string> warnings;
    if (auto text = read_file(info->get(), "exclude", ".git/info/exclude", warnings)) {
      rules.add("", *text);
    }
    for (auto& warning : warnings)
      rules.warn(std::move(warning));
  }
  return rules;
}

}  // namespace pulsebox::workspace
