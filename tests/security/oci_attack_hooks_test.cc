// OCI hooks run by the runtime against hooks that misbehave: one that
// floods its output without end, and one that leaves a process of its own
// session holding its output pipes. Either must not keep create, start or
// delete from returning (runc's hooks wait for their pipes' end of file and
// hang on the second). The hook runs in a child of the test, bounded in
// time, so a regression fails instead of hanging the suite.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>

#include "oci/hooks.h"
#include "oci/spec/spec.h"

namespace pulsebox::oci {
namespace {

using Clock = std::chrono::steady_clock;

spec::Hook shell_hook(const std::string& script, int timeout) {
  spec::Hook hook;
  hook.name = "hooks.createRuntime[0]";
  hook.path = "/bin/sh";
  hook.args = {"sh", "-c", script};
  hook.timeout = timeout;
  return hook;
}

struct Bounded {
  bool returned = false;  // run_hooks returned within the bound
  bool ok = false;        // and its status was ok
  double seconds = 0;
};

// run_hooks in a forked child, given `bound` to return; a child still
// running then is killed (its hook dies of SIGPIPE with the reader gone).
Bounded run_bounded(const spec::Hook& hook, std::chrono::seconds bound) {
  const auto start = Clock::now();
  const pid_t child = ::fork();
  if (child == 0) {
    const HookState state{"flood", "creating", 0, "/bundle", {}};
    const core::Status status = run_hooks({hook}, state);
    ::_exit(status.ok() ? 0 : 1);
  }
  Bounded result;
  int status = 0;
  while (Clock::now() - start < bound) {
    if (::waitpid(child, &status, WNOHANG) == child) {
      result.returned = true;
      result.ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (!result.returned) {
    ::kill(child, SIGKILL);
    ::waitpid(child, &status, 0);
  }
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

TEST(OciAttackHooks, AHookFloodingItsOutputIsStillKilledAtItsTimeout) {
  // Without end and faster than the runtime reads: the reader must still
  // look at the clock.
  const Bounded run = run_bounded(shell_hook("exec cat /dev/zero", 1), std::chrono::seconds(15));
  EXPECT_TRUE(run.returned) << "run_hooks still reading a flooding hook after " << run.seconds
                            << " s; its timeout is 1 s";
  EXPECT_FALSE(run.ok) << "a hook killed at its timeout is a failure";
}

TEST(OciAttackHooks, AFloodOnStderrIsBoundedToo) {
  const Bounded run =
      run_bounded(shell_hook("exec cat /dev/zero >&2", 1), std::chrono::seconds(15));
  EXPECT_TRUE(run.returned) << "still reading after " << run.seconds << " s";
  EXPECT_FALSE(run.ok);
}

TEST(OciAttackHooks, AProcessLeftInItsOwnSessionHoldingThePipesDoesNotHoldTheRuntime) {
  // The hook exits 0 at once; what it left (setsid, out of its process
  // group) keeps stdout and stderr open for longer than the bound.
  char dir_template[] = "/tmp/pulsebox-hook-XXXXXX";
  ASSERT_NE(::mkdtemp(dir_template), nullptr);
  const std::string pid_file = std::string(dir_template) + "/left.pid";
  const Bounded run = run_bounded(shell_hook("setsid sh -c 'echo $$ > " + pid_file +
                                                 "; exec sleep 30' </dev/null & echo left; exit 0",
                                             20),
                                  std::chrono::seconds(10));
  EXPECT_TRUE(run.returned) << "run_hooks waited " << run.seconds
                            << " s for the end of the pipes a left process holds";
  EXPECT_TRUE(run.ok);
  // The left process is the test's to end (the runtime leaves what a hook
  // that exited 0 started alone, as runc and crun do).
  pid_t left = 0;
  for (int i = 0; i < 100 && left == 0; ++i) {
    if (FILE* file = std::fopen(pid_file.c_str(), "r")) {
      if (std::fscanf(file, "%d", &left) != 1) left = 0;
      std::fclose(file);
    }
    if (left == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (left > 0) ::kill(left, SIGKILL);
  std::filesystem::remove_all(dir_template);
}

}  // namespace
}  // namespace pulsebox::oci
