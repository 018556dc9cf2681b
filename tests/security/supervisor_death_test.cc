// A supervisor killed with SIGKILL takes its sandbox with it: init holds a
// parent-death signal. Taking the namespace's ids clears that signal when
// they map to other host ids (as root), so init arms it again after the
// switch; before that, as root, the sandbox's processes outlived a killed
// `pulsebox run` (and with them its network namespace and veth).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <random>

#include "helpers/cli_fixture.h"
#include "helpers/cli_runner.h"
#include "helpers/local_server.h"
#include "helpers/test_support.h"

namespace pulsebox {
namespace {

using namespace std::chrono_literals;

class SupervisorDeathTest : public testing::CliFixture {};

TEST_F(SupervisorDeathTest, AKilledSupervisorLeavesNoProcessOfItsSandbox) {
  std::random_device seed;
  const std::string marker = "pulsebox-orphan-marker-" + std::to_string(seed());
  const std::vector<std::string> args = {binary_,
                                         "run",
                                         "--allow-weaker",
                                         "limits",
                                         "--changes",
                                         "discard",
                                         "-w",
                                         workspace_.path().string(),
                                         "--",
                                         "sh",
                                         "-c",
                                         "echo up; sleep 600; : " + marker};
  const auto env = cli_env();
  const pid_t supervisor = testing::spawn(args, env, scratch_.path() / "run.log");
  ASSERT_GT(supervisor, 0);
  // The marker is in the supervisor's own command line too: "up" says the
  // sandboxed command is running.
  ASSERT_TRUE(testing::poll_until(
      [&] {
        return testing::read_file(scratch_.path() / "run.log").find("up\n") != std::string::npos;
      },
      10s))
      << "the sandboxed command never started: " << testing::read_file(scratch_.path() / "run.log");
  ASSERT_GE(testing::processes_with_marker(marker), 2) << "the supervisor and its command";
  ::kill(supervisor, SIGKILL);
  ::waitpid(supervisor, nullptr, 0);
  EXPECT_TRUE(testing::poll_until([&] { return testing::processes_with_marker(marker) == 0; }, 10s))
      << "processes of the sandbox outlived its supervisor";
  // What the killed run left (its cgroup, its lock) goes now.
  const auto reconciled =
      testing::run_cli({"reconcile", "-w", workspace_.path().string()}, "", env);
  EXPECT_EQ(reconciled.exit_code, 0) << reconciled.err;
}

}  // namespace
}  // namespace pulsebox
