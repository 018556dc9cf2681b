// The OCI container's process, launched by hand (oci/launch/spawn.h) from a
// plan: it must be set up exactly as the plan says before `start`, stay
// put until the fifo is written, and then be the program itself as pid 1.
// Runs as root (no user namespace, a non-root uid) and as an ordinary user
// (a user namespace mapping the caller to 0).
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <vector>

#include <gtest/gtest.h>

#include "helpers/oci_launch_support.h"
#include "helpers/test_support.h"
#include "linux/cgroup.h"

namespace pulsebox {
namespace {

namespace fs = std::filesystem;

// `text` holds `part`; the whole text is printed when not.
::testing::AssertionResult has(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "no \"" << part << "\" in:\n" << text;
}

constexpr std::uint64_t kKeptCaps =
    (std::uint64_t{1} << CAP_CHOWN) | (std::uint64_t{1} << CAP_NET_BIND_SERVICE);

class OciLaunchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = testing::oci_launch_unavailable();
    PULSEBOX_SKIP_UNLESS(why.empty(), why);
    root_ = dir_ / "rootfs";
    testing::make_busybox_root(root_);
  }

  testing::TempDir dir_;
  fs::path root_;
};

TEST_F(OciLaunchTest, ProcessSeesWhatThePlanSays) {
  // A directory to mask (with a secret in it), a file to mask, a directory
  // made read-only, and a writable cwd: every one writable by the uid
  // inside, so that only the mounts can make them read-only or empty.
  testing::write_file(root_ / "secret" / "key", "top secret\n");
  testing::write_file(root_ / "etc" / "shadowish", "hash\n");
  fs::create_directories(root_ / "data");
  fs::create_directories(root_ / "work");
  for (const fs::path& p : {root_, root_ / "data", root_ / "work"})
    fs::permissions(p, fs::perms::all);

  const std::string script =
      "echo pid=$$; echo host=$(hostname); echo cwd=$(pwd); echo ids=$(id -u):$(id -g);"
      "echo groups=$(id -G);"
      "grep -E '^(CapEff|CapBnd|NoNewPrivs):' /proc/self/status;"
      "echo masked_dir=$(ls -A /secret | wc -l); echo masked_file=[$(cat /etc/shadowish)];"
      "touch /data/x 2>/dev/null && echo data=rw || echo data=ro;"
      "touch /rootfile 2>/dev/null && echo root=rw || echo root=ro;"
      "touch /tmp/x && echo tmp=rw; umask; echo nofile=$(ulimit -n);"
      "echo domain=$(cat /proc/sys/kernel/domainname);"
      "echo oom=$(cat /proc/self/oom_score_adj); exit 7";
  auto plan = testing::busybox_plan(root_, script);
  linux_api::MountStep tmp;
  tmp.op = linux_api::MountOp::Tmpfs;
  tmp.target = "/tmp";
  tmp.data = "mode=1777";
  tmp.stage = "mounting /tmp";
  plan.mounts.push_back(tmp);
  plan.hostname = "pulsebox-oci-test";
  plan.cwd = "/work";
  plan.masked_paths = {"/secret", "/etc/shadowish", "/no/such/path"};
  plan.readonly_paths = {"/data"};
  plan.root_readonly = true;
  plan.umask = 027;
  plan.domainname = "pulsebox.test";
  plan.rlimits = {{RLIMIT_NOFILE, 100, 200}};
  plan.oom_score_adj = 500;
  plan.no_new_privileges = true;
  plan.capabilities = {kKeptCaps, kKeptCaps, kKeptCaps, kKeptCaps, kKeptCaps};
  const bool as_root = ::geteuid() == 0;
  if (as_root) {
    plan.uid = 1000;
    plan.gid = 1000;
    plan.additional_gids = {1001, 1002};
  }

  const auto run = testing::launch_busybox(plan);
  ASSERT_EQ(run.setup_error, "");
  EXPECT_EQ(run.before_start, "") << "the program ran before start";
  const std::string& out = run.output;
  EXPECT_TRUE(has(out, "pid=1\n"));
  EXPECT_TRUE(has(out, "host=pulsebox-oci-test\n"));
  EXPECT_TRUE(has(out, "cwd=/work\n"));
  EXPECT_TRUE(has(out, as_root ? "ids=1000:1000\n" : "ids=0:0\n"));
  if (as_root) {
    EXPECT_TRUE(has(out, "groups=1000 1001 1002\n"));
  }
  // Root keeps its bounding set through execve, another uid its ambient
  // set: both are the two capabilities kept.
  EXPECT_TRUE(has(out, "CapEff:\t0000000000000401\n"));
  EXPECT_TRUE(has(out, "CapBnd:\t0000000000000401\n"));
  EXPECT_TRUE(has(out, "NoNewPrivs:\t1\n"));
  EXPECT_TRUE(has(out, "masked_dir=0\n"));
  EXPECT_TRUE(has(out, "masked_file=[]\n"));
  EXPECT_TRUE(has(out, "data=ro\n"));
  EXPECT_TRUE(has(out, "root=ro\n"));
  EXPECT_TRUE(has(out, "tmp=rw\n"));
  EXPECT_TRUE(has(out, "0027\n"));
  EXPECT_TRUE(has(out, "nofile=100\n"));
  EXPECT_TRUE(has(out, "domain=pulsebox.test\n"));
  EXPECT_TRUE(has(out, "oom=500\n"));
  EXPECT_FALSE(has(out, "top secret"));
  ASSERT_TRUE(WIFEXITED(run.wait_status)) << run.wait_status << "\n" << out;
  EXPECT_EQ(WEXITSTATUS(run.wait_status), 7) << out;
  // Nothing was written into the image through the read-only mounts.
  EXPECT_FALSE(fs::exists(root_ / "data" / "x"));
  EXPECT_FALSE(fs::exists(root_ / "rootfile"));
  EXPECT_EQ(testing::read_file(root_ / "secret" / "key"), "top secret\n");
}

TEST_F(OciLaunchTest, FailedStepComesBackAsData) {
  auto plan = testing::busybox_plan(root_, "echo should not run");
  plan.cwd = "/does-not-exist";
  const auto run = testing::launch_busybox(plan);
  EXPECT_EQ(run.setup_stage, "changing to the working directory");
  EXPECT_EQ(run.setup_errno, ENOENT);
  EXPECT_TRUE(has(run.setup_error, "/does-not-exist"));
  EXPECT_EQ(run.output, "");
  EXPECT_TRUE(WIFEXITED(run.wait_status) || WIFSIGNALED(run.wait_status));
}

TEST_F(OciLaunchTest, ConsoleMasterComesOnTheSocket) {
  auto plan =
      testing::busybox_plan(root_,
                            "echo tty=$(readlink /proc/self/fd/0); test -t 1 && echo on-a-tty; "
                            "stat -c console=%t:%T /dev/console");
  testing::add_devpts(plan);
  plan.console_rows = 40;
  plan.console_columns = 100;
  const auto run = testing::launch_busybox(plan, /*console=*/true);
  ASSERT_EQ(run.setup_error, "");
  EXPECT_EQ(run.console_name.rfind("/dev/pts/", 0), 0U) << run.console_name;
  EXPECT_TRUE(has(run.output, "tty=" + run.console_name + "\r\n"));
  EXPECT_TRUE(has(run.output, "on-a-tty\r\n"));
  // /dev/console is the pty's slave (major 136, in hex 88).
  EXPECT_TRUE(has(run.output, "console=88:"));
  ASSERT_TRUE(WIFEXITED(run.wait_status)) << run.wait_status;
  EXPECT_EQ(WEXITSTATUS(run.wait_status), 0);
}

// Without no_new_privs (podman's default) the filter is loaded while the
// process still holds CAP_SYS_ADMIN, before the id switch: the steps after
// it must still pass, and the program runs under it.
TEST_F(OciLaunchTest, SeccompFilterAppliesWithoutNoNewPrivs) {
  auto plan = testing::busybox_plan(root_,
                                    "mkdir /tmp/d 2>/dev/null; echo mkdir=$?;"
                                    "grep -E '^(Seccomp|NoNewPrivs):' /proc/self/status");
  linux_api::MountStep tmp;
  tmp.op = linux_api::MountOp::Tmpfs;
  tmp.target = "/tmp";
  plan.mounts.push_back(tmp);
  const auto deny = [](unsigned number) {
    return std::vector<sock_filter>{
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, number, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA))};
  };
  plan.seccomp_program = {BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
                          BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
                          BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
                          BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr))};
  for (const unsigned number : {SYS_mkdir, SYS_mkdirat}) {
    const auto check = deny(number);
    plan.seccomp_program.insert(plan.seccomp_program.end(), check.begin(), check.end());
  }
  plan.seccomp_program.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  plan.no_new_privileges = false;
  plan.capabilities = {kKeptCaps, kKeptCaps, kKeptCaps, kKeptCaps, kKeptCaps};
  const auto run = testing::launch_busybox(plan);
  ASSERT_EQ(run.setup_error, "");
  EXPECT_TRUE(has(run.output, "mkdir=1\n"));
  EXPECT_TRUE(has(run.output, "Seccomp:\t2\n"));
  EXPECT_TRUE(has(run.output, "NoNewPrivs:\t0\n"));
  ASSERT_TRUE(WIFEXITED(run.wait_status)) << run.wait_status;
  EXPECT_EQ(WEXITSTATUS(run.wait_status), 0);
}

// CLONE_INTO_CGROUP: the process starts in the unified leaf it is given (a
// leaf of this test's own, removed afterwards).
TEST_F(OciLaunchTest, StartsInTheGivenCgroup) {
  PULSEBOX_SKIP_UNLESS_ROOT("makes a cgroup of its own in the unified hierarchy");
  const std::string unified = linux_api::discover_cgroups().unified_mount;
  PULSEBOX_SKIP_UNLESS(!unified.empty(), "no cgroup2 hierarchy mounted");
  const std::string name = "pulsebox-test-oci-" + std::to_string(::getpid());
  const fs::path leaf = fs::path(unified) / name;
  ASSERT_TRUE(fs::create_directory(leaf)) << leaf;
  const int leaf_fd = ::open(leaf.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(leaf_fd, 0);
  auto plan = testing::busybox_plan(root_, "grep '^0::' /proc/self/cgroup");
  plan.cgroup_fd = leaf_fd;
  const auto run = testing::launch_busybox(plan);
  ::close(leaf_fd);
  EXPECT_EQ(run.setup_error, "");
  EXPECT_TRUE(has(run.output, "0::/" + name + "\n"));
  EXPECT_EQ(::rmdir(leaf.c_str()), 0) << leaf;
}

// sysfs and mqueue in the container's own network and ipc namespaces; as
// root (no user namespace) a device node made with mknod.
TEST_F(OciLaunchTest, SysfsMqueueAndDevices) {
  const bool as_root = ::geteuid() == 0;
  auto plan = testing::busybox_plan(
      root_,
      "test -d /sys/class/net && echo sysfs=ok; grep -c ' /dev/mqueue mqueue ' /proc/self/mounts;"
      "test -c /dev/zero && head -c 3 /dev/zero | wc -c");
  linux_api::MountStep sys;
  sys.op = linux_api::MountOp::Sysfs;
  sys.target = "/sys";
  sys.flags = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC;
  plan.mounts.push_back(sys);
  linux_api::MountStep mqueue;
  mqueue.op = linux_api::MountOp::Mqueue;
  mqueue.target = "/dev/mqueue";
  mqueue.flags = MS_NOSUID | MS_NODEV | MS_NOEXEC;
  plan.mounts.push_back(mqueue);
  if (as_root) {
    linux_api::MountStep zero;
    zero.op = linux_api::MountOp::MakeDevice;
    zero.target = "/dev/zero";
    zero.mode = S_IFCHR | 0666;
    zero.device = makedev(1, 5);
    plan.mounts.push_back(zero);
  }
  const auto run = testing::launch_busybox(plan);
  ASSERT_EQ(run.setup_error, "");
  EXPECT_TRUE(has(run.output, "sysfs=ok\n1\n"));
  if (as_root) {
    EXPECT_TRUE(has(run.output, "\n3\n"));
  }
  ASSERT_TRUE(WIFEXITED(run.wait_status)) << run.wait_status;
}

TEST_F(OciLaunchTest, MissingProgramIsReportedAfterStart) {
  auto plan = testing::busybox_plan(root_, "");
  plan.exec_candidates = {"/bin/no-such-program"};
  const auto run = testing::launch_busybox(plan);
  ASSERT_EQ(run.setup_error, "");
  ASSERT_TRUE(WIFEXITED(run.wait_status)) << run.wait_status;
  EXPECT_EQ(WEXITSTATUS(run.wait_status), 127);
}

}  // namespace
}  // namespace pulsebox
