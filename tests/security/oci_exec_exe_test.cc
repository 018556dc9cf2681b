// exec must not hand the container the runtime (design §1.6, §5).
// CVE-2019-5736 class: between joining the container and execve, exec's
// process runs the pulsebox binary inside the container's pid namespace; a
// root process in the container that could open /proc/<it>/exe would hold
// the host's binary (and, once it stops running, overwrite it). Both
// stages are undumpable, so that open is refused. CVE-2024-21626 class: a
// descriptor exec inherited (here a host directory on fd 40, which the
// caller did not pass with --preserve-fds) must not reach the program,
// whose working directory or /proc/self/fd/N would otherwise lead out of
// the container's root.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "helpers/oci_bundle.h"
#include "helpers/oci_fixture.h"
#include "helpers/test_support.h"

namespace pulsebox {
namespace {

namespace fs = std::filesystem;

class OciExecExeTest : public testing::OciRunningContainerTest {};

TEST_F(OciExecExeTest, TheContainerCannotOpenTheRuntimeBinaryOfAnExec) {
  // exec's process holds itself right before execve: its final identity
  // and capabilities, still the pulsebox binary.
  const fs::path pid_file = temp_ / "held.pid";
  ::setenv("PULSEBOX_TRACE_STOP_AT", "oci exec: before execve", 1);
  const auto held = oci({"exec", "--detach", "--pid-file", pid_file.string(), "c1", "true"});
  ::unsetenv("PULSEBOX_TRACE_STOP_AT");
  ASSERT_EQ(held.exit_code, 0) << held.err;
  const std::string host_pid = testing::read_file(pid_file);
  const std::string status = testing::read_file("/proc/" + host_pid + "/status");
  const auto nspid = status.find("NSpid:");
  ASSERT_NE(nspid, std::string::npos) << status;
  const std::string line = status.substr(nspid, status.find('\n', nspid) - nspid);
  const std::string inner = line.substr(line.rfind('\t') + 1);
  ASSERT_NE(inner, host_pid) << line;  // a pid of the container's namespace
  EXPECT_NE(status.find("State:\tT"), std::string::npos) << status;

  // The container's root, with the same ids and capabilities as the held
  // process, tries to read and to write its executable.
  const auto attack =
      oci({"exec", "c1", "sh", "-c",
           "cat /proc/" + inner +
               "/exe > /dev/null 2>&1 && echo read-opened || echo read-denied; "
               "( : >> /proc/" +
               inner +
               "/exe ) 2>/dev/null && echo write-opened || echo write-denied; "
               "readlink /proc/" +
               inner + "/exe >/dev/null 2>&1 && echo link-read || echo link-denied"});
  EXPECT_EQ(attack.exit_code, 0) << attack.err;
  EXPECT_EQ(attack.out, "read-denied\nwrite-denied\nlink-denied\n") << attack.err;
}

TEST_F(OciExecExeTest, NoInheritedHostDescriptorReachesTheProgram) {
  // A host directory on fd 40, inheritable, that exec's caller did not
  // mean to pass (no --preserve-fds).
  fs::create_directories(temp_ / "host-secret");
  const int dir = ::open((temp_ / "host-secret").c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(dir, 0);
  ASSERT_EQ(::dup2(dir, 40), 40);
  ::close(dir);
  const auto run = oci({"exec", "c1", "sh", "-c",
                        "for fd in /proc/$$/fd/*; do echo ${fd##*/} $(readlink $fd); done"});
  ::close(40);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  // stdin, stdout, stderr (the test's own files) and the loop's directory.
  EXPECT_EQ(run.out.find("40 "), std::string::npos) << run.out;
  EXPECT_EQ(run.out.find("host-secret"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("0 /dev/null"), std::string::npos) << run.out;
}

}  // namespace
}  // namespace pulsebox
