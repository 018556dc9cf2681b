// A config may join a namespace by path (podman --network ns:PATH, pods).
// When that path is the runtime's own namespace (here: the host's), a net.*
// sysctl or a hostname in the same config is a host change made through the
// container: `net.ipv4.ip_unprivileged_port_start=0` or a new host name.
// runc refuses a net.* sysctl when the network namespace is the runtime's
// own ("sysctl ... not allowed in host network namespace"). The test runs
// the runtime inside a network and uts namespace the test makes, which plays
// the host, so a runtime that writes changes only that throwaway namespace.
// Root only: an ordinary user cannot write its own namespace's sysctls.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <sstream>
#include <string>
#include <thread>

#include "helpers/oci_bundle.h"
#include "helpers/oci_launch_support.h"
#include "helpers/test_support.h"

namespace pulsebox {
namespace {

namespace fs = std::filesystem;

constexpr const char* kRuntimeHostname = "pulsebox-runtime-ns";

bool wait_bounded(pid_t pid, int* status, std::chrono::seconds bound) {
  const auto deadline = std::chrono::steady_clock::now() + bound;
  while (::waitpid(pid, status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, status, 0);
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

bool same_file(const std::string& a, const std::string& b) {
  struct stat first {
  }, second{};
  return ::stat(a.c_str(), &first) == 0 && ::stat(b.c_str(), &second) == 0 &&
         first.st_dev == second.st_dev && first.st_ino == second.st_ino;
}

struct InRuntimeNamespaces {
  int exit_code = -1;      // pulsebox oci run's
  std::string port_start;  // the runtime's namespace's value afterwards
  std::string hostname;    // the runtime's namespace's host name afterwards
  std::string shmmni;      // the runtime ipc namespace's kernel.shmmni afterwards
  std::string err;
};

// Runs `pulsebox oci run` in a new network and uts namespace (the test's
// stand-in for the host's), then reads that namespace's sysctl and name.
InRuntimeNamespaces run_in_own_namespaces(const fs::path& temp, const testing::OciBundle& bundle) {
  InRuntimeNamespaces result;
  const char* binary = std::getenv("PULSEBOX_BIN");
  if (binary == nullptr) {
    ADD_FAILURE() << "PULSEBOX_BIN is not set (meson sets it)";
    return result;
  }
  const fs::path report = temp / "report";
  const std::string script =
      std::string("\"$0\" oci --root ") + (temp / "state").string() + " run --bundle " +
      bundle.dir.string() + " c1 </dev/null >" + (temp / "out").string() + " 2>" +
      (temp / "err").string() + "; echo $? >" + report.string() +
      "; cat /proc/sys/net/ipv4/ip_unprivileged_port_start >>" + report.string() + "; hostname >>" +
      report.string() + "; cat /proc/sys/kernel/shmmni >>" + report.string();
  const pid_t child = ::fork();
  if (child == 0) {
    if (::unshare(CLONE_NEWNET | CLONE_NEWUTS | CLONE_NEWIPC) != 0) ::_exit(100);
    if (::sethostname(kRuntimeHostname, std::char_traits<char>::length(kRuntimeHostname)) != 0)
      ::_exit(101);
    ::execl("/bin/sh", "sh", "-c", script.c_str(), binary, static_cast<char*>(nullptr));
    ::_exit(102);
  }
  int status = 0;
  const bool ended = wait_bounded(child, &status, std::chrono::seconds(60));
  EXPECT_TRUE(ended) << "the runtime did not end within 60 s";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) < 100) << "status " << status;
  const std::string text = testing::read_file(report);
  std::istringstream lines(text);
  std::string code;
  std::getline(lines, code);
  std::getline(lines, result.port_start);
  std::getline(lines, result.hostname);
  std::getline(lines, result.shmmni);
  result.exit_code = code.empty() ? -1 : std::atoi(code.c_str());
  result.err = testing::read_file(temp / "err");
  return result;
}

testing::OciBundle joining_bundle(const fs::path& dir, const char* type, const char* path) {
  auto bundle = testing::make_oci_bundle(dir, {"sh", "-c", "true"}, "", "c1");
  for (auto& ns : bundle.config["linux"]["namespaces"]) {
    if (ns["type"] == type) ns["path"] = path;
  }
  return bundle;
}

// plan_builder.cc refuses a linux.sysctl key whose namespace is joined by
// a path naming the runtime's own namespace (here and for ipc).
TEST(OciAttackHostNamespace, NetSysctlIsRefusedWhenTheNetworkNamespaceIsTheRuntimes) {
  PULSEBOX_SKIP_UNLESS_ROOT("writing a namespace's sysctls from the runtime's side");
  const std::string why = testing::oci_launch_unavailable();
  PULSEBOX_SKIP_UNLESS(why.empty(), why);
  testing::TempDir temp;
  auto bundle = joining_bundle(temp / "bundle", "network", "/proc/self/ns/net");
  bundle.config["linux"]["sysctl"] = {{"net.ipv4.ip_unprivileged_port_start", "555"}};
  bundle.write();

  const auto run = run_in_own_namespaces(temp.path(), bundle);
  EXPECT_NE(run.port_start, "555") << "the runtime's own network namespace was changed";
  EXPECT_EQ(run.exit_code, 1) << run.err;
  EXPECT_NE(run.err.find("linux.sysctl.net.ipv4.ip_unprivileged_port_start"), std::string::npos)
      << run.err;
}

TEST(OciAttackHostNamespace, HostnameIsRefusedWhenTheUtsNamespaceIsTheRuntimes) {
  PULSEBOX_SKIP_UNLESS_ROOT("setting a uts namespace's name from the runtime's side");
  const std::string why = testing::oci_launch_unavailable();
  PULSEBOX_SKIP_UNLESS(why.empty(), why);
  testing::TempDir temp;
  auto bundle = joining_bundle(temp / "bundle", "uts", "/proc/self/ns/uts");
  bundle.config["hostname"] = "from-the-config";
  bundle.write();

  const auto run = run_in_own_namespaces(temp.path(), bundle);
  EXPECT_EQ(run.hostname, kRuntimeHostname) << "the runtime's own uts namespace was renamed";
  EXPECT_EQ(run.exit_code, 1) << run.err;
  EXPECT_NE(run.err.find("hostname"), std::string::npos) << run.err;
}

// runc checks only that an ipc namespace is listed; a path to the
// runtime's own is the host's ipc namespace.
TEST(OciAttackHostNamespace, IpcSysctlIsRefusedWhenTheIpcNamespaceIsTheRuntimes) {
  PULSEBOX_SKIP_UNLESS_ROOT("writing a namespace's sysctls from the runtime's side");
  const std::string why = testing::oci_launch_unavailable();
  PULSEBOX_SKIP_UNLESS(why.empty(), why);
  testing::TempDir temp;
  auto bundle = joining_bundle(temp / "bundle", "ipc", "/proc/self/ns/ipc");
  bundle.config["linux"]["sysctl"] = {{"kernel.shmmni", "1234"}};
  bundle.write();

  const auto run = run_in_own_namespaces(temp.path(), bundle);
  EXPECT_NE(run.shmmni, "1234") << "the runtime's own ipc namespace was changed";
  EXPECT_EQ(run.exit_code, 1) << run.err;
  EXPECT_NE(run.err.find("linux.sysctl.kernel.shmmni"), std::string::npos) << run.err;
}

// What the checks must still let through: a joined namespace that is not
// the runtime's (podman's /run/netns/... path), with its sysctl applied.
TEST(OciAttackHostNamespace, NetSysctlInAJoinedNamespaceOfItsOwnIsApplied) {
  PULSEBOX_SKIP_UNLESS_ROOT("writing a namespace's sysctls from the runtime's side");
  const std::string why = testing::oci_launch_unavailable();
  PULSEBOX_SKIP_UNLESS(why.empty(), why);
  testing::TempDir temp;
  // A network namespace held by a process of the test's (not the runtime's).
  int unshared[2];
  ASSERT_EQ(::pipe2(unshared, O_CLOEXEC), 0);
  const pid_t holder = ::fork();
  if (holder == 0) {
    ::close(unshared[0]);
    if (::unshare(CLONE_NEWNET) != 0) ::_exit(1);
    (void)!::write(unshared[1], "u", 1);
    ::pause();
    ::_exit(0);
  }
  ::close(unshared[1]);
  // Until the holder has unshared, its ns link is the test's own: the
  // sysctl would be the host's. A byte says it has (end of file: it failed).
  char byte = 0;
  const bool holder_unshared = ::read(unshared[0], &byte, 1) == 1;
  ::close(unshared[0]);
  const std::string path = "/proc/" + std::to_string(holder) + "/ns/net";
  if (!holder_unshared || same_file(path, "/proc/self/ns/net")) {
    ::kill(holder, SIGKILL);
    ::waitpid(holder, nullptr, 0);
    FAIL() << "the holder has no network namespace of its own";
  }
  auto bundle = joining_bundle(temp / "bundle", "network", path.c_str());
  bundle.config["linux"]["sysctl"] = {{"net.ipv4.ip_unprivileged_port_start", "555"}};
  bundle.config["process"]["args"] = {"cat", "/proc/sys/net/ipv4/ip_unprivileged_port_start"};
  bundle.write();

  const auto run = run_in_own_namespaces(temp.path(), bundle);
  ::kill(holder, SIGKILL);
  ::waitpid(holder, nullptr, 0);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(testing::read_file(temp / "out"), "555\n");
  EXPECT_NE(run.port_start, "555");
}

}  // namespace
}  // namespace pulsebox
