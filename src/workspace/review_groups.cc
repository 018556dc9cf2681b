#include "workspace/review_groups.h"

#include <array>

#include "core/text.h"

namespace pulsebox::workspace {

std::string_view to_string(GroupReason reason) {
  switch (reason) {
    case GroupReason::Git:
      return "git";
    case GroupReason::Cache:
      return "cache";
    case GroupReason::Ignored:
      break;
  }
  return "ignored";
}

bool is_cache_directory_name(std::string_view name) {
  static constexpr std::array<std::string_view, 7> kNames = {
      "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".tox", ".nox", "node_modules"};
  for (std::string_view known : kNames) {
    if (name == known) return true;
  }
  return false;
}

std::optional<ReviewGroup> ReviewGrouper::group_of(std::string_view path, bool is_directory) {
  // The names, and where each ends in `path`.
  std::vector<std::string_view> names;
  std::vector<std::size_t> ends;
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    if (end > start) {
      names.push_back(path.substr(start, end - start));
      ends.push_back(end);
    }
    start = end + 1;
  }
  if (names.empty()) return std::nullopt;
  auto directory_of = [&](std::size_t count) {
    return count == 0 ? std::string("./") : std::string(path.substr(0, ends[count - 1])) + "/";
  };

  // The first name that makes a group, by how many names its directory has.
  std::optional<std::pair<std::size_t, GroupReason>> best;
  for (std::size_t i = 0; i < names.size() && !best; ++i) {
    const std::string_view name = names[i];
    if (name == ".git") {
      best = {i + 1, GroupReason::Git};
    } else if (is_cache_directory_name(name) && (i + 1 < names.size() || is_directory)) {
      best = {i + 1, GroupReason::Cache};
    } else if ((name == ".venv" || name == "venv") &&
               is_file_(std::string(path.substr(0, ends[i])) + "/pyvenv.cfg")) {
      best = {i + 1, GroupReason::Cache};
    }
  }
  if (auto ignored = rules_.ignored_at(path, is_directory)) {
    // A file ignored by itself groups under its directory.
    std::size_t count = 1;
    for (char c : *ignored)
      count += c == '/' ? 1 : 0;
    const bool whole_path = count == names.size();
    const std::size_t depth = whole_path && !is_directory ? count - 1 : count;
    if (!best || depth < best->first) best = {depth, GroupReason::Ignored};
  }
  if (!best) return std::nullopt;
  return ReviewGroup{directory_of(best->first), best->second};
}

std::string group_summary(const ReviewGroup& group, std::size_t count) {
  std::string what;
  switch (group.reason) {
    case GroupReason::Git:
      what = "git internal";
      break;
    case GroupReason::Cache:
      what = "cache";
      break;
    case GroupReason::Ignored:
      what = "ignored";
      break;
  }
  return std::to_string(count) + " " + what + (count == 1 ? " path" : " paths") + " under " +
         core::quote_name(group.directory) + " (use --all)";
}

}  // namespace pulsebox::workspace
