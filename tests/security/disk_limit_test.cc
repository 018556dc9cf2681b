// --disk (and the reference's working_directory_bytes): a run cannot fill
// the host's disk through its changes (issue #18 item 8). What broke: the
// limit was accepted and ignored while limits reported strongly_enforced;
// the overlay's upper directory on the state directory's disk took
// whatever the command wrote. Now the changes live on a tmpfs of the run's
// own: a write past the limit fails with ENOSPC inside, the run goes on,
// nothing of it reaches the state directory, and what fitted is imported.
#include <nlohmann/json.hpp>

#include "helpers/cli_fixture.h"
#include "helpers/cli_runner.h"

namespace pulsebox {
namespace {

namespace fs = std::filesystem;
using testing::CliRun;

class DiskLimitTest : public testing::CliFixture {
 protected:
  // The bytes of regular files under the state directory (its staging and trash).
  std::uintmax_t state_bytes() const {
    std::uintmax_t total = 0;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(
             state_.path(), fs::directory_options::skip_permission_denied, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (it->is_regular_file(ec)) total += it->file_size(ec);
    }
    return total;
  }
};

TEST_F(DiskLimitTest, WritingPastTheLimitFailsWithEnospcAndLeavesTheHostDiskAlone) {
  const CliRun run = testing::run_cli(
      {"run", "--json", "--allow-weaker", "limits", "--timeout", "60", "-w",
       workspace_.path().string(), "--disk", "1M", "--", "sh", "-c",
       "head -c 3000000 /dev/zero > big; echo rc=$?; echo after > small || echo SMALL_FAILED; "
       "echo still-running"},
      "", cli_env());
  auto result = nlohmann::json::parse(run.out, nullptr, false);
  ASSERT_TRUE(result.is_object()) << run.out << run.err;
  const std::string out = result.value("stdout", "");
  const std::string err = result.value("stderr", "");
  EXPECT_NE(err.find("No space left on device"), std::string::npos) << err;
  EXPECT_NE(out.find("still-running"), std::string::npos) << out;
  EXPECT_EQ(result.value("exit_code", -1), 0) << result.dump();
  EXPECT_TRUE(result["termination_reason"].is_null()) << result.dump();
  // Nothing near the 3 MB reached the state directory's disk.
  EXPECT_LT(state_bytes(), 1u << 20);
  // What fitted is a change like any other.
  ASSERT_TRUE(result.contains("transaction_id") && result["transaction_id"].is_string())
      << result.dump();
  bool big = false;
  for (const auto& change : result.value("changes", nlohmann::json::array()))
    big = big || change.value("path", "") == "big";
  EXPECT_TRUE(big) << result.dump();
}

TEST_F(DiskLimitTest, TheLimitIsReportedStronglyEnforced) {
  const CliRun run = testing::run_cli({"capabilities", "--json"}, "", cli_env());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto caps = nlohmann::json::parse(run.out, nullptr, false);
  ASSERT_FALSE(caps.is_discarded()) << run.out;
  const auto disk = caps["backends"]["native"]["capabilities"]["limits.disk"];
  EXPECT_EQ(disk.value("level", ""), "strongly_enforced") << caps.dump();
  // Explicit: refused nowhere (an unsupported explicit limit exits 125).
  const CliRun limited = testing::run_cli({"run", "-w", workspace_.path().string(), "--disk", "10M",
                                           "--allow-weaker", "limits", "--", "true"},
                                          "", cli_env());
  EXPECT_EQ(limited.exit_code, 0) << limited.err;
}

}  // namespace
}  // namespace pulsebox
