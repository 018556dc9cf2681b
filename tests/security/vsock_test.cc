// AF_VSOCK is not confined by the network namespace: a sandbox run with
// --net none could bind ports in the one vsock port space of the host (here,
// of the hypervisor), so that the host's own bind of that port failed with
// EADDRINUSE. The `default` and `permissive` profiles refuse the family (and
// every other family no network namespace confines; seccomp-profiles/
// README.md has the table), `strict` allows Unix sockets only.
//
// The probe never connects and never sends: it creates a socket, binds one
// port above 1024 chosen at random, and closes it at once.
#include <linux/vm_sockets.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <random>

#include "helpers/cli_runner.h"
#include "helpers/test_support.h"

namespace pulsebox {
namespace {

using testing::TempDir;
namespace fs = std::filesystem;

// A vsock socket of this (the host's) side, bound to a port; closed with it.
class HostVsockPort {
 public:
  explicit HostVsockPort(unsigned port) {
    fd_ = ::socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) {
      error_ = errno;
      return;
    }
    sockaddr_vm address{};
    address.svm_family = AF_VSOCK;
    address.svm_cid = VMADDR_CID_ANY;
    address.svm_port = port;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) error_ = errno;
  }
  ~HostVsockPort() {
    if (fd_ >= 0) ::close(fd_);
  }
  HostVsockPort(const HostVsockPort&) = delete;
  HostVsockPort& operator=(const HostVsockPort&) = delete;

  int error() const { return error_; }

 private:
  int fd_ = -1;
  int error_ = 0;
};

class VsockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* probe = std::getenv("PULSEBOX_PROBE");
    ASSERT_NE(probe, nullptr) << "PULSEBOX_PROBE is set by meson";
    fs::copy_file(probe, workspace_ / "probe");
    fs::permissions(workspace_ / "probe", fs::perms(0755));
  }

  // The probe's report of socket-family AF_VSOCK PORT under `seccomp`.
  std::map<std::string, std::string> probe_vsock(const std::string& seccomp, unsigned port) {
    const auto run = testing::run_cli(
        {"run", "--allow-weaker", "limits", "--allow-weaker", "syscalls", "--seccomp", seccomp,
         "--changes", "discard", "-w", workspace_.path().string(), "--", "/workspace/probe",
         "socket-family", std::to_string(AF_VSOCK), std::to_string(port)},
        "", {"PULSEBOX_STATE_DIR=" + state_.path().string(), "PULSEBOX_SERVER=off", "NO_COLOR=1"});
    EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
    return testing::parse_report(run.out);
  }

  static unsigned random_port() {
    std::random_device seed;
    return std::uniform_int_distribution<unsigned>(20000, 60000)(seed);
  }

  TempDir workspace_;
  TempDir state_;
};

TEST_F(VsockTest, TheDefaultAndPermissiveProfilesRefuseVsockSockets) {
  for (const std::string profile : {"default", "permissive", "strict"}) {
    SCOPED_TRACE(profile);
    auto report = probe_vsock(profile, random_port());
    // EAFNOSUPPORT as on a kernel without vsock; strict refuses every
    // family but AF_UNIX with its EPERM.
    const std::string refused = profile == "strict" ? "EPERM" : "EAFNOSUPPORT";
    EXPECT_EQ(report["socket"], refused);
    EXPECT_EQ(report["socket_high_bits"], refused);
    EXPECT_EQ(report["socketpair"], refused);
    EXPECT_EQ(report["bind"], "no socket");
    EXPECT_EQ(report["bind_high_bits"], "no socket");
  }
}

// The control: without a filter, the sandbox's vsock socket shares the
// host's port space, whatever its network namespace. A port the host holds
// is taken inside the sandbox too.
TEST_F(VsockTest, WithoutAFilterTheSandboxSharesTheHostsVsockPorts) {
  const unsigned port = random_port();
  HostVsockPort held(port);
  PULSEBOX_SKIP_UNLESS(held.error() != EAFNOSUPPORT && held.error() != ENODEV,
                       "this kernel has no vsock transport (socket(AF_VSOCK) failed)");
  ASSERT_EQ(held.error(), 0) << "binding vsock port " << port
                             << " here: " << std::strerror(held.error());
  auto taken = probe_vsock("unconfined", port);
  EXPECT_EQ(taken["socket"], "ok");
  EXPECT_EQ(taken["socket_high_bits"], "ok");
  EXPECT_EQ(taken["bind"], "EADDRINUSE") << "the sandbox has a port space of its own";
  auto free = probe_vsock("unconfined", port + 1);
  EXPECT_EQ(free["bind"], "ok");
}

}  // namespace
}  // namespace pulsebox
