// A transaction never holds a path beneath one it stages as a file, a
// symlink or a deletion. Before, stage_write "d/f" then stage_write "d"
// (the protocol's and the C ABI's staging, an agent choosing the paths)
// kept both; the commit wrote "d" as a file, failed on "d/f" after its
// commit point, and every later open of the workspace's transactions
// replayed the same failing step: half a commit applied, and `pulsebox
// changes`, create_transaction and every commit refused until the user
// edited .agent/ by hand. Now the later staging wins as it would on a file
// system (a file staged over staged children drops them), and a child
// staged beneath a staged file is refused by name.
// Driven through `pulsebox request`, as root and as an ordinary user.
#include <nlohmann/json.hpp>

#include "helpers/cli_runner.h"
#include "helpers/test_support.h"

namespace pulsebox {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class TransactionShapeTest : public ::testing::Test {
 protected:
  json ask(json request) const {
    request["v"] = 1;
    request["workspace"] = workspace_.path().string();
    const auto run = testing::run_cli(
        {"request"}, request.dump(),
        {"PULSEBOX_STATE_DIR=" + state_.path().string(), "NO_COLOR=1", "PULSEBOX_SERVER=off"});
    return json::parse(run.out.empty() ? "{}" : run.out);
  }

  json stage_write(const std::string& tx, const std::string& path, const std::string& data) const {
    return ask({{"request", "stage_write"},
                {"transaction", tx},
                {"path", path},
                {"data", data},
                {"policy", {{"defaults", {{"write", "allow"}}}}}});
  }

  std::string create() const {
    const json made = ask({{"request", "create_transaction"}});
    EXPECT_TRUE(made.contains("transaction")) << made;
    return made.value("transaction", "");
  }

  testing::TempDir workspace_;
  testing::TempDir state_;
};

TEST_F(TransactionShapeTest, AFileStagedOverStagedChildrenReplacesThemAndCommits) {
  const std::string tx = create();
  ASSERT_FALSE(stage_write(tx, "d/f", "child\n").contains("error"));
  ASSERT_FALSE(stage_write(tx, "d", "file\n").contains("error"));
  const json committed = ask({{"request", "commit"}, {"transaction", tx}});
  EXPECT_FALSE(committed.contains("error")) << committed;
  EXPECT_EQ(testing::read_file(workspace_ / "d"), "file\n");
  // The workspace's transactions still open: nothing is left to replay.
  const json listed = ask({{"request", "changes"}});
  EXPECT_FALSE(listed.contains("error")) << listed;
  EXPECT_FALSE(create().empty());
}

TEST_F(TransactionShapeTest, AChildBeneathAPathStagedAsAFileIsRefused) {
  const std::string tx = create();
  ASSERT_FALSE(stage_write(tx, "d", "file\n").contains("error"));
  const json refused = stage_write(tx, "d/f", "child\n");
  ASSERT_TRUE(refused.contains("error")) << refused;
  EXPECT_NE(refused["error"]["message"].get<std::string>().find("stages d as"), std::string::npos)
      << refused;
  const json committed = ask({{"request", "commit"}, {"transaction", tx}});
  EXPECT_FALSE(committed.contains("error")) << committed;
  EXPECT_EQ(testing::read_file(workspace_ / "d"), "file\n");
  EXPECT_FALSE(ask({{"request", "changes"}}).contains("error"));
}

TEST_F(TransactionShapeTest, ADeletionStagedOverStagedChildrenReplacesThem) {
  fs::create_directories(workspace_ / "d");
  testing::write_file(workspace_ / "d" / "old", "old\n");
  const std::string tx = create();
  ASSERT_FALSE(stage_write(tx, "d/new", "new\n").contains("error"));
  const json deleted = ask({{"request", "stage_delete"},
                            {"transaction", tx},
                            {"path", "d"},
                            {"policy", {{"defaults", {{"delete", "allow"}}}}}});
  ASSERT_FALSE(deleted.contains("error")) << deleted;
  const json committed = ask({{"request", "commit"}, {"transaction", tx}});
  EXPECT_FALSE(committed.contains("error")) << committed;
  EXPECT_FALSE(fs::exists(fs::symlink_status(workspace_ / "d")));
  EXPECT_FALSE(ask({{"request", "changes"}}).contains("error"));
}

// The facade stages the directories a write needs, as the reference's
// commit makes them; a parent that is a file or a dangling symlink in the
// workspace cannot become one, and was staged past before (the commit then
// wedged as above).
TEST_F(TransactionShapeTest, AWriteBeneathAFileOrADanglingSymlinkOfTheWorkspaceIsRefused) {
  testing::write_file(workspace_ / "d", "a file\n");
  fs::create_symlink("nowhere", workspace_ / "dl");
  const std::string tx = create();
  for (const std::string path : {"d/f", "dl/f", "dl/sub/f"}) {
    const json refused = stage_write(tx, path, "child\n");
    ASSERT_TRUE(refused.contains("error")) << path << ": " << refused;
    EXPECT_NE(refused["error"]["message"].get<std::string>().find("not a directory"),
              std::string::npos)
        << refused;
  }
  ASSERT_FALSE(stage_write(tx, "ok/f", "fine\n").contains("error"));
  const json committed = ask({{"request", "commit"}, {"transaction", tx}});
  EXPECT_FALSE(committed.contains("error")) << committed;
  EXPECT_EQ(testing::read_file(workspace_ / "ok" / "f"), "fine\n");
  EXPECT_EQ(testing::read_file(workspace_ / "d"), "a file\n");
  EXPECT_FALSE(ask({{"request", "changes"}}).contains("error"));
}

}  // namespace
}  // namespace pulsebox
