// A sandbox that exhausts its own memory or process limit must end alone:
// the supervisor (this `pulsebox run`, or `pulsebox serve --local`) survives
// and reports the run, with its changes kept and its audit record closed.
// The attack that broke it: filling /tmp (a tmpfs, charged to the sandbox's
// memory cgroup but in no process's RSS) until the OOM killer chose init,
// whose memory was the supervisor's. Runs as root and as an ordinary user
// in a delegated cgroup (tools/check), and on pure cgroup v2 (tools/vm-test).
#include <signal.h>

#include <nlohmann/json.hpp>

#include "helpers/cli_fixture.h"
#include "helpers/cli_runner.h"
#include "helpers/local_server.h"
#include "helpers/test_support.h"

namespace pulsebox {
namespace {

namespace fs = std::filesystem;

class MemoryAttackTest : public testing::CliFixture {
 protected:
  void SetUp() override {
    CliFixture::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    testing::write_file(workspace_ / "a.txt", "original\n");
  }

  std::vector<std::string> env(bool served) const { return cli_env(served); }

  // `pulsebox run --json` of `command` with `limits`; the parsed result, or
  // a failure naming what the CLI printed instead (its supervisor died).
  nlohmann::json run_json(const std::vector<std::string>& limits, const std::string& command,
                          bool served = false) {
    std::vector<std::string> args = {
        "run", "--json", "--allow-weaker",          "limits", "--timeout",
        "60",  "-w",     workspace_.path().string()};
    args.insert(args.end(), limits.begin(), limits.end());
    args.insert(args.end(), {"--", "sh", "-c", command});
    const auto run = testing::run_cli(args, "", env(served));
    last_exit_ = run.exit_code;
    auto parsed = nlohmann::json::parse(run.out, nullptr, false);
    if (parsed.is_discarded() || !parsed.is_object()) {
      ADD_FAILURE() << "no result: the supervisor ended with exit " << run.exit_code
                    << "; stderr: " << run.err;
      return nlohmann::json::object();
    }
    return parsed;
  }

  static bool limits_enforced(const nlohmann::json& result) {
    return result.contains("enforcement") && result["enforcement"]["limits"] == "strongly_enforced";
  }

  // The run's changes were kept as a transaction holding `path`.
  static void expect_change_kept(const nlohmann::json& result, const std::string& path) {
    ASSERT_TRUE(result.contains("transaction_id")) << result.dump();
    EXPECT_TRUE(result["transaction_id"].is_string()) << result.dump();
    bool found = false;
    for (const auto& change : result.value("changes", nlohmann::json::array()))
      found = found || change.value("path", "") == path;
    EXPECT_TRUE(found) << path << " is not among the changes: " << result.dump();
  }

  std::string audit_log() const {
    return testing::read_file(workspace_ / ".agent/logs/audit.jsonl");
  }

  int last_exit_ = -1;
};

// dd into a RAM file system, past the limit; "kept.txt" is written first.
std::string fill(const std::string& where) {
  return "echo kept > kept.txt; exec dd if=/dev/zero of=" + where + "/fill bs=1M count=400";
}

TEST_F(MemoryAttackTest, FillingTmpPastTheMemoryLimitEndsOnlyTheSandbox) {
  for (const std::string where : {"/tmp", "/dev/shm"}) {
    SCOPED_TRACE(where);
    const auto result = run_json({"--memory", "64M"}, fill(where));
    if (::testing::Test::HasFailure()) return;
    if (limits_enforced(result)) {
      EXPECT_EQ(result["termination_reason"], "oom") << result.dump();
      EXPECT_NE(last_exit_, 0);
    } else {
      // No memory cgroup: the file system's own size (the memory limit)
      // stops dd.
      EXPECT_NE(result["stderr"].get<std::string>().find("No space left"), std::string::npos)
          << result.dump();
    }
    expect_change_kept(result, "kept.txt");
  }
  // Each run's closing record is there, and the chain holds.
  const std::string log = audit_log();
  EXPECT_NE(log.find("kept.txt"), std::string::npos) << log;
  const auto verified = testing::run_cli(
      {"audit", "verify", (workspace_ / ".agent/logs/audit.jsonl").string()}, "", env(false));
  EXPECT_EQ(verified.exit_code, 0) << verified.out << verified.err;
}

TEST_F(MemoryAttackTest, AMemoryHogWithTheSmallestLimitEndsOnlyTheSandbox) {
  // Far below what any process needs: the run fails, and is reported.
  for (const std::string limit : {"1", "64K", "1M"}) {
    SCOPED_TRACE(limit);
    const auto result = run_json({"--memory", limit}, "echo started; echo x > kept.txt");
    if (::testing::Test::HasFailure()) return;
    EXPECT_TRUE(result.contains("termination_reason")) << result.dump();
  }
}

TEST_F(MemoryAttackTest, AForkBombEndsAtItsLimitWithTheSupervisorAlive) {
  // 200 sleepers against a limit of 16 (bounded: the loop ends by itself).
  const auto result = run_json({"--pids", "16"},
                               "echo kept > kept.txt; for i in $(seq 200); do sleep 30 & done; "
                               "wait");
  if (::testing::Test::HasFailure()) return;
  if (limits_enforced(result)) {
    EXPECT_EQ(result["termination_reason"], "pids") << result.dump();
  }
  expect_change_kept(result, "kept.txt");
}

TEST_F(MemoryAttackTest, TheServerSurvivesASandboxThatExhaustsItsMemory) {
  testing::LocalServer server;
  ASSERT_EQ(server.start(binary_, env(true), state_ / "server.sock", scratch_ / "server.log"), "");
  for (const std::string where : {"/tmp", "/dev/shm"}) {
    SCOPED_TRACE(where);
    const auto result = run_json({"--memory", "64M"}, fill(where), /*served=*/true);
    if (::testing::Test::HasFailure()) break;
    if (limits_enforced(result)) {
      EXPECT_EQ(result["termination_reason"], "oom") << result.dump();
    }
    expect_change_kept(result, "kept.txt");
  }
  const auto tiny = run_json({"--memory", "1"}, "true", /*served=*/true);
  EXPECT_TRUE(tiny.contains("termination_reason")) << tiny.dump();
  EXPECT_TRUE(server.alive()) << server.log();
  EXPECT_EQ(server.served_runs(), 3) << server.log();
  // And it goes on serving.
  const auto next = run_json({}, "echo still here", /*served=*/true);
  EXPECT_EQ(next["stdout"], "still here\n") << next.dump();
  EXPECT_EQ(server.served_runs(), 4) << server.log();
  EXPECT_EQ(server.stop(), 0) << server.log();
}

}  // namespace
}  // namespace pulsebox
