// The remote backend, for real: `pulsebox serve --listen` on 127.0.0.1 with
// a state directory of its own plays the remote machine, and `pulsebox run`
// with PULSE_REMOTE_URL and PULSE_REMOTE_TOKEN sends its workspace there, runs
// there, and brings the changes home as a local transaction. Runs as root
// and as an ordinary user (tools/check).
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "helpers/cli_fixture.h"
#include "helpers/cli_runner.h"
#include "helpers/local_server.h"
#include "helpers/schema_check.h"
#include "helpers/test_support.h"

namespace pulsebox {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

const std::string kToken = "remote-test-token-0123456789abcdef0123456789";

class RemoteTest : public testing::CliFixture {
 protected:
  void SetUp() override {
    CliFixture::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    testing::write_file(workspace_ / "a.txt", "original\n");
    testing::write_file(workspace_ / "b.txt", "to be deleted\n");
    // The server's side: its own state directory, reachable by sandboxes.
    fs::permissions(scratch_.path(), fs::perms(0711));
    const fs::path token = scratch_ / "token";
    testing::write_file(token, kToken);
    fs::permissions(token, fs::perms(0600));
    port_ = testing::free_loopback_port();
    ASSERT_GT(port_, 0);
    server_ = testing::spawn({binary_, "serve", "--listen", "127.0.0.1:" + std::to_string(port_),
                              "--token-file", token.string()},
                             {"PULSEBOX_STATE_DIR=" + (scratch_ / "server-state").string()},
                             scratch_ / "server.log");
    ASSERT_GT(server_, 0);
    // Up when a run's health check gets an answer: poll with a plain connect.
    ASSERT_TRUE(testing::poll_until(
        [&] {
          const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
          sockaddr_in address{};
          address.sin_family = AF_INET;
          address.sin_port = htons(static_cast<std::uint16_t>(port_));
          address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
          const bool up = ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
          ::close(fd);
          return up;
        },
        10s))
        << server_log();
  }
  void TearDown() override {
    if (server_ > 0) {
      ::kill(server_, SIGTERM);
      EXPECT_EQ(testing::wait_for(server_, 30s), 0) << server_log();
    }
  }

  std::string server_log() const { return testing::read_file(scratch_ / "server.log"); }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  std::vector<std::string> remote_env(const std::string& token = kToken) const {
    auto env = cli_env();
    env.push_back("PULSE_REMOTE_URL=" + url());
    env.push_back("PULSE_REMOTE_TOKEN=" + token);
    return env;
  }
  testing::CliRun run(const std::vector<std::string>& flags,
                      const std::vector<std::string>& command,
                      const std::vector<std::string>& env) const {
    std::vector<std::string> args = {"run", "--allow-weaker", "limits", "-w",
                                     workspace_.path().string()};
    args.insert(args.end(), flags.begin(), flags.end());
    args.push_back("--");
    args.insert(args.end(), command.begin(), command.end());
    return testing::run_cli(args, "", env);
  }

  int port_ = -1;
  pid_t server_ = -1;
};

TEST_F(RemoteTest, ARunGoesToTheServerAndItsChangesComeHomeForReview) {
  const auto first =
      run({}, {"sh", "-c", "cat a.txt; echo new > c.txt; rm b.txt; echo err >&2"}, remote_env());
  ASSERT_EQ(first.exit_code, 0) << first.err << server_log();
  EXPECT_EQ(first.out, "original\n");
  EXPECT_NE(first.err.find("err\n"), std::string::npos) << first.err;
  EXPECT_NE(first.err.find("isolation remote_container"), std::string::npos) << first.err;
  EXPECT_NE(first.err.find("the workspace was sent"), std::string::npos) << first.err;
  // Nothing changed here yet: the changes are a local transaction.
  EXPECT_FALSE(fs::exists(workspace_ / "c.txt"));
  EXPECT_TRUE(fs::exists(workspace_ / "b.txt"));
  const auto listed =
      testing::run_cli({"changes", "--json", "-w", workspace_.path().string()}, "", cli_env());
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  const json transactions = json::parse(listed.out);
  ASSERT_EQ(transactions.size(), 1u) << listed.out;
  const std::string tx = transactions[0]["id"];
  const auto committed =
      testing::run_cli({"commit", "-w", workspace_.path().string(), tx}, "", cli_env());
  ASSERT_EQ(committed.exit_code, 0) << committed.err;
  EXPECT_EQ(testing::read_file(workspace_ / "c.txt"), "new\n");
  EXPECT_FALSE(fs::exists(workspace_ / "b.txt"));

  // The same content again is not sent again.
  const auto second = run({}, {"cat", "c.txt"}, remote_env());
  ASSERT_EQ(second.exit_code, 0) << second.err;
  const auto third = run({}, {"cat", "c.txt"}, remote_env());
  ASSERT_EQ(third.exit_code, 0) << third.err;
  EXPECT_EQ(third.out, "new\n");
  EXPECT_NE(third.err.find("the workspace was there already"), std::string::npos) << third.err;
  // Every remote run is in the local audit log.
  const std::string audit = testing::read_file(workspace_ / ".agent/logs/audit.jsonl");
  EXPECT_NE(audit.find("\"remote_run\""), std::string::npos);
}

TEST_F(RemoteTest, JsonAndEventsReportTheRemoteRunAndTheLocalTransaction) {
  const auto result = run({"--json"}, {"sh", "-c", "echo x > d.txt"}, remote_env());
  ASSERT_EQ(result.exit_code, 0) << result.err << server_log();
  EXPECT_EQ(testing::schema_problems("result", testing::lines_of(result.out)), "");
  const json parsed = json::parse(result.out);
  EXPECT_EQ(parsed["isolation_level"], "remote_container");
  EXPECT_EQ(parsed["remote"]["url"], url());
  EXPECT_EQ(parsed["changes"][0]["path"], "d.txt");
  const std::string tx = parsed["transaction_id"];
  EXPECT_TRUE(fs::exists(workspace_ / ".agent" / "transactions" / tx)) << tx;

  const auto events = run({"--events"}, {"sh", "-c", "echo y > e.txt"}, remote_env());
  ASSERT_EQ(events.exit_code, 0) << events.err;
  const auto lines = testing::lines_of(events.out);
  EXPECT_EQ(testing::schema_problems("event", lines), "");
  const json last = json::parse(lines.back());
  EXPECT_EQ(last["event"], "result");
  EXPECT_EQ(last["result"]["isolation_level"], "remote_container");
}

// The changes of a remote run with a registered value are checked as they
// are staged here, as a local run's are: before, they came home unchecked,
// so the diff showed the value the command wrote and the file it deleted,
// and the commit asked for no --allow-secrets.
TEST_F(RemoteTest, ARemoteRunsChangesAreCheckedForItsSecretValues) {
  const std::string value = "S3cr3tV-remote-9876";
  testing::write_file(workspace_ / "held.txt", "token=" + value + "\n");
  auto env = remote_env();
  env.push_back("MYSEC=" + value);
  const auto result = run({"--json", "--secret", "MYSEC"},
                          {"sh", "-c", "rm held.txt; echo \"$MYSEC\" > p.txt"}, env);
  ASSERT_EQ(result.exit_code, 0) << result.err << server_log();
  const json parsed = json::parse(result.out);
  EXPECT_TRUE(parsed["changes_status"]["contains_secrets"].get<bool>()) << result.out;
  const std::string tx = parsed["transaction_id"];
  const std::string ws = workspace_.path().string();
  const auto diff = testing::run_cli({"diff", "-w", ws, tx}, "", cli_env());
  EXPECT_EQ(diff.exit_code, 0) << diff.err;
  EXPECT_EQ(diff.out.find(value), std::string::npos) << diff.out;
  EXPECT_NE(diff.out.find("-token=[REDACTED"), std::string::npos) << diff.out;
  const auto refused = testing::run_cli({"commit", "-w", ws, tx}, "", cli_env());
  EXPECT_EQ(refused.exit_code, 125) << refused.out << refused.err;
  EXPECT_TRUE(fs::exists(workspace_ / "held.txt"));
  // --changes commit keeps such a transaction, and says why.
  // The result names no path by the value either.
  const auto kept = run({"--json", "--secret", "MYSEC", "--changes", "commit"},
                        {"sh", "-c", "echo \"$MYSEC\" > q.txt; touch \"n$MYSEC\""}, env);
  EXPECT_EQ(kept.exit_code, 123) << kept.err;
  EXPECT_EQ(kept.out.find(value), std::string::npos) << kept.out;
  const json status = json::parse(kept.out)["changes_status"];
  EXPECT_EQ(status["status"], "conflict") << status;
  EXPECT_NE(status["detail"].get<std::string>().find("secret"), std::string::npos) << status;
  EXPECT_FALSE(fs::exists(workspace_ / "q.txt"));
}

TEST_F(RemoteTest, AHostChangeDuringTheRemoteRunIsAConflictNotOverwritten) {
  const pid_t client =
      testing::spawn({binary_, "run", "--allow-weaker", "limits", "-w", workspace_.path().string(),
                      "--", "sh", "-c", "echo up; sleep 2; echo remote > a.txt"},
                     remote_env(), scratch_ / "client.log");
  ASSERT_GT(client, 0);
  // "up" comes from the remote command: the upload is done, the command sleeps.
  ASSERT_TRUE(testing::poll_until(
      [&] { return testing::read_file(scratch_ / "client.log").find("up\n") != std::string::npos; },
      30s))
      << testing::read_file(scratch_ / "client.log");
  testing::write_file(workspace_ / "a.txt", "edited here meanwhile\n");
  EXPECT_EQ(testing::wait_for(client, 60s), 0) << testing::read_file(scratch_ / "client.log");
  const auto committed =
      testing::run_cli({"commit", "-w", workspace_.path().string(), "latest"}, "", cli_env());
  EXPECT_NE(committed.exit_code, 0) << committed.out;
  EXPECT_EQ(testing::read_file(workspace_ / "a.txt"), "edited here meanwhile\n");
}

TEST_F(RemoteTest, AWrongTokenIsAnErrorAndNothingRuns) {
  const auto refused = run({}, {"sh", "-c", "echo ran > ran.txt"}, remote_env("wrong-token"));
  EXPECT_EQ(refused.exit_code, 125);
  EXPECT_NE(refused.err.find("refused the token"), std::string::npos) << refused.err;
  EXPECT_EQ(refused.out, "");
  const auto as_events = run({"--events"}, {"true"}, remote_env("wrong-token"));
  EXPECT_EQ(as_events.exit_code, 125);
  EXPECT_EQ(as_events.err, "");
  EXPECT_NE(as_events.out.find("\"code\":\"unauthorized\""), std::string::npos) << as_events.out;
  EXPECT_EQ(testing::schema_problems("event", testing::lines_of(as_events.out)), "");
  auto no_token = cli_env();
  no_token.push_back("PULSE_REMOTE_URL=" + url());
  const auto missing = run({}, {"true"}, no_token);
  EXPECT_EQ(missing.exit_code, 125);
  EXPECT_NE(missing.err.find("PULSE_REMOTE_TOKEN is not set"), std::string::npos) << missing.err;
  EXPECT_EQ(server_log().find("POST /v1/runs"), std::string::npos) << server_log();
}

TEST_F(RemoteTest, AnUnreachableServerFallsBackOnlyWhenTheEnvironmentChoseIt) {
  auto env = cli_env();
  env.push_back("PULSE_REMOTE_URL=http://127.0.0.1:" +
                std::to_string(testing::free_loopback_port()));
  env.push_back("PULSE_REMOTE_TOKEN=" + kToken);
  const auto fell_back = run({}, {"cat", "a.txt"}, env);
  EXPECT_EQ(fell_back.exit_code, 0) << fell_back.err;
  EXPECT_EQ(fell_back.out, "original\n");
  EXPECT_NE(fell_back.err.find("running on this machine with the native backend"),
            std::string::npos)
      << fell_back.err;
  EXPECT_NE(testing::read_file(workspace_ / ".agent/logs/audit.jsonl").find("backend_fallback"),
            std::string::npos);
  const auto explicit_remote = run({"--backend", "remote"}, {"cat", "a.txt"}, env);
  EXPECT_EQ(explicit_remote.exit_code, 125);
  EXPECT_EQ(explicit_remote.out, "");
  // --events: nothing for people; the refusal is an error event.
  const auto as_events = run({"--backend", "remote", "--events"}, {"cat", "a.txt"}, env);
  EXPECT_EQ(as_events.exit_code, 125);
  EXPECT_EQ(as_events.err, "");
  const auto lines = testing::lines_of(as_events.out);
  ASSERT_EQ(lines.size(), 1u) << as_events.out;
  EXPECT_EQ(testing::schema_problems("event", lines), "");
  EXPECT_EQ(nlohmann::json::parse(lines[0])["error"]["code"], "unavailable") << lines[0];
}

}  // namespace
}  // namespace pulsebox
