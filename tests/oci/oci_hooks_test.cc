// The runtime's own OCI hooks through pulsebox-runc (oci/hooks.h):
// prestart and createRuntime at the end of create, poststart after start,
// poststop in delete, each with the state on stdin. A failing or timed-out
// createRuntime hook fails create and leaves nothing; poststart and
// poststop failures are warnings in the --log.
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <thread>

#include "helpers/oci_bundle.h"
#include "helpers/oci_fixture.h"
#include "helpers/oci_state.h"
#include "helpers/test_support.h"

namespace pulsebox {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// A hook that appends "<kind> <status> <pid>" (status and pid from the state
// on its stdin) to `file`, then runs `more`.
json recording_hook(const std::string& kind, const fs::path& file, const std::string& more = "") {
  const std::string script =
      "state=$(/bin/cat); "
      "status=$(echo \"$state\" | /bin/sed -n 's/.*\"status\":\"\\([a-z]*\\)\".*/\\1/p'); "
      "pid=$(echo \"$state\" | /bin/sed -n 's/.*\"pid\":\\([0-9]*\\).*/\\1/p'); "
      "echo \"$0 $status $pid\" >> \"$1\"; " +
      more;
  return {{"path", "/bin/sh"}, {"args", {"sh", "-c", script, kind, file.string()}}};
}

class OciHooksTest : public testing::OciContainerTest {
 protected:
  testing::OciBundle bundle(const json& hooks) {
    auto b = OciContainerTest::bundle({"sh", "-c", "exec sleep 60"});
    b.config["hooks"] = hooks;
    b.write();
    return b;
  }
  testing::OciFileRun oci(const std::vector<std::string>& args) {
    std::vector<std::string> with_log = {"--log", log_.string()};
    with_log.insert(with_log.end(), args.begin(), args.end());
    return OciContainerTest::oci(with_log);
  }
  pid_t pid_of() {
    auto parsed = json::parse(testing::run_oci(root_, {"state", "c1"}).out, nullptr, false);
    return parsed.is_object() ? parsed.value("pid", 0) : 0;
  }
  void expect_nothing_left() {
    EXPECT_FALSE(fs::exists(root_ / "c1"));
    EXPECT_EQ(leftover_leaves(), std::vector<std::string>{});
  }
  // Bounded: the process named in `file`'s last word is gone (or a zombie).
  static bool process_gone(pid_t pid) {
    for (int i = 0; i < 100; ++i) {
      const std::string stat = testing::read_file("/proc/" + std::to_string(pid) + "/stat");
      if (stat.empty() || stat.find(") Z") != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  fs::path log_ = temp_ / "log";
  fs::path record_ = temp_ / "hooks";
};

TEST_F(OciHooksTest, EachKindRunsAtItsPointWithItsState) {
  // The in-container hooks write through a bind of this directory: a
  // createContainer hook sees the host's paths (before pivot_root), a
  // startContainer hook the container's.
  const fs::path shared = temp_ / "shared";
  fs::create_directories(shared);
  const fs::path record = shared / "record";
  auto b = bundle({{"prestart", {recording_hook("prestart", record)}},
                   {"createRuntime", {recording_hook("createRuntime", record)}},
                   {"createContainer", {recording_hook("createContainer", record)}},
                   {"startContainer", {recording_hook("startContainer", "/hooks/record")}},
                   {"poststart", {recording_hook("poststart", record)}},
                   {"poststop", {recording_hook("poststop", record)}}});
  fs::create_symlink("busybox", b.dir / "rootfs" / "bin" / "sed");
  b.config["mounts"].push_back(
      {{"destination", "/hooks"}, {"type", "bind"}, {"source", shared}, {"options", {"rbind"}}});
  b.write();
  const auto created = oci({"create", "--bundle", b.dir.string(), "c1"});
  ASSERT_EQ(created.exit_code, 0) << created.err << testing::read_file(log_);
  const std::string pid = std::to_string(pid_of());
  std::string expected = "prestart creating " + pid + "\ncreateRuntime creating " + pid +
                         "\ncreateContainer creating " + pid + "\n";
  EXPECT_EQ(testing::read_file(record), expected);
  ASSERT_EQ(oci({"start", "c1"}).exit_code, 0);
  // startContainer runs in the container after start wrote its byte, and
  // poststart in start once the program runs, which is after it.
  expected += "startContainer created " + pid + "\npoststart running " + pid + "\n";
  EXPECT_EQ(testing::read_file(record), expected);
  ASSERT_EQ(oci({"kill", "c1", "KILL"}).exit_code, 0);
  ASSERT_TRUE(wait_for_status(kId, "stopped"));
  const auto deleted = oci({"delete", "c1"});
  EXPECT_EQ(deleted.exit_code, 0) << deleted.err;
  const std::string all = testing::read_file(record);
  EXPECT_EQ(all, expected + "poststop stopped " + pid + "\n");
  expect_nothing_left();
}

TEST_F(OciHooksTest, AFailingCreateContainerHookFailsCreateAndLeavesNothing) {
  bundle({{"createContainer",
           {{{"path", "/bin/sh"}, {"args", {"sh", "-c", "echo 'cannot prepare' >&2; exit 4"}}}}}});
  const auto created = oci({"create", "--bundle", (temp_ / "bundle").string(), "c1"});
  EXPECT_EQ(created.exit_code, 1);
  EXPECT_NE(created.err.find("hooks.createContainer[0] (/bin/sh) exited with status 4: "
                             "cannot prepare"),
            std::string::npos)
      << created.err;
  expect_nothing_left();
}

// A hook that writes much and then exits: the end of what it wrote, which
// says why it failed, is read after it exits (it was lost when the exit
// was seen before the pipe was drained).
TEST_F(OciHooksTest, TheLastWordsOfAFailingHookAreKept) {
  bundle(
      {{"createContainer",
        {{{"path", "/bin/sh"},
          {"args",
           {"sh", "-c", "printf '%030000d' 0 >&2; echo ' disk full: the reason' >&2; exit 6"}}}}}});
  const auto created = oci({"create", "--bundle", (temp_ / "bundle").string(), "c1"});
  EXPECT_EQ(created.exit_code, 1);
  EXPECT_NE(created.err.find("exited with status 6: "), std::string::npos) << created.err;
  EXPECT_NE(created.err.find("disk full: the reason"), std::string::npos) << created.err;
  expect_nothing_left();
}

TEST_F(OciHooksTest, AMissingCreateContainerHookIsNamed) {
  bundle({{"createContainer", {{{"path", "/no/such/hook"}}}}});
  const auto created = oci({"create", "--bundle", (temp_ / "bundle").string(), "c1"});
  EXPECT_EQ(created.exit_code, 1);
  EXPECT_NE(created.err.find("hooks.createContainer[0] (/no/such/hook) exited with status 127: "
                             "cannot execute it: errno 2"),
            std::string::npos)
      << created.err;
  expect_nothing_left();
}

TEST_F(OciHooksTest, ACreateContainerHookPastItsTimeoutIsKilledAndCreateFails) {
  bundle({{"createContainer",
           {{{"path", "/bin/sh"}, {"args", {"sh", "-c", "/bin/sleep 60"}}, {"timeout", 1}}}}});
  const auto started = std::chrono::steady_clock::now();
  const auto created = oci({"create", "--bundle", (temp_ / "bundle").string(), "c1"});
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(20));
  EXPECT_EQ(created.exit_code, 1);
  EXPECT_NE(created.err.find("hooks.createContainer[0] (/bin/sh) killed (with its process "
                             "group) after its timeout of 1 s"),
            std::string::npos)
      << created.err;
  expect_nothing_left();
}

// A runtime hook that leaves its process group (a child makes a group of
// its own, the hook joins it) is still killed at its timeout: the group's
// kill missed it, and create waited for it to end by itself. (The child,
// in a group of its own, ends 3 s later.)
TEST_F(OciHooksTest, ARuntimeHookThatLeavesItsGroupIsKilledAtItsTimeout) {
  const std::string escape =
      "import os, time\n"
      "child = os.fork()\n"
      "if child == 0:\n"
      "    os.setpgid(0, 0)\n"
      "    time.sleep(3)\n"
      "    os._exit(0)\n"
      "while os.getpgid(child) != child:\n"  // the group exists before it is joined
      "    time.sleep(0.01)\n"
      "os.setpgid(0, child)\n"
      "time.sleep(30)\n";
  bundle({{"createRuntime",
           {{{"path", "/usr/bin/python3"}, {"args", {"python3", "-c", escape}}, {"timeout", 1}}}}});
  const auto started = std::chrono::steady_clock::now();
  const auto created = oci({"create", "--bundle", (temp_ / "bundle").string(), "c1"});
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(15));
  EXPECT_EQ(created.exit_code, 1);
  EXPECT_NE(created.err.find("after its timeout of 1 s"), std::string::npos) << created.err;
  expect_nothing_left();
}

// podman's and Docker's seccomp profiles answer clone3 with ENOSYS (libc
// then uses clone); the startContainer hook runs after the filter is on.
TEST_F(OciHooksTest, AStartContainerHookRunsUnderAProfileWithoutClone3) {
  auto b =
      bundle({{"startContainer",
               {{{"path", "/bin/sh"}, {"args", {"sh", "-c", "echo hook-ran > /dev/shm/x"}}}}}});
  b.config["process"]["args"] = {"sh", "-c", "cat /dev/shm/x"};
  b.config["linux"]["seccomp"] = {
      {"defaultAction", "SCMP_ACT_ALLOW"},
      {"architectures", {"SCMP_ARCH_X86_64"}},
      {"syscalls", {{{"names", {"clone3"}}, {"action", "SCMP_ACT_ERRNO"}, {"errnoRet", 38}}}}};
  b.write();
  const auto run = oci({"run", "--bundle", b.dir.string(), "c1"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, "hook-ran\n") << run.err;
}

// start returns once the program runs, its startContainer hooks done:
// an exec (which an ordinary user can make only into a process no longer
// undumpable) or a look at /proc right after start finds the program.
TEST_F(OciHooksTest, StartReturnsOnceTheProgramRuns) {
  auto b = bundle({{"startContainer", {{{"path", "/bin/sleep"}, {"args", {"sleep", "0.3"}}}}}});
  b.config["process"]["args"] = {"sleep", "60"};
  b.write();
  ASSERT_EQ(oci({"create", "--bundle", b.dir.string(), "c1"}).exit_code, 0)
      << testing::read_file(log_);
  const pid_t pid = pid_of();
  ASSERT_GT(pid, 0);
  ASSERT_EQ(oci({"start", "c1"}).exit_code, 0) << testing::read_file(log_);
  const std::string status = testing::read_file("/proc/" + std::to_string(pid) + "/status");
  EXPECT_NE(status.find("Name:\tsleep\n"), std::string::npos) << status;
  ASSERT_EQ(oci({"kill", "c1", "KILL"}).exit_code, 0);
  ASSERT_TRUE(wait_for_status(kId, "stopped"));
  EXPECT_EQ(oci({"delete", "c1"}).exit_code, 0);
}

// start does not learn why its process ended before the program: a failing
// startContainer hook ends it with the reason on the container's stderr.
TEST_F(OciHooksTest, AFailingStartContainerHookStopsTheProgram) {
  auto b =
      bundle({{"startContainer",
               {{{"path", "/bin/sh"}, {"args", {"sh", "-c", "echo 'not today' >&2; exit 5"}}}}}});
  b.config["process"]["args"] = {"sh", "-c", "echo program-ran"};
  b.write();
  const auto run = oci({"run", "--bundle", b.dir.string(), "c1"});
  EXPECT_NE(run.exit_code, 0);
  EXPECT_EQ(run.out.find("program-ran"), std::string::npos) << run.out;
  EXPECT_NE(run.err.find("hooks.startContainer[0] (/bin/sh) exited with status 5: not today"),
            std::string::npos)
      << run.err;
  expect_nothing_left();
}

// Without --log, create prints nothing on success (as runc), whatever its
// hooks print.
TEST_F(OciHooksTest, HookOutputStaysOffCreatesStderr) {
  bundle({{"createRuntime", {recording_hook("createRuntime", record_, "echo out; echo err >&2")}}});
  const auto created =
      testing::run_oci_to_files(root_, {"create", "--bundle", (temp_ / "bundle").string(), "c1"},
                                temp_ / "out", temp_ / "err");
  ASSERT_EQ(created.exit_code, 0) << created.err;
  EXPECT_EQ(created.err, "");
  EXPECT_EQ(created.out, "");
}

TEST_F(OciHooksTest, AHookSeesOnlyItsOwnEnvironment) {
  const fs::path env_file = temp_ / "env";
  ::setenv("PULSEBOX_HOOK_TEST_SECRET", "runtime-only", 1);
  bundle({{"createRuntime",
           {{{"path", "/bin/sh"},
             {"args", {"sh", "-c", "/usr/bin/env > " + env_file.string()}},
             {"env", {"HOOK_VAR=given"}}}}}});
  const auto created = oci({"create", "--bundle", (temp_ / "bundle").string(), "c1"});
  ::unsetenv("PULSEBOX_HOOK_TEST_SECRET");
  ASSERT_EQ(created.exit_code, 0) << created.err;
  const std::string env = testing::read_file(env_file);
  EXPECT_NE(env.find("HOOK_VAR=given\n"), std::string::npos) << env;
  EXPECT_EQ(env.find("PULSEBOX_HOOK_TEST_SECRET"), std::string::npos) << env;
  EXPECT_EQ(env.find("PATH=/usr/local"), std::string::npos) << env;
}

TEST_F(OciHooksTest, AFailingCreateRuntimeHookFailsCreateAndLeavesNothing) {
  bundle({{"createRuntime",
           {recording_hook("createRuntime", record_, "echo 'no network for you' >&2; exit 3")}},
          {"poststop", {recording_hook("poststop", record_)}}});
  const auto created = oci({"create", "--bundle", (temp_ / "bundle").string(), "c1"});
  EXPECT_EQ(created.exit_code, 1);
  EXPECT_NE(created.err.find("hooks.createRuntime[0] (/bin/sh): exited with status 3: no "
                             "network for you"),
            std::string::npos)
      << created.err;
  expect_nothing_left();
  // The container's process is gone, and poststop did not run (create never
  // finished).
  const std::string record = testing::read_file(record_);
  ASSERT_EQ(record.rfind("createRuntime creating ", 0), 0u) << record;
  EXPECT_TRUE(process_gone(std::stoi(record.substr(23))));
  EXPECT_EQ(record.find("poststop"), std::string::npos) << record;
}

TEST_F(OciHooksTest, ACreateRuntimeHookPastItsTimeoutIsKilledAndCreateFails) {
  bundle({{"createRuntime",
           {{{"path", "/bin/sh"}, {"args", {"sh", "-c", "/bin/sleep 60"}}, {"timeout", 1}}}}});
  const auto started = std::chrono::steady_clock::now();
  const auto created = oci({"create", "--bundle", (temp_ / "bundle").string(), "c1"});
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(20));
  EXPECT_EQ(created.exit_code, 1);
  EXPECT_NE(created.err.find("hooks.createRuntime[0] (/bin/sh): killed (with its process group) "
                             "after its timeout of 1 s"),
            std::string::npos)
      << created.err;
  expect_nothing_left();
}

TEST_F(OciHooksTest, PoststartAndPoststopFailuresAreWarnings) {
  bundle(
      {{"poststart", {recording_hook("poststart", record_, "echo hello-from-poststart; exit 1")}},
       {"poststop", {recording_hook("poststop", record_, "exit 2")}}});
  ASSERT_EQ(oci({"create", "--bundle", (temp_ / "bundle").string(), "c1"}).exit_code, 0);
  const auto started = oci({"start", "c1"});
  EXPECT_EQ(started.exit_code, 0) << started.err;
  EXPECT_EQ(status_of(kId), "running");
  const auto deleted = oci({"delete", "--force", "c1"});
  EXPECT_EQ(deleted.exit_code, 0) << deleted.err;
  expect_nothing_left();
  EXPECT_NE(testing::read_file(record_).find("poststop stopped"), std::string::npos);
  const std::string log = testing::read_file(log_);
  EXPECT_NE(log.find("hello-from-poststart"), std::string::npos) << log;
  EXPECT_NE(log.find("hooks.poststart[0] (/bin/sh): exited with status 1"), std::string::npos)
      << log;
  EXPECT_NE(log.find("hooks.poststop[0] (/bin/sh): exited with status 2"), std::string::npos)
      << log;
}

}  // namespace
}  // namespace pulsebox
