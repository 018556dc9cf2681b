// Device rules on cgroup v2 (oci/device_filter.h): the kernel enforces the
// program create attaches to the container's unified leaf.
//   - DeviceProgramDecidesInAUnifiedLeaf: the generated program, attached to
//     a cgroup of the test's own, decides opens and mknods of a process in
//     it. This works on a hybrid host too (the kernel asks the program of
//     the task's cgroup2 cgroup before the v1 controller), so it runs here.
//   - RootContainerCannotOpenAHostDisk: the CLI on a pure cgroup v2 host
//     (tools/vm-test runs it): a root container with CAP_MKNOD may make
//     /dev/sdx but opening it gives EPERM, and /dev/null works.
// Root only.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <random>

#include "core/unique_fd.h"
#include "helpers/oci_bundle.h"
#include "helpers/oci_fixture.h"
#include "helpers/oci_launch_support.h"
#include "helpers/test_support.h"
#include "linux/cgroup.h"
#include "oci/device_filter.h"

namespace pulsebox {
namespace {

namespace fs = std::filesystem;

oci::spec::DeviceRule rule(bool allow, char type, std::int64_t major, std::int64_t minor,
                           const char* access) {
  oci::spec::DeviceRule result;
  result.allow = allow;
  result.type = type;
  result.major = major;
  result.minor = minor;
  result.access = access;
  return result;
}

std::string random_name() {
  std::random_device random;
  return "pulsebox-test-oci-" + std::to_string(random());
}

// In a child moved into `cgroup`: each step's errno (0 for success), as
// bytes on a pipe.
std::vector<int> steps_in_cgroup(const fs::path& cgroup, const fs::path& scratch) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return {};
  const pid_t pid = ::fork();
  if (pid == 0) {
    const auto report = [&](int result) {
      const unsigned char code = static_cast<unsigned char>(result < 0 ? errno : 0);
      (void)!::write(pipe_fds[1], &code, 1);
    };
    const int procs = ::open((cgroup / "cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
    if (procs < 0 || ::write(procs, "0", 1) != 1) ::_exit(2);
    int fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);  // c 1:3, allowed
    report(fd);
    fd = ::open("/dev/zero", O_RDONLY | O_CLOEXEC);  // c 1:5, denied
    report(fd);
    // b 8:0: mknod allowed, read denied.
    report(::mknod((scratch / "sdx").c_str(), S_IFBLK | 0600, ::makedev(8, 0)));
    report(::open((scratch / "sdx").c_str(), O_RDONLY | O_CLOEXEC));
    // b 8:1: nothing allowed, not even the node.
    report(::mknod((scratch / "sdy").c_str(), S_IFBLK | 0600, ::makedev(8, 1)));
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  std::vector<int> codes;
  unsigned char code = 0;
  while (codes.size() < 8 && ::read(pipe_fds[0], &code, 1) == 1)
    codes.push_back(code);
  ::close(pipe_fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  return codes;
}

TEST(OciV2Devices, DeviceProgramDecidesInAUnifiedLeaf) {
  PULSEBOX_SKIP_UNLESS_ROOT("loading a device program needs CAP_SYS_ADMIN");
  const auto host = linux_api::discover_cgroups();
  if (!host.hierarchy_mounts.count("")) GTEST_SKIP() << "no cgroup2 hierarchy mounted";
  const fs::path cgroup = fs::path(host.hierarchy_mounts.at("")) / random_name();
  ASSERT_EQ(::mkdir(cgroup.c_str(), 0755), 0) << cgroup << ": " << std::strerror(errno);
  testing::TempDir scratch;
  std::vector<int> codes;
  {
    core::UniqueFd dir(::open(cgroup.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    auto program =
        oci::device_filter_program({rule(false, 'a', -1, -1, "rwm"), rule(true, 'c', 1, 3, "rwm"),
                                    rule(true, 'b', 8, 0, "m")});
    ASSERT_TRUE(program) << program.error().message();
    const auto attached = oci::attach_device_filter(dir.get(), *program);
    if (attached.ok()) codes = steps_in_cgroup(cgroup, scratch.path());
    ::rmdir(cgroup.c_str());
    ASSERT_TRUE(attached.ok()) << attached.error().message();
  }
  ASSERT_EQ(codes.size(), 5u);
  EXPECT_EQ(codes[0], 0) << "/dev/null: " << std::strerror(codes[0]);
  EXPECT_EQ(codes[1], EPERM) << "/dev/zero: " << std::strerror(codes[1]);
  EXPECT_EQ(codes[2], 0) << "mknod b 8:0: " << std::strerror(codes[2]);
  EXPECT_EQ(codes[3], EPERM) << "open b 8:0: " << std::strerror(codes[3]);
  EXPECT_EQ(codes[4], EPERM) << "mknod b 8:1: " << std::strerror(codes[4]);
}

TEST(OciV2Devices, RootContainerCannotOpenAHostDisk) {
  PULSEBOX_SKIP_UNLESS_ROOT("device rules matter where mknod works: real root");
  if (const auto why = testing::oci_launch_unavailable(); !why.empty()) GTEST_SKIP() << why;
  const auto host = linux_api::discover_cgroups();
  if (host.hybrid || !host.hierarchy_mounts.count(""))
    GTEST_SKIP() << "not a pure cgroup v2 host (tools/vm-test runs this)";
  const auto run = testing::run_with_cap_mknod(
      "busybox mknod /dev/sdx b 8 0 && echo made; "
      "head -c 1 /dev/sdx > /dev/null && echo opened; "
      "echo x > /dev/null && echo null-ok; "
      "head -c 1 /dev/zero | wc -c");
  EXPECT_EQ(run.exit_code, 0) << run.err;
  // runc's implicit rules allow mknod of any node; the open never works.
  EXPECT_NE(run.out.find("made"), std::string::npos) << run.out;
  EXPECT_EQ(run.out.find("opened"), std::string::npos) << run.out;
  EXPECT_NE(run.err.find("Operation not permitted"), std::string::npos) << run.err;
  EXPECT_NE(run.out.find("null-ok"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("1\n"), std::string::npos) << run.out;
}

}  // namespace
}  // namespace pulsebox
