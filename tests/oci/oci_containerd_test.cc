// containerd runs its containers on pulsebox-runc (`ctr run --runc-binary`,
// design §6 engines). Root only, and only with containerd and ctr
// installed. The test starts its own containerd (root, state and sockets
// in a TempDir, no CRI plugin, a private mount namespace) and uses a
// namespace of its own; helpers/oci_engine.h removes what the shim leaves
// under /run/containerd. ctr gives a container a new, empty network
// namespace unless told --net-host, which this test never passes; each test
// checks the host's network did not change.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <random>
#include <sstream>
#include <thread>

#include "helpers/oci_engine.h"
#include "helpers/oci_launch_support.h"
#include "helpers/test_support.h"

namespace pulsebox {
namespace {

namespace fs = std::filesystem;

std::string random_suffix() {
  std::random_device device;
  return std::to_string(std::uniform_int_distribution<unsigned>(100000, 999999)(device));
}

// The leaf's memory limit file, on a v1 hierarchy or the unified one.
fs::path memory_limit_file(const std::string& cgroup) {
  if (fs::exists("/sys/fs/cgroup/memory/memory.limit_in_bytes"))
    return fs::path("/sys/fs/cgroup/memory") / cgroup / "memory.limit_in_bytes";
  return fs::path("/sys/fs/cgroup") / cgroup / "memory.max";
}

class OciContainerdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PULSEBOX_SKIP_UNLESS_ROOT("containerd needs root");
    if (const auto why = testing::oci_launch_unavailable(); !why.empty()) GTEST_SKIP() << why;
    for (const char* tool : {"/usr/bin/containerd", "/usr/bin/ctr",
                             "/usr/bin/containerd-shim-runc-v2", "/usr/bin/unshare"}) {
      if (::access(tool, X_OK) != 0) GTEST_SKIP() << tool << " is not installed";
    }
    const char* runc = std::getenv("PULSEBOX_RUNC");
    ASSERT_NE(runc, nullptr) << "PULSEBOX_RUNC is not set (meson sets it)";
    runtime_ = fs::absolute(runc);
    network_before_ = testing::HostNetwork::snapshot();

    testing::make_busybox_root(temp_ / "rootfs");
    std::string error;
    const std::string digest =
        testing::write_oci_image_tar(temp_ / "rootfs", temp_.path(), temp_ / "image.tar", error);
    ASSERT_FALSE(digest.empty()) << error;
    image_ = "localhost/bb@" + digest;

    fs::create_directories(temp_ / "containerd");
    const std::string why =
        containerd_.start(temp_ / "containerd", "pulsebox-test-" + random_suffix());
    ASSERT_TRUE(why.empty()) << why;
    started_ = true;
    const auto imported = containerd_.ctr({"images", "import", "--base-name", "localhost/bb",
                                           "--digests", (temp_ / "image.tar").string()});
    ASSERT_EQ(imported.exit_code, 0) << imported.output;
  }

  void TearDown() override {
    if (!started_) return;
    const std::string left = containerd_.stop();
    EXPECT_EQ(left, "");
    EXPECT_FALSE(fs::exists(containerd_.runtime_root()));
    EXPECT_TRUE(testing::HostNetwork::snapshot() == network_before_)
        << "the host's ip_forward, links or iptables rules changed";
  }

  // `ctr run --runc-binary pulsebox-runc (or `binary`) EXTRA... IMAGE ID ARGS...`.
  testing::ToolRun run(const std::vector<std::string>& extra, const std::string& id,
                       const std::vector<std::string>& args, const fs::path& binary = {}) {
    std::vector<std::string> argv = {"run", "--runc-binary",
                                     binary.empty() ? runtime_.string() : binary.string()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    argv.insert(argv.end(), {image_, id});
    argv.insert(argv.end(), args.begin(), args.end());
    return containerd_.ctr(argv);
  }

  // `pulsebox-runc --root <the shim's root> ARGS...`: what the shim sees.
  testing::ToolRun runtime(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {runtime_.string(), "--root",
                                     containerd_.runtime_root().string()};
    argv.insert(argv.end(), args.begin(), args.end());
    return testing::run_tool(argv);
  }

  // Waits (bounded) until `ctr task ls` shows `id` in `status`.
  bool wait_for_status(const std::string& id, const std::string& status) {
    for (int i = 0; i < 100; ++i) {
      const auto tasks = containerd_.ctr({"task", "ls"});
      for (std::size_t at = tasks.output.find(id + " "); at != std::string::npos;
           at = tasks.output.find(id + " ", at + 1)) {
        const auto end = tasks.output.find('\n', at);
        if (tasks.output.substr(at, end - at).find(status) != std::string::npos) return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

  // The container's cgroup as containerd names it (cgroupsPath /<ns>/<id>).
  std::string cgroup_of(const std::string& id) const { return containerd_.ns() + "/" + id; }

  testing::TempDir temp_;
  testing::PrivateContainerd containerd_;
  bool started_ = false;
  fs::path runtime_;
  std::string image_;
  testing::HostNetwork network_before_;
};

TEST_F(OciContainerdTest, RunRmEchoesHiAndPassesTheExitStatus) {
  // A wrapper records each call the shim makes and runs pulsebox-runc with
  // it; after a create it records the runtime's own state of the container
  // too, which names pulsebox's enforcement: so the calls prove which
  // runtime ran, and show what the shim asked for when something fails.
  const fs::path calls = temp_ / "calls";
  const fs::path wrapper = temp_ / "recording-runc";
  const std::string binary = "'" + runtime_.string() + "'";
  const std::string log = "'" + calls.string() + "'";
  const std::string root = "'" + containerd_.runtime_root().string() + "'";
  std::string script = "#!/bin/sh\n";
  script += "echo \"$*\" >> " + log + "\n";
  script += binary + " \"$@\"\nstatus=$?\n";
  script += "for id; do :; done\n";  // the last argument: the container ID
  script += "case \" $* \" in *\" create \"*) " + binary + " --root " + root +
            " state \"$id\" >> " + log + " 2>&1;; esac\n";
  script += "exit $status\n";
  testing::write_file(wrapper, script);
  fs::permissions(wrapper, fs::perms::owner_all);
  const auto hi = run({"--rm"}, "t1", {"echo", "hi"}, wrapper);
  EXPECT_EQ(hi.exit_code, 0) << hi.output;
  EXPECT_EQ(hi.output, "hi\n");
  const auto three = run({"--rm"}, "t2", {"sh", "-c", "exit 3"}, wrapper);
  EXPECT_EQ(three.exit_code, 3) << three.output;
  const std::string recorded = testing::read_file(calls);
  const std::string globals = "--root " + containerd_.runtime_root().string() + " --log ";
  for (const std::string id : {"t1", "t2"}) {
    for (const std::string& call : {std::string("create --bundle "), "start " + id, "delete " + id})
      EXPECT_NE(recorded.find(call), std::string::npos) << call << " in\n" << recorded;
  }
  EXPECT_NE(recorded.find("org.pulsebox.enforced"), std::string::npos) << recorded;
  EXPECT_NE(recorded.find(globals), std::string::npos) << recorded;
  // --rm removed each container from the runtime's root as well.
  EXPECT_EQ(runtime({"list", "-q"}).output, "");
}

TEST_F(OciContainerdTest, OnlyLoopbackInTheContainer) {
  const auto links = run({"--rm"}, "t1", {"ls", "/sys/class/net"});
  EXPECT_EQ(links.exit_code, 0) << links.output;
  EXPECT_EQ(links.output, "lo\n");
}

TEST_F(OciContainerdTest, DetachedTaskPsKillDeleteLeaveNothing) {
  const std::string id = "t1";
  const auto started = run({"-d", "--memory-limit", "33554432"}, id, {"sleep", "100"});
  ASSERT_EQ(started.exit_code, 0) << started.output;
  ASSERT_TRUE(wait_for_status(id, "RUNNING"));

  // pulsebox-runc made it: its state carries pulsebox's enforcement report.
  const auto state = runtime({"state", id});
  ASSERT_EQ(state.exit_code, 0) << state.output;
  EXPECT_NE(state.output.find("org.pulsebox.enforced"), std::string::npos) << state.output;

  // --memory-limit reached the leaf containerd named, /<ns>/<id>.
  EXPECT_EQ(testing::read_file(memory_limit_file(cgroup_of(id))), "33554432\n");

  // `ctr task ps` calls `ps --format json`: the one process, pid 1 inside.
  const auto ps = containerd_.ctr({"task", "ps", id});
  ASSERT_EQ(ps.exit_code, 0) << ps.output;
  const auto first_line_end = ps.output.find('\n');
  ASSERT_NE(first_line_end, std::string::npos) << ps.output;
  const pid_t pid = std::atoi(ps.output.c_str() + first_line_end + 1);
  ASSERT_GT(pid, 0) << ps.output;
  EXPECT_NE(testing::read_file("/proc/" + std::to_string(pid) + "/status").find("NSpid:"),
            std::string::npos);

  const auto killed = containerd_.ctr({"task", "kill", "-s", "9", id});
  EXPECT_EQ(killed.exit_code, 0) << killed.output;
  ASSERT_TRUE(wait_for_status(id, "STOPPED"));
  // A kill that comes too late fails in runc's words, which the shim maps
  // to "process already finished" rather than a failed kill.
  const auto late = runtime({"kill", id, "9"});
  EXPECT_NE(late.exit_code, 0);
  EXPECT_NE(late.output.find("container not running"), std::string::npos) << late.output;
  const auto deleted = containerd_.ctr({"task", "delete", id});
  EXPECT_EQ(deleted.exit_code, 0) << deleted.output;
  const auto removed = containerd_.ctr({"containers", "rm", id});
  EXPECT_EQ(removed.exit_code, 0) << removed.output;

  // Nothing left: no entry under the runtime's root, no leaf, no process.
  EXPECT_TRUE(fs::is_empty(containerd_.runtime_root()));
  for (const char* hierarchy : {"memory", "pids", "devices", "cpu", "unified", ""}) {
    const fs::path leaf = fs::path("/sys/fs/cgroup") / hierarchy / cgroup_of(id);
    EXPECT_FALSE(fs::exists(leaf)) << leaf;
  }
  EXPECT_NE(::kill(pid, 0), 0);
}

TEST_F(OciContainerdTest, KillAllEndsEveryProcessOfTheTask) {
  const std::string id = "t1";
  const auto started = run({"-d"}, id, {"sh", "-c", "sleep 100 & sleep 100"});
  ASSERT_EQ(started.exit_code, 0) << started.output;
  ASSERT_TRUE(wait_for_status(id, "RUNNING"));
  // Two processes: the background sleep and the last one, which sh runs in
  // its own place (bounded wait for both to show).
  std::vector<pid_t> pids;
  for (int i = 0; i < 50 && pids.size() < 2; ++i) {
    pids.clear();
    std::istringstream lines(containerd_.ctr({"task", "ps", id}).output);
    std::string line;
    std::getline(lines, line);  // the header
    while (std::getline(lines, line))
      if (const pid_t pid = std::atoi(line.c_str()); pid > 0) pids.push_back(pid);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(pids.size(), 2u);
  // Which is the container's pid 1 (NSpid ends in 1) and which the other.
  const auto is_init = [](pid_t pid) {
    const std::string status = testing::read_file("/proc/" + std::to_string(pid) + "/status");
    const auto at = status.find("NSpid:");
    const auto end = status.find('\n', at);
    return at != std::string::npos && status.substr(at, end - at).ends_with("\t1");
  };
  const pid_t init = is_init(pids[0]) ? pids[0] : pids[1];
  const pid_t other = init == pids[0] ? pids[1] : pids[0];
  ASSERT_TRUE(is_init(init));
  ASSERT_FALSE(is_init(other));
  // TERM to every process in the container's cgroup: the background sleep
  // dies of it, pid 1 (no handler) ignores it. A kill of pid 1 alone would
  // leave the other one running.
  const auto termed = containerd_.ctr({"task", "kill", "--all", "-s", "15", id});
  EXPECT_EQ(termed.exit_code, 0) << termed.output;
  bool gone = false;
  for (int i = 0; i < 50 && !gone; ++i) {
    // Gone, or a zombie of pid 1 (which never reaps it).
    const std::string status = testing::read_file("/proc/" + std::to_string(other) + "/status");
    gone = status.empty() || status.find("State:\tZ") != std::string::npos;
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(gone) << "kill --all did not reach pid " << other;
  EXPECT_EQ(::kill(init, 0), 0);
  const auto killed = containerd_.ctr({"task", "kill", "--all", "-s", "9", id});
  EXPECT_EQ(killed.exit_code, 0) << killed.output;
  ASSERT_TRUE(wait_for_status(id, "STOPPED"));
  for (const pid_t pid : pids)
    EXPECT_NE(::kill(pid, 0), 0) << pid;
  EXPECT_EQ(containerd_.ctr({"task", "delete", id}).exit_code, 0);
  EXPECT_EQ(containerd_.ctr({"containers", "rm", id}).exit_code, 0);
  EXPECT_TRUE(fs::is_empty(containerd_.runtime_root()));
}

TEST_F(OciContainerdTest, TaskExecRunsInTheContainer) {
  const std::string id = "t1";
  const auto started = run({"-d"}, id, {"sleep", "100"});
  ASSERT_EQ(started.exit_code, 0) << started.output;
  ASSERT_TRUE(wait_for_status(id, "RUNNING"));
  const auto exec = containerd_.ctr(
      {"task", "exec", "--exec-id", "e1", id, "sh", "-c", "echo from-exec; exit 4"});
  EXPECT_EQ(exec.exit_code, 4) << exec.output;
  EXPECT_EQ(exec.output, "from-exec\n");
  EXPECT_EQ(containerd_.ctr({"task", "kill", "-s", "9", id}).exit_code, 0);
  ASSERT_TRUE(wait_for_status(id, "STOPPED"));
  EXPECT_EQ(containerd_.ctr({"task", "delete", id}).exit_code, 0);
  EXPECT_EQ(containerd_.ctr({"containers", "rm", id}).exit_code, 0);
  EXPECT_TRUE(fs::is_empty(containerd_.runtime_root()));
}

}  // namespace
}  // namespace pulsebox
