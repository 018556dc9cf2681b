// A READ rule of the caller's policy holds for every
// spelling of the path it names, and wherever a symlink leads: "./secret.txt" and ".//secret.txt"
// are the file "secret.txt" (the path checks accept them), so the policy is asked about that file,
// not about the spelling. Before, the facade asked the policy about the spelling, which no rule
// matched, and read_file returned what a deny rule kept from the caller (an agent picks the path).
// (Writes and deletes were held by the workspace's own check of the
// normalised path as well; the facade now asks about that path for all three.)
// Driven through `pulsebox request`, as root and as an ordinary user.
#include <nlohmann/json.hpp>

#include "helpers/cli_runner.h"
#include "helpers/test_support.h"

namespace pulsebox {
namespace {

using nlohmann::json;

class PolicyTargetTest : public ::testing::Test {
 protected:
  json ask(const json& request) const {
    const auto run = testing::run_cli(
        {"request"}, request.dump(),
        {"PULSEBOX_STATE_DIR=" + state_.path().string(), "NO_COLOR=1", "PULSEBOX_SERVER=off"});
    return json::parse(run.out.empty() ? "{}" : run.out);
  }

  json policy() const {
    return {{"defaults", {{"read", "allow"}, {"write", "allow"}, {"delete", "allow"}}},
            {"rules", {{{"action", "read"}, {"target", "secret.txt"}, {"decision", "deny"}}}}};
  }

  testing::TempDir workspace_;
  testing::TempDir state_;
};

TEST_F(PolicyTargetTest, AReadDenyRuleHoldsForEverySpellingOfThePath) {
  testing::write_file(workspace_ / "secret.txt", "the deny rule keeps this\n");
  for (const std::string spelling :
       {"secret.txt", "./secret.txt", ".//secret.txt", "./././secret.txt"}) {
    const json reply = ask({{"v", 1},
                            {"request", "read_file"},
                            {"workspace", workspace_.path().string()},
                            {"path", spelling},
                            {"policy", policy()}});
    EXPECT_FALSE(reply.contains("data")) << spelling << ": " << reply;
    ASSERT_TRUE(reply.contains("error")) << spelling << ": " << reply;
    EXPECT_EQ(reply["error"]["code"], "policy_denied") << spelling << ": " << reply;
  }
}

// The reference opens the file it reads with O_NOFOLLOW; pulsebox follows
// symlinks that stay in the workspace, so the rule is asked about where the
// path leads too. Before, a symlink to the denied file (one a run made and
// a commit took, as the reference's auto-commit does) read it past the rule.
TEST_F(PolicyTargetTest, AReadDenyRuleHoldsThroughASymlinkInTheWorkspace) {
  testing::write_file(workspace_ / "secret.txt", "the deny rule keeps this\n");
  testing::write_file(workspace_ / "open.txt", "anyone may read this\n");
  std::filesystem::create_symlink("secret.txt", workspace_ / "alias");
  std::filesystem::create_directory_symlink(".", workspace_ / "door");
  std::filesystem::create_symlink("open.txt", workspace_ / "fine");
  for (const std::string path : {"alias", "door/secret.txt", "door/alias"}) {
    const json reply = ask({{"v", 1},
                            {"request", "read_file"},
                            {"workspace", workspace_.path().string()},
                            {"path", path},
                            {"policy", policy()}});
    EXPECT_FALSE(reply.contains("data")) << path << ": " << reply;
    ASSERT_TRUE(reply.contains("error")) << path << ": " << reply;
    EXPECT_EQ(reply["error"]["code"], "policy_denied") << path << ": " << reply;
    EXPECT_NE(reply["error"]["message"].get<std::string>().find("secret.txt"), std::string::npos)
        << reply;
  }
  // A symlink to a file the policy allows still reads.
  const json fine = ask({{"v", 1},
                         {"request", "read_file"},
                         {"workspace", workspace_.path().string()},
                         {"path", "fine"},
                         {"policy", policy()}});
  EXPECT_EQ(fine.value("data", ""), "anyone may read this\n") << fine;
}

}  // namespace
}  // namespace pulsebox
