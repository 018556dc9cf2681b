// Drives the `pulsebox` binary as a user would and checks output and exit codes.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "helpers/cli_runner.h"
#include "helpers/test_support.h"
#include "pulsebox/audit.h"
#include "pulsebox/workspace.h"

namespace pulsebox {
namespace {

using testing::read_lines;
using testing::TempDir;
using testing::write_file;
using testing::write_lines;

using testing::CliRun;
using testing::run_cli;

TEST(CliTest, Version) {
  const auto run = run_cli({"version"});
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_EQ(run.out.rfind("pulsebox ", 0), 0u);
}

TEST(CliTest, UnknownSubcommandOrFlagIsExit125WithOneLine) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"frobnicate"}, {"policy", "eval", "--bogus", "read", "x"}, {"policy", "check"}}) {
    const auto run = run_cli(args);
    EXPECT_EQ(run.exit_code, 125) << args[0];
    EXPECT_EQ(run.err.rfind("pulsebox: ", 0), 0u) << run.err;
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
  }
}

TEST(CliTest, PolicyCheckValidAndInvalid) {
  TempDir dir;
  write_file(
      dir / "good.json",
      R"({"defaults": {"write": "ask"}, "rules": [{"action": "write", "target": "src/*", "decision": "allow"}]})");
  write_file(dir / "bad.json", "{\"rules\": [{\"action\": \"write\", \"decision\": \"sure\"}]}");
  const auto good = run_cli({"policy", "check", (dir / "good.json").string()});
  EXPECT_EQ(good.exit_code, 0) << good.err;
  EXPECT_NE(good.out.find("valid policy, 1 rule"), std::string::npos) << good.out;
  const auto bad = run_cli({"policy", "check", (dir / "bad.json").string()});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("bad.json: rules[0].decision: expected one of \"allow\", \"deny\", "
                         "\"ask\", got \"sure\""),
            std::string::npos)
      << bad.err;
  // Unreadable input is 125 (docs/cli.md); 1 is for input read and found invalid.
  const auto missing = run_cli({"policy", "check", (dir / "none.json").string()});
  EXPECT_EQ(missing.exit_code, 125);
  EXPECT_NE(missing.err.find("none.json"), std::string::npos);
  const auto as_json = run_cli({"policy", "check", "--json", (dir / "bad.json").string()});
  EXPECT_EQ(nlohmann::json::parse(as_json.out)["valid"], false);
}

TEST(CliTest, PolicyEvalPrintsDecisionAndRule) {
  TempDir dir;
  write_file(dir / "p.json", R"({"rules": [
      {"action": "write", "target": ".git/hooks/**", "decision": "deny", "reason": "hooks run on the host"},
      {"action": "write", "target": "*", "decision": "allow"}]})");
  const std::string policy = (dir / "p.json").string();
  const auto denied =
      run_cli({"policy", "eval", "--policy", policy, "write", ".git/hooks/pre-commit"});
  EXPECT_EQ(denied.exit_code, 1);
  EXPECT_EQ(denied.out, "deny by rule #1 (write \".git/hooks/**\": hooks run on the host)\n");
  const auto allowed = run_cli({"policy", "eval", "--policy", policy, "WRITE", "src/a.cc"});
  EXPECT_EQ(allowed.exit_code, 0);
  EXPECT_EQ(allowed.out, "allow by rule #2 (write \"*\")\n");
  const auto ask = run_cli({"policy", "eval", "git", "commit"});
  EXPECT_EQ(ask.exit_code, 2);
  EXPECT_EQ(ask.out, "ask by the default for this action\n");
  const auto json = run_cli({"policy", "eval", "--json", "--policy", policy, "write", "SRC\\X"});
  const auto parsed = nlohmann::json::parse(json.out);
  EXPECT_EQ(parsed["decision"], "allow");
  EXPECT_EQ(parsed["normalized_target"], "src/x");
  EXPECT_EQ(parsed["rule_index"], 1);
  const auto unknown = run_cli({"policy", "eval", "teleport", "x"});
  EXPECT_EQ(unknown.exit_code, 125);
  EXPECT_NE(unknown.err.find("unknown action \"teleport\""), std::string::npos);
  const auto broken_policy =
      run_cli({"policy", "eval", "--policy", (dir / "nope.json").string(), "read", "x"});
  EXPECT_EQ(broken_policy.exit_code, 125);
}

TEST(CliTest, AuditVerify) {
  TempDir dir;
  const auto path = dir / "audit.jsonl";
  {
    AuditLog log(path);
    for (int i = 0; i < 5; ++i)
      log.record({.action = "shell", .target = std::to_string(i)});
  }
  // An unkeyed chain that holds proves nothing: exit 2, and the text says so.
  const auto unkeyed = run_cli({"audit", "verify", path.string()});
  EXPECT_EQ(unkeyed.exit_code, 2) << unkeyed.err;
  EXPECT_NE(unkeyed.out.find("NOT PROVEN: hash chain of 5 records is consistent, but unkeyed"),
            std::string::npos)
      << unkeyed.out;

  auto lines = read_lines(path);
  lines.erase(lines.begin() + 1);
  write_lines(path, lines);
  const auto tampered = run_cli({"audit", "verify", path.string()});
  EXPECT_EQ(tampered.exit_code, 1);
  EXPECT_NE(tampered.out.find("line 2: 1 line removed before this line"), std::string::npos)
      << tampered.out;
  const auto json =
      nlohmann::json::parse(run_cli({"audit", "verify", "--json", path.string()}).out);
  EXPECT_EQ(json["ok"], false);
  EXPECT_EQ(json["line"], 2);
  const auto missing = run_cli({"audit", "verify", (dir / "none").string()});
  EXPECT_EQ(missing.exit_code, 125);
}

TEST(CliTest, AuditVerifyKeyed) {
  TempDir dir;
  const auto path = dir / "audit.jsonl";
  const auto key = dir / "keys/audit.key";
  {
    AuditLog log(path, nullptr, {.key = {.file = key, .chosen = true}});
    for (int i = 0; i < 3; ++i)
      log.record({.action = "shell", .target = std::to_string(i)});
  }
  for (const auto& [args, env] :
       std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>>{
           {{"--key", key.string()}, {}}, {{}, {"PULSEBOX_AUDIT_KEY=" + key.string()}}}) {
    std::vector<std::string> command = {"audit", "verify", path.string()};
    command.insert(command.end(), args.begin(), args.end());
    const auto verified = run_cli(command, "", env);
    EXPECT_EQ(verified.exit_code, 0) << verified.out << verified.err;
    EXPECT_NE(verified.out.find("VERIFIED: keyed chain of 3 records, matches its anchor"),
              std::string::npos)
        << verified.out;
  }
  // Without the key, the MACs are not checked, and it says so.
  const auto keyless = run_cli({"audit", "verify", path.string()}, "",
                               {"PULSEBOX_AUDIT_KEY=" + (dir / "absent.key").string()});
  EXPECT_EQ(keyless.exit_code, 2) << keyless.out << keyless.err;
  EXPECT_NE(keyless.out.find("its MACs were not checked"), std::string::npos) << keyless.out;
  // A --key that is not there is an error, not a weaker check.
  const auto wrong = run_cli({"audit", "verify", path.string(), "--key", (dir / "x").string()});
  EXPECT_EQ(wrong.exit_code, 125) << wrong.out;
  EXPECT_NE(wrong.err.find("cannot open the audit key"), std::string::npos) << wrong.err;
}

TEST(CliTest, ScrubFilter) {
  const auto run = run_cli({"scrub", "--secret-env", "PB_TEST_SECRET"},
                           "value: my-test-secret-value\npassword=abc123\nplain\n",
                           {"PB_TEST_SECRET=my-test-secret-value"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, "value: [REDACTED_SECRET]\npassword=[REDACTED_SECRET]\nplain\n");
  const auto unset = run_cli({"scrub", "--secret-env", "PB_SURELY_UNSET_VARIABLE"});
  EXPECT_EQ(unset.exit_code, 125);
}

TEST(CliTest, ChangesDiffCommitDiscard) {
  TempDir dir;
  write_file(dir / "a.txt", "one\n");
  std::string tx;
  std::string other;
  {
    Workspace ws(dir.path());
    tx = ws.create_transaction("cli test");
    ws.stage_write(tx, "a.txt", "two\n");
    ws.stage_write(tx, "b.txt", "new\n");
    other = ws.create_transaction();
    ws.stage_delete(other, "a.txt");
  }
  const std::string w = dir.path().string();
  const auto listed = run_cli({"changes", "-w", w});
  EXPECT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_NE(listed.out.find(tx + "  "), std::string::npos) << listed.out;
  EXPECT_NE(listed.out.find("2 changes (1 added, 1 modified)  cli test"), std::string::npos)
      << listed.out;
  const auto json = nlohmann::json::parse(run_cli({"changes", "--json", "-w", w}).out);
  ASSERT_EQ(json.size(), 2u);

  const auto diff = run_cli({"diff", "-w", w, tx});
  EXPECT_EQ(diff.exit_code, 0);
  EXPECT_NE(diff.out.find("--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-one\n+two\n"), std::string::npos)
      << diff.out;
  EXPECT_EQ(diff.out.find("\033["), std::string::npos);  // no colour when not a terminal

  const auto committed = run_cli({"commit", "-w", w, tx});
  EXPECT_EQ(committed.exit_code, 0) << committed.err;
  EXPECT_EQ(testing::read_file(dir / "a.txt"), "two\n");

  // `other` was staged against "one": the workspace changed underneath.
  const auto conflict = run_cli({"commit", "-w", w, other});
  EXPECT_EQ(conflict.exit_code, 125);
  EXPECT_NE(conflict.err.find("a.txt: content changed"), std::string::npos) << conflict.err;
  EXPECT_TRUE(std::filesystem::exists(dir / "a.txt"));

  EXPECT_EQ(run_cli({"discard", "-w", w, other}).exit_code, 0);
  EXPECT_NE(run_cli({"changes", "-w", w}).out.find("no pending transactions"), std::string::npos);
  const auto missing = run_cli({"diff", "-w", w, "tx-nope"});
  EXPECT_EQ(missing.exit_code, 125);
  EXPECT_NE(missing.err.find("no transaction \"tx-nope\""), std::string::npos);
  const auto not_a_dir = run_cli({"changes", "-w", (dir / "a.txt").string()});
  EXPECT_EQ(not_a_dir.exit_code, 125);
  EXPECT_NE(not_a_dir.err.find("a.txt: not a directory"), std::string::npos);
}

TEST(CliTest, CommitRefusesProtectedPathsUnlessThePolicyNamesThem) {
  TempDir dir;
  std::filesystem::create_directories(dir / ".git/hooks");
  std::string tx;
  {
    // Staged without a policy check, as the overlay reader does.
    Workspace ws(dir.path(), [] {
      ActionPolicy allow_all = default_workspace_policy();
      allow_all.add_rule({ActionType::Write, ".git/hooks/pre-commit", Decision::Allow, ""});
      return allow_all;
    }());
    tx = ws.create_transaction();
    ws.stage_write(tx, ".git/hooks/pre-commit", "#!/bin/sh\n", 0755);
  }
  const std::string w = dir.path().string();
  const auto refused = run_cli({"commit", "-w", w, tx});
  EXPECT_EQ(refused.exit_code, 125);
  EXPECT_NE(refused.err.find("protected path"), std::string::npos) << refused.err;
  EXPECT_FALSE(std::filesystem::exists(dir / ".git/hooks/pre-commit"));
  write_file(
      dir / "allow.json",
      R"({"rules": [{"action": "write", "target": ".git/hooks/pre-commit", "decision": "allow"}]})");
  const auto allowed = run_cli({"commit", "-w", w, "--policy", (dir / "allow.json").string(), tx});
  EXPECT_EQ(allowed.exit_code, 0) << allowed.err;
  EXPECT_TRUE(std::filesystem::exists(dir / ".git/hooks/pre-commit"));
}

std::vector<std::string> host_run(const std::string& workspace, std::vector<std::string> tail,
                                  std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {
      "run", "-w", workspace, "--backend", "host", "--unsafe-host", "--allow-weaker", "all"};
  args.insert(args.end(), extra.begin(), extra.end());
  args.push_back("--");
  args.insert(args.end(), tail.begin(), tail.end());
  return args;
}

TEST(CliRunTest, BadInputIsOneLineAndExit125) {
  TempDir profiles;
  const std::string bad_profile = (profiles / "bad.json").string();
  write_file(bad_profile,
             "{\"defaultAction\": \"SCMP_ACT_ERRNO\",\n \"syscalls\": [\n  {\"names\": [\"read\"], "
             "\"action\": \"ALLOW\"}]}\n");
  TempDir dir;
  write_file(dir / "file", "x");
  write_file(dir / "bad.env", "# comment\nA=1\nNOT A VARIABLE\n");
  write_file(dir / "bad-policy.json", R"({"rules": [{"action": "shell", "decision": "perhaps"}]})");
  const std::string w = dir.path().string();
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"run", "--bogus", "--", "true"}, "--bogus"},
      {{"run", "-w", w, "--memory", "12X", "--", "true"}, "--memory: \"12X\" is not valid"},
      {{"run", "-w", w, "--pids", "-3", "--", "true"}, "--pids"},
      {{"run", "-w", w, "--timeout", "soon", "--", "true"},
       "--timeout: \"soon\" is not valid (expected a duration: seconds, or a number with ms, s, "
       "m or h, e.g. 500ms, 90s, 15m, 1h; 0 or none for no limit)"},
      {{"run", "-w", w, "--swap", "lots", "--", "true"}, "--swap: \"lots\" is not valid"},
      {{"run", "-w", w, "--max-output", "-1", "--", "true"}, "--max-output"},
      {{"run", "-w", w, "--cpu-time", "1d", "--", "true"}, "--cpu-time"},
      {{"run", "-w", (dir / "missing").string(), "--", "true"}, "no such directory"},
      {{"run", "-w", (dir / "file").string(), "--", "true"}, "not a directory"},
      {{"run", "-w", w, "--policy", (dir / "bad-policy.json").string(), "--", "true"},
       "rules[0].decision"},
      {{"run", "-w", w, "--net", "sometimes", "--", "true"}, "--net"},
      {{"run", "-w", w, "--changes", "maybe", "--", "true"}, "--changes"},
      {{"run", "-w", w, "--allow-weaker", "everything", "--", "true"}, "--allow-weaker"},
      {{"run", "-w", w, "--secret", "PB_SURELY_UNSET_VAR", "--", "true"}, "not set"},
      {{"run", "-w", w}, "no command given"},
      {{"run", "-w", w, "--seccomp", "unconfined", "--", "true"}, "--allow-weaker syscalls"},
      {{"run", "-w", w, "--seccomp", "/no/such/profile.json", "--", "true"},
       "--seccomp: seccomp profile \"/no/such/profile.json\": not a built-in profile"},
      {{"run", "-w", w, "--seccomp", bad_profile, "--", "true"},
       "bad.json:3: syscalls[0].action: expected one of SCMP_ACT_ALLOW"},
      {{"run", "-w", w, "--ro-bind", "/no/such/dir:/data", "--", "true"}, "--ro-bind"},
      {{"run", "-w", w, "-v", "/etc", "--", "true"}, "--volume /etc: expected HOST:SANDBOX"},
      {{"run", "-w", w, "-v", "/no/such/dir:/data:ro", "--", "true"}, "--volume"},
      {{"run", "-w", w, "--env-file", (dir / "bad.env").string(), "--", "true"},
       "bad.env:3: expected NAME=VALUE"},
      {{"run", "-w", w, "--env-file", (dir / "none.env").string(), "--", "true"},
       "none.env: No such file or directory"},
      {{"run", "-w", w, "--rm", "--changes", "commit", "--", "true"}, "--rm"},
      {{"run", "-w", w, "--allow-weaker", "syscalls", "--ro-bind", "/etc:/workspace/etc", "--",
        "true"},
       "cannot bind inside /workspace"},
      {{"run", "-w", w, "--backend", "host", "--", "true"}, "--unsafe-host"},
      {{"run", "-w", w, "--backend", "host", "--unsafe-host", "--", "true"},
       "--allow-weaker network"},
  };
  for (const auto& [args, fragment] : cases) {
    const auto run = run_cli(args);
    EXPECT_EQ(run.exit_code, 125) << args[1] << " " << (args.size() > 4 ? args[4] : "");
    EXPECT_EQ(run.err.rfind("pulsebox: ", 0), 0u) << run.err;
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
    EXPECT_NE(run.err.find(fragment), std::string::npos)
        << "expected \"" << fragment << "\" in: " << run.err;
    EXPECT_TRUE(run.out.empty()) << run.out;
  }
}

TEST(CliRunTest, ExitStatusesFollowTheContract) {
  TempDir dir;
  const std::string w = dir.path().string();
  EXPECT_EQ(run_cli(host_run(w, {"sh", "-c", "exit 3"})).exit_code, 3);
  EXPECT_EQ(run_cli(host_run(w, {"sh", "-c", "kill -TERM $$"})).exit_code, 128 + 15);
  EXPECT_EQ(run_cli(host_run(w, {"pulsebox-no-such-command"})).exit_code, 127);
  write_file(dir / "not-executable", "data");
  EXPECT_EQ(run_cli(host_run(w, {"./not-executable"})).exit_code, 126);
  EXPECT_EQ(run_cli(host_run(w, {"sleep", "30"}, {"--timeout", "0.3"})).exit_code, 124);
  EXPECT_EQ(run_cli(host_run(w, {"sleep", "30"}, {"--timeout", "300ms"})).exit_code, 124);
}

// Docker's habits: the command without "--", -e, --env-file, --workdir,
// --rm; a "--" after the command belongs to the command.
TEST(CliRunTest, TheCommandMayFollowTheFlagsWithoutDashes) {
  TempDir dir;
  const std::string w = dir.path().string();
  std::filesystem::create_directories(dir / "sub");
  write_file(dir / "vars.env", "# a comment\n\n  # another\nFROM_FILE=a=b # kept\nBOTH=file\n");
  std::vector<std::string> args = {"run",
                                   "-w",
                                   w,
                                   "--backend",
                                   "host",
                                   "--unsafe-host",
                                   "--allow-weaker",
                                   "all",
                                   "--env-file",
                                   (dir / "vars.env").string(),
                                   "-e",
                                   "BOTH=cli",
                                   "--workdir",
                                   "sub",
                                   "--rm",
                                   "sh",
                                   "-c",
                                   "echo \"$FROM_FILE|$BOTH|$0|$1\"; pwd",
                                   "--",
                                   "after"};
  auto run = run_cli(args);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out.substr(0, run.out.find('\n')), "a=b # kept|cli|--|after") << run.out;
  EXPECT_NE(run.out.find("/sub\n"), std::string::npos) << run.out;
  // A repeatable flag takes one value: what follows it is the command.
  run = run_cli({"run", "-w", w, "--backend", "host", "--unsafe-host", "--allow-weaker", "all",
                 "-e", "A=1", "sh", "-c", "echo $A"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, "1\n");
  const auto help = run_cli({"run", "--help"});
  EXPECT_NE(help.out.find("Not the working directory: that is --workdir"), std::string::npos)
      << help.out;
}

// The summary, the JSON and the exit status agree: a timeout is 124, the
// signal that ended the command is in its own field; the summary names the
// network mode; --help marks what is not built.
TEST(CliRunTest, ATimeoutIs124EverywhereAndTheSummaryNamesTheNetworkMode) {
  TempDir dir;
  const std::string w = dir.path().string();
  // SIGTERM ends sleep; SIGKILL after the grace period on a machine so
  // loaded that the command was not yet there to take the SIGTERM.
  auto run = run_cli(host_run(w, {"sleep", "30"}, {"--timeout", "500ms", "--json"}));
  EXPECT_EQ(run.exit_code, 124);
  const auto json = nlohmann::json::parse(run.out);
  EXPECT_EQ(json["exit_code"], 124);
  EXPECT_TRUE(json["signal"] == 15 || json["signal"] == 9) << json["signal"];
  EXPECT_EQ(json["termination_reason"], "timeout");
  run = run_cli(host_run(w, {"sleep", "30"}, {"--timeout", "500ms"}));
  EXPECT_EQ(run.exit_code, 124);
  EXPECT_TRUE(run.err.rfind("pulsebox: timeout (killed by SIGTERM), exit 124 in ", 0) == 0 ||
              run.err.rfind("pulsebox: timeout (killed by SIGKILL), exit 124 in ", 0) == 0)
      << run.err;
  EXPECT_NE(run.err.find("  network     unsupported, --net none (accepted with --allow-weaker)"),
            std::string::npos)
      << run.err;
  run = run_cli(host_run(w, {"true"}, {"--network", "all"}));
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.err.find(", --net all"), std::string::npos) << run.err;
  const auto help = run_cli({"run", "--help"});
  // The remote backend is built: its help names the variables that choose it.
  EXPECT_NE(help.out.find("or remote (PULSE_REMOTE_URL"), std::string::npos) << help.out;
  EXPECT_EQ(help.out.find("[not built yet"), std::string::npos) << help.out;
  // The network modes are built: their help no longer says otherwise.
  EXPECT_EQ(help.out.find("[not built yet: allowlist"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("--allow-domain"), std::string::npos) << help.out;
}

// The output of `sh -c script` (bounded: the shells only read a file).
std::string shell_output(const std::string& script) {
  std::string out;
  FILE* pipe = ::popen(script.c_str(), "r");
  if (pipe == nullptr) return "popen failed";
  char buffer[4096];
  std::size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0)
    out.append(buffer, n);
  const int status = ::pclose(pipe);
  return status == 0 ? out : out + "[exit " + std::to_string(status) + "]";
}

// Completion for bash, zsh and fish and the man page come from the parser's
// own definitions: every run flag is in each, and each shell takes its file.
TEST(CliTest, CompletionAndManPageComeFromTheOptionDefinitions) {
  TempDir dir;
  const std::vector<std::string> flags = {"--workdir", "--env-file", "--volume",    "--rm",
                                          "--network", "--timeout",  "--pids-limit"};
  for (const char* kind : {"bash", "zsh", "fish", "man"}) {
    const auto generated = run_cli({"completion", kind});
    ASSERT_EQ(generated.exit_code, 0) << kind << ": " << generated.err;
    write_file(dir / kind, generated.out);
    for (const auto& flag : flags) {
      std::string wanted = flag;
      if (std::string(kind) == "fish") wanted = "-l " + flag.substr(2);
      if (std::string(kind) == "man") {
        wanted.clear();
        for (char c : flag)
          wanted += c == '-' ? std::string("\\-") : std::string(1, c);
      }
      EXPECT_NE(generated.out.find(wanted), std::string::npos) << kind << " lacks " << wanted;
    }
  }
  const std::string bash = (dir / "bash").string();
  EXPECT_EQ(shell_output("bash -c 'source " + bash +
                         "; COMP_WORDS=(pulsebox run --workd); COMP_CWORD=2; _pulsebox; echo "
                         "\"${COMPREPLY[*]}\"; COMP_WORDS=(pulsebox policy ch); COMP_CWORD=2; "
                         "_pulsebox; echo \"${COMPREPLY[*]}\"'"),
            "--workdir\ncheck\n");
  EXPECT_NE(testing::read_file(dir / "man").find(".TH PULSEBOX 1"), std::string::npos);
  // The other shells and groff check their files (tools/setup installs them).
  for (const char* tool : {"/usr/bin/zsh", "/usr/bin/fish", "/usr/bin/groff"})
    PULSEBOX_SKIP_UNLESS(::access(tool, X_OK) == 0, std::string(tool) + " is not installed");
  if (::access("/usr/bin/zsh", X_OK) == 0) {
    EXPECT_EQ(shell_output("zsh -n " + (dir / "zsh").string() + " 2>&1"), "");
  }
  if (::access("/usr/bin/fish", X_OK) == 0) {
    EXPECT_NE(shell_output("fish -c 'source " + (dir / "fish").string() +
                           "; complete -C \"pulsebox run --env-f\"'")
                  .find("--env-file\t"),
              std::string::npos);
  }
  if (::access("/usr/bin/groff", X_OK) == 0) {
    EXPECT_EQ(shell_output("groff -man -ww -z " + (dir / "man").string() + " 2>&1"), "");
  }
  EXPECT_EQ(run_cli({"completion", "tcsh"}).exit_code, 125);
}

TEST(CliRunTest, ZeroOrNoneLiftsOptionalLimits) {
  TempDir dir;
  const std::string w = dir.path().string();
  // Past the default 5 MiB output cap, which would end the run.
  const std::vector<std::string> six_mib = {"sh", "-c", "head -c 6291456 /dev/zero"};
  for (const char* none : {"0", "none"}) {
    const auto run = run_cli(
        host_run(w, six_mib,
                 {"--max-output", none, "--timeout", none, "--cpu-time", none, "--swap", "none"}));
    EXPECT_EQ(run.exit_code, 0) << none << ": " << run.err;
    EXPECT_EQ(run.out.size(), 6291456u) << none;
  }
  const auto capped = run_cli(host_run(w, six_mib, {"--max-output", "1M"}));
  EXPECT_NE(capped.exit_code, 0);
  EXPECT_EQ(run_cli(host_run(w, {"true"}, {"--timeout", "1h", "--swap", "0"})).exit_code, 0);
}

TEST(CliRunTest, StreamsOutputAndReportsEnforcementAndChanges) {
  TempDir dir;
  write_file(dir / "a.txt", "one\n");
  const auto run = run_cli(host_run(
      dir.path().string(), {"sh", "-c", "echo to-stdout; echo to-stderr >&2; echo two > a.txt"}));
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, "to-stdout\n");
  EXPECT_EQ(run.err.rfind("to-stderr\n", 0), 0u) << run.err;
  EXPECT_NE(run.err.find("enforcement:"), std::string::npos);
  EXPECT_NE(run.err.find("network     unsupported, --net none (accepted with --allow-weaker)"),
            std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("pulsebox: changes: tx-"), std::string::npos) << run.err;
  EXPECT_EQ(testing::read_file(dir / "a.txt"), "one\n");
}

TEST(CliRunTest, JsonResult) {
  TempDir dir;
  ::setenv("PB_CLI_SECRET", "cli-secret-value-1", 1);
  const auto run =
      run_cli(host_run(dir.path().string(), {"sh", "-c", "echo $PB_CLI_SECRET; echo new > n.txt"},
                       {"--json", "--secret", "PB_CLI_SECRET"}));
  ::unsetenv("PB_CLI_SECRET");
  EXPECT_EQ(run.exit_code, 0) << run.err;
  const auto json = nlohmann::json::parse(run.out);
  EXPECT_EQ(json["stdout"], "[REDACTED_SECRET]\n");
  EXPECT_EQ(json["exit_code"], 0);
  EXPECT_EQ(json["isolation_level"], "host_unsafe");
  EXPECT_EQ(json["enforcement"]["network"], "unsupported");
  EXPECT_TRUE(json["transaction_id"].is_string());
  EXPECT_EQ(json["changes"][0]["path"], "n.txt");
  EXPECT_EQ(json["changes"][0]["kind"], "added");
  // And the audit log at the default path has the run, intact.
  const auto verify = run_cli({"audit", "verify", (dir / ".agent/logs/audit.jsonl").string()});
  EXPECT_EQ(verify.exit_code, 0) << verify.out;
}

TEST(CliRunTest, CapabilitiesJson) {
  const auto run = run_cli({"capabilities", "--json"});
  EXPECT_EQ(run.exit_code, 0);
  const auto json = nlohmann::json::parse(run.out);
  const auto& native = json["backends"]["native"];
  if (native["available"] == true) {
    EXPECT_EQ(native["capabilities"]["filesystem"]["level"], "strongly_enforced");
    EXPECT_EQ(native["capabilities"]["network.deny_all"]["level"], "strongly_enforced");
    EXPECT_EQ(native["capabilities"]["syscalls.default"]["level"], "strongly_enforced");
    EXPECT_EQ(native["capabilities"]["syscalls.unconfined"]["level"], "unsupported");
    EXPECT_EQ(native["unsafe"], false);
  } else {
    EXPECT_FALSE(native["reason"].get<std::string>().empty());
  }
  const auto& host = json["backends"]["host"]["capabilities"];
  EXPECT_EQ(host["network.allow_all"]["level"], "strongly_enforced");
  EXPECT_EQ(host["network.deny_all"]["level"], "unsupported");
  EXPECT_FALSE(host["network.deny_all"]["fix"].get<std::string>().empty());
  EXPECT_EQ(host["limits.memory"]["level"], "partially_enforced");
  EXPECT_TRUE(host.contains("process_containment"));
  const auto seccomp = run_cli({"seccomp", "check", "strict", "--json"});
  EXPECT_EQ(seccomp.exit_code, 0) << seccomp.err;
  EXPECT_EQ(nlohmann::json::parse(seccomp.out)["valid"], true);
  const auto shown = run_cli({"seccomp", "show", "default"});
  EXPECT_NE(shown.out.find("  ioctl                   SCMP_ACT_ALLOW  if arg1 SCMP_CMP_NE 21522"),
            std::string::npos)
      << shown.out;
  const auto text = run_cli({"capabilities"});
  EXPECT_NE(text.out.find("fix: "), std::string::npos);
}

TEST(CliTest, ReconcileOnACleanWorkspace) {
  TempDir dir;
  TempDir state;  // its own: suites running beside it leave runs in theirs
  const auto run = run_cli({"reconcile", "-w", dir.path().string()}, "",
                           {"PULSEBOX_STATE_DIR=" + state.path().string()});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("nothing to reconcile"), std::string::npos) << run.out << run.err;
}

}  // namespace
}  // namespace pulsebox
