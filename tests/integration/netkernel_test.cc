// The kernel primitives of `--net allowlist` and `--net all` (linux/veth.h,
// linux/nft_rules.h), driven the way the launch drives them: a child in a new
// network namespace (the "sandbox") opens NETLINK_ROUTE and NETLINK_NETFILTER
// sockets there and passes them over SCM_RIGHTS; this process (the
// supervisor, in the test binary's own network namespace) makes the veth,
// configures the sandbox's side and installs the egress filter through them;
// then the child drops every capability, as the sandboxed command does, and
// probes what it can reach and what it can change.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/netlink.h>
#include <net/if.h>
#include <net/route.h>
#include <netinet/in.h>
#include <netinet/ip_icmp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "core/unique_fd.h"
#include "helpers/private_network.h"
#include "linux/caps.h"
#include "linux/nft_rules.h"
#include "linux/veth.h"

namespace pulsebox::linux_api {
namespace {

using core::UniqueFd;
using Clock = std::chrono::steady_clock;

LinkAddress address(const std::string& text, int prefix = -1) {
  LinkAddress out;
  out.family = text.find(':') == std::string::npos ? AF_INET : AF_INET6;
  if (::inet_pton(out.family, text.c_str(), out.bytes.data()) != 1) std::abort();
  out.prefix = prefix >= 0 ? prefix : static_cast<int>(address_length(out.family) * 8);
  return out;
}

long elapsed_ms(Clock::time_point since) {
  return static_cast<long>(
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - since).count());
}

std::string errno_name(int error) {
  const char* name = ::strerrorname_np(error);
  return name != nullptr ? name : std::to_string(error);
}

// Fills a sockaddr for `text`:`port`.
socklen_t socket_address(const std::string& text, std::uint16_t port, sockaddr_storage& out) {
  out = {};
  if (text.find(':') == std::string::npos) {
    auto* v4 = reinterpret_cast<sockaddr_in*>(&out);
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    ::inet_pton(AF_INET, text.c_str(), &v4->sin_addr);
    return sizeof(sockaddr_in);
  }
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&out);
  v6->sin6_family = AF_INET6;
  v6->sin6_port = htons(port);
  ::inet_pton(AF_INET6, text.c_str(), &v6->sin6_addr);
  return sizeof(sockaddr_in6);
}

UniqueFd listener(int type, const std::string& text, std::uint16_t port) {
  sockaddr_storage where;
  const socklen_t length = socket_address(text, port, where);
  UniqueFd fd(::socket(where.ss_family, type | SOCK_CLOEXEC, 0));
  const int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&where), length) != 0) {
    ADD_FAILURE() << "bind " << text << ":" << port << ": " << std::strerror(errno);
    return UniqueFd();
  }
  if (type == SOCK_STREAM) ::listen(fd.get(), 16);
  return fd;
}

// --- what the sandbox's child does (after dropping its capabilities) ---

// "ok", "timeout" or the errno's name, then the milliseconds it took.
std::string tcp_probe(const std::string& text, std::uint16_t port) {
  sockaddr_storage where;
  const socklen_t length = socket_address(text, port, where);
  UniqueFd fd(::socket(where.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  const auto start = Clock::now();
  std::string outcome = "ok";
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&where), length) != 0) {
    if (errno != EINPROGRESS) {
      outcome = errno_name(errno);
    } else {
      pollfd ready{.fd = fd.get(), .events = POLLOUT, .revents = 0};
      if (::poll(&ready, 1, 3000) == 0) {
        outcome = "timeout";
      } else {
        int error = 0;
        socklen_t size = sizeof(error);
        ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &size);
        if (error != 0) outcome = errno_name(error);
      }
    }
  }
  return outcome + " " + std::to_string(elapsed_ms(start));
}

// A datagram to text:port, then up to a second for an error to come back:
// "sent" when none did, else the errno's name; then the milliseconds.
std::string udp_probe(const std::string& text, std::uint16_t port) {
  sockaddr_storage where;
  const socklen_t length = socket_address(text, port, where);
  UniqueFd fd(::socket(where.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  const auto start = Clock::now();
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&where), length) != 0)
    return errno_name(errno) + " " + std::to_string(elapsed_ms(start));
  if (::send(fd.get(), "ping", 4, 0) != 4)
    return errno_name(errno) + " " + std::to_string(elapsed_ms(start));
  pollfd ready{.fd = fd.get(), .events = POLLIN, .revents = 0};
  if (::poll(&ready, 1, 1000) == 0) return "sent " + std::to_string(elapsed_ms(start));
  char byte;
  if (::recv(fd.get(), &byte, 1, MSG_DONTWAIT) < 0)
    return errno_name(errno) + " " + std::to_string(elapsed_ms(start));
  return "answered " + std::to_string(elapsed_ms(start));
}

// An ICMP echo through an unprivileged ping socket: "reply", "timeout" or the
// errno's name.
std::string ping_probe(const std::string& text) {
  sockaddr_storage where;
  const socklen_t length = socket_address(text, 0, where);
  UniqueFd fd(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, IPPROTO_ICMP));
  if (!fd) return "socket:" + errno_name(errno);
  icmphdr echo{};
  echo.type = ICMP_ECHO;
  echo.un.echo.sequence = htons(1);
  if (::sendto(fd.get(), &echo, sizeof(echo), 0, reinterpret_cast<sockaddr*>(&where), length) < 0)
    return errno_name(errno);
  pollfd ready{.fd = fd.get(), .events = POLLIN, .revents = 0};
  if (::poll(&ready, 1, 1000) == 0) return "timeout";
  char reply[64];
  if (::recv(fd.get(), reply, sizeof(reply), MSG_DONTWAIT) < 0) return errno_name(errno);
  return "reply";
}

std::string status_errno(const core::Status& status) {
  return status.ok() ? "ok" : errno_name(status.error().error_number());
}

std::string ioctl_probe(unsigned long request, void* argument) {
  UniqueFd fd(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  return ::ioctl(fd.get(), request, argument) == 0 ? "ok" : errno_name(errno);
}

std::string add_address_probe() {
  ifreq request{};
  std::strcpy(request.ifr_name, "eth0");
  auto* v4 = reinterpret_cast<sockaddr_in*>(&request.ifr_addr);
  v4->sin_family = AF_INET;
  ::inet_pton(AF_INET, "169.254.99.2", &v4->sin_addr);
  return ioctl_probe(SIOCSIFADDR, &request);
}

std::string add_route_probe() {
  rtentry route{};
  auto* destination = reinterpret_cast<sockaddr_in*>(&route.rt_dst);
  destination->sin_family = AF_INET;
  ::inet_pton(AF_INET, "169.254.98.0", &destination->sin_addr);
  auto* mask = reinterpret_cast<sockaddr_in*>(&route.rt_genmask);
  mask->sin_family = AF_INET;
  ::inet_pton(AF_INET, "255.255.255.0", &mask->sin_addr);
  char device[] = "eth0";
  route.rt_dev = device;
  route.rt_flags = RTF_UP;
  return ioctl_probe(SIOCADDRT, &route);
}

using Probes = std::function<std::string()>;

// --- the sandbox: a child in a network namespace of its own ---

void send_fds(int channel, int first, int second) {
  char byte = 's';
  iovec data{.iov_base = &byte, .iov_len = 1};
  alignas(cmsghdr) char control[CMSG_SPACE(2 * sizeof(int))] = {};
  msghdr message{};
  message.msg_iov = &data;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof(control);
  cmsghdr* header = CMSG_FIRSTHDR(&message);
  header->cmsg_level = SOL_SOCKET;
  header->cmsg_type = SCM_RIGHTS;
  header->cmsg_len = CMSG_LEN(2 * sizeof(int));
  const int fds[2] = {first, second};
  std::memcpy(CMSG_DATA(header), fds, sizeof(fds));
  if (::sendmsg(channel, &message, 0) != 1) ::_exit(3);
}

bool wait_readable(int fd, int milliseconds) {
  pollfd ready{.fd = fd, .events = POLLIN, .revents = 0};
  return ::poll(&ready, 1, milliseconds) == 1;
}

class Sandbox {
 public:
  // Forks the child; returns once its netlink sockets arrived (so its
  // namespace exists), or with pid() == -1 and a test failure.
  // `prepare` runs in the child's new namespace before the sockets are passed.
  explicit Sandbox(Probes probes, const std::function<void()>& prepare = {}) {
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
      ADD_FAILURE() << "socketpair: " << std::strerror(errno);
      return;
    }
    const CapabilityDrop drop = prepare_capability_drop();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(pair[0]);
      child(pair[1], drop, probes, prepare);
    }
    ::close(pair[1]);
    control_.reset(pair[0]);
    if (!wait_readable(control_.get(), 10000)) {
      ADD_FAILURE() << "the sandbox's child sent no sockets";
      return;
    }
    char byte;
    alignas(cmsghdr) char buffer[CMSG_SPACE(2 * sizeof(int))] = {};
    iovec data{.iov_base = &byte, .iov_len = 1};
    msghdr message{};
    message.msg_iov = &data;
    message.msg_iovlen = 1;
    message.msg_control = buffer;
    message.msg_controllen = sizeof(buffer);
    if (::recvmsg(control_.get(), &message, MSG_CMSG_CLOEXEC) != 1 ||
        CMSG_FIRSTHDR(&message) == nullptr) {
      ADD_FAILURE() << "the sandbox's child failed before passing its sockets";
      return;
    }
    int fds[2];
    std::memcpy(fds, CMSG_DATA(CMSG_FIRSTHDR(&message)), sizeof(fds));
    route_.reset(fds[0]);
    netfilter_.reset(fds[1]);
  }

  ~Sandbox() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  Sandbox(const Sandbox&) = delete;
  Sandbox& operator=(const Sandbox&) = delete;

  pid_t pid() const { return route_ ? pid_ : -1; }
  int route_socket() const { return route_.get(); }
  int netfilter_socket() const { return netfilter_.get(); }
  // The supervisor's copies hold the namespace alive: closed once configured.
  void close_sockets() {
    route_.reset();
    netfilter_.reset();
  }

  // Lets the child drop its capabilities and run its probes; returns their
  // "key=value" lines and reaps the child.
  std::map<std::string, std::string> run() {
    go();
    return collect();
  }
  void go() {
    if (::write(control_.get(), "g", 1) != 1) ADD_FAILURE() << "the sandbox's child is gone";
  }
  std::map<std::string, std::string> collect() {
    std::map<std::string, std::string> results;
    if (!wait_readable(control_.get(), 60000)) {
      ADD_FAILURE() << "the sandbox's probes did not finish";
      return results;
    }
    std::string report(65536, '\0');
    const ssize_t length = ::read(control_.get(), report.data(), report.size());
    report.resize(length > 0 ? static_cast<std::size_t>(length) : 0);
    std::istringstream lines(report);
    std::string line;
    while (std::getline(lines, line)) {
      const auto equals = line.find('=');
      if (equals != std::string::npos) results[line.substr(0, equals)] = line.substr(equals + 1);
    }
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return results;
  }

 private:
  [[noreturn]] static void child(int channel, const CapabilityDrop& drop, const Probes& probes,
                                 const std::function<void()>& prepare) {
    if (::unshare(CLONE_NEWNET) != 0) ::_exit(2);
    ifreq lo{};
    std::strcpy(lo.ifr_name, "lo");
    UniqueFd any(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    ::ioctl(any.get(), SIOCGIFFLAGS, &lo);
    lo.ifr_flags = static_cast<short>(lo.ifr_flags | IFF_UP);
    ::ioctl(any.get(), SIOCSIFFLAGS, &lo);
    // Unprivileged ICMP echo sockets for the child's own group, for the ICMP
    // probes (a sysctl of this namespace only; ids of the writer's user
    // namespace, where an ordinary user has only its own).
    const std::string group = std::to_string(::getgid());
    std::ofstream("/proc/sys/net/ipv4/ping_group_range") << group << " " << group;
    if (prepare) prepare();
    const int route = ::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    const int netfilter = ::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
    if (route < 0 || netfilter < 0) ::_exit(4);
    send_fds(channel, route, netfilter);
    ::close(route);
    ::close(netfilter);
    if (!wait_readable(channel, 60000)) ::_exit(5);
    char go;
    if (::read(channel, &go, 1) != 1) ::_exit(6);
    // As the sandboxed command: no_new_privs and no capability in any set.
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || drop_bounding_and_ambient(drop) != 0 ||
        clear_process_capabilities() != 0)
      ::_exit(7);
    const std::string report = probes();
    (void)::write(channel, report.data(), report.size());
    ::_exit(0);
  }

  pid_t pid_ = -1;
  UniqueFd control_, route_, netfilter_;
};

// The test's side of one sandbox: host link pbx-<tag>, 169.254.<n>.1/30,
// fd00:<n>::1/64 and fe80::1; the sandbox's eth0 .2 and ::2.
VethPlan plan_for(const Sandbox& sandbox, int n) {
  const std::string v4 = "169.254." + std::to_string(n) + ".";
  const std::string v6 = "fd00:" + std::to_string(n) + "::";
  VethPlan plan;
  plan.host_name = "pbx-t" + std::to_string(n);
  plan.sandbox_pid = sandbox.pid();
  plan.host_addresses = {address(v4 + "1", 30), address(v6 + "1", 64), address("fe80::1", 64)};
  plan.sandbox_addresses = {address(v4 + "2", 30), address(v6 + "2", 64)};
  plan.sandbox_gateways = {address(v4 + "1"), address("fe80::1")};
  return plan;
}

void wait_until_no_links(const std::string& prefix) {
  // A namespace is torn down asynchronously after its last reference goes
  // (up to 30 s: RCU is slow on a loaded host).
  std::vector<std::string> left;
  for (int attempt = 0; attempt < 600; ++attempt) {
    auto links = links_with_prefix(prefix);
    ASSERT_TRUE(links.ok()) << links.error().to_string();
    left = *links;
    if (left.empty()) return;
    ::usleep(50 * 1000);
  }
  ADD_FAILURE() << "links left behind: " << left.front();
}

std::string word(const std::string& result) {
  return result.substr(0, result.find(' '));
}
long milliseconds(const std::string& result) {
  const auto space = result.find(' ');
  return space == std::string::npos ? -1 : std::stol(result.substr(space + 1));
}

class NetKernel : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(pulsebox::testing::in_private_network())
        << "network tests run only in the binary's own network namespace";
  }
};

TEST_F(NetKernel, AllowListIsEnforcedAndTheSandboxCannotUndoIt) {
  Sandbox sandbox([] {
    std::ostringstream out;
    // Attacks first, so that the probes after them show the rules stand.
    out << "delete_table=" << status_errno(delete_table(std::string(kEgressTable))) << "\n";
    out << "add_address=" << add_address_probe() << "\n";
    out << "add_route=" << add_route_probe() << "\n";
    out << "delete_link=" << status_errno(delete_link("eth0")) << "\n";
    out << "tcp4_allowed=" << tcp_probe("169.254.20.1", 8080) << "\n";
    out << "tcp4_port=" << tcp_probe("169.254.20.1", 8081) << "\n";
    out << "tcp4_other=" << tcp_probe("169.254.21.1", 8080) << "\n";
    out << "tcp4_any=" << tcp_probe("169.254.22.1", 8080) << "\n";
    out << "tcp6_allowed=" << tcp_probe("fd00:20::1", 8080) << "\n";
    out << "tcp6_port=" << tcp_probe("fd00:20::1", 8081) << "\n";
    out << "tcp6_other=" << tcp_probe("fd00:21::1", 8080) << "\n";
    out << "udp4_allowed=" << udp_probe("169.254.20.1", 5353) << "\n";
    out << "udp4_port=" << udp_probe("169.254.20.1", 5354) << "\n";
    out << "udp6_allowed=" << udp_probe("fd00:20::1", 5353) << "\n";
    out << "udp6_port=" << udp_probe("fd00:20::1", 5354) << "\n";
    out << "ping_any=" << ping_probe("169.254.22.1") << "\n";
    out << "ping_port_only=" << ping_probe("169.254.20.1") << "\n";
    return out.str();
  });
  ASSERT_GT(sandbox.pid(), 0);
  VethPlan plan = plan_for(sandbox, 20);
  // Other hosts beyond the gateway, on the host side (ip(8) would lose the
  // ordinary user's capabilities in the test's user namespace at execve).
  for (const char* other : {"169.254.21.1", "169.254.22.1", "fd00:21::1"})
    plan.host_addresses.push_back(address(other));
  ASSERT_TRUE(create_veth(plan).ok());
  const auto configured = configure_sandbox_side(sandbox.route_socket(), plan);
  ASSERT_TRUE(configured.ok()) << configured.error().to_string();
  const std::vector<EgressRule> rules = {
      {.destination = address("169.254.20.1"), .protocol = IPPROTO_TCP, .port = 8080},
      {.destination = address("fd00:20::1"), .protocol = IPPROTO_TCP, .port = 8080},
      {.destination = address("169.254.20.0", 30), .protocol = IPPROTO_UDP, .port = 5353},
      {.destination = address("fd00:20::", 64), .protocol = IPPROTO_UDP, .port = 5353},
      {.destination = address("169.254.22.1")},
  };
  const auto filtered =
      install_egress_filter(sandbox.netfilter_socket(), rules, plan.sandbox_addresses);
  ASSERT_TRUE(filtered.ok()) << filtered.error().to_string();
  sandbox.close_sockets();

  std::vector<UniqueFd> servers;
  for (const char* host :
       {"169.254.20.1", "169.254.21.1", "169.254.22.1", "fd00:20::1", "fd00:21::1"})
    for (const std::uint16_t port : {8080, 8081})
      servers.push_back(listener(SOCK_STREAM, host, port));
  UniqueFd udp4 = listener(SOCK_DGRAM, "169.254.20.1", 5353);
  UniqueFd udp4_refused = listener(SOCK_DGRAM, "169.254.20.1", 5354);
  UniqueFd udp6 = listener(SOCK_DGRAM, "fd00:20::1", 5353);
  UniqueFd udp6_refused = listener(SOCK_DGRAM, "fd00:20::1", 5354);

  auto results = sandbox.run();
  for (const auto& [key, value] : results)
    std::printf("  %s: %s\n", key.c_str(), value.c_str());

  EXPECT_EQ(results["delete_table"], "EPERM");
  EXPECT_EQ(results["add_address"], "EPERM");
  EXPECT_EQ(results["add_route"], "EPERM");
  EXPECT_EQ(results["delete_link"], "EPERM");

  EXPECT_EQ(word(results["tcp4_allowed"]), "ok");
  EXPECT_EQ(word(results["tcp6_allowed"]), "ok");
  EXPECT_EQ(word(results["tcp4_any"]), "ok");
  for (const char* refused : {"tcp4_port", "tcp4_other", "tcp6_port", "tcp6_other"}) {
    EXPECT_EQ(word(results[refused]), "ECONNREFUSED") << refused;
    EXPECT_LT(milliseconds(results[refused]), 1000) << refused << " did not fail fast";
  }
  EXPECT_EQ(word(results["udp4_allowed"]), "sent");
  EXPECT_EQ(word(results["udp6_allowed"]), "sent");
  for (const char* refused : {"udp4_port", "udp6_port"}) {
    EXPECT_NE(word(results[refused]), "sent") << refused << " was let through";
    EXPECT_LT(milliseconds(results[refused]), 1000) << refused << " did not fail fast";
  }
  char datagram[8];
  EXPECT_EQ(::recv(udp4.get(), datagram, sizeof(datagram), MSG_DONTWAIT), 4);
  EXPECT_EQ(::recv(udp6.get(), datagram, sizeof(datagram), MSG_DONTWAIT), 4);
  EXPECT_LT(::recv(udp4_refused.get(), datagram, sizeof(datagram), MSG_DONTWAIT), 0);
  EXPECT_LT(::recv(udp6_refused.get(), datagram, sizeof(datagram), MSG_DONTWAIT), 0);
  EXPECT_EQ(results["ping_any"], "reply");
  EXPECT_NE(results["ping_port_only"], "reply");
  EXPECT_NE(results["ping_port_only"], "timeout");

  // The child is gone, and with its namespace the veth pair.
  wait_until_no_links("pbx-t");
  EXPECT_TRUE(delete_link(plan.host_name).ok());
}

TEST_F(NetKernel, AnExistingHostNameIsRecognisableAndDeletingAGoneLinkIsFine) {
  Sandbox sandbox([] { return std::string(); });
  ASSERT_GT(sandbox.pid(), 0);
  VethPlan plan = plan_for(sandbox, 23);
  ASSERT_TRUE(create_veth(plan).ok());
  const auto again = create_veth(plan);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().error_number(), EEXIST) << again.error().to_string();
  EXPECT_TRUE(delete_link(plan.host_name).ok());
  EXPECT_TRUE(delete_link(plan.host_name).ok()) << "a link gone already";
  auto links = links_with_prefix("pbx-t");
  ASSERT_TRUE(links.ok());
  EXPECT_TRUE(links->empty());
  (void)sandbox.run();
}

TEST_F(NetKernel, MasqueradeCarriesTheSandboxToTheInternetAndItsTableRemovesIt) {
  // The "internet": a namespace of its own whose server on 169.254.31.2:80
  // accepts one connection and reports the address it came from.
  int listening = -1;
  Sandbox internet(
      [&] {
        pollfd ready{.fd = listening, .events = POLLIN, .revents = 0};
        if (::poll(&ready, 1, 10000) != 1) return std::string("peer=timeout\n");
        sockaddr_in peer{};
        socklen_t length = sizeof(peer);
        UniqueFd connection(
            ::accept4(listening, reinterpret_cast<sockaddr*>(&peer), &length, SOCK_CLOEXEC));
        char text[INET_ADDRSTRLEN] = {};
        ::inet_ntop(AF_INET, &peer.sin_addr, text, sizeof(text));
        return "peer=" + std::string(text) + "\n";
      },
      [&] {
        // Bound before its address exists (IP_FREEBIND): listening before the
        // sandbox can connect.
        listening = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        const int one = 1;
        ::setsockopt(listening, IPPROTO_IP, IP_FREEBIND, &one, sizeof(one));
        sockaddr_storage where;
        const socklen_t length = socket_address("169.254.31.2", 80, where);
        if (::bind(listening, reinterpret_cast<sockaddr*>(&where), length) != 0 ||
            ::listen(listening, 4) != 0)
          ::_exit(8);
      });
  ASSERT_GT(internet.pid(), 0);
  VethPlan uplink;
  uplink.host_name = "pbx-up";
  uplink.sandbox_pid = internet.pid();
  uplink.host_addresses = {address("169.254.31.1", 30)};
  uplink.sandbox_addresses = {address("169.254.31.2", 30)};
  ASSERT_TRUE(create_veth(uplink).ok());
  ASSERT_TRUE(configure_sandbox_side(internet.route_socket(), uplink).ok());
  internet.close_sockets();

  Sandbox sandbox([] { return "tcp=" + tcp_probe("169.254.31.2", 80) + "\n"; });
  ASSERT_GT(sandbox.pid(), 0);
  const VethPlan plan = plan_for(sandbox, 30);
  ASSERT_TRUE(create_veth(plan).ok());
  ASSERT_TRUE(configure_sandbox_side(sandbox.route_socket(), plan).ok());
  ASSERT_TRUE(install_egress_filter(
                  sandbox.netfilter_socket(),
                  {{.destination = address("169.254.31.2"), .protocol = IPPROTO_TCP, .port = 80}})
                  .ok());
  sandbox.close_sockets();
  std::ofstream("/proc/sys/net/ipv4/ip_forward") << "1";  // the test's namespace only
  const std::vector<LinkAddress> subnets = {address("169.254.30.0", 30), address("fd00:30::", 64)};
  const auto masqueraded = install_masquerade("pulsebox-t30", plan.host_name, subnets);
  ASSERT_TRUE(masqueraded.ok()) << masqueraded.error().to_string();
  auto tables = tables_with_prefix("pulsebox-");
  ASSERT_TRUE(tables.ok()) << tables.error().to_string();
  EXPECT_EQ(*tables, std::vector<std::string>{"pulsebox-t30"});
  const auto twice = install_masquerade("pulsebox-t30", plan.host_name, subnets);
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(twice.error().error_number(), EEXIST);

  internet.go();
  auto reached = sandbox.run();
  auto served = internet.collect();
  EXPECT_EQ(word(reached["tcp"]), "ok") << reached["tcp"];
  EXPECT_EQ(served["peer"], "169.254.31.1") << "the internet saw the router's address";

  ASSERT_TRUE(delete_table("pulsebox-t30").ok());
  tables = tables_with_prefix("pulsebox-");
  ASSERT_TRUE(tables.ok());
  EXPECT_TRUE(tables->empty());
  EXPECT_TRUE(delete_table("pulsebox-t30").ok()) << "a table gone already";
  std::ofstream("/proc/sys/net/ipv4/ip_forward") << "0";
  wait_until_no_links("pbx-");
}

TEST_F(NetKernel, SetupCostMedianOfTwenty) {
  std::vector<double> costs;
  for (int round = 0; round < 20; ++round) {
    Sandbox sandbox([] { return std::string(); });
    ASSERT_GT(sandbox.pid(), 0);
    const VethPlan plan = plan_for(sandbox, 40);
    const auto start = Clock::now();
    ASSERT_TRUE(create_veth(plan).ok());
    ASSERT_TRUE(configure_sandbox_side(sandbox.route_socket(), plan).ok());
    ASSERT_TRUE(install_egress_filter(
                    sandbox.netfilter_socket(),
                    {{.destination = address("169.254.40.1"), .protocol = IPPROTO_TCP, .port = 80}})
                    .ok());
    costs.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    sandbox.close_sockets();
    (void)sandbox.run();
    ASSERT_TRUE(delete_link(plan.host_name).ok());
  }
  std::sort(costs.begin(), costs.end());
  const double median = (costs[9] + costs[10]) / 2;
  std::printf(
      "create_veth + configure_sandbox_side + install_egress_filter: median %.2f ms, "
      "min %.2f ms, max %.2f ms (20 rounds)\n",
      median, costs.front(), costs.back());
  RecordProperty("setup_median_ms", std::to_string(median));
  wait_until_no_links("pbx-t");
}

}  // namespace
}  // namespace pulsebox::linux_api
