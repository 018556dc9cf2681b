// A reused pid is never signalled (design §1.4). pulsebox oci has no daemon:
// a container's process is known by the pid in state.json, and once it
// exits the kernel may give that number to any process, a stranger an
// engine's `kill ID 9` or `delete --force ID` would then kill. The record
// also holds the process's start time, compared after pidfd_open pins the
// process. Here the record names the test's own `sleep` with a start time
// that is not its own, which is exactly what a reused pid looks like.
#include <signal.h>

#include <nlohmann/json.hpp>

#include "helpers/oci_state.h"
#include "helpers/test_support.h"
#include "oci/process_ref.h"

namespace pulsebox {
namespace {

namespace fs = std::filesystem;

class OciPidReuseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_GT(stranger_.pid(), 0);
    const auto start = oci::process_start_time(stranger_.pid());
    ASSERT_TRUE(start.has_value());
    // The container that had this pid started earlier.
    ASSERT_GT(*start, 1u);
    testing::write_oci_record(root_, "c1", stranger_.pid(), *start - 1);
  }

  testing::TempDir temp_;
  fs::path root_ = temp_ / "root";
  testing::SleepChild stranger_;
};

TEST_F(OciPidReuseTest, KillDoesNotSignalTheNewOwnerOfThePid) {
  for (const char* signal : {"KILL", "15"}) {
    const auto run = testing::run_oci(root_, {"kill", "c1", signal});
    EXPECT_EQ(run.exit_code, 1) << run.err;
    EXPECT_NE(run.err.find("container c1 is not running"), std::string::npos) << run.err;
  }
  EXPECT_TRUE(stranger_.alive());
}

TEST_F(OciPidReuseTest, StateSaysStopped) {
  const auto run = testing::run_oci(root_, {"state", "c1"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto state = nlohmann::json::parse(run.out);
  EXPECT_EQ(state["status"], "stopped");
  EXPECT_EQ(state["pid"], 0);
}

TEST_F(OciPidReuseTest, DeleteForceLeavesTheStrangerAlone) {
  const auto run = testing::run_oci(root_, {"delete", "--force", "c1"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_FALSE(fs::exists(root_ / "c1"));
  EXPECT_TRUE(stranger_.alive());
}

TEST_F(OciPidReuseTest, ReconcileLeavesTheStrangerAlone) {
  const auto run = testing::run_oci(root_, {"reconcile"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_FALSE(fs::exists(root_ / "c1"));
  EXPECT_TRUE(stranger_.alive());
}

}  // namespace
}  // namespace pulsebox
