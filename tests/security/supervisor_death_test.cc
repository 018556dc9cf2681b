// A supervisor killed with SIGKILL takes its sandbox with it: init holds a
// parent-death signal. Taking the namespace's ids clears that signal when
// they map to other host ids (as root), so init arms it again after the
// switch; before that, as root, the sandbox's processes outlived a killed
// `pulsebox run` (and with them its network namespace and veth).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <random>

#include "helpers/cli_fixture.h"
#include "helpers/cli_runner.h"
#include "helpers/test_support.h"

namespace pulsebox {
namespace {

class SupervisorDeathTest : public testing::CliFixture {};

TEST_F(SupervisorDeathTest, AKilledSupervisorLeavesNoProcessOfItsSandbox) {
  std::random_device seed;
  const std::string marker = "pulsebox-orphan-marker-" + std::to_string(seed());
  std::vector<std::string> args = {binary_,
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
                                   "sleep 600; : " + marker};
  const auto env = cli_env();
  const pid_t supervisor = ::fork();
  if (supervisor == 0) {
    for (const auto& entry : env)
      ::putenv(::strdup(entry.c_str()));
    ::execv(binary_.c_str(), testing::c_strings(args).data());
    ::_exit(127);
  }
  ASSERT_GT(supervisor, 0);
  bool running = false;
  for (int i = 0; i < 200 && !running; ++i) {  // at most 10 s
    ::usleep(50000);
    running = testing::processes_with_marker(marker) > 0;
  }
  ASSERT_TRUE(running) << "the sandboxed command never started";
  ::kill(supervisor, SIGKILL);
  ::waitpid(supervisor, nullptr, 0);
  int left = 1;
  for (int i = 0; i < 200 && left > 0; ++i) {  // at most 10 s
    ::usleep(50000);
    left = testing::processes_with_marker(marker);
  }
  EXPECT_EQ(left, 0) << "processes of the sandbox outlived its supervisor";
  // What the killed run left (its cgroup, its lock) goes now.
  const auto reconciled =
      testing::run_cli({"reconcile", "-w", workspace_.path().string()}, "", env);
  EXPECT_EQ(reconciled.exit_code, 0) << reconciled.err;
}

}  // namespace
}  // namespace pulsebox
