// The HTTP carrier (src/http/): the server class in this process with a fake
// run handler that streams lines and watches its cancel fd (the transport is
// what is under test, not runs), and the real pulsebox-http and
// `pulsebox serve --listen` for start-up checks and SIGTERM. Runs as root and
// as an ordinary user.
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "helpers/bounded_cli.h"
#include "helpers/local_server.h"
#include "helpers/schema_check.h"
#include "helpers/test_support.h"
#include "http/http_server.h"
#include "http/listen_address.h"
#include "http/shutdown_signals.h"

namespace pulsebox {
namespace {

namespace fs = std::filesystem;
using http::HttpServer;
using http::RunStream;
using http::ServerConfig;
using testing::poll_until;
using testing::TempDir;
using namespace std::chrono_literals;

const std::string kToken = "0123456789abcdef0123456789abcdef0123456789abcdef";
const std::string kWrongToken = "fedcba9876543210fedcba9876543210fedcba9876543210";

std::string write_token(const TempDir& dir, mode_t mode, const std::string& token = kToken) {
  const fs::path file = dir / "token";
  testing::write_file(file, token + "\n");
  ::chmod(file.c_str(), mode);
  return file.string();
}

// A fake run: `lines` lines `gap` apart, then a final line; when its cancel
// fd fires it says so in a last line and returns.
struct FakeRuns {
  int lines = 5;
  std::chrono::milliseconds gap = 50ms;
  std::atomic<int> started{0};
  std::atomic<int> cancelled{0};
  std::atomic<int> finished{0};

  http::RunHandler handler() {
    return [this](RunStream& run) {
      ++started;
      for (int i = 0; i < lines; ++i) {
        if (!run.write_line(R"({"event":"line","n":)" + std::to_string(i) + "}")) break;
        pollfd cancel{.fd = run.cancel_fd, .events = POLLIN, .revents = 0};
        if (::poll(&cancel, 1, static_cast<int>(gap.count())) > 0) {
          ++cancelled;
          run.write_line(R"({"event":"cancelled"})");
          return;
        }
      }
      run.write_line(R"({"event":"result","final":true})");
      ++finished;
    };
  }
};

// The server class in this process, served on a thread.
class InProcessServer {
 public:
  explicit InProcessServer(const ServerConfig& config, FakeRuns* runs = nullptr) {
    auto created = HttpServer::create(config);
    if (!created.ok()) {
      error_ = created.error().to_string();
      return;
    }
    server_ = std::move(created).value();
    if (runs != nullptr) server_->post_run("/v1/runs", runs->handler());
    server_->get("/v1/whoami", [](const httplib::Request&, httplib::Response& response,
                                  const http::ClientIdentity& client) {
      nlohmann::json body = {{"transport", client.transport}, {"address", client.address}};
      if (client.uid) body["uid"] = *client.uid;
      response.set_content(body.dump(), "application/json");
    });
    thread_ = std::thread([this] { served_ = server_->serve().ok(); });
  }
  ~InProcessServer() { stop(); }

  bool stop() {
    if (thread_.joinable()) {
      server_->begin_shutdown();
      thread_.join();
    }
    return served_;
  }
  HttpServer* operator->() { return server_.get(); }
  const std::string& error() const { return error_; }

 private:
  std::unique_ptr<HttpServer> server_;
  std::thread thread_;
  std::atomic<bool> served_{false};
  std::string error_;
};

// A raw HTTP/1.1 client over a socket, to hang up mid-response and to hold
// connections open.
class RawClient {
 public:
  static RawClient unix_socket(const fs::path& path) {
    RawClient client(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, path.c_str(), sizeof address.sun_path - 1);
    if (::connect(client.fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0)
      client.close();
    return client;
  }
  RawClient(RawClient&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  ~RawClient() { close(); }

  bool connected() const { return fd_ >= 0; }
  void close() {
    if (fd_ >= 0) ::close(std::exchange(fd_, -1));
  }

  bool send_request(const std::string& method, const std::string& path,
                    const std::string& token = kToken) {
    const std::string request = method + " " + path + " HTTP/1.1\r\nHost: pulsebox\r\n" +
                                (token.empty() ? "" : "Authorization: Bearer " + token + "\r\n") +
                                "Content-Length: 0\r\nConnection: close\r\n\r\n";
    return ::send(fd_, request.data(), request.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(request.size());
  }

  bool send_raw(const std::string& bytes) {
    return ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(bytes.size());
  }

  // Reads until `needle` has arrived, end of file, or `timeout`; returns all
  // read so far.
  const std::string& read_until(const std::string& needle, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while ((needle.empty() || received_.find(needle) == std::string::npos) &&
           std::chrono::steady_clock::now() < deadline) {
      pollfd entry{.fd = fd_, .events = POLLIN, .revents = 0};
      if (::poll(&entry, 1, 50) <= 0) continue;
      char buffer[4096];
      const ssize_t n = ::read(fd_, buffer, sizeof buffer);
      if (n <= 0) break;
      received_.append(buffer, static_cast<size_t>(n));
    }
    return received_;
  }
  const std::string& read_to_end(std::chrono::milliseconds timeout) {
    return read_until("", timeout);
  }

 private:
  explicit RawClient(int fd) : fd_(fd) {}
  int fd_ = -1;
  std::string received_;
};

httplib::Headers bearer(const std::string& token) {
  return {{"Authorization", "Bearer " + token}};
}

// spdlog's lines, captured for the test's look.
class CapturedLog {
 public:
  CapturedLog() {
    previous_ = spdlog::default_logger();
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(stream_);
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("test", sink));
  }
  ~CapturedLog() { spdlog::set_default_logger(previous_); }
  std::string text() {
    spdlog::default_logger()->flush();
    return stream_.str();
  }

 private:
  std::ostringstream stream_;
  std::shared_ptr<spdlog::logger> previous_;
};

class HttpServerTest : public ::testing::Test {
 protected:
  ServerConfig unix_config() {
    return ServerConfig{.listen = "unix:" + (dir_ / "run" / "http.sock").string(),
                        .token_file = write_token(dir_, 0600),
                        .max_runs = 2,
                        .max_queue = 4,
                        .shutdown_grace = 0s};
  }
  fs::path socket_path() const { return dir_ / "run" / "http.sock"; }

  TempDir dir_;
};

TEST_F(HttpServerTest, EveryRequestNeedsTheTokenAndA401IsLoggedWithoutIt) {
  CapturedLog log;
  InProcessServer server(unix_config());
  ASSERT_EQ(server.error(), "");
  httplib::ClientImpl client(socket_path().string(), 80);
  client.set_address_family(AF_UNIX);

  auto ok = client.Get("/v1/health", bearer(kToken));
  ASSERT_TRUE(ok) << httplib::to_string(ok.error());
  EXPECT_EQ(ok->status, 200);
  const auto health = nlohmann::json::parse(ok->body);
  EXPECT_EQ(health["v"], 1);
  EXPECT_EQ(health["status"], "ok");
  EXPECT_EQ(health["runs"]["max"], 2);

  auto missing = client.Get("/v1/health");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 401);
  const auto body = nlohmann::json::parse(missing->body);
  EXPECT_EQ(body["error"]["code"], "unauthorized");
  EXPECT_EQ(body["error"]["field"], "Authorization");

  ASSERT_EQ(kWrongToken.size(), kToken.size());
  auto wrong = client.Get("/v1/health?token=" + kWrongToken, bearer(kWrongToken));
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);
  auto prefix = client.Get("/v1/health", bearer(kToken.substr(0, 40)));
  ASSERT_TRUE(prefix);
  EXPECT_EQ(prefix->status, 401);
  auto longer = client.Get("/v1/health", bearer(kToken + "x"));
  ASSERT_TRUE(longer);
  EXPECT_EQ(longer->status, 401);
  // Every route, not health alone.
  auto other = client.Get("/v1/whoami", bearer(kWrongToken));
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 401);

  server.stop();
  const std::string text = log.text();
  EXPECT_NE(text.find("unauthorized request from unix uid=" + std::to_string(::geteuid())),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("GET /v1/health 401"), std::string::npos) << text;
  EXPECT_EQ(text.find(kToken.substr(0, 16)), std::string::npos) << text;
  EXPECT_EQ(text.find(kWrongToken.substr(0, 16)), std::string::npos) << text;
  EXPECT_EQ(text.find("token="), std::string::npos) << "query strings are not logged: " << text;
}

TEST_F(HttpServerTest, UnixSocketIdentityIsThePeersUidAndTheSocketIsPrivate) {
  InProcessServer server(unix_config());
  ASSERT_EQ(server.error(), "");
  struct stat st {};
  ASSERT_EQ(::lstat(socket_path().c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat(socket_path().parent_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);

  httplib::ClientImpl client(socket_path().string(), 80);
  client.set_address_family(AF_UNIX);
  auto who = client.Get("/v1/whoami", bearer(kToken));
  ASSERT_TRUE(who);
  ASSERT_EQ(who->status, 200);
  const auto body = nlohmann::json::parse(who->body);
  EXPECT_EQ(body["transport"], "unix");
  ASSERT_TRUE(body.contains("uid")) << body.dump();
  EXPECT_EQ(body.at("uid"), ::geteuid());
}

TEST_F(HttpServerTest, AFileInTheSocketsPlaceIsNotReplaced) {
  testing::write_file(socket_path(), "precious");
  auto created = HttpServer::create(unix_config());
  ASSERT_FALSE(created.ok());
  EXPECT_NE(created.error().to_string().find(socket_path().string()), std::string::npos);
  EXPECT_EQ(testing::read_file(socket_path()), "precious");
}

TEST_F(HttpServerTest, LoopbackTcpServesAndANetworkAddressNeedsTls) {
  ServerConfig config = unix_config();
  config.listen = "127.0.0.1:0";
  InProcessServer server(config);
  ASSERT_EQ(server.error(), "");
  const std::string address = server->address();
  const int port = std::stoi(address.substr(address.rfind(':') + 1));
  ASSERT_GT(port, 0);
  httplib::Client client("127.0.0.1", port);
  auto ok = client.Get("/v1/whoami", bearer(kToken));
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(nlohmann::json::parse(ok->body)["transport"], "tcp");
  auto missing = client.Get("/v1/health");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 401);

  EXPECT_FALSE(http::parse_listen_address("0.0.0.0:8700", false).ok());
  EXPECT_FALSE(http::parse_listen_address("example.org:8700", false).ok());
  EXPECT_TRUE(http::parse_listen_address("0.0.0.0:8700", true).ok());
  EXPECT_TRUE(http::parse_listen_address("[::1]:8700", false).ok());
  EXPECT_FALSE(http::parse_listen_address("unix:relative.sock", false).ok());
}

TEST_F(HttpServerTest, ARunStreamsNdjsonAndAClientThatLeavesCancelsIt) {
  FakeRuns runs;
  runs.lines = 200;  // 10 s: far longer than the test waits
  InProcessServer server(unix_config(), &runs);
  ASSERT_EQ(server.error(), "");

  {
    RawClient client = RawClient::unix_socket(socket_path());
    ASSERT_TRUE(client.connected());
    ASSERT_TRUE(client.send_request("POST", "/v1/runs"));
    const std::string& head = client.read_until(R"("n":1})", 5s);
    EXPECT_NE(head.find("HTTP/1.1 200"), std::string::npos) << head;
    EXPECT_NE(head.find("Content-Type: application/x-ndjson"), std::string::npos) << head;
    EXPECT_NE(head.find("Transfer-Encoding: chunked"), std::string::npos) << head;
    ASSERT_NE(head.find(R"({"event":"line","n":0})"
                        "\n"),
              std::string::npos)
        << head;
  }  // hangs up mid-stream
  EXPECT_TRUE(poll_until([&] { return runs.cancelled == 1; }, 5s))
      << "the run's cancel fd did not fire after its client left";
  EXPECT_TRUE(poll_until([&] { return server->run_counts().active == 0; }, 5s));
  EXPECT_EQ(runs.finished, 0);
}

TEST_F(HttpServerTest, RunsBeyondTheSlotsAndTheQueueAreTurnedAwayBusy) {
  FakeRuns runs;
  runs.lines = 200;
  ServerConfig config = unix_config();
  config.max_runs = 1;
  config.max_queue = 1;
  InProcessServer server(config, &runs);
  ASSERT_EQ(server.error(), "");

  RawClient first = RawClient::unix_socket(socket_path());
  ASSERT_TRUE(first.send_request("POST", "/v1/runs"));
  ASSERT_NE(first.read_until(R"("n":0)", 5s).find(R"("n":0)"), std::string::npos);
  RawClient second = RawClient::unix_socket(socket_path());
  ASSERT_TRUE(second.send_request("POST", "/v1/runs"));
  ASSERT_TRUE(poll_until([&] { return server->run_counts().queued == 1; }, 5s));

  httplib::ClientImpl third(socket_path().string(), 80);
  third.set_address_family(AF_UNIX);
  auto busy = third.Post("/v1/runs", bearer(kToken), "", "application/json");
  ASSERT_TRUE(busy);
  EXPECT_EQ(busy->status, 503);
  EXPECT_EQ(nlohmann::json::parse(busy->body)["error"]["code"], "busy");
  EXPECT_EQ(busy->get_header_value("Retry-After"), "1");
  auto health = third.Get("/v1/health", bearer(kToken));
  ASSERT_TRUE(health);
  EXPECT_EQ(nlohmann::json::parse(health->body)["runs"],
            nlohmann::json::parse(R"({"active":1,"queued":1,"max":1})"));

  // The first leaves: the queued one runs next.
  first.close();
  EXPECT_NE(second.read_until(R"("n":0)", 5s).find(R"("n":0)"), std::string::npos);
  EXPECT_EQ(runs.started, 2);
}

size_t open_fds() {
  return static_cast<size_t>(std::distance(fs::directory_iterator("/proc/self/fd"), {}));
}

TEST_F(HttpServerTest, TwoHundredRunsFromTwentyClientsAllEndAndLeaveNothing) {
  FakeRuns runs;
  runs.lines = 3;
  runs.gap = 5ms;
  ServerConfig config = unix_config();
  config.max_runs = 4;
  config.max_queue = 32;
  const size_t fds_before = open_fds();
  {
    InProcessServer server(config, &runs);
    ASSERT_EQ(server.error(), "");
    const std::string failures = testing::run_concurrently(20, [&](int) -> std::string {
      for (int i = 0; i < 10; ++i) {
        RawClient client = RawClient::unix_socket(socket_path());
        if (!client.connected() || !client.send_request("POST", "/v1/runs")) return "cannot send";
        const std::string& answer = client.read_to_end(10s);
        const bool complete = answer.find(R"({"event":"line","n":2})") != std::string::npos &&
                              answer.find(R"({"event":"result","final":true})"
                                          "\n\r\n0\r\n\r\n") != std::string::npos;
        if (!complete) return "run " + std::to_string(i) + " answered: " + answer;
      }
      return "";
    });
    EXPECT_EQ(failures, "");
    EXPECT_EQ(runs.finished, 200);
    EXPECT_EQ(runs.cancelled, 0);
    EXPECT_EQ(server->run_counts().active, 0u);
    EXPECT_EQ(server->run_counts().queued, 0u);
    EXPECT_TRUE(server.stop());
  }
  EXPECT_EQ(open_fds(), fds_before) << "descriptors left behind";
}

TEST_F(HttpServerTest, TlsServesHealthWithTheCertificate) {
  const std::string cert = (dir_ / "cert.pem").string(), key = (dir_ / "key.pem").string();
  const std::string command =
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost "
      "-addext subjectAltName=IP:127.0.0.1,DNS:localhost -keyout " +
      key + " -out " + cert + " 2>/dev/null";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  ServerConfig config = unix_config();
  config.listen = "127.0.0.1:0";
  config.tls_cert = cert;
  config.tls_key = key;
  InProcessServer server(config);
  ASSERT_EQ(server.error(), "");
  const std::string address = server->address();
  httplib::SSLClient client("127.0.0.1", std::stoi(address.substr(address.rfind(':') + 1)));
  client.set_ca_cert_path(cert.c_str());
  client.enable_server_certificate_verification(true);
  auto ok = client.Get("/v1/whoami", bearer(kToken));
  ASSERT_TRUE(ok) << httplib::to_string(ok.error());
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(nlohmann::json::parse(ok->body)["transport"], "tls");
  auto missing = client.Get("/v1/health");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 401);
}

TEST_F(HttpServerTest, ATlsClientThatLeavesCancelsItsRun) {
  const std::string cert = (dir_ / "cert.pem").string(), key = (dir_ / "key.pem").string();
  const std::string command =
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost "
      "-addext subjectAltName=IP:127.0.0.1 -keyout " +
      key + " -out " + cert + " 2>/dev/null";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  FakeRuns runs;
  runs.lines = 200;
  ServerConfig config = unix_config();
  config.listen = "127.0.0.1:0";
  config.tls_cert = cert;
  config.tls_key = key;
  InProcessServer server(config, &runs);
  ASSERT_EQ(server.error(), "");
  const std::string address = server->address();
  {
    httplib::SSLClient client("127.0.0.1", std::stoi(address.substr(address.rfind(':') + 1)));
    client.set_ca_cert_path(cert.c_str());
    client.enable_server_certificate_verification(true);
    httplib::Request request;
    request.method = "POST";
    request.path = "/v1/runs";
    request.headers = bearer(kToken);
    std::string received;
    // Leaves after the first line: the client closes its connection.
    request.content_receiver = [&](const char* data, size_t length, uint64_t, uint64_t) {
      received.append(data, length);
      return received.find(R"("n":0)") == std::string::npos;
    };
    httplib::Response response;
    httplib::Error error = httplib::Error::Success;
    client.send(request, response, error);
    EXPECT_NE(received.find(R"({"event":"line","n":0})"), std::string::npos) << received;
  }
  EXPECT_TRUE(poll_until([&] { return runs.cancelled == 1; }, 5s))
      << "the run's cancel fd did not fire after its TLS client left";
  EXPECT_EQ(runs.finished, 0);
}

// A server forked by the test. Killed and reaped when the test ends before
// it waited for it: a child left running holds meson's output pipe open,
// and the whole suite then waits for its timeout.
class ServerChild {
 public:
  explicit ServerChild(pid_t pid) : pid_(pid) {}
  ~ServerChild() {
    if (pid_ > 0) testing::wait_or_kill(pid_, 0ms);
  }
  ServerChild(const ServerChild&) = delete;
  ServerChild& operator=(const ServerChild&) = delete;
  pid_t pid() const { return pid_; }
  // Its exit status (testing::wait_or_kill).
  int wait(std::chrono::milliseconds timeout) {
    return testing::wait_or_kill(std::exchange(pid_, -1), timeout);
  }

 private:
  pid_t pid_;
};

// True once the socket takes connections: its file exists from bind(), a
// moment before listen().
bool accepts_connections(const fs::path& socket, std::chrono::milliseconds timeout = 5s) {
  return poll_until([&] { return RawClient::unix_socket(socket).connected(); }, timeout);
}

// The server in a child process of its own, so that SIGTERM reaches its
// signalfd thread and nothing of this test process.
pid_t serve_in_child(const ServerConfig& config, FakeRuns& runs) {
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  std::atomic<HttpServer*> running{nullptr};
  if (!http::watch_shutdown_signals([&] {
         if (HttpServer* server = running.load()) server->begin_shutdown();
       }).ok())
    ::_exit(3);
  auto server = HttpServer::create(config);
  if (!server.ok()) ::_exit(4);
  server.value()->post_run("/v1/runs", runs.handler());
  running = server.value().get();
  ::_exit(server.value()->serve().ok() ? 0 : 5);
}

TEST_F(HttpServerTest, SigtermLetsARunFinishRefusesNewRequestsAndExitsClean) {
  FakeRuns runs;
  runs.lines = 20;
  runs.gap = 100ms;  // 2 s of run, inside the grace
  ServerConfig config = unix_config();
  config.shutdown_grace = 20s;
  ServerChild server(serve_in_child(config, runs));
  ASSERT_TRUE(accepts_connections(socket_path()));

  RawClient run = RawClient::unix_socket(socket_path());
  ASSERT_TRUE(run.send_request("POST", "/v1/runs"));
  ASSERT_NE(run.read_until(R"("n":1})", 5s).find(R"("n":1})"), std::string::npos);
  ASSERT_EQ(::kill(server.pid(), SIGTERM), 0);

  // A new request while the run goes on is refused.
  std::string refused;
  poll_until(
      [&] {
        RawClient late = RawClient::unix_socket(socket_path());
        if (!late.send_request("GET", "/v1/health")) return false;
        refused = late.read_to_end(2s);
        return refused.find("503") != std::string::npos;
      },
      3s);
  EXPECT_NE(refused.find("HTTP/1.1 503"), std::string::npos) << refused;
  EXPECT_NE(refused.find("shutting_down"), std::string::npos) << refused;

  const std::string& stream = run.read_to_end(10s);
  EXPECT_NE(stream.find(R"({"event":"line","n":19})"), std::string::npos) << stream;
  EXPECT_NE(stream.find(R"({"event":"result","final":true})"
                        "\n"),
            std::string::npos)
      << stream;
  EXPECT_EQ(stream.find("cancelled"), std::string::npos) << stream;
  EXPECT_NE(stream.find("\r\n0\r\n\r\n"), std::string::npos) << "the chunked body ended";
  EXPECT_EQ(server.wait(10s), 0);
  EXPECT_FALSE(fs::exists(socket_path()));
}

TEST_F(HttpServerTest, SigtermCancelsARunThatOutlivesTheGrace) {
  FakeRuns runs;
  runs.lines = 1000;
  runs.gap = 100ms;
  ServerConfig config = unix_config();
  config.shutdown_grace = 1s;
  ServerChild server(serve_in_child(config, runs));
  ASSERT_TRUE(accepts_connections(socket_path()));
  RawClient run = RawClient::unix_socket(socket_path());
  ASSERT_TRUE(run.send_request("POST", "/v1/runs"));
  ASSERT_NE(run.read_until(R"("n":0})", 5s).find(R"("n":0})"), std::string::npos);
  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(server.pid(), SIGTERM), 0);
  const std::string& stream = run.read_to_end(10s);
  EXPECT_NE(stream.find(R"({"event":"cancelled"})"
                        "\n"),
            std::string::npos)
      << stream;
  EXPECT_EQ(server.wait(10s), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 8s);
  EXPECT_FALSE(fs::exists(socket_path()));
}

// The real program, through the CLI as a user starts it.
TEST_F(HttpServerTest, TheCliRefusesATokenFileOthersCanRead) {
  const std::string token = write_token(dir_, 0644);
  // Bounded: a server that wrongly starts would serve until killed.
  const testing::Bounds bounds{.deadline = 10s, .max_address_space = 8ull << 30};
  const auto result = testing::run_cli_bounded(
      {"serve", "--listen", "unix:" + socket_path().string(), "--token-file", token}, {}, bounds);
  EXPECT_FALSE(result.timed_out);
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.err.find(token), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("chmod 600"), std::string::npos) << result.err;
  EXPECT_FALSE(fs::exists(socket_path()));

  const std::string short_token = write_token(dir_, 0600, "too-short");
  const auto refused = testing::run_cli_bounded(
      {"serve", "--listen", "unix:" + socket_path().string(), "--token-file", short_token}, {},
      bounds);
  EXPECT_FALSE(refused.timed_out);
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.err.find("at least 32"), std::string::npos) << refused.err;
}

TEST_F(HttpServerTest, TheCliServesUntilSigtermAndRemovesItsSocket) {
  const std::string token = write_token(dir_, 0600);
  const char* bin = std::getenv("PULSEBOX_BIN");
  ASSERT_NE(bin, nullptr);
  ServerChild server(::fork());
  if (server.pid() == 0) {
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 2);
    ::setenv("PULSEBOX_STATE_DIR", (dir_ / "state").c_str(), 1);
    ::execl(bin, bin, "serve", "--listen", ("unix:" + socket_path().string()).c_str(),
            "--token-file", token.c_str(), "--max-runs", "3", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ASSERT_TRUE(accepts_connections(socket_path()));
  httplib::ClientImpl client(socket_path().string(), 80);
  client.set_address_family(AF_UNIX);
  auto health = client.Get("/v1/health", bearer(kToken));
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(nlohmann::json::parse(health->body)["runs"]["max"], 3);
  // A run refused before it begins: one error event, naming the field.
  auto runs = client.Post("/v1/runs", bearer(kToken), "{}", "application/json");
  ASSERT_TRUE(runs);
  EXPECT_EQ(runs->status, 200);
  EXPECT_EQ(testing::schema_problems("event", testing::lines_of(runs->body)), "");
  EXPECT_EQ(nlohmann::json::parse(runs->body)["error"]["code"], "invalid_request");
  EXPECT_EQ(nlohmann::json::parse(runs->body)["error"]["field"], "v");
  auto refused = client.Get("/v1/health", bearer(kWrongToken));
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 401);
  ::kill(server.pid(), SIGTERM);
  EXPECT_EQ(server.wait(10s), 0);
  EXPECT_FALSE(fs::exists(socket_path()));

  // The refusal is audited with the client's identity, without the token.
  const std::string audit = testing::read_file(dir_ / "state" / "audit" / "http.jsonl");
  nlohmann::json record;
  for (const auto& line : testing::read_lines(dir_ / "state" / "audit" / "http.jsonl")) {
    if (nlohmann::json::parse(line)["action"] == "http_auth") record = nlohmann::json::parse(line);
  }
  ASSERT_FALSE(record.is_null()) << audit;
  EXPECT_EQ(record["decision"], "deny");
  EXPECT_EQ(record["target"], "GET /v1/health");
  EXPECT_EQ(record["transport"], "unix");
  EXPECT_EQ(record["uid"], ::geteuid());
  EXPECT_EQ(audit.find(kWrongToken.substr(0, 16)), std::string::npos) << audit;
  EXPECT_EQ(audit.find(kToken.substr(0, 16)), std::string::npos) << audit;
}

// Real runs through `pulsebox serve --listen` on a unix socket: events
// checked against docs/schema/, limits clamped to the server's maxima, the
// review requests, and what a TCP caller may not name.
class ServedRunsTest : public HttpServerTest {
 protected:
  void SetUp() override {
    HttpServerTest::SetUp();
    // The state directory below it must be reachable by the sandbox's ids.
    fs::permissions(dir_.path(), fs::perms(0711));
    workspace_ = dir_ / "ws";
    fs::create_directory(workspace_);
    testing::write_file(workspace_ / "a.txt", "original\n");
  }
  void TearDown() override {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      EXPECT_EQ(testing::wait_or_kill(pid_, 30s), 0);
    }
  }
  void serve(const std::string& listen) {
    const std::string token = write_token(dir_, 0600);
    const char* bin = std::getenv("PULSEBOX_BIN");
    ASSERT_NE(bin, nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {
      const int log = ::open((dir_ / "log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
      ::dup2(log, 2);
      ::setenv("PULSEBOX_STATE_DIR", (dir_ / "state").c_str(), 1);
      ::execl(bin, bin, "serve", "--listen", listen.c_str(), "--token-file", token.c_str(),
              "--max-memory", "1G", static_cast<char*>(nullptr));
      ::_exit(127);
    }
  }
  std::string log() const { return testing::read_file(dir_ / "log"); }

  nlohmann::json run_body(const std::vector<std::string>& argv) const {
    return {{"v", 1},
            {"argv", argv},
            {"workspace", workspace_.string()},
            {"allow_weaker", {"limits"}},
            {"limits", {{"memory", "8G"}}}};
  }

  fs::path workspace_;
  pid_t pid_ = -1;
};

TEST_F(ServedRunsTest, ARunOverTheUnixSocketStreamsItsEventsAndIsReviewed) {
  serve("unix:" + socket_path().string());
  ASSERT_TRUE(accepts_connections(socket_path(), 10s)) << log();
  httplib::ClientImpl client(socket_path().string(), 80);
  client.set_address_family(AF_UNIX);
  client.set_read_timeout(60, 0);
  const auto body = run_body({"sh", "-c", "cat a.txt; echo new > b.txt"});
  EXPECT_EQ(testing::schema_problems("request", {body.dump()}), "");
  auto response = client.Post("/v1/runs", bearer(kToken), body.dump(), "application/json");
  ASSERT_TRUE(response) << log();
  EXPECT_EQ(response->status, 200);
  const auto lines = testing::lines_of(response->body);
  EXPECT_EQ(testing::schema_problems("event", lines), "");
  ASSERT_GE(lines.size(), 4u) << response->body;
  // The 8G asked for was clamped to the server's 1G, and it said so.
  EXPECT_EQ(nlohmann::json::parse(lines[0])["event"], "warning") << lines[0];
  EXPECT_NE(lines[0].find("limits.memory: 8G asked, 1G"), std::string::npos) << lines[0];
  const auto result = nlohmann::json::parse(lines.back());
  ASSERT_EQ(result["event"], "result") << response->body;
  EXPECT_EQ(result["exit_status"], 0);
  EXPECT_NE(response->body.find("\"data\":\"original\\n\""), std::string::npos) << response->body;
  const std::string transaction = result["result"]["transaction_id"];

  std::vector<std::string> replies;
  for (const char* route : {"/v1/diff", "/v1/commit"}) {
    const nlohmann::json request = {
        {"v", 1}, {"workspace", workspace_.string()}, {"transaction", transaction}};
    auto reply = client.Post(route, bearer(kToken), request.dump(), "application/json");
    ASSERT_TRUE(reply);
    EXPECT_EQ(reply->status, 200) << reply->body;
    replies.push_back(reply->body);
  }
  auto capabilities = client.Get("/v1/capabilities", bearer(kToken));
  ASSERT_TRUE(capabilities);
  replies.push_back(capabilities->body);
  EXPECT_EQ(testing::schema_problems("reply", replies), "");
  EXPECT_EQ(testing::read_file(workspace_ / "b.txt"), "new\n");
  // The transaction API as routes: made, staged under the caller's policy, committed.
  auto post = [&](const std::string& route, const nlohmann::json& request) {
    auto reply = client.Post(route, bearer(kToken), request.dump(), "application/json");
    EXPECT_TRUE(reply) << route;
    EXPECT_EQ(testing::schema_problems("reply", {reply ? reply->body : ""}), "");
    return reply ? nlohmann::json::parse(reply->body) : nlohmann::json();
  };
  const nlohmann::json workspace = workspace_.string();
  const std::string staged =
      post("/v1/create_transaction", {{"v", 1}, {"workspace", workspace}})["transaction"];
  const nlohmann::json allow = {
      {"rules", {{{"action", "write"}, {"target", "*"}, {"decision", "allow"}}}}};
  EXPECT_EQ(post("/v1/stage_write", {{"v", 1},
                                     {"workspace", workspace},
                                     {"transaction", staged},
                                     {"path", "c.txt"},
                                     {"data", "staged\n"},
                                     {"policy", allow}})["staged"],
            "write");
  EXPECT_EQ(post("/v1/commit",
                 {{"v", 1}, {"workspace", workspace}, {"transaction", staged}})["committed"],
            nlohmann::json::array({"c.txt"}));
  EXPECT_EQ(testing::read_file(workspace_ / "c.txt"), "staged\n");
  // Without the token: 401, nothing run.
  auto refused = client.Post("/v1/runs", bearer(kWrongToken), body.dump(), "application/json");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 401);
  EXPECT_EQ(testing::schema_problems("reply", {refused->body}), "") << refused->body;
}

TEST_F(ServedRunsTest, ATcpCallerNamesNoPathOfTheServersMachine) {
  const int port = testing::free_loopback_port();
  serve("127.0.0.1:" + std::to_string(port));
  httplib::Client client("127.0.0.1", port);
  ASSERT_TRUE(poll_until([&] { return static_cast<bool>(client.Get("/v1/health")); }, 10s))
      << log();
  auto response =
      client.Post("/v1/runs", bearer(kToken), run_body({"true"}).dump(), "application/json");
  ASSERT_TRUE(response);
  const auto lines = testing::lines_of(response->body);
  EXPECT_EQ(testing::schema_problems("event", lines), "");
  ASSERT_EQ(lines.size(), 1u) << response->body;
  EXPECT_EQ(nlohmann::json::parse(lines[0])["error"]["code"], "forbidden");
  auto diff = client.Post("/v1/diff", bearer(kToken),
                          R"({"v":1,"workspace":"/","transaction":"x"})", "application/json");
  ASSERT_TRUE(diff);
  EXPECT_EQ(diff->status, 403) << diff->body;
}

// Real runs under load: 200 from 20 clients at once, each with its own
// output, and nothing left of them on the server afterwards.
TEST_F(ServedRunsTest, TwoHundredRealRunsFromTwentyClientsAreAllRightAndLeaveNothing) {
  serve("unix:" + socket_path().string());
  ASSERT_TRUE(accepts_connections(socket_path(), 10s)) << log();
  std::atomic<int> right{0};
  std::mutex failures_mutex;
  std::string failures;
  std::vector<std::thread> clients;
  for (int c = 0; c < 20; ++c) {
    clients.emplace_back([&, c] {
      httplib::ClientImpl client(socket_path().string(), 80);
      client.set_address_family(AF_UNIX);
      client.set_read_timeout(120, 0);
      for (int i = 0; i < 10; ++i) {
        const std::string word = "run-" + std::to_string(c) + "-" + std::to_string(i);
        auto body = run_body({"echo", word});
        body["changes"] = "discard";
        auto response = client.Post("/v1/runs", bearer(kToken), body.dump(), "application/json");
        const std::string expected = "\"data\":\"" + word + "\\n\"";
        if (response && response->status == 200 &&
            response->body.find(expected) != std::string::npos &&
            response->body.find("\"event\":\"result\"") != std::string::npos) {
          ++right;
        } else {
          const std::lock_guard lock(failures_mutex);
          failures +=
              word + ": " + (response ? response->body.substr(0, 300) : "no response") + "\n";
        }
      }
    });
  }
  for (auto& client : clients)
    client.join();
  EXPECT_EQ(right.load(), 200) << failures << log();
  // Once the server has stopped (runs are torn down after their results go
  // out), every run's state is gone from its state directory.
  ::kill(pid_, SIGTERM);
  EXPECT_EQ(testing::wait_or_kill(pid_, 30s), 0) << log();
  pid_ = -1;
  std::vector<std::string> left;
  if (fs::exists(dir_ / "state" / "runs")) {
    for (const auto& entry : fs::directory_iterator(dir_ / "state" / "runs"))
      left.push_back(entry.path().filename());
  }
  EXPECT_TRUE(left.empty()) << left.size() << " runs left, e.g. " << left.front();
}

// A client that goes away mid-run has its sandbox killed, and SIGTERM under
// load lets the runs that finish deliver their results.
TEST_F(ServedRunsTest, AGoneClientsRunIsKilledAndSigtermLosesNoFinishedResult) {
  serve("unix:" + socket_path().string());
  ASSERT_TRUE(accepts_connections(socket_path(), 10s)) << log();
  {
    auto raw = RawClient::unix_socket(socket_path());
    ASSERT_TRUE(raw.connected());
    const std::string body = run_body({"sh", "-c", "echo begun; exec sleep 60"}).dump();
    raw.send_raw("POST /v1/runs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + kToken +
                 "\r\nContent-Type: application/json\r\nContent-Length: " +
                 std::to_string(body.size()) + "\r\n\r\n" + body);
    ASSERT_NE(raw.read_until("begun", 30s).find("begun"), std::string::npos) << log();
  }  // the client hangs up
  const auto audit = workspace_ / ".agent/logs/audit.jsonl";
  EXPECT_TRUE(poll_until(
      [&] { return testing::read_file(audit).find("cancelled") != std::string::npos; }, 20s))
      << testing::read_file(audit);

  // Three runs on a server of (at least) two slots: the runs that began
  // finish and deliver their results; one still queued, if any, is told
  // shutting_down. Nothing ends without an answer.
  httplib::ClientImpl health_client(socket_path().string(), 80);
  health_client.set_address_family(AF_UNIX);
  auto runs_held = [&] {
    auto health = health_client.Get("/v1/health", bearer(kToken));
    if (!health) return -1;
    const auto runs = nlohmann::json::parse(health->body, nullptr, false)["runs"];
    return runs.is_object() ? runs.value("active", 0) + runs.value("queued", 0) : -1;
  };
  // The gone client's slot is given back after its audit record.
  ASSERT_TRUE(poll_until([&] { return runs_held() == 0; }, 20s)) << log();
  std::vector<std::thread> clients;
  std::atomic<int> finished{0};
  std::atomic<int> told_shutting_down{0};
  for (int c = 0; c < 3; ++c) {
    clients.emplace_back([&] {
      httplib::ClientImpl client(socket_path().string(), 80);
      client.set_address_family(AF_UNIX);
      client.set_read_timeout(60, 0);
      auto response =
          client.Post("/v1/runs", bearer(kToken),
                      run_body({"sh", "-c", "sleep 3; echo finished"}).dump(), "application/json");
      if (response && response->body.find("finished\\n") != std::string::npos &&
          response->body.find("\"event\":\"result\"") != std::string::npos) {
        ++finished;
      } else if (response && response->status == 503 &&
                 response->body.find("shutting_down") != std::string::npos) {
        ++told_shutting_down;
      }
    });
  }
  // Every run holds a slot or waits in the queue, not a fixed pause (seen
  // within the runs' 3 s, before the first one ends).
  EXPECT_TRUE(poll_until([&] { return runs_held() == 3; }, 20s)) << log();
  ::kill(pid_, SIGTERM);
  for (auto& client : clients)
    client.join();
  EXPECT_GE(finished.load(), 2) << log();
  EXPECT_EQ(finished.load() + told_shutting_down.load(), 3) << log();
  EXPECT_EQ(testing::wait_or_kill(pid_, 30s), 0) << log();
  pid_ = -1;
}

// A run's id names whose approvals an answer is for: a second live run may
// not take it over. Attack review, #21.
TEST_F(ServedRunsTest, AnIdOfALiveRunIsNotTakenOver) {
  serve("unix:" + socket_path().string());
  ASSERT_TRUE(accepts_connections(socket_path(), 10s)) << log();
  auto first_body = run_body({"sh", "-c", "sleep 2; echo first"});
  first_body["execution_id"] = "job-1";
  std::string first;
  enum { kWaiting, kStarted, kEndedFirst };
  std::atomic<int> first_state{kWaiting};
  std::thread runner([&] {
    httplib::ClientImpl client(socket_path().string(), 80);
    client.set_address_family(AF_UNIX);
    client.set_read_timeout(60, 0);
    httplib::Request request;
    request.method = "POST";
    request.path = "/v1/runs";
    request.headers = bearer(kToken);
    request.body = first_body.dump();
    request.set_header("Content-Type", "application/json");
    // A run holds its id from before its "started" event; a slot taken (what
    // /v1/health counts) is earlier, before the id is claimed.
    request.content_receiver = [&](const char* data, size_t length, uint64_t, uint64_t) {
      first.append(data, length);
      if (first.find(R"("event":"started")") != std::string::npos) first_state = kStarted;
      return true;
    };
    httplib::Response response;
    httplib::Error error = httplib::Error::Success;
    client.send(request, response, error);
    int waiting = kWaiting;
    first_state.compare_exchange_strong(waiting, kEndedFirst);
  });
  httplib::ClientImpl client(socket_path().string(), 80);
  client.set_address_family(AF_UNIX);
  client.set_read_timeout(60, 0);
  ASSERT_TRUE(poll_until([&] { return first_state.load() != kWaiting; }, 10s));
  if (first_state.load() != kStarted) {
    runner.join();
    FAIL() << "the first run ended before it started: " << first;
  }
  auto second_body = run_body({"echo", "second"});
  second_body["execution_id"] = "job-1";
  auto second = client.Post("/v1/runs", bearer(kToken), second_body.dump(), "application/json");
  runner.join();
  ASSERT_TRUE(second);
  const auto lines = testing::lines_of(second->body);
  EXPECT_EQ(testing::schema_problems("event", lines), "");
  ASSERT_EQ(lines.size(), 1u) << second->body;
  EXPECT_EQ(nlohmann::json::parse(lines[0])["error"]["field"], "execution_id") << second->body;
  EXPECT_NE(first.find("first\\n"), std::string::npos) << first;
}

}  // namespace
}  // namespace pulsebox
