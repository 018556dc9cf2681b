// The command's stdin (issue #19 item 1): a pipe, a file or nothing reach
// the command as the user gave them, in this process and through
// `pulsebox serve --local`; what would hand the sandbox a host object it
// could misuse (a file opened for writing, a socket, the user's terminal)
// is given read-only or relayed through a pipe.
#include <fcntl.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers/cli_fixture.h"
#include "helpers/cli_runner.h"
#include "helpers/local_server.h"
#include "helpers/test_support.h"

extern char** environ;

namespace pulsebox {
namespace {

class StdinTest : public testing::CliFixture, public ::testing::WithParamInterface<bool> {
 protected:
  void SetUp() override {
    CliFixture::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    if (served()) {
      ASSERT_EQ(
          server_.start(binary_, cli_env(true), state_ / "server.sock", scratch_ / "server.log"),
          "");
    }
  }
  void TearDown() override {
    // Each run went through the server (a fallback would hide a dropped stdin).
    if (served() && runs_ > 0) {
      EXPECT_EQ(server_.served_runs(), runs_) << server_.log();
    }
  }

  bool served() const { return GetParam(); }

  std::vector<std::string> args(const std::string& script) const {
    return {"run", "--allow-weaker",           "limits", "--timeout", "60",
            "-w",  workspace_.path().string(), "--",     "sh",        "-c",
            script};
  }

  // `pulsebox run` of `script` with `in` as its stdin (-1: closed);
  // `flags` go before "--"; `typed` is written to `terminal` once it runs.
  testing::CliRun run_with_stdin(const std::string& script, int in,
                                 const std::vector<std::string>& flags = {}, int terminal = -1,
                                 const std::string& typed = "") {
    ++runs_;
    int out_pipe[2], err_pipe[2];
    EXPECT_EQ(::pipe2(out_pipe, O_CLOEXEC), 0);
    EXPECT_EQ(::pipe2(err_pipe, O_CLOEXEC), 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    if (in < 0) {
      posix_spawn_file_actions_addclose(&actions, 0);
    } else {
      posix_spawn_file_actions_adddup2(&actions, in, 0);
    }
    posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
    posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
    std::vector<std::string> argv_storage = {binary_};
    const auto rest = args(script);
    argv_storage.insert(argv_storage.end(), rest.begin(), rest.end());
    argv_storage.insert(argv_storage.begin() + 2, flags.begin(), flags.end());
    std::vector<std::string> env_storage;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string entry = *e;
      if (entry.rfind("PULSEBOX_SERVER=", 0) != 0 && entry.rfind("PULSEBOX_STATE_DIR=", 0) != 0)
        env_storage.push_back(entry);
    }
    for (const auto& entry : cli_env(served()))
      env_storage.push_back(entry);
    const auto argv = testing::c_strings(argv_storage);
    const auto envp = testing::c_strings(env_storage);
    pid_t pid = -1;
    const int rc =
        ::posix_spawn(&pid, binary_.c_str(), &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    ::close(out_pipe[1]);
    ::close(err_pipe[1]);
    testing::CliRun run;
    EXPECT_EQ(rc, 0);
    if (terminal >= 0) {
      EXPECT_EQ(::write(terminal, typed.data(), typed.size()), static_cast<ssize_t>(typed.size()));
    }
    run.out = testing::drain(out_pipe[0]);
    run.err = testing::drain(err_pipe[0]);
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    int status = 0;
    if (rc == 0) ::waitpid(pid, &status, 0);
    run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return run;
  }

  testing::LocalServer server_;
  int runs_ = 0;
};

TEST_P(StdinTest, APipePassesThrough) {
  ++runs_;
  const auto run = testing::run_cli(args("cat"), "hi\n", cli_env(served()));
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, "hi\n") << run.err;
}

TEST_P(StdinTest, AFileRedirectPassesThroughAtItsOffset) {
  testing::write_file(scratch_ / "input.txt", "first\nsecond\n");
  const int file = ::open((scratch_ / "input.txt").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(file, 0);
  ASSERT_EQ(::lseek(file, 6, SEEK_SET), 6);
  const auto run = run_with_stdin("cat", file);
  ::close(file);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, "second\n") << run.err;
}

// `<>`: the shell opened the file for writing too; the command reads it but
// cannot write through its stdin.
TEST_P(StdinTest, AFileOpenForWritingIsGivenReadOnly) {
  testing::write_file(scratch_ / "input.txt", "data\n");
  const int file = ::open((scratch_ / "input.txt").c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(file, 0);
  const auto run = run_with_stdin("cat; echo planted >&0 && echo wrote", file);
  ::close(file);
  EXPECT_EQ(run.out, "data\n") << run.err;
  EXPECT_EQ(testing::read_file(scratch_ / "input.txt"), "data\n");
}

TEST_P(StdinTest, NoStdinGivesDevNull) {
  const auto run = run_with_stdin("readlink /proc/self/fd/0; cat; echo end", -1);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, "/dev/null\nend\n") << run.err;
}

// A socket on stdin would let the sandbox talk to its peer (sendmsg,
// getpeername): the command gets a pipe with the socket's data.
TEST_P(StdinTest, ASocketIsRelayedThroughAPipe) {
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  ASSERT_EQ(::write(pair[1], "over a socket\n", 14), 14);
  ::shutdown(pair[1], SHUT_WR);
  const auto run = run_with_stdin("cat; readlink /proc/self/fd/0", pair[0]);
  ::close(pair[0]);
  ::close(pair[1]);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out.substr(0, run.out.find('\n') + 1), "over a socket\n") << run.err;
  EXPECT_NE(run.out.find("pipe:"), std::string::npos) << run.out;
}

// A pseudo-terminal of the test's own: the user's terminal.
struct Terminal {
  int master = -1;
  int slave = -1;
  Terminal() {
    master = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (master < 0 || ::grantpt(master) != 0 || ::unlockpt(master) != 0) return;
    slave = ::open(::ptsname(master), O_RDWR | O_NOCTTY | O_CLOEXEC);
  }
  ~Terminal() {
    if (slave >= 0) ::close(slave);
    if (master >= 0) ::close(master);
  }
};

// Without -i a terminal is not read: the command ends instead of waiting for
// keys, and never holds the user's terminal.
TEST_P(StdinTest, ATerminalWithoutInteractiveGivesDevNull) {
  Terminal terminal;
  ASSERT_GE(terminal.slave, 0);
  const auto run = run_with_stdin("readlink /proc/self/fd/0; cat; echo end", terminal.slave);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, "/dev/null\nend\n") << run.err;
}

// With -i what is typed reaches the command, through a pipe: the sandbox
// gets no descriptor of the user's terminal.
TEST_P(StdinTest, InteractiveRelaysATerminalThroughAPipe) {
  Terminal terminal;
  ASSERT_GE(terminal.slave, 0);
  const auto run = run_with_stdin("head -n 1; readlink /proc/self/fd/0", terminal.slave, {"-i"},
                                  terminal.master, "typed\n");
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out.substr(0, run.out.find('\n') + 1), "typed\n") << run.err;
  EXPECT_NE(run.out.find("pipe:"), std::string::npos) << run.out;
}

std::string place_name(const ::testing::TestParamInfo<bool>& place) {
  return place.param ? "Served" : "InProcess";
}

INSTANTIATE_TEST_SUITE_P(InProcessAndServed, StdinTest, ::testing::Bool(), place_name);

}  // namespace
}  // namespace pulsebox
