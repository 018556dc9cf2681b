// The workspace's own .gitignore rules, for grouping a review (never for
// deciding what is committed: an ignored path is committed like any other).
//
// git is never run: a repository's config can make git run commands
// (core.fsmonitor, filters), and the workspace is written by sandboxes.
// The rules follow gitignore(5): blank lines and "#" comments skipped,
// trailing unescaped spaces dropped, "!" negates, a trailing "/" matches
// directories only, a "/" at the start or in the middle anchors the pattern
// to the .gitignore's directory (otherwise it matches a name at any depth),
// "**/" leading, "/**" trailing and "/**/" inside match any number of
// directories; each name is matched with fnmatch(3) ("*", "?", "[...]",
// backslash escapes; a leading "." is not special). Deeper .gitignore files
// win over higher ones, later lines over earlier ones, and nothing beneath
// an ignored directory can be re-included. Not read: core.excludesFile and
// anything else from git's config (hostile), .gitignore files that are
// symlinks (git does not follow them either).
//
// Usage:
//   IgnoreRules rules = workspace_ignore_rules(root_fd);
//   if (auto at = rules.ignored_at("build/obj/x.o", false)) ...  // "build"
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace pulsebox::workspace {

// The largest .gitignore read; a larger one is skipped with a warning.
inline constexpr std::size_t kMaxIgnoreFileBytes = 1 << 20;

class IgnoreRules {
 public:
  // The text of the .gitignore in directory `dir` ("" is the root), or
  // nullopt when there is none (adding to `warnings` why, when one exists
  // but cannot be read). Called once per directory, parents first, lazily.
  using Reader = std::function<std::optional<std::string>(const std::string& dir,
                                                          std::vector<std::string>& warnings)>;

  IgnoreRules() = default;
  explicit IgnoreRules(Reader reader) : reader_(std::move(reader)) {}

  // Adds the rules of one file as if it were `dir`/.gitignore, after any
  // already there (.git/info/exclude goes in "" before the root .gitignore).
  void add(const std::string& dir, std::string_view text);

  // The path (relative, normalised, no "..") ignored: itself, or the highest
  // ignored directory above it; nullopt when it is not ignored.
  // `is_directory` says what the path itself is (its ancestors are
  // directories).
  std::optional<std::string> ignored_at(std::string_view path, bool is_directory);
  bool ignored(std::string_view path, bool is_directory) {
    return ignored_at(path, is_directory).has_value();
  }

  // Why a .gitignore was not read (a symlink, too large, unreadable), one
  // line each: shown to the user, since grouping then shows more.
  const std::vector<std::string>& warnings() const { return warnings_; }
  void warn(std::string warning) { warnings_.push_back(std::move(warning)); }

 private:
  struct Pattern {
    std::vector<std::string> names;  // split at '/'; "**" matches any number of names
    bool negated = false;
    bool directory_only = false;
    bool anchored = false;  // else `names` has one name, matched at any depth
  };
  const std::vector<Pattern>& rules_of(const std::string& dir);
  // The last pattern of `dir` matching `relative` (beneath dir) decides:
  // nullopt when none matches, else whether it ignores.
  std::optional<bool> decide(const std::string& dir, const std::vector<std::string>& relative,
                             bool is_directory);

  Reader reader_;
  std::map<std::string, std::vector<Pattern>> rules_;
  std::set<std::string> read_;  // directories whose .gitignore the reader was asked for
  std::vector<std::string> warnings_;
};

// The rules of the workspace whose root directory is `root_fd` (kept open by
// the caller for the rules' lifetime): .git/info/exclude and every
// .gitignore, read beneath root_fd without following any symlink, at most
// kMaxIgnoreFileBytes each.
IgnoreRules workspace_ignore_rules(int root_fd);

}  // namespace pulsebox::workspace
