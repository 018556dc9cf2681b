// Groups a transaction's paths for review: generated noise (paths the
// workspace's .gitignore files ignore, known caches, git's internals) is
// summarised as one line per group ("412 ignored paths under .venv/ (use
// --all)"). Only the review is grouped: every path is committed as staged.
//
// Usage:
//   ReviewGrouper grouper(workspace_ignore_rules(root_fd), exists);
//   if (auto group = grouper.group_of("a/__pycache__/m.pyc", false)) ...
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "workspace/ignore_rules.h"

namespace pulsebox::workspace {

enum class GroupReason { Git, Cache, Ignored };

// "git", "cache", "ignored": the JSON spelling.
std::string_view to_string(GroupReason reason);

struct ReviewGroup {
  // The group's directory with a trailing '/' (".venv/", "src/__pycache__/";
  // "./" for files the root's rules ignore one by one).
  std::string directory;
  GroupReason reason = GroupReason::Ignored;

  bool operator<(const ReviewGroup& other) const {
    return directory != other.directory ? directory < other.directory : reason < other.reason;
  }
  bool operator==(const ReviewGroup& other) const = default;
};

// The names of cache directories grouped wherever they are: __pycache__,
// .pytest_cache, .mypy_cache, .ruff_cache, .tox, .nox, node_modules; and
// .venv or venv when they hold pyvenv.cfg (a Python virtual environment).
// A build directory such as target/ is grouped only when ignored.
bool is_cache_directory_name(std::string_view name);

class ReviewGrouper {
 public:
  // `is_file(path)`: whether `path` is a file in the workspace or in the
  // transaction (asked for .venv/pyvenv.cfg).
  using FileCheck = std::function<bool(const std::string& path)>;
  ReviewGrouper(IgnoreRules rules, FileCheck is_file)
      : rules_(std::move(rules)), is_file_(std::move(is_file)) {}

  // The group of `path` (relative, normalised), or nullopt when it is shown
  // on its own. Of a path in several groups, the one highest up wins
  // (build/__pycache__/x with build/ ignored: "build/", ignored).
  std::optional<ReviewGroup> group_of(std::string_view path, bool is_directory);

  const IgnoreRules& rules() const { return rules_; }

 private:
  IgnoreRules rules_;
  FileCheck is_file_;
};

// "412 ignored paths under .venv/ (use --all)".
std::string group_summary(const ReviewGroup& group, std::size_t count);

}  // namespace pulsebox::workspace
