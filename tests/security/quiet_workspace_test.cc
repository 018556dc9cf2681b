// pulsebox's own .agent/ and the command's HOME stay out of the project
// (issue #18 item 5). What broke: `git status` listed .agent/ as untracked;
// a run from a subdirectory made a second .agent/ there; inside the sandbox
// .agent/ was an empty mount point (listed by `ls -a`, rmdir failed EBUSY);
// HOME was /workspace, so dotfiles and caches became the run's changes.
// Each test drives the real CLI, as root and as an ordinary user.
#include <sys/stat.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "helpers/cli_fixture.h"
#include "helpers/cli_runner.h"

namespace pulsebox {
namespace {

namespace fs = std::filesystem;
using testing::CliRun;

class QuietWorkspaceTest : public testing::CliFixture {
 protected:
  CliRun sandbox(const std::string& script, std::vector<std::string> flags = {},
                 const std::string& cwd = "") {
    std::vector<std::string> args = {"run",    "--json",    "--allow-weaker",
                                     "limits", "--timeout", "60"};
    args.insert(args.end(), flags.begin(), flags.end());
    args.insert(args.end(), {"--", "sh", "-c", script});
    return testing::run_cli(args, "", cli_env(), cwd.empty() ? workspace_.path().string() : cwd);
  }
  static nlohmann::json result_of(const CliRun& run) {
    auto result = nlohmann::json::parse(run.out, nullptr, false);
    if (result.is_discarded() || !result.is_object()) {
      ADD_FAILURE() << "no result (exit " << run.exit_code << "): " << run.err;
      return nlohmann::json::object();
    }
    return result;
  }
  static std::string output(const std::string& command) {
    std::string text;
    FILE* pipe = ::popen(command.c_str(), "r");
    if (pipe == nullptr) return "popen failed";
    char buffer[4096];
    for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;)
      text.append(buffer, n);
    ::pclose(pipe);
    return text;
  }
};

TEST_F(QuietWorkspaceTest, GitStatusDoesNotListTheAgentDirectory) {
  const std::string ws = workspace_.path().string();
  if (std::system(("git init -q " + ws + " >/dev/null 2>&1").c_str()) != 0)
    GTEST_SKIP() << "git is not installed";
  testing::write_file(workspace_ / "tracked.txt", "x\n");
  ASSERT_EQ(std::system(("git -C " + ws + " add tracked.txt").c_str()), 0);
  const CliRun run = sandbox("echo changed > tracked.txt");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  ASSERT_TRUE(fs::is_directory(workspace_ / ".agent"));
  EXPECT_EQ(testing::read_file(workspace_ / ".agent" / ".gitignore").find('*') != std::string::npos,
            true);
  // Only the staged file the test added; nothing of pulsebox's.
  EXPECT_EQ(output("git -C " + ws + " status --porcelain --untracked-files=all --ignored=no"),
            "A  tracked.txt\n");
}

TEST_F(QuietWorkspaceTest, AMissingGitignoreIsAddedBack) {
  ASSERT_EQ(sandbox("true").exit_code, 0);
  fs::remove(workspace_ / ".agent" / ".gitignore");
  ASSERT_EQ(sandbox("true").exit_code, 0);
  EXPECT_TRUE(fs::exists(workspace_ / ".agent" / ".gitignore"));
}

TEST_F(QuietWorkspaceTest, TheAgentDirectoryIsNotThereInsideTheSandbox) {
  ASSERT_EQ(sandbox("true").exit_code, 0);  // makes .agent/
  ASSERT_TRUE(fs::is_directory(workspace_ / ".agent"));
  testing::write_file(workspace_ / "kept.txt", "k\n");
  const CliRun run = sandbox(
      "ls -a /workspace; test -e /workspace/.agent && echo VISIBLE; "
      "mkdir /workspace/.agent && echo own > /workspace/.agent/mine && echo MADE");
  const auto result = result_of(run);
  const std::string out = result.value("stdout", "");
  EXPECT_NE(out.find("kept.txt"), std::string::npos) << out;
  EXPECT_EQ(out.find(".agent"), std::string::npos) << out;
  EXPECT_EQ(out.find("VISIBLE"), std::string::npos) << out;
  EXPECT_NE(out.find("MADE"), std::string::npos) << out << run.err;
  // The sandbox's own .agent is never a change, and the real one is untouched.
  EXPECT_FALSE(result.contains("transaction_id") && result["transaction_id"].is_string())
      << result.dump();
  EXPECT_FALSE(fs::exists(workspace_ / ".agent" / "mine"));
}

TEST_F(QuietWorkspaceTest, ARunFromASubdirectoryUsesTheWorkspaceAbove) {
  ASSERT_EQ(sandbox("true").exit_code, 0);  // makes .agent/ at the top
  fs::create_directories(workspace_ / "sub" / "deep");
  const CliRun run = sandbox("pwd; echo hi > here.txt", {}, (workspace_ / "sub" / "deep").string());
  const auto result = result_of(run);
  EXPECT_EQ(result.value("stdout", ""), "/workspace/sub/deep\n") << result.dump();
  EXPECT_FALSE(fs::exists(workspace_ / "sub" / "deep" / ".agent"));
  EXPECT_FALSE(fs::exists(workspace_ / "sub" / ".agent"));
  ASSERT_TRUE(result.contains("transaction_id") && result["transaction_id"].is_string())
      << result.dump();
  const std::string tx = result["transaction_id"];
  EXPECT_TRUE(fs::is_directory(workspace_ / ".agent" / "transactions" / tx));
  bool listed = false;
  for (const auto& change : result.value("changes", nlohmann::json::array()))
    listed = listed || change.value("path", "") == "sub/deep/here.txt";
  EXPECT_TRUE(listed) << result.dump();
}

TEST_F(QuietWorkspaceTest, HomeIsPrivateAndNotAChange) {
  const CliRun run = sandbox(
      "echo \"$HOME\"; mkdir -p \"$HOME/.cache/tool\" && echo c > \"$HOME/.cache/tool/x\" && "
      "echo dot > \"$HOME/.toolrc\" && stat -c %a \"$HOME\"");
  const auto result = result_of(run);
  EXPECT_EQ(result.value("exit_code", -1), 0) << result.dump();
  const std::string out = result.value("stdout", "");
  EXPECT_EQ(out.rfind("/home/sandbox\n", 0), 0u) << out;
  EXPECT_NE(out.find("700"), std::string::npos) << out;
  EXPECT_FALSE(result.contains("transaction_id") && result["transaction_id"].is_string())
      << result.dump();
}

TEST_F(QuietWorkspaceTest, AKeptHomeSurvivesBetweenRuns) {
  const fs::path home = scratch_ / "home";
  const std::vector<std::string> flag = {"--home", home.string()};
  const auto first = result_of(sandbox("echo one >> \"$HOME/count\"", flag));
  ASSERT_EQ(first.value("exit_code", -1), 0) << first.dump();
  const auto second = result_of(sandbox("echo two >> \"$HOME/count\"; cat \"$HOME/count\"", flag));
  EXPECT_EQ(second.value("stdout", ""), "one\ntwo\n") << second.dump();
  EXPECT_EQ(testing::read_file(home / "count"), "one\ntwo\n");
  struct stat st {};
  ASSERT_EQ(::stat(home.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  EXPECT_FALSE(second.contains("transaction_id") && second["transaction_id"].is_string());
}

TEST_F(QuietWorkspaceTest, AHomeInsideTheWorkspaceOrASystemDirectoryIsRefused) {
  for (const std::string& home : {(workspace_ / "h").string(), std::string("/etc")}) {
    const CliRun run = sandbox("true", {"--home", home});
    EXPECT_EQ(run.exit_code, 125) << home;
    EXPECT_NE(run.err.find("--home " + home), std::string::npos) << run.err;
  }
  EXPECT_FALSE(fs::exists(workspace_ / "h"));
}

}  // namespace
}  // namespace pulsebox
