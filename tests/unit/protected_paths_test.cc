// The protected-path matcher (src/workspace/protected_paths.h): names at any
// depth, case-insensitively, git's data allowed under .git and nothing else,
// symlinks that redirect a protected path, and git directories under other
// names (a directory that holds HEAD).
#include "workspace/protected_paths.h"

#include <gtest/gtest.h>

#include <set>

#include "core/text.h"
#include "pulsebox/workspace.h"

namespace pulsebox::workspace {
namespace {

// A tree in which the listed "dir/name" entries exist, on a file system that
// ignores ASCII case.
HoldsEntry tree(const std::set<std::string>& entries = {}) {
  std::set<std::string> lower;
  for (const std::string& entry : entries)
    lower.insert(core::ascii_lower(entry));
  return [lower](std::string_view dir, std::string_view name) {
    const std::string path =
        dir.empty() ? std::string(name) : std::string(dir) + "/" + std::string(name);
    return lower.count(core::ascii_lower(path)) > 0;
  };
}

bool is_protected(std::string_view path, NodeType becomes = NodeType::File,
                  const HoldsEntry& holds = tree()) {
  return match_protected_path(path, becomes, holds).has_value();
}

TEST(ProtectedPathsTest, NamesMatchAtAnyDepthAndIgnoringAsciiCase) {
  for (const char* path : {".git",
                           ".git/config",
                           "sub/.git/config",
                           "a/b/c/.git",
                           ".GIT/config",
                           ".Git/HOOKS/x",
                           ".gitattributes",
                           "pkg/.gitattributes",
                           "pkg/.GitAttributes",
                           ".gitmodules",
                           ".envrc",
                           "deep/er/.envrc",
                           ".vscode",
                           ".vscode/tasks.json",
                           "app/.VSCode/settings.json",
                           "x.code-workspace",
                           "A.CODE-WORKSPACE",
                           ".github/workflows/ci.yml",
                           "sub/.github/workflows",
                           "mise.toml",
                           "mise.local.toml",
                           ".mise.toml",
                           ".mise/tasks/x",
                           ".config/mise/config.toml",
                           ".agent",
                           "sub/.agent/x",
                           ".hg/hgrc",
                           ".devcontainer.json",
                           ".devcontainer/devcontainer.json",
                           ".idea/workspace.xml",
                           ".husky/pre-commit",
                           ".githooks/pre-commit",
                           ".pre-commit-config.yaml",
                           ".gitlab-ci.yml",
                           ".lfsconfig"}) {
    EXPECT_TRUE(is_protected(path)) << path;
  }
  for (const char* path :
       {"src/main.cc", "git/config", ".gitignore", "x.git/config", "vscode/tasks.json",
        ".github/CODEOWNERS", ".github/ISSUE_TEMPLATE/bug.md", "tasks.json", ".env",
        "code-workspace", "src/.gitx", "my.envrc", ".tool-versions", "misetoml"}) {
    EXPECT_FALSE(is_protected(path)) << path;
  }
}

TEST(ProtectedPathsTest, UnderDotGitOnlyGitsDataMayChange) {
  for (const char* path : {".git/objects/ab/cdef0123",
                           ".git/objects/pack/pack-1.pack",
                           ".git/objects/info/packs",
                           ".git/objects/info/commit-graph",
                           ".git/refs/heads/main",
                           ".git/refs/tags/v1",
                           ".git/logs/HEAD",
                           ".git/logs/refs/heads/main",
                           ".git/index",
                           ".git/HEAD",
                           ".git/ORIG_HEAD",
                           ".git/FETCH_HEAD",
                           ".git/MERGE_HEAD",
                           ".git/COMMIT_EDITMSG",
                           ".git/packed-refs",
                           ".git/description",
                           ".git/info/refs",
                           ".git/sharedindex.0123",
                           "sub/.git/refs/heads/x",
                           "sub/.git/objects/00/11"}) {
    EXPECT_FALSE(is_protected(path)) << path;
  }
  for (const char* path : {".git/config",
                           ".git/config.worktree",
                           ".git/commondir",
                           ".git/gitdir",
                           ".git/hooks/pre-commit",
                           ".git/info/attributes",
                           ".git/info/exclude",
                           ".git/info/sparse-checkout",
                           ".git/worktrees/w/commondir",
                           ".git/modules/m/config",
                           ".git/modules/m/objects/ab/cd",
                           ".git/objects/info/alternates",
                           ".git/objects/info/http-alternates",
                           ".git/rebase-merge/git-rebase-todo",
                           ".git/rebase-apply/x",
                           ".git/sequencer/todo",
                           ".git/branches/origin",
                           ".git/remotes/x",
                           ".git/rr-cache/x",
                           ".git/anything-new"}) {
    EXPECT_TRUE(is_protected(path)) << path;
  }
  // Directories that hold git's data may be made; as anything else they are
  // protected (a file or symlink would stand in for what git reads there).
  EXPECT_FALSE(is_protected(".git/objects", NodeType::Directory));
  EXPECT_FALSE(is_protected(".git/objects/info", NodeType::Directory));
  EXPECT_TRUE(is_protected(".git/objects/info", NodeType::File));
  EXPECT_TRUE(is_protected(".git/objects", NodeType::Absent));
  // Deleting data is data; deleting a control file is not.
  EXPECT_FALSE(is_protected(".git/objects/ab", NodeType::Absent));
  EXPECT_FALSE(is_protected(".git/refs/heads/old", NodeType::Absent));
  EXPECT_TRUE(is_protected(".git/hooks/pre-commit", NodeType::Absent));
  // git writes no symlink there: one would redirect what git reads.
  EXPECT_TRUE(is_protected(".git/refs", NodeType::Symlink));
  EXPECT_TRUE(is_protected(".git/HEAD", NodeType::Symlink));
  // A .git nested in git's data is a repository of its own.
  EXPECT_TRUE(is_protected(".git/refs/heads/.git"));
}

TEST(ProtectedPathsTest, UnderDotHgOnlyMercurialsDataMayChange) {
  for (const char* path : {".hg/store/data/a.i", ".hg/dirstate", ".hg/branch", ".hg/cache/x",
                           ".hg/undo.desc", ".hg/last-message.txt"}) {
    EXPECT_FALSE(is_protected(path)) << path;
  }
  for (const char* path : {".hg", ".hg/hgrc", ".hg/hgrc-not-shared", ".hg/sharedpath",
                           ".hg/requires", "sub/.hg/hgrc"}) {
    EXPECT_TRUE(is_protected(path)) << path;
  }
}

TEST(ProtectedPathsTest, ASymlinkAtAnAncestorOfAPatternRedirectsIt) {
  for (const char* path : {".github", "sub/.github", ".config", "x/.config"}) {
    EXPECT_TRUE(is_protected(path, NodeType::Symlink)) << path;
    EXPECT_FALSE(is_protected(path, NodeType::Directory)) << path;
    EXPECT_FALSE(is_protected(path, NodeType::File)) << path;  // a file redirects nothing
  }
  const auto match = match_protected_path(".github", NodeType::Symlink, tree());
  ASSERT_TRUE(match);
  EXPECT_NE(match->why.find("a symlink here would redirect protected path (.github/workflows"),
            std::string::npos)
      << match->why;
}

TEST(ProtectedPathsTest, ADirectoryHoldingHeadIsAGitDirectory) {
  const HoldsEntry bare = tree({"x.git/HEAD", "HEAD", "y/config"});
  for (const char* path : {"x.git/config", "x.git/hooks/post-update", "x.git/info/attributes",
                           "x.git/objects/info/alternates", "x.git/commondir", "x.git/worktrees/w",
                           "x.git/modules/m/config", "X.GIT/CONFIG", "config", "hooks/x"}) {
    EXPECT_TRUE(is_protected(path, NodeType::File, bare)) << path;
  }
  for (const char* path : {"x.git/objects/ab/cd", "x.git/refs/heads/main", "x.git/description",
                           "other/config", "z.git/config"}) {
    EXPECT_FALSE(is_protected(path, NodeType::File, bare)) << path;
  }
  EXPECT_TRUE(is_protected("x.git/objects", NodeType::Symlink, bare));
  EXPECT_FALSE(is_protected("x.git/objects", NodeType::Directory, bare));
  const auto match = match_protected_path("x.git/config", NodeType::File, bare);
  ASSERT_TRUE(match);
  EXPECT_NE(match->why.find("config in x.git, a git directory since it holds HEAD"),
            std::string::npos)
      << match->why;
  EXPECT_EQ(match->names, (std::vector<std::string>{"x.git"}));
  // Writing HEAD next to git's control files makes their directory one.
  EXPECT_TRUE(is_protected("y/HEAD", NodeType::File, bare));
  EXPECT_TRUE(is_protected("y/head", NodeType::Symlink, bare));
  EXPECT_FALSE(is_protected("y/HEAD", NodeType::Directory, bare));
  EXPECT_FALSE(is_protected("w/HEAD", NodeType::File, bare));
  // In .git, HEAD is git's data, and .git's own allow-list decides.
  EXPECT_FALSE(is_protected(".git/HEAD", NodeType::File, tree({".git/HEAD", ".git/config"})));
  EXPECT_FALSE(
      is_protected(".git/objects/info/packs", NodeType::File, tree({".git/HEAD", "HEAD"})));
}

TEST(ProtectedPathsTest, MatchesCarryTheNamesARuleMaySpellOut) {
  const auto git = match_protected_path("sub/.git/hooks/x", NodeType::File, tree());
  ASSERT_TRUE(git);
  EXPECT_EQ(git->names, (std::vector<std::string>{".git"}));
  EXPECT_NE(git->why.find("protected path (.git/hooks: git runs the hooks in it)"),
            std::string::npos)
      << git->why;
  const auto workflows = match_protected_path(".GitHub/Workflows/ci.yml", NodeType::File, tree());
  ASSERT_TRUE(workflows);
  EXPECT_EQ(workflows->names, (std::vector<std::string>{".github", "workflows"}));
  const auto workspace_file = match_protected_path("My.code-workspace", NodeType::File, tree());
  ASSERT_TRUE(workspace_file);
  EXPECT_EQ(workspace_file->names, (std::vector<std::string>{"my.code-workspace"}));
}

TEST(ProtectedPathsTest, NameGlobsStayWithinOneName) {
  EXPECT_TRUE(name_matches("*.code-workspace", "a.code-workspace"));
  EXPECT_TRUE(name_matches("*.code-workspace", ".code-workspace"));
  EXPECT_TRUE(name_matches("mise*.toml", "MISE.toml"));
  EXPECT_TRUE(name_matches("objects/??", "objects/??"));
  EXPECT_TRUE(name_matches("??", "ab"));
  EXPECT_FALSE(name_matches("??", "abc"));
  EXPECT_FALSE(name_matches("*.code-workspace", "a.code-workspace.bak"));
  EXPECT_TRUE(name_matches("a*b*c", "aXbYbZc"));
  EXPECT_FALSE(name_matches("a*b*c", "aXbYcZ"));
}

TEST(ProtectedPathsTest, EveryPublicPatternProtectsItsOwnPath) {
  for (const auto* list : {&protected_paths(), &protected_in_git_directories()}) {
    for (const ProtectedPath& path : *list) {
      std::string sample = path.pattern;
      for (char& c : sample) {
        if (c == '*' || c == '?') c = 'x';
      }
      const bool in_git_directory = list == &protected_in_git_directories();
      const HoldsEntry holds = tree({"repo/HEAD"});
      const std::string where = in_git_directory ? "repo/" + sample : "deep/" + sample;
      EXPECT_TRUE(is_protected(where, NodeType::File, holds)) << where;
      EXPECT_FALSE(path.reason.empty()) << path.pattern;
    }
  }
}

}  // namespace
}  // namespace pulsebox::workspace
