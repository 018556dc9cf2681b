// podman runs its containers on pulsebox-runc (design §6, milestone 1).
// Root only, and only with podman installed. Everything podman keeps is
// under a TempDir and every podman command runs in a mount namespace of its
// own (helpers/podman_env.h). Never podman's default network: it changes
// the host (a bridge, iptables chains, ip_forward), so every run says
// --network none.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers/podman_env.h"
#include "helpers/test_support.h"
#include "linux/cgroup.h"

namespace pulsebox {
namespace {

namespace fs = std::filesystem;

using testing::PodmanEnv;
using testing::ToolRun;

class OciPodmanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const auto why = PodmanEnv::unavailable(); !why.empty()) GTEST_SKIP() << why;
    ASSERT_NO_FATAL_FAILURE(podman_.set_up());
  }

  ToolRun podman(const std::vector<std::string>& args) { return podman_.run(args); }

  // `podman run --rm --network none EXTRA... IMAGE sh -c SCRIPT`.
  ToolRun run(const std::vector<std::string>& extra, const std::string& script) {
    std::vector<std::string> args = {"run", "--rm", "--network", "none"};
    args.insert(args.end(), extra.begin(), extra.end());
    args.insert(args.end(), {kImage, "sh", "-c", script});
    return podman(args);
  }

  static constexpr const char* kImage = PodmanEnv::kImage;
  testing::TempDir temp_;
  PodmanEnv podman_{temp_.path()};
};

TEST_F(OciPodmanTest, RunRmEchoesHi) {
  const auto result = podman({"run", "--rm", "--network", "none", kImage, "echo", "hi"});
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(result.output, "hi\n");
}

TEST_F(OciPodmanTest, ExitStatusOnlyLoopbackAndSeccomp) {
  const auto result = run({}, "ls /sys/class/net; grep -E '^Seccomp:' /proc/self/status; exit 7");
  EXPECT_EQ(result.exit_code, 7) << result.output;
  // Only lo, and podman's seccomp profile in force (mode 2: a filter).
  EXPECT_EQ(result.output, "lo\nSeccomp:\t2\n");
}

TEST_F(OciPodmanTest, VolumeWriteIsSeenOnTheHost) {
  const fs::path shared = temp_ / "shared";
  fs::create_directories(shared);
  const auto result = run({"-v", shared.string() + ":/data"}, "echo written > /data/f");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(testing::read_file(shared / "f"), "written\n");
}

TEST_F(OciPodmanTest, MemoryAndPidsLimitsAreTheContainersOwn) {
  if (!fs::exists("/sys/fs/cgroup/memory/memory.limit_in_bytes"))
    GTEST_SKIP() << "reads cgroup v1 files (this host is not hybrid)";
  const auto result = run({"--memory", "32m", "--pids-limit", "16"},
                          "cat /sys/fs/cgroup/memory/memory.limit_in_bytes "
                          "/sys/fs/cgroup/pids/pids.max");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(result.output, "33554432\n16\n");
}

// --cpuset-cpus and --device-read-bps (linux.resources.cpu.cpus and
// blockIO.throttleReadBpsDevice) in the container's own v1 leaves.
TEST_F(OciPodmanTest, CpusetAndBlockIoLimitsAreTheContainersOwn) {
  if (!fs::exists("/sys/fs/cgroup/cpuset/cpuset.cpus") ||
      !fs::exists("/sys/fs/cgroup/blkio/blkio.throttle.read_bps_device"))
    GTEST_SKIP() << "reads cgroup v1 cpuset and blkio files (this host is not hybrid)";
  if (!fs::exists("/sys/block/vda/dev")) GTEST_SKIP() << "no /dev/vda to throttle";
  auto device = testing::read_file("/sys/block/vda/dev");
  while (!device.empty() && device.back() == '\n')
    device.pop_back();
  const auto result = run({"--cpuset-cpus", "0", "--device-read-bps", "/dev/vda:1mb"},
                          "cat /sys/fs/cgroup/cpuset/cpuset.cpus "
                          "/sys/fs/cgroup/blkio/blkio.throttle.read_bps_device");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(result.output, "0\n" + device + " 1048576\n");
}

TEST_F(OciPodmanTest, MemoryAndPidsLimitsAreEnforced) {
  // A hog past memory + swap (podman gives swap = 2 x memory) is killed.
  const auto hog = run({"--memory", "32m"}, "head -c 300m /dev/zero | busybox tail > /dev/null");
  EXPECT_EQ(hog.exit_code, 137) << hog.output;
  // A bounded fork loop meets the pids limit.
  const auto forks = run({"--pids-limit", "16"},
                         "for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do "
                         "sleep 2 & done; wait");
  EXPECT_NE(forks.output.find("can't fork"), std::string::npos) << forks.output;
}

TEST_F(OciPodmanTest, ReadOnlyRoot) {
  const auto plain = run({"--read-only", "--read-only-tmpfs=false"},
                         "touch /x 2>/dev/null && echo writable || echo read-only");
  EXPECT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_EQ(plain.output, "read-only\n");
  // podman's default --read-only-tmpfs: /tmp, /run and /var/tmp are
  // tmpcopyup tmpfs mounts, writable on a read-only root.
  const auto tmpfs = run({"--read-only"},
                         "touch /x 2>/dev/null && echo writable || echo read-only; "
                         "touch /tmp/x /run/x /var/tmp/x && echo tmp-writable");
  EXPECT_EQ(tmpfs.exit_code, 0) << tmpfs.output;
  EXPECT_EQ(tmpfs.output, "read-only\ntmp-writable\n");
}

// The join path: podman --network ns:PATH names a network namespace this
// test made (held by an `unshare -n sleep`, killed by its pid), and the
// container runs in it. Never podman's default network.
TEST_F(OciPodmanTest, NetworkNamespaceJoinedByPath) {
  const pid_t holder = ::fork();
  ASSERT_GE(holder, 0);
  if (holder == 0) {
    ::execl("/usr/bin/unshare", "unshare", "-n", "sleep", "60", nullptr);
    ::_exit(127);
  }
  const std::string ns = "/proc/" + std::to_string(holder) + "/ns/net";
  std::error_code error;
  const auto own = fs::read_symlink("/proc/self/ns/net", error);
  fs::path joined;
  for (int i = 0; i < 250; ++i) {
    if (testing::read_file("/proc/" + std::to_string(holder) + "/comm") == "sleep\n") {
      joined = fs::read_symlink(ns, error);
      break;
    }
    ::usleep(20 * 1000);
  }
  ToolRun result;
  if (!joined.empty() && joined != own) {
    result =
        podman({"run", "--rm", "--network", "ns:" + ns, kImage, "readlink", "/proc/self/ns/net"});
  }
  ::kill(holder, SIGKILL);
  ::waitpid(holder, nullptr, 0);
  ASSERT_FALSE(joined.empty()) << "unshare -n did not start";
  ASSERT_NE(joined, own);
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(result.output, joined.string() + "\n");
}

// podman exec (conmon calls `exec --pid-file P --process F --detach ID`)
// into a detached container, then stop -t 1 and rm leave nothing: no state
// directory under pulsebox-runc's default root, no cgroup leaf.
TEST_F(OciPodmanTest, ExecIntoADetachedContainerThenStopAndRemove) {
  const auto started = podman({"run", "-d", "--network", "none", kImage, "sleep", "60"});
  ASSERT_EQ(started.exit_code, 0) << started.output;
  std::string id = started.output;
  while (!id.empty() && (id.back() == '\n' || id.back() == '\r'))
    id.pop_back();
  id = id.substr(id.rfind('\n') + 1);  // the last line is the container's ID
  ASSERT_EQ(id.size(), 64U) << started.output;

  const auto cmdline = podman({"exec", id, "cat", "/proc/1/cmdline"});
  EXPECT_EQ(cmdline.exit_code, 0) << cmdline.output;
  EXPECT_EQ(cmdline.output, std::string("sleep\0"
                                        "60\0",
                                        9))
      << cmdline.output;
  const auto status = podman({"exec", id, "sh", "-c", "exit 7"});
  EXPECT_EQ(status.exit_code, 7) << status.output;
  // -t: conmon passes --console-socket S --tty.
  const auto tty = podman({"exec", "-t", id, "sh", "-c", "test -t 1 && echo on-a-tty"});
  EXPECT_EQ(tty.exit_code, 0) << tty.output;
  EXPECT_NE(tty.output.find("on-a-tty"), std::string::npos) << tty.output;

  const auto stopped = podman({"stop", "-t", "1", id});
  EXPECT_EQ(stopped.exit_code, 0) << stopped.output;
  const auto removed = podman({"rm", id});
  EXPECT_EQ(removed.exit_code, 0) << removed.output;
  EXPECT_FALSE(fs::exists(fs::path("/run/pulsebox-oci") / id));
  const auto host = linux_api::discover_cgroups();
  for (const auto& [name, mount] : host.hierarchy_mounts) {
    EXPECT_FALSE(fs::exists(fs::path(mount) / "libpod_parent" / ("libpod-" + id)))
        << name << " keeps the container's leaf";
  }
}

}  // namespace
}  // namespace pulsebox
