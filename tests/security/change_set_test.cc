// A change set is taken path by path, and type swaps commit without ever
// following a link:
//  - a symlink to a directory outside the workspace, replaced by the command
//    with a directory, made the reader refuse the whole change set ("it
//    resolves outside the allowed root"): the run's work was lost;
//  - one FIFO in the upper directory lost every other change of the run;
//  - directory <-> symlink <-> file swaps in both directions commit, and the
//    target outside the workspace is never written.
// Driven through the CLI, as root and as an ordinary user (tools/check).
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "helpers/cli_fixture.h"
#include "helpers/cli_runner.h"
#include "helpers/test_support.h"

namespace pulsebox {
namespace {

namespace fs = std::filesystem;

class ChangeSetTest : public testing::CliFixture {
 protected:
  void SetUp() override {
    CliFixture::SetUp();
    if (IsSkipped()) return;
    outside_ = scratch_ / "outside";
    fs::create_directories(outside_);
    testing::write_file(outside_ / "keep.txt", "outside\n");
  }

  // Runs `command` in a sandbox on the workspace and returns its transaction
  // ("" when it made none).
  // `expected_exit`: 123 when a path is held (the command itself succeeds).
  std::string run(const std::string& command, int expected_exit = 0) {
    const auto result = testing::run_cli({"run", "--json", "--allow-weaker", "limits", "-w",
                                          workspace_.path().string(), "--", "sh", "-c", command},
                                         "", cli_env());
    EXPECT_EQ(result.exit_code, expected_exit) << result.out << result.err;
    const auto reply = nlohmann::json::parse(result.out, nullptr, false);
    if (reply.is_discarded() || !reply.contains("transaction_id") ||
        !reply["transaction_id"].is_string()) {
      ADD_FAILURE() << "no transaction: " << result.out << result.err;
      return "";
    }
    return reply["transaction_id"];
  }

  void commit(const std::string& tx) {
    const auto result =
        testing::run_cli({"commit", "-w", workspace_.path().string(), tx}, "", cli_env());
    EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
  }

  void expect_outside_untouched() {
    EXPECT_EQ(testing::listing(outside_).size(), 1u);
    EXPECT_EQ(testing::read_file(outside_ / "keep.txt"), "outside\n");
  }

  fs::path outside_;
};

TEST_F(ChangeSetTest, ASymlinkToOutsideReplacedByADirectoryCommits) {
  fs::create_symlink(outside_, workspace_ / "d");
  const std::string tx = run("rm d && mkdir d && echo inside > d/keep.txt && echo other > e.txt");
  if (tx.empty()) return;
  commit(tx);
  struct stat st {};
  ASSERT_EQ(::lstat((workspace_ / "d").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(testing::read_file(workspace_ / "d/keep.txt"), "inside\n");
  EXPECT_EQ(testing::read_file(workspace_ / "e.txt"), "other\n");
  expect_outside_untouched();
}

TEST_F(ChangeSetTest, ADirectoryBecomesASymlinkToOutsideAndBack) {
  testing::write_file(workspace_ / "d/old.txt", "old\n");
  std::string tx = run("rm -rf d && ln -s '" + outside_.string() + "' d");
  if (tx.empty()) return;
  commit(tx);
  ASSERT_TRUE(fs::is_symlink(workspace_ / "d"));
  EXPECT_EQ(fs::read_symlink(workspace_ / "d"), outside_);
  expect_outside_untouched();

  tx = run("rm d && mkdir d && echo again > d/keep.txt");
  if (tx.empty()) return;
  commit(tx);
  EXPECT_FALSE(fs::is_symlink(workspace_ / "d"));
  EXPECT_EQ(testing::read_file(workspace_ / "d/keep.txt"), "again\n");
  expect_outside_untouched();
}

TEST_F(ChangeSetTest, AFileBecomesADirectoryAndBack) {
  testing::write_file(workspace_ / "f", "file\n");
  std::string tx = run("rm f && mkdir f && echo in > f/x");
  if (tx.empty()) return;
  commit(tx);
  EXPECT_EQ(testing::read_file(workspace_ / "f/x"), "in\n");
  tx = run("rm -rf f && echo file again > f");
  if (tx.empty()) return;
  commit(tx);
  EXPECT_EQ(testing::read_file(workspace_ / "f"), "file again\n");
}

TEST_F(ChangeSetTest, ASymlinkToAnOutsideFileReplacedByAFileIsNotWrittenThrough) {
  fs::create_symlink(outside_ / "keep.txt", workspace_ / "link");
  const std::string tx = run("rm link && echo mine > link");
  if (tx.empty()) return;
  commit(tx);
  EXPECT_FALSE(fs::is_symlink(workspace_ / "link"));
  EXPECT_EQ(testing::read_file(workspace_ / "link"), "mine\n");
  expect_outside_untouched();
}

TEST_F(ChangeSetTest, AFifoIsLeftOutAndTheRestIsKept) {
  const std::string tx = run("mkfifo pipe && echo kept > kept.txt", /*expected_exit=*/123);
  if (tx.empty()) return;
  commit(tx);
  EXPECT_EQ(testing::read_file(workspace_ / "kept.txt"), "kept\n");
  EXPECT_FALSE(fs::exists(fs::symlink_status(workspace_ / "pipe")));
}

}  // namespace
}  // namespace pulsebox
