// The --net proxy's cost: MB/s through one CONNECT tunnel, and tunnels
// opened per second (each one: accept, parse, the rebinding guard's
// getaddrinfo on a hosts-file name, connect, 200, close). Runs in a network
// namespace of its own (tests/helpers/private_network.h) with link-local
// addresses on its lo, like the network test suites.
#include <arpa/inet.h>
#include <benchmark/benchmark.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "core/unique_fd.h"
#include "helpers/private_network.h"
#include "network/http_proxy.h"

namespace {

using pulsebox::core::UniqueFd;
namespace network = pulsebox::network;

constexpr const char* kProxyAddress = "169.254.21.1";
constexpr const char* kServerAddress = "169.254.21.2";

UniqueFd tcp_socket(const char* address, int port, bool listen, int* bound_port = nullptr) {
  sockaddr_in in4{};
  in4.sin_family = AF_INET;
  in4.sin_port = htons(static_cast<std::uint16_t>(port));
  ::inet_pton(AF_INET, address, &in4.sin_addr);
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  auto* raw = reinterpret_cast<sockaddr*>(&in4);
  if (listen) {
    if (::bind(fd.get(), raw, sizeof in4) != 0 || ::listen(fd.get(), 512) != 0) return {};
    socklen_t length = sizeof in4;
    ::getsockname(fd.get(), raw, &length);
    if (bound_port != nullptr) *bound_port = ntohs(in4.sin_port);
  } else if (::connect(fd.get(), raw, sizeof in4) != 0) {
    return {};
  }
  return fd;
}

// Reads and discards each connection until EOF, then answers "ok".
class SinkServer {
 public:
  SinkServer() {
    listener_ = tcp_socket(kServerAddress, 0, true, &port_);
    thread_ = std::thread([this] {
      std::vector<char> buffer(1 << 16);
      while (!stopping_) {
        pollfd fd{listener_.get(), POLLIN, 0};
        if (::poll(&fd, 1, 50) <= 0) continue;
        UniqueFd client(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
        while (client && ::recv(client.get(), buffer.data(), buffer.size(), 0) > 0) {
        }
        if (client) ::send(client.get(), "ok", 2, MSG_NOSIGNAL);
      }
    });
  }
  ~SinkServer() {
    stopping_ = true;
    thread_.join();
  }
  int port() const { return port_; }

 private:
  UniqueFd listener_;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

struct Setup {
  SinkServer server;
  std::unique_ptr<network::HttpProxy> proxy;
  int proxy_port = 0;
  Setup() {
    network::ProxyConfig config;
    config.listener = tcp_socket(kProxyAddress, 0, true, &proxy_port);
    config.domains.push_back(network::DomainPattern::parse("bench.example.test").value());
    config.listed.push_back(*network::parse_ip_range(kServerAddress));
    config.max_connections = 256;
    proxy = std::move(network::HttpProxy::start(std::move(config))).value();
  }
  UniqueFd tunnel() {
    UniqueFd fd = tcp_socket(kProxyAddress, proxy_port, false);
    const std::string head =
        "CONNECT bench.example.test:" + std::to_string(server.port()) + " HTTP/1.1\r\n\r\n";
    ::send(fd.get(), head.data(), head.size(), MSG_NOSIGNAL);
    char answer[64];
    const ssize_t got = ::recv(fd.get(), answer, sizeof answer, 0);
    if (got < 12 || std::memcmp(answer, "HTTP/1.1 200", 12) != 0) return {};
    return fd;
  }
};

Setup& setup() {
  static Setup instance;
  return instance;
}

void BM_TunnelThroughput(benchmark::State& state) {
  const std::size_t total = 256u << 20;
  const std::string chunk(1 << 16, 'x');
  for (auto _ : state) {
    UniqueFd fd = setup().tunnel();
    if (!fd) return state.SkipWithError("CONNECT failed");
    for (std::size_t sent = 0; sent < total;) {
      const ssize_t n = ::send(fd.get(), chunk.data(), chunk.size(), MSG_NOSIGNAL);
      if (n <= 0) return state.SkipWithError("send failed");
      sent += static_cast<std::size_t>(n);
    }
    ::shutdown(fd.get(), SHUT_WR);
    char ok[2];
    if (::recv(fd.get(), ok, sizeof ok, MSG_WAITALL) != 2) return state.SkipWithError("no answer");
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * total));
}
BENCHMARK(BM_TunnelThroughput)->Unit(benchmark::kMillisecond)->Iterations(5)->UseRealTime();

void BM_TunnelsOpened(benchmark::State& state) {
  for (auto _ : state) {
    UniqueFd fd = setup().tunnel();
    if (!fd) return state.SkipWithError("CONNECT failed");
    ::shutdown(fd.get(), SHUT_WR);
    char ok[2];
    ::recv(fd.get(), ok, sizeof ok, MSG_WAITALL);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}
BENCHMARK(BM_TunnelsOpened)->Unit(benchmark::kMicrosecond)->Iterations(2000)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  const std::string error = pulsebox::testing::enter_private_network();
  if (!error.empty()) {
    std::fprintf(stderr, "proxy_bench: entering a network namespace of its own: %s\n",
                 error.c_str());
    return 1;
  }
  for (const char* address : {kProxyAddress, kServerAddress}) {
    if (pulsebox::testing::ip_command(std::string("addr replace ") + address + "/32 dev lo") != 0)
      return 1;
  }
  if (!pulsebox::testing::override_hosts_file(std::string(kServerAddress) + " bench.example.test\n")
           .empty()) {
    return 1;
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
