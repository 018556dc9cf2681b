// Names that a sandboxed command chooses reach the reviewer's terminal: in
// `pulsebox diff` headers, `pulsebox commit`'s list and its conflict errors,
// the origin `pulsebox changes` shows, a refused run's error. Raw, a name
// such as ESC [2K ESC [1A erased the line a reviewer should have seen, a
// newline forged a line of its own, a right-to-left override turned
// "txt.exe" around. Names are now shown quoted the way git quotes them
// ("a/esc\033[2K..."), and on a terminal the diff's content lines are
// escaped too; piped, the content stays raw so `pulsebox diff | git apply`
// applies it byte for byte.
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <chrono>
#include <nlohmann/json.hpp>

#include "helpers/cli_runner.h"
#include "helpers/test_support.h"

extern char** environ;

namespace pulsebox {
namespace {

using testing::TempDir;

const std::string kErase = "esc\x1b[2K\x1b[1Ahidden";  // erases the line above
const std::string kNewline = "new\nline.txt";
const std::string kReturn = "cr\rret.txt";
const std::string kBidi = "bidi\xe2\x80\xaetxt.exe";  // U+202E RIGHT-TO-LEFT OVERRIDE
const std::string kContent = "+\x1b[2K\x1b[1Ahidden line";

// The first byte sequence a terminal would act on, described; "" if none.
std::string raw_hazard(const std::string& text) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == 0x1b) return "ESC at " + std::to_string(i);
    if (c == '\r') return "CR at " + std::to_string(i);
    if (c == 0xff || c == 0xfe) return "an invalid UTF-8 byte at " + std::to_string(i);
    if (text.compare(i, 3, "\xe2\x80\xae") == 0) return "U+202E at " + std::to_string(i);
  }
  return "";
}

// `text` without pulsebox's own colour codes.
std::string without_own_colours(std::string text) {
  for (const char* code : {"\x1b[0m", "\x1b[1m", "\x1b[31m", "\x1b[32m", "\x1b[36m"}) {
    for (auto at = text.find(code); at != std::string::npos; at = text.find(code))
      text.erase(at, std::string(code).size());
  }
  return text;
}

// Runs the CLI with its stdout and stderr on a pseudo-terminal (no output
// processing, so "\n" stays "\n"); returns what it wrote there. `colour`
// leaves NO_COLOR out of the environment and sets TERM.
std::string run_on_terminal(const std::vector<std::string>& args,
                            const std::vector<std::string>& extra_env, bool colour) {
  int master = -1;
  int slave = -1;
  if (::openpty(&master, &slave, nullptr, nullptr, nullptr) != 0) {
    ADD_FAILURE() << "openpty: " << std::strerror(errno);
    return "";
  }
  termios mode{};
  ::tcgetattr(slave, &mode);
  mode.c_oflag &= ~OPOST;
  ::tcsetattr(slave, TCSANOW, &mode);
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    if (entry.rfind("NO_COLOR=", 0) != 0 && entry.rfind("TERM=", 0) != 0) env.push_back(entry);
  }
  env.push_back(colour ? "TERM=xterm-256color" : "TERM=dumb");
  if (!colour) env.push_back("NO_COLOR=1");
  env.insert(env.end(), extra_env.begin(), extra_env.end());
  const std::string binary = std::getenv("PULSEBOX_BIN");
  std::vector<std::string> argv_storage = {binary};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  const std::vector<char*> argv = testing::c_strings(argv_storage);
  const std::vector<char*> envp = testing::c_strings(env);
  const pid_t child = ::fork();
  if (child == 0) {
    ::setsid();
    ::dup2(slave, STDOUT_FILENO);
    ::dup2(slave, STDERR_FILENO);
    ::close(master);
    ::close(slave);
    ::execve(binary.c_str(), argv.data(), envp.data());
    ::_exit(127);
  }
  ::close(slave);
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd ready{master, POLLIN, 0};
    if (::poll(&ready, 1, 1000) <= 0) continue;
    char buffer[4096];
    const ssize_t n = ::read(master, buffer, sizeof buffer);
    if (n <= 0) break;  // EIO once the last writer is gone
    out.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(master);
  // The terminal closes as the CLI exits; its exit may follow a moment later.
  int status = 0;
  pid_t done = 0;
  while ((done = ::waitpid(child, &status, WNOHANG)) == 0 &&
         std::chrono::steady_clock::now() < deadline) {
    ::usleep(10000);
  }
  if (done == 0) {
    ::kill(child, SIGKILL);  // our own child, past the deadline
    ::waitpid(child, &status, 0);
    ADD_FAILURE() << "the CLI did not finish on the terminal";
  }
  return out;
}

class TerminalEscapeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(std::getenv("PULSEBOX_BIN"), nullptr) << "PULSEBOX_BIN is set by meson";
    testing::write_file(workspace_ / kErase, "original\n");
  }

  std::vector<std::string> env() const {
    return {"PULSEBOX_STATE_DIR=" + state_.path().string(), "PULSEBOX_SERVER=off", "NO_COLOR=1"};
  }

  // A sandboxed command that writes a file under each name in `names`
  // (passed as arguments) and `script`'s own; returns the transaction.
  std::string run_sandbox(const std::vector<std::string>& names, const std::string& script = "") {
    std::vector<std::string> args = {"run",
                                     "--allow-weaker",
                                     "limits",
                                     "-w",
                                     workspace_.path().string(),
                                     "--",
                                     "sh",
                                     "-c",
                                     "for n in \"$@\"; do printf 'x\\n' > \"$n\"; done; " + script,
                                     "sh"};
    args.insert(args.end(), names.begin(), names.end());
    const auto run = testing::run_cli(args, "", env());
    EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
    EXPECT_EQ(raw_hazard(run.err), "") << run.err;
    const auto pending =
        testing::run_cli({"changes", "--json", "-w", workspace_.path().string()}, "", env());
    const auto list = nlohmann::json::parse(pending.out, nullptr, false);
    if (!list.is_array() || list.empty()) {
      ADD_FAILURE() << "no transaction: " << pending.out << pending.err;
      return "";
    }
    return list.back()["id"].get<std::string>();
  }

  TempDir workspace_;
  TempDir state_;
};

TEST_F(TerminalEscapeTest, ChangesAndDiffShowHostileNamesQuoted) {
  const std::string tx = run_sandbox({kErase, kNewline, kReturn, kBidi},
                                     "mkdir \"$1.d\"; printf 'one\\n\\033[2K\\033[1Ahidden "
                                     "line\\n' > content.txt");
  ASSERT_FALSE(tx.empty());
  const std::string w = workspace_.path().string();

  // The origin names the command, its hostile arguments with it.
  const auto changes = testing::run_cli({"changes", "-w", w}, "", env());
  EXPECT_EQ(changes.exit_code, 0) << changes.err;
  EXPECT_EQ(raw_hazard(changes.out + changes.err), "") << changes.out;
  EXPECT_NE(changes.out.find("esc\\033[2K\\033[1Ahidden"), std::string::npos) << changes.out;
  EXPECT_NE(changes.out.find("new\\nline.txt"), std::string::npos) << changes.out;

  // Piped: names quoted as git quotes them, content raw (git apply reads it).
  const auto piped = testing::run_cli({"diff", "-w", w, tx}, "", env());
  EXPECT_EQ(piped.exit_code, 0) << piped.err;
  for (const std::string& expected : std::vector<std::string>{
           "diff --git \"a/esc\\033[2K\\033[1Ahidden\" \"b/esc\\033[2K\\033[1Ahidden\"\n",
           "+++ \"b/esc\\033[2K\\033[1Ahidden\"\n",
           "diff --git \"a/esc\\033[2K\\033[1Ahidden.d\" \"b/esc\\033[2K\\033[1Ahidden.d\"\n",
           "+++ \"b/new\\nline.txt\"\n", "+++ \"b/cr\\rret.txt\"\n",
           "+++ \"b/bidi\\342\\200\\256txt.exe\"\n", "\n" + kContent + "\n"}) {
    EXPECT_NE(piped.out.find(expected), std::string::npos) << expected << " in:\n" << piped.out;
  }
  std::string headers = piped.out;
  headers.erase(headers.find(kContent), kContent.size());
  EXPECT_EQ(raw_hazard(headers), "") << headers;
  EXPECT_EQ(headers.find("\nline.txt"), std::string::npos) << "a name split into two lines";

  // On a terminal, the content is escaped as well, with and without colour.
  for (bool colour : {false, true}) {
    SCOPED_TRACE(colour ? "colour" : "no colour");
    const std::string shown = run_on_terminal({"diff", "-w", w, tx}, env(), colour);
    EXPECT_EQ(raw_hazard(without_own_colours(shown)), "") << shown;
    EXPECT_NE(without_own_colours(shown).find("+\\033[2K\\033[1Ahidden line\n"), std::string::npos)
        << shown;
    EXPECT_NE(shown.find("\"b/new\\nline.txt\""), std::string::npos) << shown;
    EXPECT_EQ(shown.find("\nline.txt"), std::string::npos) << shown;
  }
}

TEST_F(TerminalEscapeTest, CommitListsAndConflictErrorsQuoteNames) {
  const std::string w = workspace_.path().string();
  // A commit that conflicts: the hostile-named file changes on the host
  // after the sandbox wrote it.
  const std::string conflicting = run_sandbox({kErase});
  ASSERT_FALSE(conflicting.empty());
  testing::write_file(workspace_ / kErase, "changed on the host\n");
  for (bool terminal : {false, true}) {
    SCOPED_TRACE(terminal ? "terminal" : "pipe");
    std::string shown;
    if (terminal) {
      shown = run_on_terminal({"commit", "-w", w, conflicting}, env(), false);
    } else {
      const auto refused = testing::run_cli({"commit", "-w", w, conflicting}, "", env());
      EXPECT_EQ(refused.exit_code, 125) << refused.out << refused.err;
      shown = refused.out + refused.err;
    }
    EXPECT_EQ(raw_hazard(shown), "") << shown;
    EXPECT_NE(shown.find("\"esc\\033[2K\\033[1Ahidden\""), std::string::npos) << shown;
  }
  ASSERT_EQ(testing::run_cli({"discard", "-w", w, conflicting}, "", env()).exit_code, 0);

  // A commit that applies lists what it changed, quoted.
  const std::string clean = run_sandbox({kNewline, kReturn, kBidi});
  ASSERT_FALSE(clean.empty());
  const auto committed = testing::run_cli({"commit", "-w", w, clean}, "", env());
  EXPECT_EQ(committed.exit_code, 0) << committed.err;
  EXPECT_EQ(raw_hazard(committed.out + committed.err), "") << committed.out;
  for (const std::string expected :
       {"  \"new\\nline.txt\"\n", "  \"cr\\rret.txt\"\n", "  \"bidi\\342\\200\\256txt.exe\"\n"}) {
    EXPECT_NE(committed.out.find(expected), std::string::npos) << expected << committed.out;
  }
}

// A refused run names the command it refused; its arguments are the
// caller's, but they may come from anywhere (a file list, a previous run).
// A policy file with no rule for SHELL refuses every command.
TEST_F(TerminalEscapeTest, ARefusedRunsErrorShowsItsArgumentsEscaped) {
  const std::filesystem::path policy = workspace_ / "policy.json";
  testing::write_file(policy, R"({"rules": []})");
  const auto run =
      testing::run_cli({"run", "--allow-weaker", "limits", "--policy", policy.string(), "-w",
                        workspace_.path().string(), "--", "echo", "bad\xff\xfe", kErase},
                       "", env());
  EXPECT_NE(run.exit_code, 0);
  EXPECT_EQ(raw_hazard(run.out + run.err), "") << run.err;
  EXPECT_NE(run.err.find("\\033[2K"), std::string::npos) << run.err;
}

// Names are bytes: one that is not UTF-8 is shown with octal escapes, like
// git.
TEST_F(TerminalEscapeTest, NamesThatAreNotUtf8AreShownAsOctalEscapes) {
  const std::string tx = run_sandbox({}, "printf 'y\\n' > \"$(printf 'bad\\377\\376.txt')\"");
  ASSERT_FALSE(tx.empty());
  const auto piped = testing::run_cli({"diff", "-w", workspace_.path().string(), tx}, "", env());
  EXPECT_EQ(raw_hazard(piped.out), "") << piped.out;
  EXPECT_NE(piped.out.find("+++ \"b/bad\\377\\376.txt\"\n"), std::string::npos) << piped.out;
}

}  // namespace
}  // namespace pulsebox
