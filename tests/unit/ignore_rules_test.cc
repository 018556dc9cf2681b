// The .gitignore matcher behind review grouping (workspace/ignore_rules.h)
// and the grouping itself (workspace/review_groups.h).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "core/unique_fd.h"
#include "helpers/test_support.h"
#include "workspace/ignore_rules.h"
#include "workspace/review_groups.h"

namespace pulsebox::workspace {
namespace {

using testing::TempDir;
using testing::write_file;

IgnoreRules rules_of(std::string_view root_text) {
  IgnoreRules rules;
  rules.add("", root_text);
  return rules;
}

TEST(IgnoreRulesTest, NamesWithoutASlashMatchAtAnyDepth) {
  auto rules = rules_of("*.pyc\n# a comment\n\nbuild\n");
  EXPECT_TRUE(rules.ignored("m.pyc", false));
  EXPECT_TRUE(rules.ignored("a/b/m.pyc", false));
  EXPECT_FALSE(rules.ignored("m.py", false));
  EXPECT_EQ(rules.ignored_at("src/build/x.o", false), "src/build");
  EXPECT_FALSE(rules.ignored("# a comment", false));
  EXPECT_FALSE(rules.ignored("src/builder", false));
}

TEST(IgnoreRulesTest, ASlashAnchorsToTheFilesDirectory) {
  auto rules = rules_of("/top.txt\ndoc/*.html\n");
  EXPECT_TRUE(rules.ignored("top.txt", false));
  EXPECT_FALSE(rules.ignored("sub/top.txt", false));
  EXPECT_TRUE(rules.ignored("doc/a.html", false));
  EXPECT_FALSE(rules.ignored("doc/sub/a.html", false));  // '*' does not cross '/'
  EXPECT_FALSE(rules.ignored("x/doc/a.html", false));
}

TEST(IgnoreRulesTest, TrailingSlashMatchesDirectoriesOnly) {
  auto rules = rules_of("out/\n");
  EXPECT_FALSE(rules.ignored("out", false));
  EXPECT_TRUE(rules.ignored("out", true));
  EXPECT_EQ(rules.ignored_at("a/out/x", false), "a/out");
}

TEST(IgnoreRulesTest, DoubleAsterisk) {
  auto rules = rules_of("**/logs\nfoo/**\na/**/b\n");
  EXPECT_EQ(rules.ignored_at("logs/1", false), "logs");
  EXPECT_EQ(rules.ignored_at("x/y/logs/1", false), "x/y/logs");
  EXPECT_FALSE(rules.ignored("foo", true));  // what is inside foo, not foo
  EXPECT_EQ(rules.ignored_at("foo/x/y", false), "foo/x");
  EXPECT_TRUE(rules.ignored("a/b", false));
  EXPECT_TRUE(rules.ignored("a/x/b", false));
  EXPECT_TRUE(rules.ignored("a/x/y/z/b", false));
  EXPECT_FALSE(rules.ignored("a/x/c", false));
}

TEST(IgnoreRulesTest, NegationAndTheLastMatchingLineWins) {
  auto rules = rules_of("*.log\n!keep.log\n");
  EXPECT_TRUE(rules.ignored("a.log", false));
  EXPECT_FALSE(rules.ignored("keep.log", false));
  EXPECT_FALSE(rules.ignored("d/keep.log", false));
  auto reversed = rules_of("!keep.log\n*.log\n");
  EXPECT_TRUE(reversed.ignored("keep.log", false));
}

TEST(IgnoreRulesTest, NothingBeneathAnIgnoredDirectoryIsReincluded) {
  auto rules = rules_of("build/\n!build/keep.txt\n");
  EXPECT_EQ(rules.ignored_at("build/keep.txt", false), "build");
  auto contents = rules_of("build/*\n!build/keep.txt\n");  // the directory itself is not ignored
  EXPECT_FALSE(contents.ignored("build/keep.txt", false));
  EXPECT_TRUE(contents.ignored("build/other.txt", false));
}

TEST(IgnoreRulesTest, EscapesAndSpaces) {
  auto rules = rules_of("\\#hash\n\\!bang\ntrail   \nkeep\\ \r\n");
  EXPECT_TRUE(rules.ignored("#hash", false));
  EXPECT_TRUE(rules.ignored("!bang", false));
  EXPECT_TRUE(rules.ignored("trail", false));
  EXPECT_TRUE(rules.ignored("keep ", false));
  EXPECT_FALSE(rules.ignored("keep", false));
}

TEST(IgnoreRulesTest, DeeperFilesWinAndMatchRelativeToTheirDirectory) {
  IgnoreRules rules([](const std::string& dir, std::vector<std::string>&) {
    if (dir == "") return std::optional<std::string>("*.tmp\n");
    if (dir == "sub") return std::optional<std::string>("!*.tmp\n/local\n");
    return std::optional<std::string>();
  });
  EXPECT_TRUE(rules.ignored("a.tmp", false));
  EXPECT_FALSE(rules.ignored("sub/a.tmp", false));
  EXPECT_TRUE(rules.ignored("sub/local", false));
  EXPECT_FALSE(rules.ignored("local", false));
  EXPECT_FALSE(rules.ignored("sub/x/local", false));
}

TEST(IgnoreRulesTest, DeepPathsAndManyDoubleAsterisksStayCheap) {
  auto rules = rules_of("**/**/**/**/**/**/**/**/**/**/z\n");
  std::string deep;
  for (int i = 0; i < 300; ++i)
    deep += "d/";
  EXPECT_FALSE(rules.ignored(deep + "y", false));
  EXPECT_TRUE(rules.ignored(deep + "z", false));
}

class WorkspaceIgnoreRulesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = core::UniqueFd(::open(dir_.path().c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    ASSERT_TRUE(root_);
  }
  TempDir dir_;
  TempDir outside_;
  core::UniqueFd root_;
};

TEST_F(WorkspaceIgnoreRulesTest, ReadsRootNestedAndInfoExclude) {
  write_file(dir_ / ".gitignore", "*.o\n");
  write_file(dir_ / "lib/.gitignore", "gen/\n");
  write_file(dir_ / ".git/info/exclude", "secret-notes\n");
  auto rules = workspace_ignore_rules(root_.get());
  EXPECT_TRUE(rules.ignored("x.o", false));
  EXPECT_EQ(rules.ignored_at("lib/gen/a.c", false), "lib/gen");
  EXPECT_FALSE(rules.ignored("gen/a.c", false));
  EXPECT_TRUE(rules.ignored("secret-notes", false));
  EXPECT_TRUE(rules.warnings().empty());
}

TEST_F(WorkspaceIgnoreRulesTest, NeverFollowsASymlink) {
  write_file(outside_ / ".gitignore", "*\n");
  std::filesystem::create_symlink(outside_ / ".gitignore", dir_ / ".gitignore");
  std::filesystem::create_directory_symlink(outside_.path(), dir_ / "linked");
  auto rules = workspace_ignore_rules(root_.get());
  EXPECT_FALSE(rules.ignored("anything", false));
  EXPECT_FALSE(rules.ignored("linked/anything", false));
  ASSERT_EQ(rules.warnings().size(), 1u);
  EXPECT_NE(rules.warnings()[0].find(".gitignore is a symlink"), std::string::npos);
}

TEST_F(WorkspaceIgnoreRulesTest, ATooLargeFileIsSkippedWithAWarning) {
  write_file(dir_ / ".gitignore", "*\n" + std::string(kMaxIgnoreFileBytes, '#'));
  auto rules = workspace_ignore_rules(root_.get());
  EXPECT_FALSE(rules.ignored("a", false));
  ASSERT_EQ(rules.warnings().size(), 1u);
  EXPECT_NE(rules.warnings()[0].find("over the limit"), std::string::npos) << rules.warnings()[0];
}

TEST_F(WorkspaceIgnoreRulesTest, AFifoIsNeverOpenedForReading) {
  ASSERT_EQ(::mkfifo((dir_ / ".gitignore").c_str(), 0644), 0);
  auto rules = workspace_ignore_rules(root_.get());  // would block on a FIFO
  EXPECT_FALSE(rules.ignored("a", false));
  EXPECT_EQ(rules.warnings().size(), 1u);
}

TEST(ReviewGroupsTest, GroupsGitCachesAndIgnoredPathsAtTheirTop) {
  std::set<std::string> files = {"env/.venv/pyvenv.cfg"};
  ReviewGrouper grouper(rules_of("build/\n*.log\n"),
                        [&](const std::string& path) { return files.count(path) != 0; });
  auto group = [&](std::string_view path, bool dir = false) { return grouper.group_of(path, dir); };
  EXPECT_EQ(group(".git/objects/ab/cd"), (ReviewGroup{".git/", GroupReason::Git}));
  EXPECT_EQ(group("sub/.git/index"), (ReviewGroup{"sub/.git/", GroupReason::Git}));
  EXPECT_EQ(group("a/__pycache__/m.pyc"), (ReviewGroup{"a/__pycache__/", GroupReason::Cache}));
  EXPECT_EQ(group("node_modules", true), (ReviewGroup{"node_modules/", GroupReason::Cache}));
  EXPECT_FALSE(group("node_modules"));  // a file of that name is not a cache
  EXPECT_EQ(group("env/.venv/bin/pip"), (ReviewGroup{"env/.venv/", GroupReason::Cache}));
  EXPECT_FALSE(group(".venv/bin/pip"));  // no pyvenv.cfg: not known to be a venv
  EXPECT_EQ(group("build/__pycache__/x.pyc"), (ReviewGroup{"build/", GroupReason::Ignored}));
  EXPECT_EQ(group("src/a.log"), (ReviewGroup{"src/", GroupReason::Ignored}));
  EXPECT_EQ(group("a.log"), (ReviewGroup{"./", GroupReason::Ignored}));
  EXPECT_FALSE(group("src/main.cc"));
  EXPECT_FALSE(group("target/debug/app"));  // target/ only when ignored
  EXPECT_EQ(group_summary({".venv/", GroupReason::Cache}, 412),
            "412 cache paths under .venv/ (use --all)");
  EXPECT_EQ(group_summary({"b/", GroupReason::Ignored}, 1), "1 ignored path under b/ (use --all)");
}

}  // namespace
}  // namespace pulsebox::workspace
