// The protocol (docs/protocol.md) on its two local carriers, for real:
// `pulsebox run --events`, and the local server's JSON socket. Every
// message is checked against docs/schema/. Runs as root and as an
// ordinary user (tools/check).
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/unique_fd.h"
#include "helpers/cli_fixture.h"
#include "helpers/cli_runner.h"
#include "helpers/local_server.h"
#include "helpers/schema_check.h"
#include "helpers/test_support.h"

namespace pulsebox {
namespace {

using nlohmann::json;
using testing::lines_of;
using testing::schema_problems;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::vector<json> parsed(const std::vector<std::string>& lines) {
  std::vector<json> out;
  for (const auto& line : lines)
    out.push_back(json::parse(line));
  return out;
}

std::vector<json> of_kind(const std::vector<json>& events, const std::string& kind) {
  std::vector<json> out;
  for (const auto& event : events)
    if (event["event"] == kind) out.push_back(event);
  return out;
}

class EventsTest : public testing::CliFixture {
 protected:
  testing::CliRun run(const std::vector<std::string>& flags,
                      const std::vector<std::string>& command) {
    std::vector<std::string> args = {"run",    "--events", "--allow-weaker",
                                     "limits", "-w",       workspace_.path().string()};
    args.insert(args.end(), flags.begin(), flags.end());
    args.push_back("--");
    args.insert(args.end(), command.begin(), command.end());
    return testing::run_cli(args, "", cli_env());
  }
};

TEST_F(EventsTest, ARunIsStartedOutputChangesAndResult) {
  const auto result = run({}, {"sh", "-c", "echo out; echo err >&2; echo new > b.txt; exit 3"});
  EXPECT_EQ(result.exit_code, 3) << result.err;
  const auto lines = lines_of(result.out);
  EXPECT_EQ(schema_problems("event", lines), "");
  const auto events = parsed(lines);
  ASSERT_GE(events.size(), 4u) << result.out;
  EXPECT_EQ(events.front()["event"], "started");
  EXPECT_EQ(events.front()["argv"][0], "sh");
  EXPECT_EQ(events.back()["event"], "result");
  EXPECT_EQ(events.back()["exit_status"], 3);
  EXPECT_EQ(events.back()["result"]["exit_code"], 3);
  std::string out, err;
  for (const auto& event : of_kind(events, "output"))
    (event["stream"] == "stdout" ? out : err) += event["data"].get<std::string>();
  EXPECT_EQ(out, "out\n");
  EXPECT_EQ(err, "err\n");
  const auto changes = of_kind(events, "changes");
  ASSERT_EQ(changes.size(), 1u) << result.out;
  EXPECT_EQ(changes[0]["changes"][0]["path"], "b.txt");
  EXPECT_EQ(changes[0]["transaction_id"], events.back()["result"]["transaction_id"]);
  // Everything is in the events: stderr has nothing for people.
  EXPECT_EQ(result.err, "");
}

TEST_F(EventsTest, OutputThatIsNotTextTravelsExactly) {
  const auto result = run({}, {"sh", "-c", "printf '\\377\\376'"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto lines = lines_of(result.out);
  EXPECT_EQ(schema_problems("event", lines), "");
  const auto output = of_kind(parsed(lines), "output");
  ASSERT_EQ(output.size(), 1u) << result.out;
  EXPECT_EQ(output[0]["data_base64"], "//4=");
}

TEST_F(EventsTest, ARefusedRequestIsAnErrorEventNamingItsField) {
  const auto result = run({"--memory", "12x"}, {"true"});
  EXPECT_EQ(result.exit_code, 125);
  const auto lines = lines_of(result.out);
  ASSERT_EQ(lines.size(), 1u) << result.out;
  EXPECT_EQ(schema_problems("event", lines), "");
  const json error = json::parse(lines[0])["error"];
  EXPECT_EQ(error["code"], "invalid_field");
  EXPECT_EQ(error["field"], "limits.memory");
  EXPECT_EQ(error["message"].get<std::string>().rfind("limits.memory: ", 0), 0u) << error;
}

TEST_F(EventsTest, TheJsonResultMatchesItsSchemaAndKeepsArgv) {
  const auto result = testing::run_cli({"run", "--json", "--allow-weaker", "limits", "-w",
                                        workspace_.path().string(), "--", "echo", "a b", "c"},
                                       "", cli_env());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(schema_problems("result", lines_of(result.out)), "");
  EXPECT_EQ(json::parse(result.out)["argv"], json({"echo", "a b", "c"}));
}

// The local server's protocol socket.
TEST_F(EventsTest, AnExecutionIdNamesTheRunEverywhere) {
  const auto result = run({"--execution-id", "agent-step.7"}, {"true"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  for (const json& event : parsed(lines_of(result.out)))
    EXPECT_EQ(event["run_id"], "agent-step.7") << event;
  EXPECT_NE(testing::read_file(workspace_ / ".agent/logs/audit.jsonl").find("agent-step.7"),
            std::string::npos);
  const auto refused = run({"--execution-id", "no/slash"}, {"true"});
  EXPECT_EQ(refused.exit_code, 125);
  EXPECT_NE(refused.err.find("--execution-id"), std::string::npos) << refused.err;
}

// SIGTERM to an in-process run cancels it as a hung-up client does: the
// result says so, and so does the audit log (the signal's default action
// left neither).
TEST_F(EventsTest, SigtermCancelsTheRunAndItsResultSaysSo) {
  int out[2];
  ASSERT_EQ(::pipe2(out, O_CLOEXEC), 0);
  std::vector<std::string> args = {binary_,
                                   "run",
                                   "--events",
                                   "--allow-weaker",
                                   "limits",
                                   "-w",
                                   workspace_.path().string(),
                                   "--",
                                   "sh",
                                   "-c",
                                   "echo up; exec sleep 60"};
  std::vector<std::string> env = cli_env();
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::dup2(out[1], STDOUT_FILENO);
    const int null = ::open("/dev/null", O_RDONLY);
    ::dup2(null, STDIN_FILENO);
    std::vector<char*> argv, envp;
    for (auto& arg : args)
      argv.push_back(arg.data());
    argv.push_back(nullptr);
    for (auto& item : env)
      envp.push_back(item.data());
    envp.push_back(nullptr);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  ::close(out[1]);
  std::string text;
  char chunk[4096];
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  bool signalled = false;
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{out[0], POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    const ssize_t n = ::read(out[0], chunk, sizeof chunk);
    if (n <= 0) break;
    text.append(chunk, static_cast<std::size_t>(n));
    if (!signalled && text.find("\"data\":\"up\\n\"") != std::string::npos) {
      ::kill(child, SIGTERM);
      signalled = true;
    }
  }
  ::close(out[0]);
  if (std::chrono::steady_clock::now() >= deadline) ::kill(child, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(signalled) << text;
  ASSERT_TRUE(WIFEXITED(status)) << "ended by signal " << WTERMSIG(status) << "\n" << text;
  const auto events = parsed(lines_of(text));
  ASSERT_FALSE(events.empty());
  ASSERT_EQ(events.back()["event"], "result") << text;
  EXPECT_EQ(events.back()["result"]["termination_reason"], "cancelled") << text;
  EXPECT_EQ(WEXITSTATUS(status), events.back()["exit_status"]);
  EXPECT_NE(testing::read_file(workspace_ / ".agent/logs/audit.jsonl").find("cancelled"),
            std::string::npos);
}

class ProtocolSocketTest : public testing::CliFixture {
 protected:
  void SetUp() override {
    CliFixture::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    testing::write_file(workspace_ / "a.txt", "original\n");
    const std::string started = server_.start(binary_, cli_env(true), state_.path() / "server.sock",
                                              scratch_.path() / "log");
    ASSERT_EQ(started, "");
    // Up when a connection is taken (the socket's file exists a moment
    // before the server listens on it).
    ASSERT_TRUE(testing::poll_until([&] { return static_cast<bool>(connect()); }, 10s))
        << server_.log();
  }

  fs::path socket() const { return state_.path() / "server.json.sock"; }

  core::UniqueFd connect() const {
    core::UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, socket().c_str(), sizeof address.sun_path - 1);
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) return {};
    return fd;
  }

  static void send_line(int fd, const json& message) {
    const std::string line = message.dump() + "\n";
    ASSERT_EQ(::send(fd, line.data(), line.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(line.size()));
  }

  // Lines until the server closes, or until `until` returns true for one.
  static std::vector<std::string> read_lines(int fd,
                                             const std::function<bool(const json&)>& until = {}) {
    std::vector<std::string> lines;
    std::string buffer;
    char chunk[4096];
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (std::chrono::steady_clock::now() < deadline) {
      for (auto end = buffer.find('\n'); end != std::string::npos; end = buffer.find('\n')) {
        lines.push_back(buffer.substr(0, end));
        buffer.erase(0, end + 1);
        if (until && until(json::parse(lines.back()))) return lines;
      }
      const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
      if (n <= 0) break;
      buffer.append(chunk, static_cast<std::size_t>(n));
    }
    return lines;
  }

  std::vector<std::string> request(const json& message) const {
    const auto fd = connect();
    EXPECT_TRUE(fd) << server_.log();
    if (!fd) return {};
    send_line(fd.get(), message);
    return read_lines(fd.get());
  }

  json run_request(const std::vector<std::string>& argv) const {
    return {{"v", 1},
            {"request", "run"},
            {"argv", argv},
            {"workspace", workspace_.path().string()},
            {"allow_weaker", {"limits"}}};
  }

  testing::LocalServer server_;
};

TEST_F(ProtocolSocketTest, ARunWithStdinAndItsChangesReviewedAndCommitted) {
  json run = run_request({"sh", "-c", "cat a.txt; cat > b.txt"});
  run["stdin"] = "from the client\n";
  const auto lines = request(run);
  EXPECT_EQ(schema_problems("request", {run.dump()}), "");
  EXPECT_EQ(schema_problems("event", lines), "");
  const auto events = parsed(lines);
  ASSERT_FALSE(events.empty()) << server_.log();
  ASSERT_EQ(events.back()["event"], "result") << events.back();
  EXPECT_EQ(events.back()["exit_status"], 0);
  const std::string transaction = events.back()["result"]["transaction_id"];
  EXPECT_EQ(of_kind(events, "output").at(0)["data"], "original\n");

  const json workspace = workspace_.path().string();
  std::vector<std::string> replies;
  for (const json& message :
       {json{{"v", 1}, {"request", "health"}}, json{{"v", 1}, {"request", "capabilities"}},
        json{{"v", 1}, {"request", "changes"}, {"workspace", workspace}},
        json{{"v", 1}, {"request", "diff"}, {"workspace", workspace}, {"transaction", transaction}},
        json{{"v", 1}, {"request", "read_file"}, {"workspace", workspace}, {"path", "a.txt"}},
        json{{"v", 1},
             {"request", "commit"},
             {"workspace", workspace},
             {"transaction", transaction}}}) {
    EXPECT_EQ(schema_problems("request", {message.dump()}), "") << message;
    const auto reply = request(message);
    ASSERT_EQ(reply.size(), 1u) << message;
    replies.push_back(reply[0]);
    EXPECT_FALSE(json::parse(reply[0]).contains("error")) << reply[0];
  }
  EXPECT_EQ(schema_problems("reply", replies), "");
  EXPECT_NE(replies[3].find("+from the client"), std::string::npos) << replies[3];
  EXPECT_EQ(json::parse(replies[4])["data"], "original\n");
  EXPECT_EQ(testing::read_file(workspace_ / "b.txt"), "from the client\n");
}

// The reference's transaction API as requests: a transaction made, a write
// and a delete staged under the caller's policy, reviewed and committed.
TEST_F(ProtocolSocketTest, ATransactionIsStagedReviewedAndCommittedByRequests) {
  testing::write_file(workspace_ / "old.txt", "old\n");
  const json workspace = workspace_.path().string();
  const json allow_writes = {{"rules",
                              {{{"action", "write"}, {"target", "*"}, {"decision", "allow"}},
                               {{"action", "delete"}, {"target", "*"}, {"decision", "allow"}}}}};
  std::vector<std::string> sent;
  std::vector<std::string> replies;
  auto ask = [&](const json& message) {
    sent.push_back(message.dump());
    const auto reply = request(message);
    EXPECT_EQ(reply.size(), 1u) << message;
    replies.push_back(reply.empty() ? "{}" : reply[0]);
    return json::parse(replies.back());
  };
  const json made = ask({{"v", 1}, {"request", "create_transaction"}, {"workspace", workspace}});
  ASSERT_TRUE(made.contains("transaction")) << made;
  const std::string tx = made["transaction"];
  json write = {{"v", 1},
                {"request", "stage_write"},
                {"workspace", workspace},
                {"transaction", tx},
                {"path", "src/new.txt"},
                {"data", "new\n"}};
  // Without a policy, the reference defaults: writes are denied.
  EXPECT_EQ(ask(write)["error"]["code"], "policy_denied");
  write["policy"] = allow_writes;
  write["secrets"] = {{"TOKEN", "value-of-the-token"}};
  write["data"] = "leak value-of-the-token\n";
  const json leak = ask(write);
  EXPECT_EQ(leak["error"]["code"], "security") << leak;
  EXPECT_EQ(leak["error"]["field"], "data") << leak;
  write["data"] = "new\n";
  EXPECT_EQ(ask(write)["staged"], "write");
  json binary = write;
  binary.erase("data");
  binary["path"] = "bin.dat";
  binary["data_base64"] = "AP8K";  // 00 ff 0a
  binary["mode"] = 0755;
  EXPECT_EQ(ask(binary)["staged"], "write");
  const json remove = {{"v", 1},
                       {"request", "stage_delete"},
                       {"workspace", workspace},
                       {"transaction", tx},
                       {"path", "old.txt"},
                       {"policy", allow_writes}};
  EXPECT_EQ(ask(remove)["staged"], "delete");
  json stray = remove;
  stray["mode"] = 0644;
  EXPECT_EQ(ask(stray)["error"]["field"], "mode");
  sent.pop_back();  // refused by the schema too
  const json diff =
      ask({{"v", 1}, {"request", "diff"}, {"workspace", workspace}, {"transaction", tx}});
  EXPECT_NE(diff.value("diff", "").find("+new"), std::string::npos) << diff;
  const json committed =
      ask({{"v", 1}, {"request", "commit"}, {"workspace", workspace}, {"transaction", tx}});
  // src/ was made for src/new.txt, as the reference's commit makes it.
  EXPECT_EQ(committed.value("committed", json::array()).size(), 4u) << committed;
  EXPECT_EQ(testing::read_file(workspace_ / "src/new.txt"), "new\n");
  EXPECT_EQ(testing::read_file(workspace_ / "bin.dat"), std::string("\0\xff\n", 3));
  EXPECT_EQ(fs::status(workspace_ / "bin.dat").permissions() & fs::perms::all,
            static_cast<fs::perms>(0755));
  EXPECT_FALSE(fs::exists(workspace_ / "old.txt"));
  EXPECT_EQ(schema_problems("request", sent), "");
  EXPECT_EQ(schema_problems("reply", replies), "");
}

// `pulsebox request`: the same requests with no server, one JSON line each
// way; exit 125 with an error reply.
TEST_F(EventsTest, RequestsWithoutAServerAnswerOneLine) {
  testing::write_file(workspace_ / "a.txt", "text TOKENVALUE1234\n");
  const std::string workspace = workspace_.path().string();
  auto ask = [&](const json& message) {
    auto result = testing::run_cli({"request"}, message.dump() + "\n", cli_env());
    EXPECT_EQ(schema_problems("reply", {result.out}), "") << result.out;
    return result;
  };
  const auto read = ask({{"v", 1},
                         {"request", "read_file"},
                         {"workspace", workspace},
                         {"path", "a.txt"},
                         {"secrets", {{"T", "TOKENVALUE1234"}}}});
  EXPECT_EQ(read.exit_code, 0) << read.out << read.err;
  EXPECT_EQ(json::parse(read.out)["data"], "text [REDACTED_SECRET]\n");
  const auto denied = ask({{"v", 1},
                           {"request", "read_file"},
                           {"workspace", workspace},
                           {"path", "a.txt"},
                           {"policy", {{"defaults", {{"read", "deny"}}}}}});
  EXPECT_EQ(denied.exit_code, 125);
  EXPECT_EQ(json::parse(denied.out)["error"]["code"], "policy_denied") << denied.out;
  const auto made = ask({{"v", 1}, {"request", "create_transaction"}, {"workspace", workspace}});
  ASSERT_EQ(made.exit_code, 0) << made.out << made.err;
  const auto bad_policy = ask({{"v", 1},
                               {"request", "stage_delete"},
                               {"workspace", workspace},
                               {"transaction", json::parse(made.out)["transaction"]},
                               {"path", "a.txt"},
                               {"policy", {{"rules", {{{"action", "delete"}}}}}}});
  EXPECT_EQ(bad_policy.exit_code, 125);
  EXPECT_EQ(json::parse(bad_policy.out)["error"]["field"], "policy") << bad_policy.out;
  const auto run = ask({{"v", 1}, {"request", "run"}, {"argv", {"true"}}});
  EXPECT_EQ(run.exit_code, 125);
  EXPECT_EQ(json::parse(run.out)["error"]["field"], "request") << run.out;
  const auto garbage = testing::run_cli({"request"}, "{not json", cli_env());
  EXPECT_EQ(garbage.exit_code, 125);
  EXPECT_EQ(json::parse(garbage.out)["error"]["code"], "invalid_request") << garbage.out;
}

// A run after a review request on the same workspace: the review request
// keyed the workspace's audit log with the server's key, and the run must
// find that key too (it looked in the request's environment, which has
// none, and was refused).
TEST_F(ProtocolSocketTest, ARunAfterAReviewRequestFindsTheServersAuditKey) {
  const json workspace = workspace_.path().string();
  for (int round = 0; round < 2; ++round) {
    const auto run = request(run_request({"true"}));
    ASSERT_FALSE(run.empty());
    EXPECT_EQ(json::parse(run.back())["event"], "result") << run.back();
    const auto read =
        request({{"v", 1}, {"request", "read_file"}, {"workspace", workspace}, {"path", "a.txt"}});
    ASSERT_EQ(read.size(), 1u);
    EXPECT_EQ(json::parse(read[0])["data"], "original\n") << read[0];
  }
}

TEST_F(ProtocolSocketTest, RefusalsAreErrorsWithACodeAndAField) {
  std::vector<std::string> errors;
  auto expect = [&](const json& message, const std::string& code, const json& field) {
    const auto reply = request(message);
    ASSERT_EQ(reply.size(), 1u) << message;
    const json got = json::parse(reply[0]);
    EXPECT_EQ(got["error"]["code"], code) << reply[0];
    EXPECT_EQ(got["error"]["field"], field) << reply[0];
    errors.push_back(reply[0]);
  };
  json unknown = run_request({"true"});
  unknown["limits"] = {{"memroy", "1G"}};
  expect(unknown, "invalid_field", "limits.memroy");
  json wrong_version = run_request({"true"});
  wrong_version["v"] = 2;
  expect(wrong_version, "invalid_request", "v");
  expect(json{{"v", 1}, {"request", "diff"}, {"workspace", workspace_.path().string()}},
         "invalid_field", "transaction");
  expect(json{{"v", 1}, {"request", "diff"}, {"workspace", "relative"}, {"transaction", "x"}},
         "invalid_field", "workspace");
  expect(json{{"v", 1}, {"request", "launch"}}, "not_found", "request");
  // A workspace of another user's: forbidden, whoever asks.
  const fs::path theirs = scratch_.path() / "theirs";
  fs::create_directory(theirs);
  if (::geteuid() == 0) {
    ASSERT_EQ(::chown(theirs.c_str(), 65534, 65534), 0);
  }
  const std::string other = ::geteuid() == 0 ? theirs.string() : std::string("/");
  json foreign = run_request({"true"});
  foreign["workspace"] = other;
  const auto reply = request(foreign);
  ASSERT_EQ(reply.size(), 1u);
  EXPECT_EQ(json::parse(reply[0])["error"]["code"], "forbidden") << reply[0];
  EXPECT_EQ(schema_problems("event", reply), "");
  // Errors of runs are error events; those of other requests, replies.
  std::vector<std::string> events(errors.begin(), errors.begin() + 2);
  std::vector<std::string> replies(errors.begin() + 2, errors.end());
  EXPECT_EQ(schema_problems("event", events), "");
  EXPECT_EQ(schema_problems("reply", replies), "");
}

TEST_F(ProtocolSocketTest, AnAskIsAnsweredOverTheConnection) {
  for (const std::string decision : {"allow", "deny"}) {
    json run = run_request({"sh", "-c", "echo the-command-ran"});
    run["approvals"] = "ask";
    run["policy"] = json::parse(R"({"rules": [{"action": "shell", "target": "*",
        "decision": "ask", "reason": "a person reviews every command"}]})");
    EXPECT_EQ(schema_problems("request", {run.dump()}), "");
    const auto fd = connect();
    ASSERT_TRUE(fd);
    send_line(fd.get(), run);
    auto lines =
        read_lines(fd.get(), [](const json& e) { return e["event"] == "approval_request"; });
    ASSERT_FALSE(lines.empty()) << server_.log();
    const json asked = json::parse(lines.back());
    ASSERT_EQ(asked["event"], "approval_request") << lines.back();
    const json answer = {{"v", 1},
                         {"request", "approval"},
                         {"run_id", asked["run_id"]},
                         {"approval_id", asked["approval_id"]},
                         {"decision", decision}};
    EXPECT_EQ(schema_problems("request", {answer.dump()}), "");
    send_line(fd.get(), answer);
    const auto rest = read_lines(fd.get());
    lines.insert(lines.end(), rest.begin(), rest.end());
    EXPECT_EQ(schema_problems("event", lines), "");
    const auto events = parsed(lines);
    ASSERT_EQ(of_kind(events, "approval").size(), 1u);
    EXPECT_EQ(of_kind(events, "approval")[0]["decision"], decision);
    if (decision == "allow") {
      EXPECT_EQ(events.back()["event"], "result");
      EXPECT_EQ(of_kind(events, "output").at(0)["data"], "the-command-ran\n");
    } else {
      EXPECT_EQ(events.back()["event"], "error");
      EXPECT_EQ(events.back()["error"]["code"], "policy_denied");
      EXPECT_TRUE(of_kind(events, "output").empty());
    }
  }
}

TEST_F(ProtocolSocketTest, AClientThatHangsUpHasItsRunCancelled) {
  auto fd = connect();
  ASSERT_TRUE(fd);
  send_line(fd.get(), run_request({"sh", "-c", "echo begun; exec sleep 60"}));
  const auto lines = read_lines(fd.get(), [](const json& e) { return e["event"] == "output"; });
  ASSERT_FALSE(lines.empty());
  const std::string run_id = json::parse(lines.back())["run_id"];
  const auto closed_at = std::chrono::steady_clock::now();
  fd.reset();
  // The audit log records the run's end as cancelled, long before the sleep's.
  const auto audit = workspace_ / ".agent/logs/audit.jsonl";
  const bool ended = testing::poll_until(
      [&] {
        const std::string log = testing::read_file(audit);
        return log.find(run_id) != std::string::npos && log.find("cancelled") != std::string::npos;
      },
      20s);
  EXPECT_TRUE(ended) << testing::read_file(audit);
  EXPECT_LT(std::chrono::steady_clock::now() - closed_at, 30s);
}

}  // namespace
}  // namespace pulsebox
