// podman run -it on pulsebox-runc (design §6, milestone 1): podman's
// stdin, stdout and stderr are the slave of a pty pair this test owns (its
// controlling terminal), and the test reads and types on the master. conmon
// passes --console-socket; the container's terminal is a pty of its own
// devpts. Root only, --network none, podman set up as in
// oci_podman_test.cc (tests/helpers/podman_env.h).
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <utmp.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "helpers/podman_env.h"
#include "helpers/test_support.h"

extern char** environ;

namespace pulsebox {
namespace {

using testing::PodmanEnv;

struct TtyRun {
  int exit_code = -1;
  std::string output;  // what the master read
};

class OciPodmanTtyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const auto why = PodmanEnv::unavailable(); !why.empty()) GTEST_SKIP() << why;
    ASSERT_NO_FATAL_FAILURE(podman_.set_up());
  }

  // `podman ARGS...` on the slave of a new pty pair; `typed` is written to
  // the master once the output holds `after` ("" for none). Bounded: the
  // whole run is killed after 60 s.
  TtyRun run_on_pty(const std::vector<std::string>& args, const std::string& after = "",
                    const std::string& typed = "") {
    TtyRun result;
    int master = -1;
    int slave = -1;
    winsize size{};
    size.ws_row = 24;
    size.ws_col = 80;
    if (::openpty(&master, &slave, nullptr, nullptr, &size) != 0) {
      ADD_FAILURE() << "openpty: " << std::strerror(errno);
      return result;
    }
    ::fcntl(master, F_SETFD, FD_CLOEXEC);
    // Everything the child needs is made before the fork.
    auto argv_text = podman_.command(args);
    std::vector<std::string> env_text;
    for (char** entry = environ; *entry != nullptr; ++entry)
      env_text.emplace_back(*entry);
    for (const auto& entry : podman_.environment())
      env_text.push_back(entry);
    std::vector<char*> argv, envp;
    for (auto& arg : argv_text)
      argv.push_back(arg.data());
    argv.push_back(nullptr);
    for (auto& entry : env_text)
      envp.push_back(entry.data());
    envp.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid == 0) {
      // A session of its own with the slave as controlling terminal and
      // stdin, stdout and stderr.
      if (::login_tty(slave) != 0) ::_exit(126);
      ::execve(argv[0], argv.data(), envp.data());
      ::_exit(127);
    }
    ::close(slave);
    if (pid < 0) {
      ADD_FAILURE() << "fork: " << std::strerror(errno);
      ::close(master);
      return result;
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    bool typed_done = typed.empty();
    int status = 0;
    bool exited = false;
    // Until podman exits, then what is left on the master (bounded).
    for (int idle = 0; idle < 10;) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pid, SIGKILL);
        ADD_FAILURE() << "podman did not end within 60 s; output so far:\n" << result.output;
        break;
      }
      if (!exited && ::waitpid(pid, &status, WNOHANG) == pid) exited = true;
      pollfd readable{master, POLLIN, 0};
      if (::poll(&readable, 1, 100) <= 0) {
        if (exited) ++idle;
        continue;
      }
      char buffer[4096];
      const ssize_t n = ::read(master, buffer, sizeof buffer);
      if (n <= 0) {
        if (exited) break;  // EIO: no slave left open
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        continue;
      }
      result.output.append(buffer, static_cast<std::size_t>(n));
      if (!typed_done && result.output.find(after) != std::string::npos) {
        EXPECT_EQ(::write(master, typed.data(), typed.size()), static_cast<ssize_t>(typed.size()));
        typed_done = true;
      }
    }
    if (!exited) ::waitpid(pid, &status, 0);
    ::close(master);
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return result;
  }

  testing::TempDir temp_;
  PodmanEnv podman_{temp_.path()};
};

TEST_F(OciPodmanTtyTest, TtyIsTheContainersOwnPty) {
  const auto result = run_on_pty(
      {"run", "--rm", "-it", "--network", "none", PodmanEnv::kImage, "sh", "-c", "tty; echo hi"});
  EXPECT_EQ(result.exit_code, 0) << result.output;
  // A terminal turns \n into \r\n.
  EXPECT_NE(result.output.find("/dev/pts/0\r\n"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("hi\r\n"), std::string::npos) << result.output;
}

TEST_F(OciPodmanTtyTest, TypedExitIsTheStatus) {
  // busybox sh's prompt as root is "/ # ".
  const auto result = run_on_pty(
      {"run", "--rm", "-it", "--network", "none", PodmanEnv::kImage, "sh"}, "# ", "exit 4\n");
  EXPECT_EQ(result.exit_code, 4) << result.output;
}

}  // namespace
}  // namespace pulsebox
