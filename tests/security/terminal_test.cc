// `pulsebox run -t` (issue #19 item 1) driven through a real pseudo-terminal
// of the test's own, as a user's terminal: the command gets a terminal of
// the sandbox's own devpts, typed input reaches it, Ctrl-C ends it through
// its line discipline, a resize reaches it, the user's terminal is back in
// its mode afterwards, and nothing in the sandbox can push input into the
// user's terminal (TIOCSTI).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <chrono>

#include "helpers/cli_fixture.h"
#include "helpers/cli_runner.h"
#include "helpers/local_server.h"
#include "helpers/test_support.h"

extern char** environ;

namespace pulsebox {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

// pulsebox in a session of its own whose controlling terminal is a new
// pseudo-terminal: the test holds the master, as a terminal emulator does.
class TerminalSession {
 public:
  TerminalSession(const std::string& binary, const std::vector<std::string>& args,
                  const std::vector<std::string>& env, winsize size) {
    master_ = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (master_ < 0 || ::grantpt(master_) != 0 || ::unlockpt(master_) != 0) return;
    slave_path_ = ::ptsname(master_);
    (void)::ioctl(master_, TIOCSWINSZ, &size);
    slave_ = ::open(slave_path_.c_str(), O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (slave_ < 0 || ::tcgetattr(slave_, &before_) != 0) return;
    posix_spawnattr_t attributes;
    posix_spawnattr_init(&attributes);
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSID);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    // Opened after setsid, without O_NOCTTY: its controlling terminal.
    posix_spawn_file_actions_addopen(&actions, 0, slave_path_.c_str(), O_RDWR, 0);
    posix_spawn_file_actions_adddup2(&actions, 0, 1);
    posix_spawn_file_actions_adddup2(&actions, 0, 2);
    std::vector<std::string> argv_storage = {binary};
    argv_storage.insert(argv_storage.end(), args.begin(), args.end());
    std::vector<std::string> env_storage;
    for (char** e = environ; *e != nullptr; ++e)
      env_storage.emplace_back(*e);
    env_storage.insert(env_storage.end(), env.begin(), env.end());
    const auto argv = testing::c_strings(argv_storage);
    const auto envp = testing::c_strings(env_storage);
    if (::posix_spawn(&pid_, binary.c_str(), &actions, &attributes, argv.data(), envp.data()) != 0)
      pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attributes);
  }
  ~TerminalSession() {
    if (pid_ > 0 && status_ < 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (slave_ >= 0) ::close(slave_);
    if (master_ >= 0) ::close(master_);
  }
  TerminalSession(const TerminalSession&) = delete;
  TerminalSession& operator=(const TerminalSession&) = delete;

  bool started() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  int master() const { return master_; }
  int slave() const { return slave_; }
  const std::string& output() const { return output_; }
  const termios& before() const { return before_; }

  // Reads what the terminal shows until it holds `text` (true) or 20 s pass.
  bool expect(const std::string& text) {
    const auto deadline = steady_clock::now() + std::chrono::seconds(20);
    while (output_.find(text, seen_) == std::string::npos) {
      const auto left =
          std::chrono::duration_cast<milliseconds>(deadline - steady_clock::now()).count();
      if (left <= 0) return false;
      pollfd fd{master_, POLLIN, 0};
      if (::poll(&fd, 1, static_cast<int>(left)) <= 0) continue;
      char buffer[4096];
      const ssize_t n = ::read(master_, buffer, sizeof buffer);
      if (n <= 0) return false;
      output_.append(buffer, static_cast<size_t>(n));
    }
    seen_ = output_.find(text, seen_) + text.size();
    return true;
  }

  void type(const std::string& keys) {
    EXPECT_EQ(::write(master_, keys.data(), keys.size()), static_cast<ssize_t>(keys.size()));
  }

  // pulsebox's exit status, -1 if it did not end within 20 s.
  int wait() {
    for (int i = 0; i < 400 && status_ < 0; ++i) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        break;
      }
      // Keep the terminal drained: a full one would block the writer.
      pollfd fd{master_, POLLIN, 0};
      if (::poll(&fd, 1, 50) > 0) {
        char buffer[4096];
        const ssize_t n = ::read(master_, buffer, sizeof buffer);
        if (n > 0) output_.append(buffer, static_cast<size_t>(n));
      }
    }
    return status_;
  }

 private:
  int master_ = -1;
  int slave_ = -1;
  std::string slave_path_;
  termios before_{};
  pid_t pid_ = -1;
  int status_ = -1;
  std::string output_;
  std::size_t seen_ = 0;
};

class TerminalTest : public testing::CliFixture {
 protected:
  std::vector<std::string> args(const std::vector<std::string>& command,
                                const std::vector<std::string>& flags = {}) const {
    std::vector<std::string> all = {"run", "-t", "--allow-weaker",          "limits", "--timeout",
                                    "60",  "-w", workspace_.path().string()};
    all.insert(all.end(), flags.begin(), flags.end());
    all.emplace_back("--");
    all.insert(all.end(), command.begin(), command.end());
    return all;
  }
  static constexpr winsize kSize{24, 80, 0, 0};

  // The user's terminal is in its own mode again (raw mode was undone).
  static void expect_mode_restored(const TerminalSession& session) {
    termios after{};
    ASSERT_EQ(::tcgetattr(session.slave(), &after), 0);
    EXPECT_EQ(after.c_lflag, session.before().c_lflag);
    EXPECT_EQ(after.c_iflag, session.before().c_iflag);
    EXPECT_EQ(after.c_oflag, session.before().c_oflag);
  }
};

TEST_F(TerminalTest, TheCommandHasATerminalOfTheSandboxsOwn) {
  TerminalSession session(binary_, args({"sh", "-c", "tty; stty size"}), cli_env(), kSize);
  ASSERT_TRUE(session.started());
  EXPECT_TRUE(session.expect("/dev/pts/")) << session.output();
  EXPECT_TRUE(session.expect("24 80")) << session.output();
  EXPECT_EQ(session.wait(), 0) << session.output();
  EXPECT_EQ(session.output().find("not a tty"), std::string::npos) << session.output();
  expect_mode_restored(session);
}

TEST_F(TerminalTest, TypedInputReachesPython) {
  TerminalSession session(binary_,
                          args({"python3", "-c", "print('got ' + input('name? ').upper())"}),
                          cli_env(), kSize);
  ASSERT_TRUE(session.started());
  ASSERT_TRUE(session.expect("name? ")) << session.output();
  session.type("pulse\r");
  EXPECT_TRUE(session.expect("got PULSE")) << session.output();
  EXPECT_EQ(session.wait(), 0) << session.output();
  expect_mode_restored(session);
}

TEST_F(TerminalTest, CtrlCEndsTheCommand) {
  TerminalSession session(binary_, args({"sh", "-c", "echo ready; exec sleep 30"}), cli_env(),
                          kSize);
  ASSERT_TRUE(session.started());
  ASSERT_TRUE(session.expect("ready")) << session.output();
  session.type("\x03");
  EXPECT_EQ(session.wait(), 128 + SIGINT) << session.output();
  expect_mode_restored(session);
}

TEST_F(TerminalTest, CtrlZReachesTheCommand) {
  // SIGTSTP blocked and waited for: a handler and signal.pause() would race
  // (Python runs a handler between bytecodes, so one caught just before
  // pause() waited forever; it failed so once in CI under load).
  const std::string script =
      "import signal\n"
      "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTSTP})\n"
      "print('ready', flush=True)\n"
      "signal.sigwait({signal.SIGTSTP})\n"
      "print('got TSTP', flush=True)\n";
  TerminalSession session(binary_, args({"python3", "-c", script}), cli_env(), kSize);
  ASSERT_TRUE(session.started());
  ASSERT_TRUE(session.expect("ready")) << session.output();
  session.type("\x1a");
  EXPECT_TRUE(session.expect("got TSTP")) << session.output();
  EXPECT_EQ(session.wait(), 0) << session.output();
}

// What the terminal shows goes through the scrubber as piped output does.
TEST_F(TerminalTest, TheTerminalsOutputIsScrubbed) {
  auto env = cli_env();
  env.emplace_back("PB_TERMINAL_SECRET=s3cr3t-terminal-value-4711");
  TerminalSession session(
      binary_,
      args({"sh", "-c", "echo \"value=$PB_TERMINAL_SECRET\""}, {"--secret", "PB_TERMINAL_SECRET"}),
      env, kSize);
  ASSERT_TRUE(session.started());
  EXPECT_TRUE(session.expect("value=")) << session.output();
  EXPECT_EQ(session.wait(), 0) << session.output();
  EXPECT_EQ(session.output().find("s3cr3t-terminal-value-4711"), std::string::npos)
      << session.output();
  EXPECT_NE(session.output().find("REDACTED"), std::string::npos) << session.output();
}

// pulsebox ended by a signal still gives the user's terminal its mode back.
TEST_F(TerminalTest, ASignalledPulseboxRestoresTheTerminal) {
  TerminalSession session(binary_, args({"sh", "-c", "echo ready; exec sleep 30"}), cli_env(),
                          kSize);
  ASSERT_TRUE(session.started());
  ASSERT_TRUE(session.expect("ready")) << session.output();
  ASSERT_EQ(::kill(session.pid(), SIGTERM), 0);
  EXPECT_EQ(session.wait(), 128 + SIGTERM) << session.output();
  expect_mode_restored(session);
  // A pulsebox ended by a signal leaves what a crashed run leaves (its
  // cgroup, its lock): reconcile removes it, so no later test finds it.
  const auto reconciled =
      testing::run_cli({"reconcile", "-w", workspace_.path().string()}, "", cli_env());
  EXPECT_EQ(reconciled.exit_code, 0) << reconciled.err;
}

TEST_F(TerminalTest, AResizeReachesTheCommand) {
  // Bounded by expect()'s wait; the shell ends with the test's session.
  const std::string script =
      "stty size; while [ \"$(stty size)\" != '40 100' ]; do sleep 0.05; done; echo resized";
  TerminalSession session(binary_, args({"sh", "-c", script}), cli_env(), kSize);
  ASSERT_TRUE(session.started());
  ASSERT_TRUE(session.expect("24 80")) << session.output();
  // As a terminal emulator does: the kernel sends SIGWINCH to pulsebox.
  const winsize bigger{40, 100, 0, 0};
  ASSERT_EQ(::ioctl(session.master(), TIOCSWINSZ, &bigger), 0);
  EXPECT_TRUE(session.expect("resized")) << session.output();
  EXPECT_EQ(session.wait(), 0) << session.output();
  expect_mode_restored(session);
}

// The command holds only the sandbox's terminal: TIOCSTI (refused by the
// default profile anyway) could at most push into that one, never into the
// user's, which has nothing queued afterwards.
TEST_F(TerminalTest, TiocstiCannotReachTheUsersTerminal) {
  const std::string push =
      "import fcntl, termios\n"
      "try:\n"
      "    for c in 'id\\n': fcntl.ioctl(0, termios.TIOCSTI, c.encode())\n"
      "    print('pushed')\n"
      "except OSError as e: print('refused', e.errno)\n";
  for (const std::string profile : {"default", "unconfined"}) {
    SCOPED_TRACE(profile);
    TerminalSession session(
        binary_,
        args({"python3", "-c", push}, {"--seccomp", profile, "--allow-weaker", "syscalls"}),
        cli_env(), kSize);
    ASSERT_TRUE(session.started());
    EXPECT_EQ(session.wait(), 0) << session.output();
    // Unconfined, it lands in the sandbox's own terminal (if this kernel
    // allows TIOCSTI at all: dev.tty.legacy_tiocsti).
    if (profile == "default") {
      EXPECT_NE(session.output().find("refused"), std::string::npos) << session.output();
    }
    // What the user's terminal would give its next reader: nothing.
    const int flags = ::fcntl(session.slave(), F_GETFL);
    ASSERT_EQ(::fcntl(session.slave(), F_SETFL, flags | O_NONBLOCK), 0);
    char queued[64];
    const ssize_t n = ::read(session.slave(), queued, sizeof queued);
    EXPECT_EQ(n, -1) << "the user's terminal holds: " << std::string(queued, n > 0 ? n : 0);
  }
}

// A server cannot put the user's terminal in raw mode: it answers "fallback"
// and the run happens in the client's process.
TEST_F(TerminalTest, AServedRunFallsBackToTheClient) {
  testing::LocalServer server;
  ASSERT_EQ(server.start(binary_, cli_env(true), state_ / "server.sock", scratch_ / "server.log"),
            "");
  TerminalSession session(binary_, args({"tty"}), cli_env(true), kSize);
  ASSERT_TRUE(session.started());
  EXPECT_TRUE(session.expect("/dev/pts/")) << session.output();
  EXPECT_EQ(session.wait(), 0) << session.output();
  EXPECT_EQ(server.served_runs(), 0) << server.log();
  EXPECT_NE(server.log().find("-t runs in the client's process"), std::string::npos)
      << server.log();
}

}  // namespace
}  // namespace pulsebox
