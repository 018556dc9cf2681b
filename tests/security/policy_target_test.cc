// A READ rule of the caller's policy holds for every
// spelling of the path it names: "./secret.txt" and ".//secret.txt" are
// the file "secret.txt" (the path checks accept them), so the policy is
// asked about that file, not about the spelling. Before, the facade asked
// the policy about the spelling, which no rule matched, and read_file
// returned what a deny rule kept from the caller (an agent picks the path).
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

}  // namespace
}  // namespace pulsebox
