// `exec` (design §1.6) into a running busybox container, as podman's conmon
// (--process F --detach --pid-file P) and runc's inline form call it: the
// process is in the container's pid, mount and network namespaces and its
// cgroup, runs with the identity and capabilities its process JSON gives,
// and its exit status comes back. As root the container has a cgroup under
// this test's own subtree; as an ordinary user a user namespace.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
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

class OciExecTest : public testing::OciRunningContainerTest {
 protected:
  void SetUp() override {
    OciRunningContainerTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    const auto state = nlohmann::json::parse(run_oci(root_, {"state", "c1"}).out);
    ASSERT_EQ(state["status"], "running");
    pid_ = state["pid"].get<pid_t>();
  }
  // A process JSON as conmon writes one.
  fs::path process_file(const nlohmann::json& process) {
    const fs::path file = temp_ / "process.json";
    testing::write_file(file, process.dump());
    return file;
  }

  pid_t pid_ = 0;
};

TEST_F(OciExecTest, TheProcessIsInTheContainersNamespacesAndCgroup) {
  // The inline form: ID, then the program with flags of its own.
  const auto run =
      oci({"exec", "c1", "sh", "-c",
           "for n in pid mnt net ipc uts; do "
           "  [ $(readlink /proc/self/ns/$n) = $(readlink /proc/1/ns/$n) ] "
           "    && echo same-$n || echo other-$n; done; "
           "[ \"$(cat /proc/self/cgroup)\" = \"$(cat /proc/1/cgroup)\" ] "
           "  && echo same-cgroup; busybox tr \"\\\\0\" \" \" < /proc/1/cmdline; echo; exit 7"});
  EXPECT_EQ(run.exit_code, 7) << run.err;
  EXPECT_EQ(run.out, "same-pid\nsame-mnt\nsame-net\nsame-ipc\nsame-uts\nsame-cgroup\nsleep 60 \n")
      << run.err;
  if (!subtree_.empty()) {
    // No process of the container's is left outside its own leaf.
    const fs::path unified = host_.hierarchy_mounts.count("pids")
                                 ? fs::path(host_.hierarchy_mounts.at("pids"))
                                 : fs::path(host_.hierarchy_mounts.at(""));
    EXPECT_EQ(testing::read_file(unified / subtree_ / "c1" / "cgroup.procs"),
              std::to_string(pid_) + "\n");
  }
}

TEST_F(OciExecTest, IdentityCapabilitiesEnvAndCwdComeFromTheProcessFile) {
  // An ordinary user's container maps one id: uid 0 there.
  const int uid = ::geteuid() == 0 ? 1000 : 0;
  const auto file =
      process_file({{"user", {{"uid", uid}, {"gid", uid}}},
                    {"args",
                     {"sh", "-c",
                      "echo uid=$(id -u) gid=$(id -g) cwd=$(pwd) foo=$FOO; "
                      "grep -E '^(CapBnd|NoNewPrivs):' /proc/self/status"}},
                    {"env", {"PATH=/bin", "FOO=bar"}},
                    {"cwd", "/tmp"},
                    {"capabilities", {{"bounding", {"CAP_KILL"}}, {"permitted", {"CAP_KILL"}}}},
                    {"noNewPrivileges", true}});
  const auto run = oci({"exec", "--process", file.string(), "c1"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  const std::string expected_ids = "uid=" + std::to_string(uid) + " gid=" + std::to_string(uid);
  EXPECT_EQ(run.out, expected_ids +
                         " cwd=/tmp foo=bar\n"
                         "CapBnd:\t0000000000000020\n"
                         "NoNewPrivs:\t1\n")
      << run.err;
}

TEST_F(OciExecTest, InlineFlagsRepeatAndEndAtTheId) {
  const auto run =
      oci({"exec", "--env", "A=1", "-e", "B=2", "--cwd", "/tmp", "--cap", "CAP_SYS_CHROOT", "--cap",
           "CAP_CHOWN", "c1", "sh", "-c", "echo $A $B $(pwd); grep CapEff /proc/self/status"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  // The container's CAP_AUDIT_WRITE, CAP_KILL, CAP_NET_BIND_SERVICE plus
  // CAP_CHOWN (0) and CAP_SYS_CHROOT (18).
  EXPECT_EQ(run.out, "1 2 /tmp\nCapEff:\t0000000020040421\n") << run.err;
}

TEST_F(OciExecTest, DetachWritesThePidFileAndExits) {
  // This test reaps the detached process, as conmon and containerd's shim do,
  // and only after the delete: so the delete meets a reaper that takes its
  // time (a host's init may take over a second), and the container's init,
  // which ends only once its namespace's processes are reaped, lingers.
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), 0);
  struct NoLongerSubreaper {
    ~NoLongerSubreaper() { (void)::prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0); }
  } restore;
  const fs::path pid_file = temp_ / "exec.pid";
  const auto file = process_file({{"user", {{"uid", 0}, {"gid", 0}}},
                                  {"args", {"sleep", "30"}},
                                  {"env", {"PATH=/bin"}},
                                  {"cwd", "/"}});
  const auto run =
      oci({"exec", "--pid-file", pid_file.string(), "--process", file.string(), "--detach", "c1"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.err, "");
  const std::string text = testing::read_file(pid_file);
  ASSERT_FALSE(text.empty());
  const std::string status = testing::read_file("/proc/" + text + "/status");
  // A pid of the container's namespace too (NSpid: host, then inside), and
  // the program already runs: exec returned once execve had replaced it.
  const auto nspid = status.find("NSpid:\t" + text + "\t");
  EXPECT_NE(nspid, std::string::npos) << status;
  EXPECT_NE(status.find("Name:\tsleep"), std::string::npos) << status;
  // delete --force ends it with the container (its pid namespace goes), not
  // waiting for this test to reap it.
  const auto deleted = oci({"delete", "--force", "c1"});
  EXPECT_EQ(deleted.exit_code, 0) << deleted.err;
  EXPECT_FALSE(fs::exists(root_ / "c1"));
  // Ended: this test, its reaper, finds it a zombie.
  int wait_status = 0;
  EXPECT_EQ(::waitpid(std::stoi(text), &wait_status, 0), std::stoi(text));
  EXPECT_TRUE(WIFSIGNALED(wait_status) && WTERMSIG(wait_status) == SIGKILL) << wait_status;
}

TEST_F(OciExecTest, AStoppedContainerIsNotRunning) {
  ASSERT_EQ(oci({"kill", "c1", "KILL"}).exit_code, 0);
  bool stopped = false;
  for (int i = 0; i < 250 && !stopped; ++i) {
    stopped = run_oci(root_, {"state", "c1"}).out.find("\"stopped\"") != std::string::npos;
    if (!stopped) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(stopped);
  const auto run = oci({"exec", "c1", "true"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("container c1 is not running"), std::string::npos) << run.err;
}

TEST_F(OciExecTest, FailuresAreNamed) {
  // A program that cannot run is exec's own error, in the words podman maps
  // to 127, and a detached one writes no pid file for conmon to watch.
  const auto missing = oci({"exec", "c1", "/no/such/program"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("executing /no/such/program: No such file or directory"),
            std::string::npos)
      << missing.err;
  const fs::path pid_file = temp_ / "missing.pid";
  const auto detached =
      oci({"exec", "--detach", "--pid-file", pid_file.string(), "c1", "/no/such/program"});
  EXPECT_EQ(detached.exit_code, 1);
  EXPECT_NE(detached.err.find("executing /no/such/program"), std::string::npos) << detached.err;
  EXPECT_FALSE(fs::exists(pid_file));
  const auto cwd = oci({"exec", "--cwd", "/no-such-dir", "c1", "true"});
  EXPECT_EQ(cwd.exit_code, 1);
  EXPECT_NE(cwd.err.find("changing to the working directory /no-such-dir"), std::string::npos)
      << cwd.err;
  // No LSM support: refused as at create, naming the file and the field.
  const auto apparmor = oci({"exec", "--process",
                             process_file({{"user", {{"uid", 0}, {"gid", 0}}},
                                           {"args", {"true"}},
                                           {"cwd", "/"},
                                           {"apparmorProfile", "unconfined"}})
                                 .string(),
                             "c1"});
  EXPECT_EQ(apparmor.exit_code, 1);
  EXPECT_NE(apparmor.err.find("apparmorProfile"), std::string::npos) << apparmor.err;
  if (::geteuid() != 0) {
    // One gid mapped, setgroups denied: the groups cannot be given.
    const auto groups =
        oci({"exec", "--process",
             process_file({{"user", {{"uid", 0}, {"gid", 0}, {"additionalGids", {0}}}},
                           {"args", {"sh", "-c", "exit 0"}},
                           {"cwd", "/"}})
                 .string(),
             "c1"});
    EXPECT_EQ(groups.exit_code, 1);
    EXPECT_NE(groups.err.find("additionalGids: setgroups is denied"), std::string::npos)
        << groups.err;
  }
  const auto tty = oci({"exec", "--tty", "c1", "true"});
  EXPECT_EQ(tty.exit_code, 1);
  EXPECT_NE(tty.err.find("give --console-socket"), std::string::npos) << tty.err;
}

// The pid of this test's own `pulsebox oci --root ROOT exec` command (its
// cmdline names this test's root), or 0.
pid_t exec_command_pid(const fs::path& root) {
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline = testing::read_file(entry.path() / "cmdline");
    for (char& c : cmdline) {
      if (c == '\0') c = ' ';
    }
    if (cmdline.find(" oci --root " + root.string() + " exec ") != std::string::npos)
      return static_cast<pid_t>(std::stoi(name));
  }
  return 0;
}

TEST_F(OciExecTest, ForegroundExecForwardsSignalsAndDoesNotHoldTheContainer) {
  // TERM to exec reaches the process, whose trap gives the status.
  testing::OciFileRun trapped;
  std::thread waiting([&] {
    trapped = run_oci_to_files(
        root_,
        {"exec", "c1", "sh", "-c", "trap 'exit 42' TERM; echo ready; while :; do sleep 1; done"},
        temp_ / "trap-out", temp_ / "trap-err");
  });
  pid_t command = 0;
  for (int i = 0; i < 1500; ++i) {  // up to 30 s on a loaded host
    if (testing::read_file(temp_ / "trap-out") == "ready\n") {
      command = exec_command_pid(root_);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_GT(command, 0);
  if (command > 0) {
    ::kill(command, SIGTERM);
  } else {
    (void)oci({"delete", "--force", "c1"});  // fail now, not when the exec gives up
  }
  waiting.join();
  if (command == 0) return;
  EXPECT_EQ(trapped.exit_code, 42) << trapped.err;

  // A foreground exec holds no lock: delete --force goes ahead, and the
  // process ends with the container (SIGKILL: 137).
  testing::OciFileRun killed;
  std::thread waiting_again([&] {
    killed = run_oci_to_files(root_, {"exec", "c1", "sh", "-c", "echo ready; exec sleep 30"},
                              temp_ / "kill-out", temp_ / "kill-err");
  });
  for (int i = 0; i < 1500 && testing::read_file(temp_ / "kill-out") != "ready\n"; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(testing::read_file(temp_ / "kill-out"), "ready\n");
  const auto deleted = oci({"delete", "--force", "c1"});
  waiting_again.join();
  EXPECT_EQ(deleted.exit_code, 0) << deleted.err;
  EXPECT_EQ(killed.exit_code, 137) << killed.err;
}

// podman exec -t: conmon passes --console-socket S --tty; the process gets a
// terminal of the container's devpts, its master sent on the socket.
TEST_F(OciExecTest, ConsoleSocketGetsTheProcesssTerminal) {
  const fs::path socket_path = temp_ / "console.sock";
  const core::UniqueFd listener = testing::listen_console_socket(socket_path);
  ASSERT_TRUE(listener);
  const auto run = oci({"exec", "--detach", "--tty", "--console-socket", socket_path.string(), "c1",
                        "sh", "-c", "test -t 0 && test -t 1 && echo on-a-tty; sleep 1"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  std::string name;
  const core::UniqueFd master = testing::accept_console_master(listener.get(), name);
  ASSERT_TRUE(master);
  EXPECT_EQ(name.rfind("/dev/pts/", 0), 0u) << name;
  const std::string seen = testing::read_terminal_until(master.get(), "on-a-tty");
  EXPECT_NE(seen.find("on-a-tty"), std::string::npos) << seen;
}

}  // namespace
}  // namespace pulsebox
