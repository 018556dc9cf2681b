#include "backends/native/network.h"

#include <netinet/in.h>
#include <sys/capability.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <functional>

#include "backends/native/pasta.h"
#include "backends/native/sandbox_run.h"
#include "core/fs.h"
#include "core/trace.h"
#include "linux/nft_rules.h"
#include "linux/veth.h"
#include "network/address.h"
#include "network/domain_pattern.h"
#include "network/http_proxy.h"
#include "network/resolver.h"
#include "runtime/sync_channel.h"

namespace pulsebox::backends::native {

using core::Error;
using core::ErrorKind;

namespace {

// How long init may take to hand its namespace's sockets over (it does so
// right after bringing lo up).
constexpr int kHandoverTimeoutMs = 10000;
constexpr std::string_view kTablePrefix = "pulsebox-";
constexpr std::string_view kVethPrefix = "pbx";
// The decisions a run records one by one; past it they are counted.
constexpr std::size_t kMaxRecordedAccesses = 1000;
// 169.254.192.0/18 in /30s: 4096 runs at once on one host.
constexpr std::uint32_t kVethSlots = 4096;

bool has_effective_capability(cap_value_t capability) {
  cap_t caps = cap_get_proc();
  if (caps == nullptr) return false;
  cap_flag_value_t value = CAP_CLEAR;
  const bool ok = cap_get_flag(caps, capability, CAP_EFFECTIVE, &value) == 0 && value == CAP_SET;
  cap_free(caps);
  return ok;
}

std::string proxy_text() {
  return "the sandbox has only its own loopback; pulsebox's HTTP proxy, listening on the "
         "sandbox's 127.0.0.1:" +
         std::to_string(kProxyPort) +
         " and served from outside it, is the one way out: it lets through only the host names "
         "--allow-domain names, resolves them itself and refuses loopback, private, link-local "
         "and cloud metadata addresses unless --allow lists them";
}

std::string pasta_text() {
  return "a network namespace of its own, connected by pasta (user-mode networking: the "
         "sandbox's connections leave as this user's sockets; no host port forwarded in or "
         "out, the gateway not mapped to the host's loopback)";
}

std::string without_pasta(const NetworkHostFacts& facts) {
  if (facts.pasta.empty()) return "(not installed: apt-get install passt)";
  return "(installed, but /dev/net/tun is not usable by this user: udev makes it 0666)";
}

linux_api::LinkAddress link_address(const network::IpAddress& address, int prefix) {
  linux_api::LinkAddress link{};
  link.family = address.family;
  link.bytes = address.bytes;
  link.prefix = prefix;
  return link;
}

linux_api::LinkAddress ipv4(std::uint32_t host_order, int prefix) {
  linux_api::LinkAddress link{};
  link.family = AF_INET;
  link.bytes[0] = static_cast<std::uint8_t>(host_order >> 24);
  link.bytes[1] = static_cast<std::uint8_t>(host_order >> 16);
  link.bytes[2] = static_cast<std::uint8_t>(host_order >> 8);
  link.bytes[3] = static_cast<std::uint8_t>(host_order);
  link.prefix = prefix;
  return link;
}

// fd70:6275:6c73:SLOT::N/64 ("pbuls")
linux_api::LinkAddress ipv6(std::uint32_t slot, std::uint8_t last, int prefix) {
  linux_api::LinkAddress link{};
  link.family = AF_INET6;
  const std::uint8_t head[] = {0xfd, 0x70, 0x62, 0x75, 0x6c, 0x73};
  std::copy(std::begin(head), std::end(head), link.bytes.begin());
  link.bytes[6] = static_cast<std::uint8_t>(slot >> 8);
  link.bytes[7] = static_cast<std::uint8_t>(slot);
  link.bytes[15] = last;
  link.prefix = prefix;
  return link;
}

linux_api::VethPlan veth_plan(std::uint32_t slot, pid_t sandbox_pid) {
  linux_api::VethPlan plan;
  char name[16];
  std::snprintf(name, sizeof name, "%s%04x", std::string(kVethPrefix).c_str(), slot);
  plan.host_name = name;
  plan.sandbox_pid = sandbox_pid;
  const std::uint32_t base = ((169u << 24) | (254u << 16) | (192u << 8)) + slot * 4;
  // The IPv6 gateway is link-local, as routers' are.
  linux_api::LinkAddress gateway6{};
  gateway6.family = AF_INET6;
  gateway6.bytes[0] = 0xfe;
  gateway6.bytes[1] = 0x80;
  gateway6.bytes[15] = 1;
  gateway6.prefix = 64;
  plan.host_addresses = {ipv4(base + 1, 30), ipv6(slot, 1, 64), gateway6};
  plan.sandbox_addresses = {ipv4(base + 2, 30), ipv6(slot, 2, 64)};
  gateway6.prefix = 128;
  plan.sandbox_gateways = {ipv4(base + 1, 32), gateway6};
  return plan;
}

// The rules an allowlist gives the filter: each --allow as an address range
// (a host name as the addresses plan_network resolved).
std::vector<linux_api::EgressRule> egress_rules(
    const NetworkPolicy& policy, const std::vector<std::vector<network::IpAddress>>& resolved) {
  std::vector<linux_api::EgressRule> rules;
  for (std::size_t i = 0; i < policy.rules.size(); ++i) {
    const NetworkRule& rule = policy.rules[i];
    auto add = [&](const linux_api::LinkAddress& destination) {
      linux_api::EgressRule egress;
      egress.destination = destination;
      egress.protocol = rule.protocol == NetworkProtocol::Tcp   ? IPPROTO_TCP
                        : rule.protocol == NetworkProtocol::Udp ? IPPROTO_UDP
                                                                : 0;
      if (rule.port) egress.port = static_cast<std::uint16_t>(*rule.port);
      rules.push_back(egress);
    };
    if (const auto range = network::parse_ip_range(rule.destination)) {
      add(link_address(range->base, range->prefix));
      continue;
    }
    for (const auto& address : resolved[i])
      add(link_address(address, address.family == AF_INET ? 32 : 128));
  }
  return rules;
}

core::Status take_handover(SandboxRun& run) {
  const int channel = run.sandbox.channel.get();
  for (;;) {
    int passed[runtime::kMaxPassedFds];
    auto message = runtime::receive_message_fds(channel, kHandoverTimeoutMs, passed);
    if (!message) {
      return Error(ErrorKind::kUnavailable, "network",
                   "the sandbox's init handed over no network sockets (it ended or did not "
                   "answer)");
    }
    if (message->kind != runtime::ChildMessageKind::Network) {
      for (const int fd : passed) {
        if (fd >= 0) ::close(fd);
      }
      run.early_messages.push_back(*message);
      if (message->kind == runtime::ChildMessageKind::Error) {
        return Error(ErrorKind::kUnavailable, "network",
                     "setting the sandbox up: " + runtime::describe_child_error(*message));
      }
      continue;
    }
    RunNetwork& net = *run.network;
    if (run.plan.network_handover == runtime::LaunchPlan::NetworkHandover::ProxyListener) {
      net.proxy_listener.reset(passed[0]);
    } else {
      net.route_socket.reset(passed[0]);
      net.netfilter_socket.reset(passed[1]);
    }
    for (int i = 2; i < runtime::kMaxPassedFds; ++i) {
      if (passed[i] >= 0) ::close(passed[i]);
    }
    return core::ok_status();
  }
}

core::Status start_proxy(SandboxRun& run, const ExecutionRequest& request) {
  RunNetwork& net = *run.network;
  network::ProxyConfig config;
  config.listener = std::move(net.proxy_listener);
  for (const auto& text : request.network.domains) {
    PB_TRY(pattern, network::DomainPattern::parse(text));
    config.domains.push_back(std::move(pattern));
  }
  for (const auto& rule : request.network.rules) {
    const auto range = network::parse_ip_range(rule.destination);
    if (!range) {
      return Error(ErrorKind::kInvalidInput, "network",
                   "--allow \"" + rule.destination +
                       "\": with --net proxy, --allow takes addresses (an IP or a CIDR); host "
                       "names go to --allow-domain");
    }
    config.listed.push_back(*range);
  }
  RunNetwork* target = &net;
  config.on_record = [target](const network::ProxyRecord& record) {
    const std::lock_guard hold(target->accesses_mutex);
    if (target->accesses.size() < kMaxRecordedAccesses) {
      target->accesses.push_back(record);
      return;
    }
    ++(record.allowed ? target->beyond_allowed : target->beyond_refused);
    target->beyond.bytes_up += record.bytes_up;
    target->beyond.bytes_down += record.bytes_down;
  };
  PB_TRY(proxy, network::HttpProxy::start(std::move(config)));
  net.proxy = std::move(proxy);
  return core::ok_status();
}

core::Status make_veth(SandboxRun& run, const ExecutionRequest& request,
                       const NetworkHostFacts& facts) {
  RunNetwork& net = *run.network;
  const std::uint32_t first =
      static_cast<std::uint32_t>(std::hash<std::string>{}(run.id) % kVethSlots);
  linux_api::VethPlan plan;
  for (std::uint32_t attempt = 0;; ++attempt) {
    if (attempt == 64) {
      return Error(ErrorKind::kUnavailable, "network",
                   "no free veth name or address (64 tried): too many sandboxes with a network "
                   "at once");
    }
    plan = veth_plan((first + attempt * 97) % kVethSlots, run.sandbox.pid);
    auto made = linux_api::create_veth(plan);
    if (made) break;
    if (made.error().error_number() != EEXIST)
      return std::move(made).error().with_context("making the sandbox's veth pair");
  }
  net.veth = plan.host_name;
  core::trace_phase("network: veth made");
  PB_CHECK(linux_api::configure_sandbox_side(net.route_socket.get(), plan));
  if (request.network.mode == NetworkMode::Allowlist) {
    const auto rules = egress_rules(request.network, run.resolved_destinations);
    // The host answers neighbour solicitations from its address on the
    // veth's prefix: replies to it must pass.
    PB_CHECK(linux_api::install_egress_filter(net.netfilter_socket.get(), rules,
                                              plan.sandbox_addresses));
  }
  core::trace_phase("network: sandbox side addressed and filtered");
  if (facts.forwarding) {
    const std::string table = std::string(kTablePrefix) + plan.host_name;
    std::vector<linux_api::LinkAddress> subnets = {plan.sandbox_addresses[0],
                                                   plan.sandbox_addresses[1]};
    auto installed = linux_api::install_masquerade(table, plan.host_name, subnets);
    if (!installed && installed.error().error_number() == EEXIST) {
      // A killed run's, left for reconcile: its veth had this name, which
      // was free when this run's was made, so that run is gone.
      PB_CHECK(linux_api::delete_table(table));
      installed = linux_api::install_masquerade(table, plan.host_name, subnets);
    }
    PB_CHECK(std::move(installed));
    net.nat_table = table;
  }
  net.route_socket.reset();
  net.netfilter_socket.reset();
  return core::ok_status();
}

core::Status make_pasta(SandboxRun& run, const ExecutionRequest& request,
                        const NetworkHostFacts& facts) {
  RunNetwork& net = *run.network;
  // The filter first: no packet leaves before it is in place.
  if (request.network.mode == NetworkMode::Allowlist) {
    const auto rules = egress_rules(request.network, run.resolved_destinations);
    PB_CHECK(linux_api::install_egress_filter(net.netfilter_socket.get(), rules));
  }
  net.route_socket.reset();
  net.netfilter_socket.reset();
  PB_TRY(pid, start_pasta(facts.pasta, run.sandbox.pid, run.run_dir));
  net.pasta = pid;
  core::trace_phase("network: pasta up");
  return core::ok_status();
}

}  // namespace

RunNetwork::RunNetwork() = default;
RunNetwork::~RunNetwork() = default;

NetworkHostFacts probe_network_host() {
  NetworkHostFacts facts;
  facts.veth = ::geteuid() == 0 && has_effective_capability(CAP_NET_ADMIN) &&
               has_effective_capability(CAP_SYS_ADMIN);
  facts.forwarding = core::first_line_of_file("/proc/sys/net/ipv4/ip_forward") == "1";
  // pasta refuses root (pasta.h): only an ordinary user's sandboxes use it.
  if (::geteuid() != 0) {
    facts.pasta = find_pasta();
    facts.tun = tun_usable();
  }
  return facts;
}

std::string_view to_string(NetworkSetup setup) {
  switch (setup) {
    case NetworkSetup::HostNamespace:
      return "host";
    case NetworkSetup::Loopback:
      return "loopback";
    case NetworkSetup::Proxy:
      return "proxy";
    case NetworkSetup::Veth:
      return "veth";
    case NetworkSetup::Pasta:
      return "pasta";
  }
  return "loopback";
}

NetworkChoice choose_network(const NetworkPolicy& policy, const NetworkHostFacts& facts) {
  using Level = EnforcementLevel;
  const std::string forwarding_note =
      facts.forwarding ? ", with NAT on this host (a nftables table of the run's own)"
                       : "; this host does not forward (net.ipv4.ip_forward is 0), so only its "
                         "own addresses are reachable";
  switch (policy.mode) {
    case NetworkMode::DenyAll:
    case NetworkMode::LocalhostOnly:
      return {NetworkSetup::Loopback,
              {Level::StronglyEnforced, "a new network namespace with only the loopback interface",
               ""}};
    case NetworkMode::Proxy:
      return {NetworkSetup::Proxy, {Level::StronglyEnforced, proxy_text(), ""}};
    case NetworkMode::Allowlist:
      if (facts.veth) {
        return {NetworkSetup::Veth,
                {Level::StronglyEnforced,
                 "a veth pair to this host" + forwarding_note +
                     "; an nftables filter in the sandbox's own namespace, which the command "
                     "holds no capability over, lets only the --allow destinations through and "
                     "refuses the rest at once; host names resolved by pulsebox before the run "
                     "(the rebinding guard) and written to the sandbox's /etc/hosts",
                 facts.forwarding ? "" : "sysctl net.ipv4.ip_forward=1 to reach past this host"}};
      }
      if (!facts.pasta.empty() && facts.tun) {
        return {NetworkSetup::Pasta,
                {Level::StronglyEnforced,
                 pasta_text() +
                     "; an nftables filter in the sandbox's own namespace, which the command "
                     "holds no capability over, lets only the --allow destinations through and "
                     "refuses the rest at once; host names resolved by pulsebox before the run "
                     "(the rebinding guard) and written to the sandbox's /etc/hosts",
                 ""}};
      }
      return {NetworkSetup::Loopback,
              {Level::Unsupported,
               "an allowlist needs a veth pair to this host (root: CAP_NET_ADMIN) or pasta " +
                   without_pasta(facts) + "; the run would get no network at all",
               "run as root, install passt (pasta) with a usable /dev/net/tun, or use --net proxy "
               "(works without privileges)"}};
    case NetworkMode::AllowAll:
      if (facts.veth && facts.forwarding) {
        return {NetworkSetup::Veth,
                {Level::StronglyEnforced,
                 "a network namespace of its own with a veth pair to this host" + forwarding_note +
                     ": the host's own loopback services and abstract unix sockets stay out of "
                     "reach",
                 ""}};
      }
      if (!facts.veth && !facts.pasta.empty() && facts.tun) {
        return {NetworkSetup::Pasta,
                {Level::StronglyEnforced,
                 pasta_text() + ": the host's own loopback services and abstract unix sockets "
                                "stay out of reach",
                 ""}};
      }
      return {NetworkSetup::HostNamespace,
              {Level::PartiallyEnforced,
               "the host's own network namespace is shared: its loopback services, abstract "
               "unix sockets and interfaces are reachable (" +
                   std::string(facts.veth ? "this host does not forward: net.ipv4.ip_forward is 0"
                                          : "a veth pair with NAT needs root, and pasta " +
                                                without_pasta(facts)) +
                   ")",
               facts.veth ? "sysctl net.ipv4.ip_forward=1"
                          : "run as root, install passt (pasta) with a usable /dev/net/tun, or use "
                            "--net proxy"}};
  }
  return {NetworkSetup::Loopback, {Level::StronglyEnforced, "", ""}};
}

core::Status plan_network(SandboxRun& run, const ExecutionRequest& request) {
  const NetworkPolicy& policy = request.network;
  run.resolved_destinations.assign(policy.rules.size(), {});
  const NetworkSetup setup = run.network->setup;
  if ((setup != NetworkSetup::Veth && setup != NetworkSetup::Pasta) ||
      policy.mode != NetworkMode::Allowlist) {
    return core::ok_status();
  }
  // Addresses given as such are the guard's exceptions.
  std::vector<network::IpRange> listed;
  for (const auto& rule : policy.rules) {
    if (auto range = network::parse_ip_range(rule.destination)) listed.push_back(*range);
  }
  std::string hosts = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n";
  for (std::size_t i = 0; i < policy.rules.size(); ++i) {
    const NetworkRule& rule = policy.rules[i];
    if (network::parse_ip_range(rule.destination)) continue;
    auto resolved = network::resolve_guarded(rule.destination, listed);
    if (resolved) {
      // The veth delivers packets for the host's own addresses to the host.
      if (auto own = network::refuse_own_addresses(*resolved, listed); !own) resolved = own.error();
    }
    NetworkAccess access;
    access.method = "resolve";
    access.host = rule.destination;  // the facade scrubs what it records
    access.port = rule.port.value_or(0);
    if (!resolved) {
      access.reason = resolved.error().message();
      run.network->accesses.push_back(access);
      return Error(ErrorKind::kInvalidInput, "network",
                   "--allow " + rule.destination + ": " + resolved.error().message());
    }
    for (const auto& [address, kind] : resolved->refused) {
      access.reason = network::to_string(address) + " is " + std::string(network::to_string(kind)) +
                      " (the DNS-rebinding guard; list the address with --allow to permit it)";
      run.network->accesses.push_back(access);
      return Error(ErrorKind::kPolicyDenied, "network",
                   "--allow " + rule.destination + ": resolves to " + access.reason);
    }
    access.allowed = true;
    for (const auto& address : resolved->allowed) {
      access.addresses.push_back(network::to_string(address));
      hosts += network::to_string(address) + "\t" + rule.destination + "\n";
    }
    access.reason = "resolved before the run";
    run.network->accesses.push_back(access);
    run.resolved_destinations[i] = resolved->allowed;
  }
  const auto file = run.run_dir / "hosts";
  {
    std::ofstream out(file, std::ios::trunc);
    out << hosts;
    if (!out.flush()) return Error::from_errno("network", "writing " + file.string());
  }
  run.layout.hosts_file = file;
  return core::ok_status();
}

core::Status make_network(SandboxRun& run, const ExecutionRequest& request,
                          const NetworkHostFacts& facts) {
  if (run.plan.network_handover == runtime::LaunchPlan::NetworkHandover::None)
    return core::ok_status();
  PB_CHECK(take_handover(run));
  core::trace_phase("network: init's sockets taken");
  if (run.network->setup == NetworkSetup::Proxy) return start_proxy(run, request);
  if (run.network->setup == NetworkSetup::Pasta) return make_pasta(run, request, facts);
  return make_veth(run, request, facts);
}

void stop_network(SandboxRun& run) {
  if (!run.network) return;
  RunNetwork& net = *run.network;
  if (net.proxy) net.proxy->stop();
  // The command's processes are gone (init reported after ending them):
  // nothing more goes out. The NAT table goes now, while the sandbox's
  // namespace still stands: once init exits, the kernel's removal of that
  // namespace holds the routing lock, which the deletion would wait for.
  stop_pasta(net.pasta);
  net.pasta = -1;
  if (!net.nat_table.empty() && linux_api::delete_table(net.nat_table)) net.nat_table.clear();
}

std::vector<NetworkAccess> take_accesses(RunNetwork& net) {
  const std::lock_guard hold(net.accesses_mutex);
  std::vector<NetworkAccess> accesses = std::move(net.accesses);
  net.accesses.clear();
  if (const std::uint64_t more = net.beyond_allowed + net.beyond_refused; more > 0) {
    NetworkAccess summary = net.beyond;
    summary.method = "more";
    summary.host = "(past the first " + std::to_string(kMaxRecordedAccesses) + ")";
    summary.allowed = net.beyond_refused == 0;
    summary.reason = std::to_string(more) + " more proxy decisions, counted here (" +
                     std::to_string(net.beyond_allowed) + " allowed, " +
                     std::to_string(net.beyond_refused) +
                     " refused; the bytes are theirs): the first " +
                     std::to_string(kMaxRecordedAccesses) + " are recorded one by one";
    accesses.push_back(std::move(summary));
  }
  return accesses;
}

void tear_down_network(SandboxRun& run) {
  // stop_network() again: a run that never got to its end (a failed setup)
  // still has its proxy, pasta and NAT table. The veth needs nothing: the
  // kernel removes the pair with the sandbox's namespace (nothing else holds
  // it: the supervisor closed its sockets).
  stop_network(run);
}

std::vector<std::string> reconcile_network(const NetworkHostFacts& facts) {
  std::vector<std::string> removed;
  if (!facts.veth) return removed;
  auto tables = linux_api::tables_with_prefix(kTablePrefix);
  if (!tables) return removed;
  auto links = linux_api::links_with_prefix(kVethPrefix);
  if (!links) return removed;
  for (const auto& table : *tables) {
    const std::string veth = table.substr(kTablePrefix.size());
    if (std::find(links->begin(), links->end(), veth) != links->end()) continue;
    if (linux_api::delete_table(table)) removed.push_back("nftables table " + table);
  }
  return removed;
}

}  // namespace pulsebox::backends::native
