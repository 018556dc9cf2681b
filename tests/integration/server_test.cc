// `pulsebox serve --local` and `pulsebox run` through it, for real: a server
// process on a state directory of the test's own, clients started as a user
// would start them. Whatever a run through the server shows (output, exit
// status, JSON, errors, changes, secrets, the audit log) must be what the
// same run shows in-process; only the start-up is saved. Also the native
// runtime's sandboxes started ahead, in this process. Runs as root and as an
// ordinary user (tools/check).
#include <fcntl.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <thread>

#include "backends/native_runtime.h"
#include "helpers/cli_fixture.h"
#include "helpers/cli_runner.h"
#include "helpers/local_server.h"
#include "helpers/test_support.h"
#include "pulsebox/sandbox.h"
#include "server/protocol.h"

namespace pulsebox {
namespace {

using testing::spawn;
using testing::TempDir;
using testing::wait_for;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

// A run's summary without its duration ("exit 0 in 3 ms, ..."), the one
// part that differs between two runs of the same command.
std::string without_timing(std::string text) {
  const auto at = text.find(" in ");
  const auto end = text.find(" ms,", at);
  if (at != std::string::npos && end != std::string::npos) text.erase(at, end - at);
  return text;
}

class ServerTest : public testing::CliFixture {
 protected:
  void SetUp() override {
    CliFixture::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    testing::write_file(workspace_ / "a.txt", "original\n");
  }

  void TearDown() override {
    if (server_ > 0) stop_server();
  }

  std::vector<std::string> env() const {
    // Limits are strong only with cgroups (root, or a delegated cgroup):
    // the runs here accept weaker ones, in-process and served alike.
    return cli_env(/*served=*/true);
  }
  std::vector<std::string> in_process_env() const {
    auto e = env();
    e.push_back("PULSEBOX_SERVER=off");
    return e;
  }
  fs::path socket() const { return state_.path() / "server.sock"; }

  // Returns once the socket's name is there, looked for every `poll`.
  void start_server(const std::vector<std::string>& extra = {},
                    std::chrono::milliseconds poll = 5ms) {
    std::vector<std::string> argv = {binary_, "serve", "--local", "--verbose"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    server_ = spawn(argv, env(), log_);
    ASSERT_GT(server_, 0);
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!fs::exists(socket())) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << server_log();
      ASSERT_EQ(wait_for(server_, 0ms), -1) << "the server ended: " << server_log();
      std::this_thread::sleep_for(poll);
    }
  }

  int stop_server() {
    ::kill(server_, SIGTERM);
    const int status = wait_for(server_, 30s);
    server_ = -1;
    return status;
  }

  std::string server_log() const { return testing::read_file(log_); }

  // A raw connection to the fast path's socket (a client of our own making).
  core::UniqueFd connect_fast_path() const {
    core::UniqueFd connection(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, socket().c_str(), sizeof address.sun_path - 1);
    if (::connect(connection.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) != 0)
      return {};
    return connection;
  }
  int served_runs() const {
    int count = 0;
    const std::string log = server_log();
    for (std::size_t at = log.find("pulsebox serve: run in"); at != std::string::npos;
         at = log.find("pulsebox serve: run in", at + 1)) {
      ++count;
    }
    return count;
  }

  testing::CliRun run(std::vector<std::string> args, const std::vector<std::string>& environment,
                      const std::string& cwd = "") {
    args.insert(args.begin(), {"run", "--allow-weaker", "limits"});
    return testing::run_cli(args, "", environment, cwd);
  }

  fs::path log_ = scratch_ / "server.log";
  pid_t server_ = -1;
};

TEST_F(ServerTest, ARunThroughTheServerShowsWhatTheSameRunShowsInProcess) {
  start_server();
  const std::string w = workspace_.path().string();
  const std::vector<std::string> command = {"-w", w,    "--",
                                            "sh", "-c", "cat a.txt; echo to-stderr >&2; exit 7"};
  const auto served = run(command, env());
  const auto alone = run(command, in_process_env());
  EXPECT_EQ(served_runs(), 1) << server_log();
  EXPECT_EQ(served.exit_code, 7) << served.err;
  EXPECT_EQ(served.exit_code, alone.exit_code);
  EXPECT_EQ(served.out, "original\n");
  EXPECT_EQ(served.out, alone.out);
  // The summary differs only in the run's duration.
  EXPECT_EQ(without_timing(served.err), without_timing(alone.err));
  EXPECT_NE(served.err.find("to-stderr\n"), std::string::npos) << served.err;

  // --json: the same object but for times, pids and the cgroup's counters.
  const std::vector<std::string> json_command = {
      "--json", "-w", w, "--", "sh", "-c", "echo out; echo err >&2; exit 3"};
  const auto served_json = run(json_command, env());
  const auto alone_json = run(json_command, in_process_env());
  EXPECT_EQ(served_runs(), 2) << server_log();
  ASSERT_EQ(served_json.exit_code, 3) << served_json.err;
  auto a = nlohmann::json::parse(served_json.out);
  auto b = nlohmann::json::parse(alone_json.out);
  for (auto* object : {&a, &b}) {
    for (const char* varying : {"duration_ms", "metrics", "pid", "execution_id"})
      object->erase(varying);
  }
  EXPECT_EQ(a, b);
  EXPECT_EQ(a["stdout"], "out\n");
  EXPECT_EQ(a["stderr"], "err\n");

  // Both runs are in the workspace's one audit log, chained.
  const auto verified = testing::run_cli(
      {"audit", "verify", (workspace_ / ".agent/logs/audit.jsonl").string()}, "", env());
  EXPECT_EQ(verified.exit_code, 0) << verified.out << verified.err;
}

TEST_F(ServerTest, PathsTheEnvironmentAndSecretsAreTheClients) {
  start_server();
  // A relative workspace is the client's, not the server's working directory.
  const fs::path parent = workspace_.path().parent_path();
  const std::string relative = workspace_.path().filename().string();
  const std::string secret = "s3cr3t-value-" + std::to_string(::getpid());
  auto served = run(
      {"-w", relative, "--secret", "CLIENT_ONLY_TOKEN", "--", "sh", "-c",
       "echo token=$CLIENT_ONLY_TOKEN; echo changed > a.txt"},
      [&] {
        auto e = env();
        e.push_back("CLIENT_ONLY_TOKEN=" + secret);
        return e;
      }(),
      parent.string());
  EXPECT_EQ(served_runs(), 1) << server_log();
  ASSERT_EQ(served.exit_code, 0) << served.err;
  // The value came from the client's environment (the server's has none)
  // and is scrubbed from the output all the same.
  EXPECT_EQ(served.out.find(secret), std::string::npos) << served.out;
  EXPECT_NE(served.out.find("token="), std::string::npos) << served.out;
  EXPECT_NE(served.out.find("REDACTED"), std::string::npos) << served.out;
  EXPECT_EQ(testing::read_file(workspace_ / ".agent/logs/audit.jsonl").find(secret),
            std::string::npos);
  // The change is a pending transaction of that workspace, applied by the
  // ordinary commit.
  const auto tx_at = served.err.find("tx-");
  ASSERT_NE(tx_at, std::string::npos) << served.err;
  const std::string tx = served.err.substr(tx_at, served.err.find_first_of(" \n", tx_at) - tx_at);
  EXPECT_EQ(testing::read_file(workspace_ / "a.txt"), "original\n");
  const auto committed =
      testing::run_cli({"commit", "-w", workspace_.path().string(), tx}, "", env());
  ASSERT_EQ(committed.exit_code, 0) << committed.err;
  EXPECT_EQ(testing::read_file(workspace_ / "a.txt"), "changed\n");

  // A missing secret is the client's error, named like in-process.
  const auto missing =
      run({"-w", relative, "--secret", "NOT_SET_ANYWHERE", "--", "true"}, env(), parent.string());
  EXPECT_EQ(missing.exit_code, 125);
  EXPECT_NE(missing.err.find("--secret NOT_SET_ANYWHERE: the variable is not set"),
            std::string::npos)
      << missing.err;
}

TEST_F(ServerTest, BadInputIsReportedExactlyAsWithoutAServer) {
  start_server();
  const std::string w = workspace_.path().string();
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"-w", w, "--memory", "lots", "--", "true"},  // the run's own check
           {"-w", w, "--no-such-flag", "--", "true"},    // the parser's (the client's own)
           {"-w", (workspace_ / "missing").string(), "--", "true"},
           {"-w", w, "--", "no-such-program-here"},
       }) {
    const auto served = run(args, env());
    const auto alone = run(args, in_process_env());
    EXPECT_EQ(served.exit_code, alone.exit_code) << args[2];
    EXPECT_EQ(without_timing(served.err), without_timing(alone.err)) << args[2];
    EXPECT_NE(served.exit_code, 0) << args[2];
  }
  // Three were the server's to report; the unknown flag went back to the
  // client's own parser.
  EXPECT_EQ(served_runs(), 3) << server_log();
  EXPECT_NE(server_log().find("fallback: the arguments are for the client's own parser"),
            std::string::npos)
      << server_log();
}

TEST_F(ServerTest, AClientThatGoesAwayCancelsItsRun) {
  start_server();
  const std::string marker = "cancel-marker-" + std::to_string(::getpid());
  const pid_t client =
      spawn({binary_, "run", "--allow-weaker", "limits", "-w", workspace_.path().string(), "--",
             "sh", "-c", "sleep 30; : " + marker},
            env(), scratch_ / "client.log");
  ASSERT_GT(client, 0);
  // The sandboxed sleep is running (the client's own command line has the
  // marker too: 2 processes, then the client goes).
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (testing::processes_with_marker(marker) < 2) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << server_log();
    std::this_thread::sleep_for(10ms);
  }
  ::kill(client, SIGKILL);
  EXPECT_EQ(wait_for(client, 5s), 128 + SIGKILL);
  const auto gone = std::chrono::steady_clock::now() + 10s;
  while (testing::processes_with_marker(marker) > 0) {
    ASSERT_LT(std::chrono::steady_clock::now(), gone) << "the sandbox outlived its client";
    std::this_thread::sleep_for(10ms);
  }
  // The run ended as cancelled, in the audit log; the server goes on.
  const auto deadline_log = std::chrono::steady_clock::now() + 10s;
  while (
      testing::read_file(workspace_ / ".agent/logs/audit.jsonl").find("termination: cancelled") ==
      std::string::npos) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline_log)
        << testing::read_file(workspace_ / ".agent/logs/audit.jsonl");
    std::this_thread::sleep_for(10ms);
  }
  const auto next = run({"-w", workspace_.path().string(), "--", "echo", "still here"}, env());
  EXPECT_EQ(next.exit_code, 0) << next.err;
  EXPECT_EQ(next.out, "still here\n");
}

TEST_F(ServerTest, ConcurrentClientsAreServedAtOnce) {
  start_server();
  const std::string failures = testing::run_concurrently(4, [&](int client) -> std::string {
    for (int i = 0; i < 3; ++i) {
      const std::string word = "c" + std::to_string(client) + "-" + std::to_string(i);
      const auto result =
          run({"-w", workspace_.path().string(), "--", "sh", "-c", "echo " + word}, env());
      if (result.exit_code != 0 || result.out != word + "\n")
        return word + ": exit " + std::to_string(result.exit_code) + " " + result.out + result.err;
    }
    return "";
  });
  EXPECT_EQ(failures, "") << server_log();
  EXPECT_EQ(served_runs(), 12) << server_log();
}

TEST_F(ServerTest, AnotherReleaseOrUserNamespaceRunsByItself) {
  start_server();
  // A copy of the binary is the same release: served (the identity is the
  // release and the protocol, not the file).
  const fs::path copy = scratch_ / "pulsebox-copy";
  fs::copy_file(binary_, copy);
  fs::permissions(copy, fs::perms(0755));
  ::setenv("PULSEBOX_BIN", copy.c_str(), 1);
  auto result = run({"-w", workspace_.path().string(), "--", "echo", "served"}, env());
  ::setenv("PULSEBOX_BIN", binary_.c_str(), 1);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, "served\n");
  EXPECT_EQ(served_runs(), 1) << server_log();

  // Another release is answered with a fallback: its flags may mean other things.
  const core::UniqueFd connection = connect_fast_path();
  ASSERT_TRUE(connection) << server_log();
  server::RunRequest request;
  request.args = {"-w", workspace_.path().string(), "--", "true"};
  request.client_binary = "pulsebox 0.0.1 local protocol 1";
  core::UniqueFd here(::open(".", O_PATH | O_DIRECTORY | O_CLOEXEC));
  ASSERT_EQ(server::send_message(connection.get(), server::encode(request),
                                 {here.get(), STDOUT_FILENO, STDERR_FILENO, STDIN_FILENO}),
            0);
  const auto reply = server::receive_message(connection.get(), 64 * 1024, 0);
  ASSERT_TRUE(reply.has_value());
  const auto decoded = server::decode_reply(reply->bytes);
  ASSERT_TRUE(decoded) << decoded.error().to_string();
  EXPECT_EQ(decoded.value().kind, server::ReplyKind::Fallback);
  EXPECT_NE(decoded.value().reason.find("another pulsebox release"), std::string::npos)
      << decoded.value().reason;
  EXPECT_EQ(served_runs(), 1) << server_log();

  // A client in another user namespace (unshare -U: ids mean other things
  // there) is not served either. Whether the run then works in there by
  // itself is not the point: the server must not have done it.
  const std::string command = "PULSEBOX_STATE_DIR=" + state_.path().string() + " unshare -U " +
                              binary_ + " run -w " + workspace_.path().string() +
                              " -- true >/dev/null 2>&1";
  (void)std::system(command.c_str());
  EXPECT_EQ(served_runs(), 1) << server_log();
  EXPECT_NE(server_log().find("fallback: the client is in another user namespace"),
            std::string::npos)
      << server_log();
}

// A request without the client's stdin (a client of before it was sent)
// is not run with /dev/null in its place: the server answers fallback.
TEST_F(ServerTest, ARequestWithoutStdinFallsBack) {
  start_server();
  const core::UniqueFd connection = connect_fast_path();
  ASSERT_TRUE(connection) << server_log();
  server::RunRequest request;
  request.args = {"-w", workspace_.path().string(), "--", "cat"};
  request.client_binary = server::binary_identity();
  core::UniqueFd here(::open(".", O_PATH | O_DIRECTORY | O_CLOEXEC));
  ASSERT_EQ(server::send_message(connection.get(), server::encode(request),
                                 {here.get(), STDOUT_FILENO, STDERR_FILENO}),
            0);
  const auto reply = server::receive_message(connection.get(), 64 * 1024, 0);
  ASSERT_TRUE(reply.has_value());
  const auto decoded = server::decode_reply(reply->bytes);
  ASSERT_TRUE(decoded) << decoded.error().to_string();
  EXPECT_EQ(decoded.value().kind, server::ReplyKind::Fallback);
  EXPECT_NE(decoded.value().reason.find("stdin"), std::string::npos) << decoded.value().reason;
  EXPECT_EQ(served_runs(), 0) << server_log();
}

TEST_F(ServerTest, AClientWithFewerCapabilitiesIsNotServed) {
  PULSEBOX_SKIP_UNLESS_ROOT("dropping one capability of root's");
  start_server();
  const std::string command = "PULSEBOX_STATE_DIR=" + state_.path().string() +
                              " setpriv --bounding-set=-net_raw " + binary_ +
                              " run --allow-weaker limits -w " + workspace_.path().string() +
                              " -- echo capable > " + (scratch_ / "out").string() + " 2>&1";
  EXPECT_EQ(std::system(command.c_str()), 0) << testing::read_file(scratch_ / "out");
  EXPECT_EQ(testing::read_file(scratch_ / "out").rfind("capable\n", 0), 0u)
      << testing::read_file(scratch_ / "out");
  EXPECT_EQ(served_runs(), 0) << server_log();
  EXPECT_NE(server_log().find("lacks capabilities"), std::string::npos) << server_log();
}

TEST_F(ServerTest, OneServerPerStateDirectoryAndAStopLeavesNothing) {
  start_server();
  const auto served = run({"-w", workspace_.path().string(), "--", "true"}, env());
  ASSERT_EQ(served.exit_code, 0) << served.err;
  // A second server refuses, naming the first.
  const auto second = testing::run_cli({"serve", "--local"}, "", env());
  EXPECT_EQ(second.exit_code, 125);
  EXPECT_NE(second.err.find("another pulsebox server already serves " + socket().string() +
                            " (pid " + std::to_string(server_) + ")"),
            std::string::npos)
      << second.err;
  // A socket in a directory others can write to is refused, and that
  // directory is left as it is.
  const fs::path shared = scratch_ / "shared";
  fs::create_directories(shared);
  fs::permissions(shared, fs::perms(01777));
  const auto elsewhere =
      testing::run_cli({"serve", "--local", "--socket", (shared / "s.sock").string()}, "", env());
  EXPECT_EQ(elsewhere.exit_code, 125);
  EXPECT_NE(elsewhere.err.find("nobody else can write to"), std::string::npos) << elsewhere.err;
  EXPECT_EQ(fs::status(shared).permissions(), fs::perms(01777));
  EXPECT_FALSE(fs::exists(shared / "s.sock"));

  EXPECT_EQ(stop_server(), 0) << server_log();
  EXPECT_FALSE(fs::exists(socket()));
  // The sandbox it had started ahead is gone with its staging and cgroup.
  int left = 0;
  for (const auto& entry : fs::directory_iterator(state_.path() / "runs")) {
    ++left;
    ADD_FAILURE() << "left behind: " << entry.path();
  }
  EXPECT_EQ(left, 0);
  // Without a server the run still works, in-process.
  const auto alone = run({"-w", workspace_.path().string(), "--", "echo", "no server"}, env());
  EXPECT_EQ(alone.exit_code, 0) << alone.err;
  EXPECT_EQ(alone.out, "no server\n");
  // An explicit socket that does not answer is said, then run anyway.
  auto explicit_env = env();
  explicit_env.push_back("PULSEBOX_SERVER=" + socket().string());
  const auto told = run({"-w", workspace_.path().string(), "--", "echo", "told"}, explicit_env);
  EXPECT_EQ(told.exit_code, 0) << told.err;
  EXPECT_NE(told.err.find("PULSEBOX_SERVER=" + socket().string()), std::string::npos) << told.err;
}

// The socket appears only once it listens: a client that finds it must be
// able to connect (else it silently runs in its own process, as with no
// server). Bound, then listening, a watcher that connects the moment the
// name appears got ECONNREFUSED in some of these starts.
TEST_F(ServerTest, TheSocketAppearsListening) {
  int refused = 0;
  for (int start = 0; start < 15; ++start) {
    start_server({}, 0ms);  // as soon as the name is there
    if (HasFatalFailure()) return;
    if (!connect_fast_path()) ++refused;
    ASSERT_EQ(stop_server(), 0) << server_log();
  }
  EXPECT_EQ(refused, 0) << "starts whose socket refused its first client";
}

// The native runtime's sandboxes started ahead, in this process.
class StartedAheadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto backend = make_native_backend(NativeBackendOptions{.state_dir = state_.path()});
    const Availability availability = backend->availability();
    PULSEBOX_SKIP_UNLESS(availability.available, availability.reason);
    testing::write_file(workspace_ / "a.txt", "original\n");
    // A system directory of the test's own, with a file hidden in it once
    // it exists (the real ones are the host's).
    fs::create_directories(system_ / "bin");
    // Readable by the sandbox's user (as root, an unprivileged id): without
    // its mask the hidden file would be readable.
    fs::permissions(system_.path, fs::perms(0755));
    testing::write_file(system_ / "bin/visible", "shown\n");
    native_.state_dir = state_.path();
    native_.system_paths = {"/usr", "/bin", "/lib", "/lib64", system_.path.string()};
    native_.hidden_paths = {(system_ / "bin/hidden-file").string()};
  }

  SandboxOptions options(std::shared_ptr<Backend> backend) {
    SandboxOptions o;
    o.workspace = workspace_.path();
    o.policy.add_rule({ActionType::Shell, "*", Decision::Allow, "test"});
    o.backend = std::move(backend);
    o.accept_weaker = {Dimension::Limits};
    return o;
  }

  ProcessResult run(backends::NativeRuntime& runtime, const std::vector<std::string>& argv,
                    ExecuteOptions execute = {}) {
    Sandbox sandbox(options(runtime.make_backend()));
    return sandbox.execute(argv, execute);
  }

  // Not under /tmp, which is the sandbox's own tmpfs.
  struct VarTmpDir {
    VarTmpDir() {
      std::string pattern = "/var/tmp/pulsebox-test-system-XXXXXX";
      if (::mkdtemp(pattern.data()) == nullptr) std::abort();
      path = pattern;
    }
    ~VarTmpDir() {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
    fs::path operator/(const std::string& name) const { return path / name; }
    fs::path path;
  };

  TempDir workspace_;
  TempDir state_;
  VarTmpDir system_;
  NativeBackendOptions native_;
};

TEST_F(StartedAheadTest, TheNextRunBeginsInASandboxStartedAheadAndNeverInAUsedOne) {
  auto runtime = backends::make_native_runtime(native_, true);
  runtime->start_ahead(NetworkPolicy{}, ResourcePolicy{});
  runtime->wait_until_idle();
  EXPECT_EQ(runtime->stats().started_ahead, 2);  // Prestart::kSandboxesAhead
  // Each run gets a fresh sandbox: a file left in /tmp, a process's pid, a
  // hostname change are never seen by the next one.
  auto first = run(*runtime, {"sh", "-c", "echo $$; echo left > /tmp/left; echo seen > seen.txt"});
  ASSERT_EQ(first.exit_code, 0) << first.stderr_data << first.termination_detail;
  EXPECT_EQ(first.stdout_data, "2\n");
  runtime->wait_until_idle();
  // (Shell builtins and ls only: the VM test runs this on busybox.)
  auto second =
      run(*runtime, {"sh", "-c", "echo $$; test -e /tmp/left && echo left || echo none; ls"});
  ASSERT_EQ(second.exit_code, 0) << second.stderr_data << second.termination_detail;
  EXPECT_EQ(second.stdout_data.rfind("2\nnone\n", 0), 0u) << second.stdout_data;
  // The first run's change is its transaction, not the second run's view.
  EXPECT_EQ(second.stdout_data.find("seen.txt"), std::string::npos) << second.stdout_data;
  ASSERT_TRUE(first.transaction_id.has_value());
  runtime->wait_until_idle();
  const auto stats = runtime->stats();
  EXPECT_EQ(stats.used_started_ahead, 2);
  EXPECT_EQ(stats.launched_for_a_run, 0);
  EXPECT_EQ(stats.started_ahead, 4);  // each run's is replaced: two wait for the next runs
  // One look at the host per run, just before its command starts: each
  // launch ahead plans from the host as it is, and is the fresh look a
  // finished run asks for.
  EXPECT_EQ(stats.shapes_computed, 2);
}

TEST_F(StartedAheadTest, ASandboxOfAnotherShapeIsNeverUsed) {
  auto runtime = backends::make_native_runtime(native_, true);
  runtime->start_ahead(NetworkPolicy{}, ResourcePolicy{});
  runtime->wait_until_idle();
  // The file to hide appears after the sandbox was started ahead: that one
  // has no mask for it, so it must not be used.
  testing::write_file(system_ / "bin/hidden-file", "do not show\n");
  fs::permissions(system_ / "bin/hidden-file", fs::perms(0644));
  auto result = run(*runtime, {"sh", "-c",
                               "cat " + (system_ / "bin/visible").string() + "; cat " +
                                   (system_ / "bin/hidden-file").string()});
  EXPECT_NE(result.exit_code, 0);
  EXPECT_EQ(result.stdout_data, "shown\n") << result.stderr_data;
  runtime->wait_until_idle();
  auto stats = runtime->stats();
  EXPECT_EQ(stats.used_started_ahead, 0);
  EXPECT_EQ(stats.launched_for_a_run, 1);
  EXPECT_EQ(stats.discarded, 2);  // both replaced by ones of the new shape
  // Other limits or another network are other shapes too; the same again
  // is served from the one started ahead for it.
  ResourcePolicy smaller;
  smaller.memory_bytes = 256ull << 20;
  SandboxOptions o = options(runtime->make_backend());
  o.limits = smaller;
  Sandbox sandbox(std::move(o));
  result = sandbox.execute({"sh", "-c", ":"});
  EXPECT_EQ(result.exit_code, 0) << result.termination_detail;
  runtime->wait_until_idle();
  result = run(*runtime, {"sh", "-c", ":"});
  EXPECT_EQ(result.exit_code, 0) << result.termination_detail;
  stats = runtime->stats();
  EXPECT_EQ(stats.used_started_ahead, 0);
  EXPECT_EQ(stats.launched_for_a_run, 3);
  runtime->wait_until_idle();
  result = run(*runtime, {"sh", "-c", ":"});
  EXPECT_EQ(result.exit_code, 0) << result.termination_detail;
  EXPECT_EQ(runtime->stats().used_started_ahead, 1);
}

// The shape is compared when the command is about to start, not when the
// sandbox is taken: a file to hide that appears after prepare() (while init
// makes the workspace mounts) is still masked.
TEST_F(StartedAheadTest, TheShapeIsComparedJustBeforeTheCommandStarts) {
  auto runtime = backends::make_native_runtime(native_, true);
  runtime->start_ahead(NetworkPolicy{}, ResourcePolicy{});
  runtime->wait_until_idle();
  auto backend = runtime->make_backend();
  ExecutionRequest request;
  request.argv = {"sh", "-c",
                  "cat " + (system_ / "bin/visible").string() + "; cat " +
                      (system_ / "bin/hidden-file").string()};
  request.workspace = workspace_.path();
  request.environment = {{"PATH", "/usr/bin:/bin"}};
  request.execution_id = "run-late-shape";
  std::string out;
  request.on_output = [&](OutputStream which, std::string_view text) {
    if (which == OutputStream::Stdout) out += text;
  };
  auto prepared = backend->prepare(request);
  ASSERT_NE(prepared, nullptr);
  testing::write_file(system_ / "bin/hidden-file", "do not show\n");
  fs::permissions(system_ / "bin/hidden-file", fs::perms(0644));
  const auto outcome = backend->execute(request, std::move(prepared));
  backend->cleanup();
  EXPECT_NE(outcome.result.exit_code, 0);
  EXPECT_EQ(out, "shown\n");
  runtime->wait_until_idle();
  const auto stats = runtime->stats();
  EXPECT_EQ(stats.used_started_ahead, 0);
  EXPECT_EQ(stats.launched_for_a_run, 1);
}

// Under load, runs of the same shape end while the next sandbox is being
// started ahead: each asks for a refill and a fresh look at the host, and
// the sandbox being started is still of the shape they want.
TEST_F(StartedAheadTest, ASandboxStartedAheadIsKeptWhenRunsOfItsShapeEndMeanwhile) {
  // A start is seen under way by its run's lock file, there before the
  // start is counted; the request made then (what a finished run's
  // hand-over asks for) came during the start if, once made, the start is
  // still not counted. Seen, not timed: a loaded machine may keep this
  // thread off a core for a whole start, so a few tries are allowed.
  const auto lock_files = [&] {
    int count = 0;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(state_.path() / "runs", ec))
      count += entry.path().extension() == ".lock" ? 1 : 0;
    return count;
  };
  int asked_during_a_start = 0;
  for (int attempt = 0; attempt < 3 && asked_during_a_start == 0; ++attempt) {
    auto runtime = backends::make_native_runtime(native_, true);
    runtime->start_ahead(NetworkPolicy{}, ResourcePolicy{});
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    int asked_during = -1;  // the start (0 or 1) last asked during
    for (;;) {
      const auto stats = runtime->stats();
      const int finished = stats.started_ahead + stats.discarded;
      if (finished >= 2 || std::chrono::steady_clock::now() > deadline) break;
      if (lock_files() > finished && asked_during < finished) {
        runtime->start_ahead(NetworkPolicy{}, ResourcePolicy{});
        asked_during = finished;
        const auto after = runtime->stats();
        if (after.started_ahead + after.discarded == finished) ++asked_during_a_start;
      }
      std::this_thread::yield();
    }
    runtime->wait_until_idle();
    const auto stats = runtime->stats();
    EXPECT_EQ(stats.discarded, 0) << "started ahead in the wanted shape, then thrown away";
    EXPECT_EQ(stats.started_ahead, 2);
  }
  EXPECT_GE(asked_during_a_start, 1) << "no request came while a start was under way";
}

TEST_F(StartedAheadTest, ACancelDescriptorEndsTheRun) {
  auto runtime = backends::make_native_runtime(native_, true);
  const int cancel = ::eventfd(0, EFD_CLOEXEC);
  ASSERT_GE(cancel, 0);
  std::thread canceller([&] {
    std::this_thread::sleep_for(200ms);
    const std::uint64_t one = 1;
    (void)!::write(cancel, &one, sizeof one);
  });
  ExecuteOptions execute;
  execute.cancel_fd = cancel;
  const auto started = std::chrono::steady_clock::now();
  const auto result = run(*runtime, {"sleep", "30"}, execute);
  canceller.join();
  ::close(cancel);
  EXPECT_EQ(result.termination_reason, TerminationReason::Cancelled);
  EXPECT_EQ(result.signal, SIGTERM);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 10s);
}

TEST_F(StartedAheadTest, GoingAwayTearsDownWhatWasStartedAhead) {
  {
    auto runtime = backends::make_native_runtime(native_, true);
    runtime->start_ahead(NetworkPolicy{}, ResourcePolicy{});
    runtime->wait_until_idle();
    ASSERT_EQ(runtime->stats().started_ahead, 2);
    EXPECT_FALSE(fs::is_empty(state_.path() / "runs"));
  }
  EXPECT_TRUE(fs::is_empty(state_.path() / "runs"));
}

}  // namespace
}  // namespace pulsebox
