// create / start / run / delete through pulsebox-runc, as engines call them,
// on a busybox bundle (design §1.3, §1.7). As root the container gets a
// cgroup under this test's own subtree; as an ordinary user a user
// namespace and no cgroup.
#include <sys/socket.h>
#include <unistd.h>

#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/unique_fd.h"
#include "helpers/oci_bundle.h"
#include "helpers/oci_fixture.h"
#include "helpers/oci_state.h"
#include "helpers/test_support.h"

namespace pulsebox {
namespace {

namespace fs = std::filesystem;
using testing::run_oci;
using testing::run_oci_to_files;

class OciLifecycleTest : public testing::OciContainerTest {};

TEST_F(OciLifecycleTest, CreateStartKillDelete) {
  const auto b = bundle({"sh", "-c", "echo started; exec sleep 60"});
  const fs::path pid_file = temp_ / "pid";
  const auto created =
      oci({"create", "--bundle", b.dir.string(), "--pid-file", pid_file.string(), "c1"});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  EXPECT_EQ(created.err, "");  // nothing on success, as runc

  // Created: the pid file names the process, pid 1 of its own namespace,
  // which has not run the program yet.
  const auto state = nlohmann::json::parse(run_oci(root_, {"state", "c1"}).out);
  EXPECT_EQ(state["status"], "created");
  const pid_t pid = state["pid"].get<pid_t>();
  EXPECT_EQ(testing::read_file(pid_file), std::to_string(pid));
  const std::string status = testing::read_file("/proc/" + std::to_string(pid) + "/status");
  const auto nspid = status.find("NSpid:");
  ASSERT_NE(nspid, std::string::npos);
  const std::string line = status.substr(nspid, status.find('\n', nspid) - nspid);
  EXPECT_EQ(line.back(), '1') << line;
  EXPECT_NE(line.find('\t' + std::to_string(pid)), std::string::npos) << line;
  EXPECT_EQ(testing::read_file(out_), "");
  EXPECT_NE(state["annotations"]["org.pulsebox.enforced"].get<std::string>().find("nnp=1"),
            std::string::npos);

  const auto started = oci({"start", "c1"});
  ASSERT_EQ(started.exit_code, 0) << started.err;
  EXPECT_EQ(status_of("c1"), "running");
  EXPECT_TRUE(wait_for_output("started\n")) << testing::read_file(out_);
  // Started once only.
  const auto again = oci({"start", "c1"});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_NE(again.err.find("container c1 is not created (it is running)"), std::string::npos)
      << again.err;

  ASSERT_EQ(oci({"kill", "c1", "KILL"}).exit_code, 0);
  EXPECT_TRUE(wait_for_status("c1", "stopped"));
  const auto deleted = oci({"delete", "c1"});
  EXPECT_EQ(deleted.exit_code, 0) << deleted.err;
  EXPECT_FALSE(fs::exists(root_ / "c1"));
  EXPECT_EQ(leftover_leaves(), std::vector<std::string>{});
}

TEST_F(OciLifecycleTest, DeleteForceOfACreatedContainer) {
  const auto b = bundle({"sh", "-c", "echo never"});
  ASSERT_EQ(oci({"create", "--bundle", b.dir.string(), "c1"}).exit_code, 0);
  const auto deleted = oci({"delete", "--force", "c1"});
  EXPECT_EQ(deleted.exit_code, 0) << deleted.err;
  EXPECT_FALSE(fs::exists(root_ / "c1"));
  EXPECT_EQ(leftover_leaves(), std::vector<std::string>{});
  EXPECT_EQ(testing::read_file(out_), "");
}

TEST_F(OciLifecycleTest, RunGivesTheExitStatusAndLeavesNothing) {
  bundle({"sh", "-c", "exit 3"});
  const auto run = oci({"run", "--bundle", (temp_ / "bundle").string(), "c1"});
  EXPECT_EQ(run.exit_code, 3) << run.err;
  EXPECT_FALSE(fs::exists(root_ / "c1"));
  EXPECT_EQ(leftover_leaves(), std::vector<std::string>{});
}

TEST_F(OciLifecycleTest, WhatTheProcessSees) {
  bundle({"sh", "-c",
          "echo uid=$(id -u) host=$(hostname) cwd=$(pwd); "
          "grep -E '^(NoNewPrivs|CapBnd|CapEff|Seccomp):' /proc/self/status; "
          "touch /rootfile 2>/dev/null && echo root-writable || echo root-readonly; "
          "touch /dev/shm/x && echo shm-writable; "
          "test -c /dev/null && test -c /dev/urandom && echo devices-made; "
          "readlink /dev/ptmx; "
          "echo keys=$(wc -c < /proc/keys) firmware=$(ls /sys/firmware | wc -l); "
          "touch /proc/sys/kernel/x 2>/dev/null || echo proc-sys-readonly; "
          "ls /sys/class/net"});
  const auto run = oci({"run", "--bundle", (temp_ / "bundle").string(), "c1"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  const std::string& out = run.out;
  EXPECT_NE(out.find("uid=0 host=pulsebox-test cwd=/\n"), std::string::npos) << out;
  EXPECT_NE(out.find("NoNewPrivs:\t1"), std::string::npos) << out;
  // CAP_KILL (5), CAP_NET_BIND_SERVICE (10), CAP_AUDIT_WRITE (29).
  EXPECT_NE(out.find("CapBnd:\t0000000020000420"), std::string::npos) << out;
  EXPECT_NE(out.find("CapEff:\t0000000020000420"), std::string::npos) << out;
  EXPECT_NE(out.find("root-readonly"), std::string::npos) << out;
  EXPECT_NE(out.find("shm-writable"), std::string::npos) << out;
  EXPECT_NE(out.find("devices-made"), std::string::npos) << out;
  EXPECT_NE(out.find("pts/ptmx"), std::string::npos) << out;
  // Masked: a file reads as /dev/null, a directory as an empty tmpfs.
  EXPECT_NE(out.find("keys=0 firmware=0\n"), std::string::npos) << out;
  EXPECT_NE(out.find("proc-sys-readonly"), std::string::npos) << out;
  // A network namespace of its own: only lo.
  EXPECT_NE(out.find("lo\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("eth"), std::string::npos) << out;
}

TEST_F(OciLifecycleTest, FailedCreateLeavesNothing) {
  auto b = bundle({"sh", "-c", "echo never"});
  b.config["process"]["cwd"] = "/no-such-dir";
  b.write();
  const auto created = oci({"create", "--bundle", b.dir.string(), "c1"});
  EXPECT_EQ(created.exit_code, 1);
  EXPECT_NE(created.err.find("changing to the working directory"), std::string::npos)
      << created.err;
  EXPECT_FALSE(fs::exists(root_ / "c1"));
  EXPECT_EQ(leftover_leaves(), std::vector<std::string>{});
  EXPECT_EQ(testing::read_file(out_), "");
}

TEST_F(OciLifecycleTest, ARefusedConfigMakesNothing) {
  auto b = bundle({"sh", "-c", "echo never"});
  b.config["mounts"].push_back({{"destination", "/run"},
                                {"type", "tmpfs"},
                                {"source", "tmpfs"},
                                {"options", {"nosuid", "rshared"}}});
  b.write();
  const auto created = oci({"create", "--bundle", b.dir.string(), "c1"});
  EXPECT_EQ(created.exit_code, 1);
  // (The text log escapes the quotes around the option.)
  EXPECT_NE(created.err.find("mounts[6] (/run).options"), std::string::npos) << created.err;
  EXPECT_NE(created.err.find("rshared"), std::string::npos) << created.err;
  EXPECT_NE(created.err.find("not supported yet"), std::string::npos) << created.err;
  EXPECT_FALSE(fs::exists(root_ / "c1"));
  EXPECT_EQ(leftover_leaves(), std::vector<std::string>{});
}

// podman's --read-only puts tmpcopyup on /tmp, /run and /var/tmp: a tmpfs
// that starts with the image's files, modes and owners; a symlink in the
// image is copied as a link, never followed on the host.
TEST_F(OciLifecycleTest, TmpcopyupStartsWithTheImagesFiles) {
  PULSEBOX_SKIP_UNLESS_ROOT("tmpcopyup is not offered in a user namespace yet");
  auto b = bundle({"sh", "-c",
                   "cat /run/sub/marker; stat -c '%a %u %g' /run/sub/marker; "
                   "readlink /run/host-link; touch /run/new && echo run-writable"});
  const fs::path image_run = b.dir / "rootfs" / "run";
  fs::create_directories(image_run / "sub");
  { std::ofstream(image_run / "sub" / "marker") << "from the image\n"; }
  ASSERT_EQ(::chown((image_run / "sub" / "marker").c_str(), 123, 456), 0);
  ASSERT_EQ(::chmod((image_run / "sub" / "marker").c_str(), 0604), 0);
  const fs::path host_secret = temp_ / "host-secret";
  { std::ofstream(host_secret) << "host\n"; }
  fs::create_symlink(host_secret, image_run / "host-link");
  ::mkfifo((image_run / "fifo").c_str(), 0600);  // left out, and must not block the copy
  b.config["mounts"].push_back({{"destination", "/run"},
                                {"type", "tmpfs"},
                                {"source", "tmpfs"},
                                {"options", {"nosuid", "nodev", "tmpcopyup"}}});
  b.write();
  const auto run = oci({"run", "--bundle", b.dir.string(), "c1"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, "from the image\n604 123 456\n" + host_secret.string() + "\nrun-writable\n")
      << run.err;
  // The image itself is unchanged (the write went to the tmpfs).
  EXPECT_FALSE(fs::exists(image_run / "new"));
  EXPECT_EQ(testing::read_file(host_secret), "host\n");
}

// Each tmpcopyup tree stays open in the container's process until it is
// attached: with more than four of them the fifth was closed by the
// process's descriptor sweep, which kept at most eight descriptors.
TEST_F(OciLifecycleTest, ManyTmpcopyupMountsAreAllAttached) {
  PULSEBOX_SKIP_UNLESS_ROOT("the copy is made outside the user namespace by root's create");
  std::string script;
  auto b = bundle({"true"});
  for (int i = 0; i < 8; ++i) {
    const std::string name = "copy" + std::to_string(i);
    fs::create_directories(b.dir / "rootfs" / name);
    { std::ofstream(b.dir / "rootfs" / name / "marker") << name << "\n"; }
    b.config["mounts"].push_back({{"destination", "/" + name},
                                  {"type", "tmpfs"},
                                  {"source", "tmpfs"},
                                  {"options", {"nosuid", "nodev", "tmpcopyup"}}});
    script += "cat /" + name + "/marker; ";
  }
  b.config["process"]["args"] = {"sh", "-c", script};
  b.write();
  const auto run = oci({"run", "--bundle", b.dir.string(), "c1"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, "copy0\ncopy1\ncopy2\ncopy3\ncopy4\ncopy5\ncopy6\ncopy7\n") << run.err;
}

TEST_F(OciLifecycleTest, ConsoleSocketGetsTheTerminal) {
  auto b = bundle({"sh", "-c", "test -t 0 && test -t 1 && echo on-a-tty"});
  b.config["process"]["terminal"] = true;
  b.write();
  const fs::path socket_path = temp_ / "console.sock";
  const core::UniqueFd listener = testing::listen_console_socket(socket_path);
  ASSERT_TRUE(listener);

  const auto created =
      oci({"create", "--bundle", b.dir.string(), "--console-socket", socket_path.string(), "c1"});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  std::string name;
  const core::UniqueFd master = testing::accept_console_master(listener.get(), name);
  ASSERT_TRUE(master);
  EXPECT_EQ(name.rfind("/dev/pts/", 0), 0u) << name;
  ASSERT_EQ(oci({"start", "c1"}).exit_code, 0);
  const std::string seen = testing::read_terminal_until(master.get(), "on-a-tty");
  EXPECT_NE(seen.find("on-a-tty"), std::string::npos) << seen;
  EXPECT_TRUE(wait_for_status("c1", "stopped"));
  EXPECT_EQ(oci({"delete", "c1"}).exit_code, 0);
}

// `runc spec` asks for ambient capabilities it does not make inheritable.
// The kernel cannot raise those: like runc and crun, create leaves them out
// and runs, but names them in the log; one that is also inheritable is
// raised.
TEST_F(OciLifecycleTest, AmbientCapabilitiesTheKernelCannotRaiseAreNamed) {
  auto b = bundle({"sh", "-c", "grep CapAmb: /proc/self/status"});
  b.config["process"]["capabilities"]["ambient"] = {"CAP_KILL", "CAP_NET_BIND_SERVICE"};
  b.config["process"]["capabilities"]["inheritable"] = {"CAP_KILL"};
  b.write();
  const fs::path log = temp_ / "log.json";
  const auto run =
      oci({"--log", log.string(), "--log-format", "json", "run", "--bundle", b.dir.string(), "c1"});
  EXPECT_EQ(run.exit_code, 0) << run.err << testing::read_file(log);
  // CAP_KILL (5) only.
  EXPECT_NE(run.out.find("CapAmb:\t0000000000000020"), std::string::npos) << run.out;
  const std::string text = testing::read_file(log);
  EXPECT_NE(text.find("\"level\":\"warning\""), std::string::npos) << text;
  EXPECT_NE(text.find("process.capabilities.ambient: CAP_NET_BIND_SERVICE not raised"),
            std::string::npos)
      << text;
}

TEST_F(OciLifecycleTest, JsonLogHasTheError) {
  auto b = bundle({"sh", "-c", "echo never"});
  b.config["process"]["cwd"] = "/no-such-dir";
  b.write();
  const fs::path log = temp_ / "log.json";
  const auto created = oci(
      {"--log", log.string(), "--log-format", "json", "create", "--bundle", b.dir.string(), "c1"});
  EXPECT_EQ(created.exit_code, 1);
  // containerd reads the last error line of the log.
  std::string text = testing::read_file(log);
  while (!text.empty() && text.back() == '\n')
    text.pop_back();
  const auto last = nlohmann::json::parse(text.substr(text.rfind('\n') + 1), nullptr, false);
  ASSERT_TRUE(last.is_object()) << text;
  EXPECT_EQ(last["level"], "error");
  EXPECT_NE(last["msg"].get<std::string>().find("changing to the working directory"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace pulsebox
