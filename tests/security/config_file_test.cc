// Issue #19 item 4: profiles and config files. The workspace is what the
// sandboxed command can write, so its .pulsebox.json may only tighten the
// run's limits and policy: a line that would loosen one is refused with its
// file and line, before anything runs. User profiles live in
// $XDG_CONFIG_HOME/pulsebox/config.json, checked the same way.
#include <chrono>
#include <nlohmann/json.hpp>

#include "helpers/cli_fixture.h"
#include "helpers/cli_runner.h"
#include "helpers/test_support.h"

namespace pulsebox {
namespace {

namespace fs = std::filesystem;

class ConfigFileTest : public testing::CliFixture {
 protected:
  void SetUp() override {
    CliFixture::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    fs::create_directories(scratch_.path() / "xdg/pulsebox");
  }

  std::vector<std::string> env() const {
    auto extra = cli_env();
    extra.push_back("XDG_CONFIG_HOME=" + (scratch_.path() / "xdg").string());
    return extra;
  }

  void user_config(const std::string& text) const {
    testing::write_file(scratch_.path() / "xdg/pulsebox/config.json", text);
  }
  void workspace_config(const std::string& text) const {
    testing::write_file(workspace_.path() / ".pulsebox.json", text);
  }
  std::string workspace_file() const { return (workspace_.path() / ".pulsebox.json").string(); }

  testing::CliRun run(const std::vector<std::string>& flags, const std::string& script) const {
    std::vector<std::string> args = {"run", "--allow-weaker", "limits", "-w",
                                     workspace_.path().string()};
    args.insert(args.end(), flags.begin(), flags.end());
    args.insert(args.end(), {"--", "sh", "-c", script});
    return testing::run_cli(args, "", env());
  }

  testing::CliRun show(const std::vector<std::string>& flags = {}) const {
    std::vector<std::string> args = {"config", "show", "-w", workspace_.path().string()};
    args.insert(args.end(), flags.begin(), flags.end());
    return testing::run_cli(args, "", env());
  }
};

TEST_F(ConfigFileTest, AWorkspaceFileThatLoosensALimitIsRefusedWithItsLine) {
  workspace_config("{\n  \"pids\": 8,\n  \"timeout\": \"600\"\n}\n");
  const auto result = run({}, "echo the-command-ran");
  EXPECT_EQ(result.exit_code, 125) << result.err;
  EXPECT_EQ(result.out.find("the-command-ran"), std::string::npos) << result.out;
  EXPECT_NE(result.err.find(workspace_file() + ":3: timeout 600 would loosen 30"),
            std::string::npos)
      << result.err;
  // Nor past a flag: --timeout 5 stays the ceiling.
  workspace_config("{\"timeout\": \"10\"}");
  const auto flagged = run({"--timeout", "5"}, "true");
  EXPECT_EQ(flagged.exit_code, 125) << flagged.err;
  EXPECT_NE(flagged.err.find("would loosen 5 (from --timeout)"), std::string::npos) << flagged.err;
}

// "none" is no limit: the loosest a workspace file could ask for, and
// what a workspace file's own value tightens.
TEST_F(ConfigFileTest, NoneIsTheLoosestLimit) {
  workspace_config("{\"timeout\": \"none\"}");
  auto result = run({}, "echo the-command-ran");
  EXPECT_EQ(result.exit_code, 125) << result.err;
  EXPECT_NE(result.err.find("would loosen"), std::string::npos) << result.err;
  workspace_config("{\"timeout\": \"1\"}");
  result = run({"--timeout", "none"}, "sleep 5");
  EXPECT_EQ(result.exit_code, 124) << result.err;
}

// The built-in ci profile: no wall-clock limit, output cut rather than the
// run killed, room for a threaded test runner; its values are defaults, so
// a host that cannot enforce them strongly still runs.
TEST_F(ConfigFileTest, TheCiProfileSuitsABuild) {
  const auto shown = show({"--profile", "ci"});
  EXPECT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_NE(shown.out.find("none"), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("profile ci"), std::string::npos) << shown.out;

  std::vector<std::string> args = {
      "run",          "--json",
      "--profile",    "ci",
      "--max-output", "1K",
      "-w",           workspace_.path().string(),
      "--",           "sh",
      "-c",           "head -c 5000 /dev/zero | tr '\\0' a; echo finished > f.txt"};
  auto result = testing::run_cli(args, "", env());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  auto reply = nlohmann::json::parse(result.out);
  EXPECT_TRUE(reply["truncated"].get<bool>());
  EXPECT_TRUE(reply["termination_reason"].is_null()) << reply["termination_reason"];
  EXPECT_EQ(reply["stdout"].get<std::string>().size(), 1024u);
  EXPECT_EQ(reply["changes"].size(), 1u) << "the command did not run to its end";

  // 100 threads at once: over the agent profile's 64, within ci's.
  const std::string threads =
      "python3 -c \"import threading, time\n"
      "ts = [threading.Thread(target=time.sleep, args=(0.3,)) for _ in range(100)]\n"
      "[t.start() for t in ts]\n[t.join() for t in ts]\nprint('ok')\"";
  args = {"run", "--json", "--profile", "ci",   "-w", workspace_.path().string(),
          "--",  "sh",     "-c",        threads};
  result = testing::run_cli(args, "", env());
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  reply = nlohmann::json::parse(result.out);
  EXPECT_EQ(reply["stdout"], "ok\n") << reply["stderr"];
}

TEST_F(ConfigFileTest, AWorkspaceFileTightensTheRun) {
  workspace_config("{\"timeout\": \"1\"}");
  const auto started = std::chrono::steady_clock::now();
  const auto result = run({}, "sleep 20");
  EXPECT_EQ(result.exit_code, 124) << result.err;
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(15));
  const auto shown = show({"--json"});
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  const auto settings = nlohmann::json::parse(shown.out, nullptr, false);
  ASSERT_TRUE(settings.is_object()) << shown.out;
  EXPECT_EQ(settings["settings"]["timeout"]["value"], "1") << shown.out;
  EXPECT_EQ(settings["settings"]["timeout"]["source"], workspace_file() + ":1 (workspace)")
      << shown.out;
  EXPECT_EQ(settings["settings"]["memory"]["source"], "default (profile agent)") << shown.out;
}

TEST_F(ConfigFileTest, AWorkspaceFileMayDenyOrAskButNeverAllow) {
  workspace_config(R"({"rules": [{"action": "network", "target": "*", "decision": "allow"}]})");
  auto result = run({}, "echo the-command-ran");
  EXPECT_EQ(result.exit_code, 125) << result.err;
  EXPECT_NE(result.err.find("may only deny or ask"), std::string::npos) << result.err;
  EXPECT_EQ(result.out.find("the-command-ran"), std::string::npos) << result.out;

  workspace_config(R"({"rules": [{"action": "shell", "target": "sh *", "decision": "deny",
                       "reason": "this repository runs no shells"}]})");
  result = run({}, "echo the-command-ran");
  EXPECT_EQ(result.exit_code, 125) << result.err;
  EXPECT_NE(result.err.find("this repository runs no shells"), std::string::npos) << result.err;
  EXPECT_EQ(result.out.find("the-command-ran"), std::string::npos) << result.out;
}

TEST_F(ConfigFileTest, AWorkspaceFileMustBeARegularFile) {
  fs::create_symlink("/etc/hostname", workspace_.path() / ".pulsebox.json");
  const auto result = run({}, "echo the-command-ran");
  EXPECT_EQ(result.exit_code, 125) << result.err;
  EXPECT_NE(result.err.find("a symbolic link"), std::string::npos) << result.err;
}

TEST_F(ConfigFileTest, UserProfilesAreCheckedWithFileAndLine) {
  user_config(R"({
  "profile": "quick",
  "profiles": {
    "quick": {"timeout": "1", "pids": 128},
    "broken": {"memory": "lots"},
    "typo": {"memroy": "1G"}
  }
})");
  const std::string file = (scratch_.path() / "xdg/pulsebox/config.json").string();
  // The file's default profile applies without --profile.
  auto result = run({}, "sleep 20");
  EXPECT_EQ(result.exit_code, 124) << result.err;
  const auto shown = show();
  EXPECT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_NE(shown.out.find("profile quick"), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find(file + ":4 (profile quick)"), std::string::npos) << shown.out;
  // Flags win over the profile.
  result = run({"--timeout", "30"}, "sleep 1.5; echo the-command-ran");
  EXPECT_EQ(result.exit_code, 0) << result.err;
  // agent is built in: today's defaults.
  result = run({"--profile", "agent"}, "sleep 1.5; echo the-command-ran");
  EXPECT_EQ(result.exit_code, 0) << result.err;

  result = run({"--profile", "broken"}, "true");
  EXPECT_EQ(result.exit_code, 125);
  EXPECT_NE(result.err.find(file + ":5: memory: \"lots\" is not valid"), std::string::npos)
      << result.err;
  result = run({"--profile", "typo"}, "true");
  EXPECT_EQ(result.exit_code, 125);
  EXPECT_NE(result.err.find(file + ":6: \"memroy\": not a profile setting"), std::string::npos)
      << result.err;
  result = run({"--profile", "missing"}, "true");
  EXPECT_EQ(result.exit_code, 125);
  EXPECT_NE(
      result.err.find("no profile \"missing\" (known: agent, ci (built in), broken, quick, typo"),
      std::string::npos)
      << result.err;
  user_config("{\"profiles\": {\n  \"x\": {\"timeout\": 1,}}}");
  result = run({}, "true");
  EXPECT_EQ(result.exit_code, 125);
  EXPECT_NE(result.err.find(file + ":2:"), std::string::npos) << result.err;
}

}  // namespace
}  // namespace pulsebox
