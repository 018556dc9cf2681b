// `pulsebox oci run` passes TERM, INT, HUP, QUIT, USR1, USR2 and WINCH on
// to the container's pid 1 and exits with its status (design §1.7); the
// container is deleted after it exits unless --keep; --detach returns once
// it started.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>
#include <tuple>

#include "helpers/oci_bundle.h"
#include "helpers/oci_fixture.h"
#include "helpers/oci_state.h"
#include "helpers/test_support.h"

namespace pulsebox {
namespace {

namespace fs = std::filesystem;
using testing::run_oci;

class OciRunSignalTest : public testing::OciContainerTest {
 protected:
  void TearDown() override {
    if (run_pid_ > 0) {
      ::kill(run_pid_, SIGKILL);
      ::waitpid(run_pid_, nullptr, 0);
    }
    OciContainerTest::TearDown();
  }

  // A container whose shell says "ready" once its trap is set, then waits.
  testing::OciBundle trapping_bundle(const std::string& signal, int status) {
    const std::string script = "trap \"exit " + std::to_string(status) + "\" " + signal +
                               "; echo ready; while :; do sleep 0.1; done";
    return bundle({"sh", "-c", script});
  }

  // `pulsebox oci --root R run ARGS... --bundle B c1` in the background.
  void start_run(const testing::OciBundle& bundle, const std::vector<std::string>& flags) {
    std::vector<std::string> args = {"run"};
    args.insert(args.end(), flags.begin(), flags.end());
    args.insert(args.end(), {"--bundle", bundle.dir.string(), kId});
    run_pid_ = testing::spawn_oci(root_, args, out_, err_);
    ASSERT_GT(run_pid_, 0);
  }

  // run's exit code (128 + n after signal n), bounded by 30 s; -1 on timeout.
  int wait_for_run() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    int status = 0;
    while (::waitpid(run_pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) return -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    run_pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  std::vector<std::string> root_entries() {
    std::vector<std::string> entries;
    if (fs::exists(root_)) {
      for (const auto& entry : fs::directory_iterator(root_))
        entries.push_back(entry.path().filename());
    }
    return entries;
  }

  pid_t run_pid_ = -1;
};

class OciRunForwardTest : public OciRunSignalTest,
                          public ::testing::WithParamInterface<std::tuple<int, const char*>> {};

// The signal reaches the container's trap: run exits with the trap's status
// and the container is gone.
TEST_P(OciRunForwardTest, SignalReachesContainer) {
  const auto [signal, name] = GetParam();
  const int status = signal == SIGTERM ? 5 : 30 + signal;
  ASSERT_NO_FATAL_FAILURE(start_run(trapping_bundle(name, status), {}));
  ASSERT_TRUE(wait_for_output("ready")) << testing::read_file(err_);
  ASSERT_EQ(::kill(run_pid_, signal), 0);
  EXPECT_EQ(wait_for_run(), status) << testing::read_file(err_);
  EXPECT_TRUE(root_entries().empty());
  for (const auto& [key, mount] : host_.hierarchy_mounts) {
    if (subtree_.empty()) break;
    EXPECT_FALSE(fs::exists(fs::path(mount) / subtree_ / kId)) << mount;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Signals, OciRunForwardTest,
    ::testing::Values(std::make_tuple(SIGTERM, "TERM"), std::make_tuple(SIGINT, "INT"),
                      std::make_tuple(SIGHUP, "HUP"), std::make_tuple(SIGQUIT, "QUIT"),
                      std::make_tuple(SIGUSR1, "USR1"), std::make_tuple(SIGUSR2, "USR2"),
                      std::make_tuple(SIGWINCH, "WINCH")),
    [](const auto& param_info) { return std::string(std::get<1>(param_info.param)); });

// --keep leaves the stopped container for `state` and `delete`.
TEST_F(OciRunSignalTest, KeepLeavesStoppedContainer) {
  ASSERT_NO_FATAL_FAILURE(start_run(trapping_bundle("TERM", 5), {"--keep"}));
  ASSERT_TRUE(wait_for_output("ready")) << testing::read_file(err_);
  ASSERT_EQ(::kill(run_pid_, SIGTERM), 0);
  EXPECT_EQ(wait_for_run(), 5) << testing::read_file(err_);
  const auto state = nlohmann::json::parse(run_oci(root_, {"state", kId}).out, nullptr, false);
  ASSERT_TRUE(state.is_object());
  EXPECT_EQ(state["status"], "stopped");
  EXPECT_EQ(run_oci(root_, {"delete", kId}).exit_code, 0);
  EXPECT_TRUE(root_entries().empty());
}

// --detach exits 0 once the container runs; it goes on without run.
TEST_F(OciRunSignalTest, DetachReturnsOnceStarted) {
  ASSERT_NO_FATAL_FAILURE(start_run(trapping_bundle("TERM", 5), {"--detach"}));
  EXPECT_EQ(wait_for_run(), 0) << testing::read_file(err_);
  ASSERT_TRUE(wait_for_output("ready"));
  const auto state = nlohmann::json::parse(run_oci(root_, {"state", kId}).out, nullptr, false);
  ASSERT_TRUE(state.is_object());
  EXPECT_EQ(state["status"], "running");
  EXPECT_EQ(run_oci(root_, {"kill", kId, "TERM"}).exit_code, 0);
  EXPECT_EQ(run_oci(root_, {"delete", "--force", kId}).exit_code, 0);
  EXPECT_TRUE(root_entries().empty());
}

}  // namespace
}  // namespace pulsebox
