// The filtering HTTP proxy of `--net proxy` with real sockets, in the test
// binary's own network namespace (helpers/private_network.h): servers on
// link-local and ULA addresses on its lo play the internet, a hosts file of
// the test's own names them, and a real client talks to the proxy.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/unique_fd.h"
#include "helpers/private_network.h"
#include "network/http_proxy.h"
#include "pulsebox/secrets.h"

namespace pulsebox::network {
namespace {

using core::UniqueFd;
using namespace std::chrono_literals;

constexpr const char* kProxyAddress = "169.254.20.1";
constexpr const char* kServerAddress = "169.254.20.2";
constexpr const char* kUnlistedAddress = "169.254.20.3";
constexpr const char* kServerAddress6 = "fd00:20::2";

sockaddr_storage socket_address(const std::string& text, int port, socklen_t& length) {
  return network::socket_address(parse_ip_address(text).value(), port, &length);
}

// A listener on `address`, port chosen by the kernel; sets `port`.
UniqueFd listen_on(const std::string& address, int& port) {
  socklen_t length = 0;
  auto storage = socket_address(address, 0, length);
  UniqueFd fd(::socket(storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd || ::bind(fd.get(), reinterpret_cast<sockaddr*>(&storage), length) != 0 ||
      ::listen(fd.get(), 128) != 0) {
    ADD_FAILURE() << "listening on " << address << ": " << std::strerror(errno);
    return {};
  }
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&storage), &length);
  port = ntohs(storage.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&storage)->sin_port
                                            : reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port);
  return fd;
}

UniqueFd connect_to(const std::string& address, int port) {
  socklen_t length = 0;
  auto storage = socket_address(address, port, length);
  UniqueFd fd(::socket(storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  timeval timeout{5, 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&storage), length) != 0) {
    ADD_FAILURE() << "connecting to " << address << " port " << port << ": "
                  << std::strerror(errno);
    return {};
  }
  return fd;
}

void send_text(int fd, std::string_view text) {
  ASSERT_EQ(::send(fd, text.data(), text.size(), MSG_NOSIGNAL), static_cast<ssize_t>(text.size()));
}

// Reads until `stop` appears, EOF, a timeout (SO_RCVTIMEO) or `limit` bytes.
std::string read_until(int fd, std::string_view stop = {}, std::size_t limit = 1 << 20) {
  std::string text;
  char chunk[4096];
  while (text.size() < limit && (stop.empty() || text.find(stop) == std::string::npos)) {
    const ssize_t got = ::recv(fd, chunk, std::min(sizeof chunk, limit - text.size()), 0);
    if (got <= 0) break;
    text.append(chunk, static_cast<std::size_t>(got));
  }
  return text;
}

// A server thread on its own listener: echoes each connection back until
// EOF, then says "bye" and closes (Echo), or answers one HTTP request with "hello"
// after reading its head, which it keeps (Http).
class TestServer {
 public:
  enum class Mode { Echo, Http };
  TestServer(const std::string& address, Mode mode) : mode_(mode) {
    listener_ = listen_on(address, port_);
    thread_ = std::thread([this] { run(); });
  }
  ~TestServer() {
    stopping_ = true;
    thread_.join();
  }
  int port() const { return port_; }
  int accepted() const { return accepted_; }
  std::string last_head() {
    const std::lock_guard lock(mutex_);
    return last_head_;
  }

 private:
  void run() {
    // Bounded: the test ends it; one connection at a time is all tests need.
    while (!stopping_) {
      pollfd fd{listener_.get(), POLLIN, 0};
      if (::poll(&fd, 1, 50) <= 0) continue;
      UniqueFd client(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!client) continue;
      ++accepted_;
      timeval timeout{5, 0};
      ::setsockopt(client.get(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
      if (mode_ == Mode::Http) {
        const std::string head = read_until(client.get(), "\r\n\r\n", 16384);
        {
          const std::lock_guard lock(mutex_);
          last_head_ = head;
        }
        const std::string_view reply =
            "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello";
        ::send(client.get(), reply.data(), reply.size(), MSG_NOSIGNAL);
        continue;
      }
      char chunk[4096];
      while (true) {
        const ssize_t got = ::recv(client.get(), chunk, sizeof chunk, 0);
        if (got == 0) ::send(client.get(), "bye", 3, MSG_NOSIGNAL);  // only after a real EOF
        if (got <= 0) break;
        ::send(client.get(), chunk, static_cast<std::size_t>(got), MSG_NOSIGNAL);
      }
    }
  }

  Mode mode_;
  UniqueFd listener_;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> accepted_{0};
  std::mutex mutex_;
  std::string last_head_;
  std::thread thread_;
};

class Records {
 public:
  void add(const ProxyRecord& record) {
    const std::lock_guard lock(mutex_);
    records_.push_back(record);
    changed_.notify_all();
  }
  // The records once there are `count` of them (bounded wait).
  std::vector<ProxyRecord> wait_for(std::size_t count) {
    std::unique_lock lock(mutex_);
    changed_.wait_for(lock, 10s, [&] { return records_.size() >= count; });
    return records_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<ProxyRecord> records_;
};

std::string all_text(const ProxyRecord& record) {
  std::string text = record.method + "|" + record.host + "|" + record.reason;
  for (const auto& address : record.addresses)
    text += "|" + address;
  return text;
}

class ProxyTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_TRUE(testing::in_private_network());
    for (const std::string address : {kProxyAddress, kServerAddress, kUnlistedAddress}) {
      ASSERT_EQ(testing::ip_command("addr replace " + address + "/32 dev lo"), 0);
    }
    ASSERT_EQ(testing::ip_command("-6 addr replace " + std::string(kServerAddress6) +
                                  "/128 dev lo nodad"),
              0);
    const std::string error = testing::override_hosts_file(
        "127.0.0.1 localhost\n" + std::string(kServerAddress) + " api.example.test\n" +
        std::string(kUnlistedAddress) + " internal.example.test\n" + kServerAddress6 +
        " v6.example.test\n" + kServerAddress + " s3cr3tvalue.example.test\n");
    ASSERT_EQ(error, "");
  }

  // Starts a proxy with the tests' rules; `adjust` changes the config.
  void start(const std::function<void(ProxyConfig&)>& adjust = {}) {
    ProxyConfig config;
    config.listener = listen_on(kProxyAddress, proxy_port_);
    for (const char* pattern :
         {"api.example.test", "internal.example.test", "v6.example.test", "missing.example.test"}) {
      config.domains.push_back(DomainPattern::parse(pattern).value());
    }
    config.listed = {*parse_ip_range(kServerAddress), *parse_ip_range(kServerAddress6)};
    config.on_record = [this](const ProxyRecord& record) { records_.add(record); };
    if (adjust) adjust(config);
    auto proxy = HttpProxy::start(std::move(config));
    ASSERT_TRUE(proxy.ok()) << proxy.error().to_string();
    proxy_ = std::move(proxy).value();
  }

  UniqueFd client() { return connect_to(kProxyAddress, proxy_port_); }

  // Sends `head` and returns the proxy's whole answer (it closes after it).
  std::string ask(std::string_view head) {
    UniqueFd fd = client();
    send_text(fd.get(), head);
    return read_until(fd.get());
  }

  int proxy_port_ = 0;
  Records records_;
  std::unique_ptr<HttpProxy> proxy_;
};

TEST_F(ProxyTest, ResolveGuardedSplitsANamesAddressesAndNamesAnUnresolvedOne) {
  const std::vector<IpRange> listed = {*parse_ip_range(kServerAddress)};
  const auto api = resolve_guarded("API.example.test.", listed);
  ASSERT_TRUE(api.ok()) << api.error().to_string();
  EXPECT_EQ(api->allowed, std::vector<IpAddress>{*parse_ip_address(kServerAddress)});
  EXPECT_TRUE(destination_allowed(api.value()));
  const auto inner = resolve_guarded("internal.example.test", listed);
  ASSERT_TRUE(inner.ok());
  ASSERT_EQ(inner->refused.size(), 1u);
  EXPECT_EQ(inner->refused[0].second, AddressKind::LinkLocal);
  EXPECT_FALSE(destination_allowed(inner.value()));
  const auto loopback = resolve_guarded("localhost", listed);
  ASSERT_TRUE(loopback.ok());
  ASSERT_EQ(loopback->refused.size(), 1u);
  EXPECT_EQ(loopback->refused[0].second, AddressKind::Loopback);
  const auto missing = resolve_guarded("missing.example.test", listed);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message().find("missing.example.test does not resolve"),
            std::string::npos);
}

TEST_F(ProxyTest, ConnectRelaysBothWaysWithHalfCloseAndCountsBytes) {
  TestServer echo(kServerAddress, TestServer::Mode::Echo);
  start();
  UniqueFd fd = client();
  send_text(fd.get(), "CONNECT api.example.test:" + std::to_string(echo.port()) +
                          " HTTP/1.1\r\nHost: api.example.test\r\n\r\n");
  EXPECT_EQ(read_until(fd.get(), "\r\n\r\n"), "HTTP/1.1 200 Connection established\r\n\r\n");
  send_text(fd.get(), "ping-12345");
  EXPECT_EQ(read_until(fd.get(), "", 10), "ping-12345");
  send_text(fd.get(), "more");
  // The server echoes until it sees EOF: it sees one only if the proxy
  // passes the half-close on, and then its reply still comes back.
  ::shutdown(fd.get(), SHUT_WR);
  EXPECT_EQ(read_until(fd.get()), "morebye");
  const auto records = records_.wait_for(1);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_TRUE(records[0].allowed);
  EXPECT_EQ(records[0].method, "CONNECT");
  EXPECT_EQ(records[0].host, "api.example.test");
  EXPECT_EQ(records[0].port, echo.port());
  EXPECT_EQ(records[0].addresses, std::vector<std::string>{kServerAddress});
  EXPECT_EQ(records[0].bytes_up, 14u);
  EXPECT_EQ(records[0].bytes_down, 17u);
  EXPECT_NE(records[0].reason.find("--allow-domain api.example.test"), std::string::npos);
}

TEST_F(ProxyTest, RefusesANameNoPatternAllows) {
  TestServer echo(kServerAddress, TestServer::Mode::Echo);
  start();
  const std::string answer =
      ask("CONNECT evil.example.test:" + std::to_string(echo.port()) + " HTTP/1.1\r\n\r\n");
  EXPECT_TRUE(answer.starts_with("HTTP/1.1 403 ")) << answer;
  EXPECT_NE(answer.find("evil.example.test is not an allowed destination"), std::string::npos);
  const auto records = records_.wait_for(1);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_FALSE(records[0].allowed);
  EXPECT_EQ(records[0].host, "evil.example.test");
  EXPECT_EQ(echo.accepted(), 0);
}

TEST_F(ProxyTest, GuardRefusesAnAllowedNameThatResolvesToAnUnlistedLinkLocalAddress) {
  TestServer inner(kUnlistedAddress, TestServer::Mode::Echo);
  start();
  const std::string answer =
      ask("CONNECT internal.example.test:" + std::to_string(inner.port()) + " HTTP/1.1\r\n\r\n");
  EXPECT_TRUE(answer.starts_with("HTTP/1.1 403 ")) << answer;
  EXPECT_NE(answer.find("169.254.20.3 (link-local)"), std::string::npos) << answer;
  const auto records = records_.wait_for(1);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_FALSE(records[0].allowed);
  EXPECT_EQ(records[0].addresses, std::vector<std::string>{kUnlistedAddress});
  EXPECT_EQ(inner.accepted(), 0);

  // The same destination passes once its address is listed with --allow.
  proxy_->stop();
  start([](ProxyConfig& config) { config.listed.push_back(*parse_ip_range(kUnlistedAddress)); });
  UniqueFd fd = client();
  send_text(fd.get(),
            "CONNECT internal.example.test:" + std::to_string(inner.port()) + " HTTP/1.1\r\n\r\n");
  EXPECT_TRUE(read_until(fd.get(), "\r\n\r\n").starts_with("HTTP/1.1 200 "));
}

TEST_F(ProxyTest, ANameResolvingToThisHostsOwnAddressIsRefusedUnlessListed) {
  // A name may resolve to a public address that is the host's own: the proxy
  // runs in the host's namespace, so it would reach every host service bound
  // to any address. The hook plays a resolver that found such an address
  // public (kUnlistedAddress is on this namespace's lo).
  TestServer own(kUnlistedAddress, TestServer::Mode::Echo);
  auto public_answer = [](const std::string&, const std::vector<IpRange>&) {
    return core::Result<GuardedAddresses>(
        GuardedAddresses{.allowed = {*parse_ip_address(kUnlistedAddress)}, .refused = {}});
  };
  start([&](ProxyConfig& config) { config.resolve = public_answer; });
  const std::string answer =
      ask("CONNECT api.example.test:" + std::to_string(own.port()) + " HTTP/1.1\r\n\r\n");
  EXPECT_TRUE(answer.starts_with("HTTP/1.1 403 ")) << answer;
  EXPECT_NE(answer.find("169.254.20.3 (this host's own)"), std::string::npos) << answer;
  EXPECT_EQ(own.accepted(), 0);
  const auto records = records_.wait_for(1);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_FALSE(records[0].allowed);

  // Listed with --allow, the host's own address is the user's choice.
  proxy_->stop();
  start([&](ProxyConfig& config) {
    config.resolve = public_answer;
    config.listed.push_back(*parse_ip_range(kUnlistedAddress));
  });
  UniqueFd fd = client();
  send_text(fd.get(),
            "CONNECT api.example.test:" + std::to_string(own.port()) + " HTTP/1.1\r\n\r\n");
  EXPECT_TRUE(read_until(fd.get(), "\r\n\r\n").starts_with("HTTP/1.1 200 "));
}

TEST_F(ProxyTest, ANameWithOneRefusedAddressIsRefusedWhole) {
  // A rebinding answer: one address the guard allows, one it refuses.
  TestServer echo(kServerAddress, TestServer::Mode::Echo);
  std::atomic<int> resolved{0};
  start([&](ProxyConfig& config) {
    config.resolve = [&](const std::string&, const std::vector<IpRange>& listed) {
      ++resolved;
      return core::Result<GuardedAddresses>(guard_addresses(
          {*parse_ip_address(kServerAddress), *parse_ip_address("::ffff:169.254.169.254")},
          listed));
    };
  });
  const std::string answer =
      ask("CONNECT api.example.test:" + std::to_string(echo.port()) + " HTTP/1.1\r\n\r\n");
  EXPECT_TRUE(answer.starts_with("HTTP/1.1 403 ")) << answer;
  EXPECT_NE(answer.find("::ffff:169.254.169.254 (cloud metadata)"), std::string::npos) << answer;
  EXPECT_EQ(resolved, 1);
  EXPECT_EQ(echo.accepted(), 0);
  const auto records = records_.wait_for(1);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_FALSE(records[0].allowed);
}

TEST_F(ProxyTest, PlainHttpIsForwardedInOriginFormWithoutProxyHeadersAndNothingSecretIsRecorded) {
  TestServer http(kServerAddress, TestServer::Mode::Http);
  start();
  const std::string port = std::to_string(http.port());
  const std::string answer = ask("GET http://api.example.test:" + port +
                                 "/path/x?token=tok123 HTTP/1.1\r\nHost: other.test\r\n"
                                 "Proxy-Authorization: Basic c2VjcmV0\r\n"
                                 "Proxy-Connection: keep-alive\r\nX-Keep: yes\r\n\r\n");
  EXPECT_TRUE(answer.starts_with("HTTP/1.1 200 OK")) << answer;
  EXPECT_TRUE(answer.ends_with("hello"));
  const std::string head = http.last_head();
  EXPECT_TRUE(head.starts_with("GET /path/x?token=tok123 HTTP/1.1\r\n")) << head;
  EXPECT_NE(head.find("\r\nHost: api.example.test:" + port + "\r\n"), std::string::npos) << head;
  EXPECT_NE(head.find("\r\nX-Keep: yes\r\n"), std::string::npos) << head;
  EXPECT_NE(head.find("\r\nConnection: close\r\n"), std::string::npos) << head;
  EXPECT_EQ(head.find("Proxy-"), std::string::npos) << head;
  EXPECT_EQ(head.find("other.test"), std::string::npos) << head;

  const auto records = records_.wait_for(1);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_TRUE(records[0].allowed);
  EXPECT_EQ(records[0].method, "GET");
  EXPECT_EQ(records[0].bytes_up, head.size());
  EXPECT_EQ(records[0].bytes_down, answer.size());
  const std::string recorded = all_text(records[0]);
  for (const char* secret : {"tok123", "/path", "c2VjcmV0", "X-Keep", "other.test"}) {
    EXPECT_EQ(recorded.find(secret), std::string::npos) << secret << " in " << recorded;
  }
}

TEST_F(ProxyTest, IPv6DestinationsByNameAndLiteral) {
  TestServer echo(kServerAddress6, TestServer::Mode::Echo);
  start();
  for (const std::string host : {"v6.example.test", "[fd00:20::2]"}) {
    UniqueFd fd = client();
    send_text(fd.get(),
              "CONNECT " + host + ":" + std::to_string(echo.port()) + " HTTP/1.1\r\n\r\n");
    EXPECT_TRUE(read_until(fd.get(), "\r\n\r\n").starts_with("HTTP/1.1 200 ")) << host;
    send_text(fd.get(), "six");
    EXPECT_EQ(read_until(fd.get(), "", 3), "six") << host;
  }
  const auto records = records_.wait_for(2);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].addresses, std::vector<std::string>{kServerAddress6});
  // An IP literal that no --allow range holds is refused.
  EXPECT_TRUE(ask("CONNECT [fd00:20::9]:443 HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 403 "));
  EXPECT_TRUE(ask("CONNECT 169.254.20.3:443 HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 403 "));
}

TEST_F(ProxyTest, BadRequestsUnresolvableNamesAndFailedConnections) {
  start();
  EXPECT_TRUE(ask("GET /not-absolute HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 400 "));
  EXPECT_TRUE(ask("GET https://api.example.test/ HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 400 "));
  const std::string unresolved = ask("CONNECT missing.example.test:443 HTTP/1.1\r\n\r\n");
  EXPECT_TRUE(unresolved.starts_with("HTTP/1.1 403 ")) << unresolved;
  EXPECT_NE(unresolved.find("missing.example.test does not resolve"), std::string::npos);
  int closed_port = 0;
  { UniqueFd gone = listen_on(kServerAddress, closed_port); }
  const std::string refused =
      ask("CONNECT api.example.test:" + std::to_string(closed_port) + " HTTP/1.1\r\n\r\n");
  EXPECT_TRUE(refused.starts_with("HTTP/1.1 502 ")) << refused;
  const auto records = records_.wait_for(4);
  ASSERT_EQ(records.size(), 4u);
  for (const auto& record : records)
    EXPECT_FALSE(record.allowed);
}

TEST_F(ProxyTest, OneConnectionOverTheLimitGets503) {
  start([](ProxyConfig& config) { config.max_connections = 64; });
  std::vector<UniqueFd> held;
  for (int i = 0; i < 64; ++i)
    held.push_back(client());
  UniqueFd extra = client();
  const std::string answer = read_until(extra.get());
  EXPECT_TRUE(answer.starts_with("HTTP/1.1 503 ")) << answer;
  const auto records = records_.wait_for(1);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_NE(records[0].reason.find("too many connections"), std::string::npos);
  // The 64 held ones were not answered.
  for (auto& fd : held) {
    pollfd ready{fd.get(), POLLIN, 0};
    EXPECT_EQ(::poll(&ready, 1, 0), 0);
  }
}

TEST_F(ProxyTest, StopDoesNotWaitForStalledClientsOrIdleTunnels) {
  TestServer echo(kServerAddress, TestServer::Mode::Echo);
  start([](ProxyConfig& config) { config.head_timeout = 60s; });
  // The stalled client first: the proxy accepts in order, so the tunnel's
  // answer says the stalled one was accepted too.
  UniqueFd stalled = client();
  send_text(stalled.get(), "CONNECT api.exa");
  UniqueFd tunnel = client();
  send_text(tunnel.get(),
            "CONNECT api.example.test:" + std::to_string(echo.port()) + " HTTP/1.1\r\n\r\n");
  ASSERT_TRUE(read_until(tunnel.get(), "\r\n\r\n").starts_with("HTTP/1.1 200 "));

  const auto before = std::chrono::steady_clock::now();
  proxy_->stop();
  EXPECT_LT(std::chrono::steady_clock::now() - before, 3s);
  proxy_->stop();  // idempotent
  const auto records = records_.wait_for(2);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(read_until(stalled.get()), "");  // closed, nothing sent
  EXPECT_EQ(read_until(tunnel.get()), "");
  const bool tunnel_first = records[0].allowed;
  const auto& tunnel_record = records[tunnel_first ? 0 : 1];
  const auto& stalled_record = records[tunnel_first ? 1 : 0];
  EXPECT_TRUE(tunnel_record.allowed);
  EXPECT_NE(tunnel_record.reason.find("closed when the proxy stopped"), std::string::npos);
  EXPECT_FALSE(stalled_record.allowed);
  EXPECT_NE(stalled_record.reason.find("proxy stopped before a complete request head"),
            std::string::npos);
}

TEST_F(ProxyTest, ASecretInTheHostIsScrubbedFromRecordsAndAnswers) {
  const SecretScrubber scrubber({"s3cr3tvalue"});
  start([&](ProxyConfig& config) {
    config.scrub = [&](std::string_view text) { return scrubber.redact(text); };
  });
  const std::string answer = ask("CONNECT s3cr3tvalue.example.test:443 HTTP/1.1\r\n\r\n");
  EXPECT_TRUE(answer.starts_with("HTTP/1.1 403 ")) << answer;
  EXPECT_EQ(answer.find("s3cr3tvalue"), std::string::npos) << answer;
  const auto records = records_.wait_for(1);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(all_text(records[0]).find("s3cr3tvalue"), std::string::npos) << all_text(records[0]);
  EXPECT_NE(records[0].host.find(SecretScrubber::kReplacement), std::string::npos);
}

}  // namespace
}  // namespace pulsebox::network
