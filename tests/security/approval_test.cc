// Issue #19 item 7: an ASK decision of the action policy must be decided
// before anything runs. The break: ASK ran the command anyway and only
// audited "ask". Now the CLI refuses (exit 125, naming the rule) unless -y,
// --approve-with CMD (the decision's JSON on its stdin, exit 0 allows) or a
// terminal approves; the decision and its approver are audited.
#include <poll.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>

#include "helpers/cli_fixture.h"
#include "helpers/cli_runner.h"
#include "helpers/local_server.h"
#include "helpers/test_support.h"

namespace pulsebox {
namespace {

class ApprovalTest : public testing::CliFixture {
 protected:
  void SetUp() override {
    CliFixture::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    policy_ = (scratch_.path() / "ask.json").string();
    testing::write_file(policy_, R"({"rules": [{"action": "shell", "target": "*",
      "decision": "ask", "reason": "a person reviews every command"}]})");
  }

  testing::CliRun run(const std::vector<std::string>& flags, bool served = false) {
    std::vector<std::string> args = {
        "run", "--allow-weaker", "limits", "--policy", policy_, "-w", workspace_.path().string()};
    args.insert(args.end(), flags.begin(), flags.end());
    args.insert(args.end(), {"--", "sh", "-c", "echo the-command-ran"});
    return testing::run_cli(args, "", cli_env(served));
  }

  std::string audit_log() const {
    return testing::read_file(workspace_.path() / ".agent/logs/audit.jsonl");
  }

  // The audit records of `action`, parsed.
  std::vector<nlohmann::json> records(const std::string& action) const {
    std::vector<nlohmann::json> found;
    std::istringstream lines(audit_log());
    for (std::string line; std::getline(lines, line);) {
      auto record = nlohmann::json::parse(line, nullptr, false);
      if (record.is_object() && record.value("action", "") == action) found.push_back(record);
    }
    return found;
  }

  // `pulsebox run` on a pseudo-terminal: waits (bounded) for the prompt,
  // types `answer`, and returns everything the terminal showed and the exit.
  std::pair<int, std::string> run_on_terminal(const std::string& answer) {
    std::vector<std::string> args = {binary_,
                                     "run",
                                     "--allow-weaker",
                                     "limits",
                                     "--policy",
                                     policy_,
                                     "-w",
                                     workspace_.path().string(),
                                     "--",
                                     "sh",
                                     "-c",
                                     "echo the-command-ran"};
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e)
      env.emplace_back(*e);
    for (const auto& extra : cli_env())
      env.push_back(extra);
    std::vector<char*> argv, envp;
    for (auto& a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : env)
      envp.push_back(e.data());
    envp.push_back(nullptr);
    int master = -1;
    const pid_t pid = ::forkpty(&master, nullptr, nullptr, nullptr);
    if (pid == 0) {
      ::execve(argv[0], argv.data(), envp.data());
      ::_exit(127);
    }
    EXPECT_GT(pid, 0) << std::strerror(errno);
    if (pid <= 0) return {-1, ""};
    std::string shown;
    bool answered = false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd fd = {master, POLLIN, 0};
      if (::poll(&fd, 1, 1000) <= 0) continue;
      char buffer[4096];
      const ssize_t n = ::read(master, buffer, sizeof buffer);
      if (n <= 0) break;  // EIO: the terminal's last process ended
      shown.append(buffer, static_cast<std::size_t>(n));
      if (!answered && shown.find("[y/N]") != std::string::npos) {
        answered = true;
        const std::string line = answer + "\n";
        EXPECT_EQ(::write(master, line.data(), line.size()), static_cast<ssize_t>(line.size()));
      }
    }
    ::close(master);
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(answered) << "no prompt; the terminal showed: " << shown;
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, shown};
  }

  std::string policy_;
};

TEST_F(ApprovalTest, AskWithoutAnApproverRefusesNamingTheRule) {
  const auto result = run({});
  EXPECT_EQ(result.exit_code, 125) << result.err;
  EXPECT_EQ(result.out.find("the-command-ran"), std::string::npos) << result.out;
  EXPECT_NE(result.err.find("ask by rule #1"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("a person reviews every command"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("--approve-with"), std::string::npos) << result.err;
}

TEST_F(ApprovalTest, YesApprovesAndTheApproverIsAudited) {
  const auto result = run({"-y"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("the-command-ran"), std::string::npos) << result.out;
  const auto approvals = records("approval");
  ASSERT_EQ(approvals.size(), 1u) << audit_log();
  EXPECT_EQ(approvals[0].value("decision", ""), "allow");
  EXPECT_EQ(approvals[0].value("approver", ""), "--yes") << approvals[0].dump();
}

TEST_F(ApprovalTest, ApproveWithGetsTheDecisionAsJsonAndExitZeroAllows) {
  const auto seen = scratch_.path() / "request.json";
  const auto result = run({"--approve-with", "cat > '" + seen.string() + "'"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("the-command-ran"), std::string::npos) << result.out;
  const auto request = nlohmann::json::parse(testing::read_file(seen), nullptr, false);
  ASSERT_TRUE(request.is_object()) << testing::read_file(seen);
  EXPECT_EQ(request.value("action", ""), "shell");
  EXPECT_EQ(request.value("decision", ""), "ask");
  EXPECT_NE(request.value("target", "").find("echo the-command-ran"), std::string::npos);
  EXPECT_EQ(request.value("reason", ""), "a person reviews every command");
  EXPECT_NE(request.value("rule", "").find("rule #1"), std::string::npos);
  const auto approvals = records("approval");
  ASSERT_EQ(approvals.size(), 1u) << audit_log();
  EXPECT_EQ(approvals[0].value("decision", ""), "allow");
  EXPECT_NE(approvals[0].value("approver", "").find("--approve-with"), std::string::npos);
}

TEST_F(ApprovalTest, ApproveWithNonZeroExitDeniesBeforeAnythingRuns) {
  const auto marker = scratch_.path() / "ran";
  const auto result = run({"--approve-with", "exit 3"});
  EXPECT_EQ(result.exit_code, 125) << result.err;
  EXPECT_EQ(result.out.find("the-command-ran"), std::string::npos) << result.out;
  EXPECT_NE(result.err.find("not approved"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("exit 3"), std::string::npos) << result.err;
  const auto approvals = records("approval");
  ASSERT_EQ(approvals.size(), 1u) << audit_log();
  EXPECT_EQ(approvals[0].value("decision", ""), "deny");
}

TEST_F(ApprovalTest, AnApproverThatNeverAnswersIsDeniedInBoundedTime) {
  const auto started = std::chrono::steady_clock::now();
  // It never reads its stdin and never exits; its child holds stderr too.
  const auto result = run({"--approve-timeout", "1", "--approve-with", "sleep 30 & sleep 30"});
  const auto took = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(result.exit_code, 125) << result.err;
  EXPECT_EQ(result.out.find("the-command-ran"), std::string::npos) << result.out;
  EXPECT_NE(result.err.find("no answer within 1 s"), std::string::npos) << result.err;
  EXPECT_LT(took, std::chrono::seconds(20));
}

TEST_F(ApprovalTest, ATerminalIsAskedAndItsYesAllows) {
  const auto [status, shown] = run_on_terminal("y");
  EXPECT_EQ(status, 0) << shown;
  EXPECT_NE(shown.find("a person reviews every command"), std::string::npos) << shown;
  // The command's own output comes after the answer.
  EXPECT_GT(shown.rfind("the-command-ran"), shown.find("[y/N]")) << shown;
  const auto approvals = records("approval");
  ASSERT_EQ(approvals.size(), 1u) << audit_log();
  EXPECT_EQ(approvals[0].value("approver", ""), "terminal");
  EXPECT_EQ(approvals[0].value("decision", ""), "allow");
}

TEST_F(ApprovalTest, ATerminalsOtherAnswerDenies) {
  const auto [status, shown] = run_on_terminal("n");
  EXPECT_EQ(status, 125) << shown;
  // Only the echoed prompt text names it; the command never printed.
  EXPECT_EQ(shown.find("the-command-ran\r"), std::string::npos) << shown;
  EXPECT_NE(shown.find("not approved by terminal"), std::string::npos) << shown;
}

// A run through `pulsebox serve --local` decides the same way; the server
// has no terminal of the client's to ask.
TEST_F(ApprovalTest, ARunThroughTheLocalServerIsDecidedTheSameWay) {
  testing::LocalServer server;
  ASSERT_EQ(server.start(binary_, cli_env(true), state_ / "server.sock", scratch_ / "server.log"),
            "");
  auto result = run({}, /*served=*/true);
  EXPECT_EQ(result.exit_code, 125) << result.err;
  EXPECT_NE(result.err.find("ask by rule #1"), std::string::npos) << result.err;
  result = run({"--approve-with", "exit 1"}, /*served=*/true);
  EXPECT_EQ(result.exit_code, 125) << result.err;
  EXPECT_NE(result.err.find("not approved"), std::string::npos) << result.err;
  result = run({"-y"}, /*served=*/true);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("the-command-ran"), std::string::npos) << result.out;
  EXPECT_EQ(server.served_runs(), 3) << server.log();
  const auto approvals = records("approval");
  ASSERT_EQ(approvals.size(), 2u) << audit_log();
}

TEST_F(ApprovalTest, YesAndApproveWithTogetherAreRefused) {
  const auto result = run({"-y", "--approve-with", "true"});
  EXPECT_EQ(result.exit_code, 125) << result.err;
  EXPECT_NE(result.err.find("give one of them"), std::string::npos) << result.err;
}

}  // namespace
}  // namespace pulsebox
