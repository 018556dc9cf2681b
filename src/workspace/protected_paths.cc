#include "workspace/protected_paths.h"

#include <algorithm>

#include "core/text.h"
#include "pulsebox/workspace.h"

namespace pulsebox {

namespace {

// What git itself writes as data in a .git directory: history, refs, the
// index and the state files of a merge or commit in progress. Nothing here
// names a program, a hook or another directory to read.
const std::vector<std::string> kGitData = {
    "objects/??",
    "objects/pack",
    "objects/info/packs",
    "objects/info/commit-graph",
    "objects/info/commit-graphs",
    "info/refs",  // written by git repack for dumb transports; git reads no setting from it
    "refs",
    "logs",
    "reftable",
    "packed-refs",
    "index",
    "sharedindex.*",
    "HEAD",
    "ORIG_HEAD",
    "FETCH_HEAD",
    "MERGE_HEAD",
    "MERGE_MSG",
    "MERGE_MODE",
    "AUTO_MERGE",
    "CHERRY_PICK_HEAD",
    "REVERT_HEAD",
    "REBASE_HEAD",
    "COMMIT_EDITMSG",
    "TAG_EDITMSG",
    "NOTES_EDITMSG",
    "SQUASH_MSG",
    "description",
    "shallow",
    "gc.log",
    "lfs/objects",
    "lfs/tmp",
};

// What Mercurial writes as data in .hg: the store, the dirstate, caches and
// the journal of the last transaction.
const std::vector<std::string> kMercurialData = {
    "store",  "dirstate", "dirstate.*", "branch",           "bookmarks", "cache",
    "wcache", "undo.*",   "journal.*",  "last-message.txt", "merge",     "00changelog.i",
};

}  // namespace

const std::vector<ProtectedPath>& protected_paths() {
  static const std::vector<ProtectedPath> kPaths = {
      {".git",
       "git reads its configuration, hooks and the repository's location (a .git file's "
       "gitdir: line, commondir) from it; only git's data (objects, refs, logs, the index, "
       "HEAD, ...) may change",
       kGitData},
      {".gitattributes",
       "selects which filter, diff and merge drivers git runs on which files, and their "
       "options"},
      {".gitmodules",
       "git fetches and checks out the submodules it names, from the URLs it names, with the "
       "user's credentials"},
      {".lfsconfig", "git-lfs sends the user's credentials to the endpoint it names"},
      {".hg",
       "Mercurial reads hooks and extensions (Python code) from .hg/hgrc, and the location of "
       "a shared repository from .hg/sharedpath; only its store and state files may change",
       kMercurialData},
      {".envrc", "direnv runs it when a shell enters the directory"},
      {".vscode",
       "VS Code runs what it configures: tasks that run when the folder opens (tasks.json), "
       "interpreter, compiler and tool paths (settings.json, c_cpp_properties.json), launch "
       "configurations"},
      {"*.code-workspace",
       "a VS Code workspace file carries settings, tasks and launch "
       "configurations like .vscode/"},
      {".devcontainer",
       "dev container tools run its initializeCommand on the host and its other commands "
       "with the user's mounts and credentials"},
      {".devcontainer.json", "the same as .devcontainer/devcontainer.json"},
      {".idea",
       "JetBrains IDEs run what it configures: file watchers, startup tasks, run "
       "configurations, external tools"},
      {".husky", "husky installs these as git hooks (core.hooksPath)"},
      {".githooks", "a common core.hooksPath: git runs these as hooks"},
      {".pre-commit-config.yaml", "pre-commit runs the hooks it names at each git commit"},
      {"mise*.toml", "mise runs its hooks and env scripts when a shell enters the directory"},
      {".mise*.toml", "mise runs its hooks and env scripts when a shell enters the directory"},
      {".mise", "mise reads its configuration and tasks from it"},
      {".config/mise", "mise reads its configuration and tasks from it"},
      {".github/workflows", "CI runs the workflows with the repository's secrets"},
      {".gitlab-ci.yml", "CI runs it with the repository's secrets"},
      {".agent", "pulsebox's own audit log and transactions"},
  };
  return kPaths;
}

const std::vector<ProtectedPath>& protected_in_git_directories() {
  static const std::vector<ProtectedPath> kNames = {
      {"config",
       "git reads it as the repository's configuration, which can name programs git runs"},
      {"config.worktree", "git reads it as configuration, which can name programs git runs"},
      {"commondir", "moves the repository's configuration, hooks and objects elsewhere"},
      {"gitdir", "points git at another repository"},
      {"hooks", "git runs the hooks in it"},
      {"info", "info/attributes selects filter and diff drivers; info/grafts rewrites history"},
      {"worktrees", "linked working trees' HEAD, configuration and common directory"},
      {"modules", "the git directories of submodules, with their own configuration and hooks"},
      {"objects/info", "objects/info/alternates makes git read objects from elsewhere"},
      {"rebase-merge", "the todo list of a rebase holds exec lines git runs on --continue"},
      {"rebase-apply", "the state of git am or a rebase, which git resumes"},
      {"sequencer", "the todo list of a cherry-pick or revert, which git resumes"},
      {"branches", "remote definitions: URLs git fetches from with the user's credentials"},
      {"remotes", "remote definitions: URLs git fetches from with the user's credentials"},
  };
  return kNames;
}

namespace workspace {

namespace {

std::vector<std::string> split_lower(std::string_view path) {
  std::vector<std::string> names = path_names(path);
  for (std::string& name : names)
    name = core::ascii_lower(name);
  return names;
}

struct CompiledPattern {
  const ProtectedPath* source = nullptr;
  std::vector<std::string> names;
  std::vector<std::vector<std::string>> except;
};

std::vector<CompiledPattern> compile(const std::vector<ProtectedPath>& list) {
  std::vector<CompiledPattern> out;
  for (const ProtectedPath& path : list) {
    CompiledPattern compiled{&path, split_lower(path.pattern), {}};
    for (const std::string& except : path.except)
      compiled.except.push_back(split_lower(except));
    out.push_back(std::move(compiled));
  }
  return out;
}

const std::vector<CompiledPattern>& tree_patterns() {
  static const std::vector<CompiledPattern> kCompiled = compile(protected_paths());
  return kCompiled;
}

const std::vector<CompiledPattern>& git_directory_patterns() {
  static const std::vector<CompiledPattern> kCompiled = compile(protected_in_git_directories());
  return kCompiled;
}

using Names = std::vector<std::string>;

// pattern[0, count) against names[at, at + count).
bool names_match(const Names& pattern, std::size_t count, const Names& names, std::size_t at) {
  if (count > pattern.size() || at + count > names.size()) return false;
  for (std::size_t k = 0; k < count; ++k) {
    if (!name_matches(pattern[k], names[at + k])) return false;
  }
  return true;
}

// Under a pattern with an allow-list: `rest` (the names below the pattern's
// path, from `at`) is data, or a directory on the way to data.
bool is_allowed_data(const CompiledPattern& pattern, const Names& names, std::size_t at,
                     NodeType becomes) {
  const std::size_t depth = names.size() - at;
  for (const Names& data : pattern.except) {
    if (data.size() <= depth && names_match(data, data.size(), names, at)) return true;
    if (becomes == NodeType::Directory && data.size() > depth &&
        names_match(data, depth, names, at))
      return true;
  }
  return false;
}

std::string describe(const ProtectedPath& path) {
  return "protected path (" + path.pattern + ": " + path.reason + ")";
}

// Beneath .git, the reason of the control file it is, when git documents one.
std::string describe(const CompiledPattern& pattern, const Names& names, std::size_t rest) {
  if (pattern.names.size() == 1 && pattern.names.front() == ".git") {
    for (const CompiledPattern& control : git_directory_patterns()) {
      const std::size_t length = control.names.size();
      if (names_match(control.names, length, names, rest)) {
        return "protected path (.git/" + control.source->pattern + ": " + control.source->reason +
               ")";
      }
    }
  }
  return describe(*pattern.source);
}

std::string join(const std::vector<std::string>& original, std::size_t count) {
  std::string out;
  for (std::size_t k = 0; k < count; ++k) {
    if (k > 0) out += '/';
    out += original[k];
  }
  return out;
}

ProtectedMatch matched(std::string why, const Names& names, std::size_t at, std::size_t count) {
  ProtectedMatch match{std::move(why), {}};
  for (std::size_t k = at; k < at + count && k < names.size(); ++k)
    match.names.push_back(names[k]);
  return match;
}

std::optional<ProtectedMatch> match_tree(const Names& names, NodeType becomes) {
  for (std::size_t at = 0; at < names.size(); ++at) {
    const std::size_t depth = names.size() - at;
    for (const CompiledPattern& pattern : tree_patterns()) {
      const std::size_t length = pattern.names.size();
      if (depth >= length && names_match(pattern.names, length, names, at)) {
        // Beneath a version-control directory, only its data may change, and
        // never into a symlink (git writes none; one would redirect it).
        const bool beneath = depth > length;
        if (beneath && !pattern.except.empty() && becomes != NodeType::Symlink &&
            is_allowed_data(pattern, names, at + length, becomes)) {
          continue;
        }
        return matched(describe(pattern, names, at + length), names, at, length);
      }
      if (depth < length && becomes == NodeType::Symlink &&
          names_match(pattern.names, depth, names, at)) {
        return matched("a symlink here would redirect " + describe(*pattern.source), names, at,
                       depth);
      }
    }
  }
  return std::nullopt;
}

std::optional<ProtectedMatch> match_git_directory(const Names& names,
                                                  const std::vector<std::string>& original,
                                                  NodeType becomes, const HoldsEntry& holds) {
  for (std::size_t at = 0; at < names.size(); ++at) {
    // A .git directory is governed by its allow-list (match_tree).
    if (at > 0 && names[at - 1] == ".git") continue;
    const std::size_t depth = names.size() - at;
    for (const CompiledPattern& pattern : git_directory_patterns()) {
      const std::size_t length = pattern.names.size();
      const bool inside = depth >= length && names_match(pattern.names, length, names, at);
      const bool redirects = depth < length && becomes == NodeType::Symlink &&
                             names_match(pattern.names, depth, names, at);
      if (!inside && !redirects) continue;
      const std::string dir = join(original, at);
      if (!holds(dir, "HEAD")) break;  // not a git directory: no other pattern applies here
      const std::string where = dir.empty() ? "the workspace root" : dir;
      // A rule allows it by naming the git directory (at the root: the file).
      return matched(std::string(redirects ? "a symlink here would redirect " : "") +
                         "protected path (" + pattern.source->pattern + " in " + where +
                         ", a git directory since it holds HEAD: " + pattern.source->reason + ")",
                     names, at > 0 ? at - 1 : at, 1);
    }
  }
  return std::nullopt;
}

// HEAD written next to git's control files makes their directory a git
// directory (the other half of match_git_directory's condition).
std::optional<ProtectedMatch> match_new_head(const Names& names,
                                             const std::vector<std::string>& original,
                                             NodeType becomes, const HoldsEntry& holds) {
  const std::size_t n = names.size();
  if (n == 0 || names[n - 1] != "head") return std::nullopt;
  if (becomes != NodeType::File && becomes != NodeType::Symlink) return std::nullopt;
  if (n >= 2 && names[n - 2] == ".git") return std::nullopt;  // git's own data
  const std::string dir = join(original, n - 1);
  for (const CompiledPattern& pattern : git_directory_patterns()) {
    if (!holds(dir, pattern.names.front())) continue;
    const std::string where = dir.empty() ? "the workspace root" : dir;
    return matched("protected path (HEAD makes " + where + " a git directory, and it holds " +
                       pattern.names.front() + ": " + pattern.source->reason + ")",
                   names, n >= 2 ? n - 2 : n - 1, 1);
  }
  return std::nullopt;
}

}  // namespace

std::vector<std::string> path_names(std::string_view path) {
  std::vector<std::string> names;
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    if (end > start) names.emplace_back(path.substr(start, end - start));
    start = end + 1;
  }
  return names;
}

bool name_matches(std::string_view pattern, std::string_view name) {
  auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
  // Iterative glob with one backtrack point: linear in practice.
  std::size_t p = 0, n = 0, star = std::string_view::npos, resume = 0;
  while (n < name.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = n;
    } else if (p < pattern.size() && (pattern[p] == '?' || lower(pattern[p]) == lower(name[n]))) {
      ++p;
      ++n;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      n = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*')
    ++p;
  return p == pattern.size();
}

std::optional<ProtectedMatch> match_protected_path(std::string_view path, NodeType becomes,
                                                   const HoldsEntry& holds) {
  const Names names = split_lower(path);
  if (auto match = match_tree(names, becomes)) return match;
  const std::vector<std::string> original = path_names(path);
  if (auto match = match_git_directory(names, original, becomes, holds)) return match;
  return match_new_head(names, original, becomes, holds);
}

}  // namespace workspace
}  // namespace pulsebox
