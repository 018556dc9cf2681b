// A native run's network: how each mode is made on this host (the choice
// and its honest report), and the supervisor's part of making it once init
// has handed over its namespace's sockets (runtime::ChildMessageKind::
// Network). docs/network.md describes every mode.
//
//   none, localhost  a network namespace of its own with lo only
//   proxy            the same, plus a listener on the sandbox's
//                    127.0.0.1:kProxyPort that init made and the supervisor
//                    serves (network::HttpProxy): the one way out
//   allowlist, all   a veth pair to this host (as root), addressed from
//                    169.254.192.0/18 and fd70:6275:6c73::/48, NAT on the
//                    host when it forwards; rootless, pasta (pasta.h);
//                    allowlist adds an nftables filter inside the sandbox's
//                    namespace
//   all, weaker      the host's own namespace, only with --allow-weaker
//                    network when nothing else is possible
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/result.h"
#include "core/unique_fd.h"
#include "pulsebox/backend.h"

namespace pulsebox::network {
class HttpProxy;
}

namespace pulsebox::backends::native {

struct SandboxRun;

// The port the proxy listens on inside the sandbox (its namespace is its
// own: no other program's port).
inline constexpr std::uint16_t kProxyPort = 3128;

enum class NetworkSetup : std::uint8_t { HostNamespace, Loopback, Proxy, Veth, Pasta };

// What this host allows, probed once per process.
struct NetworkHostFacts {
  bool veth = false;        // root with CAP_NET_ADMIN: a veth pair to this host
  bool forwarding = false;  // net.ipv4.ip_forward is 1: NAT reaches past this host
  std::string pasta;        // the pasta program ("" when not installed)
  bool tun = false;         // /dev/net/tun is usable (pasta needs it)
};
NetworkHostFacts probe_network_host();

struct NetworkChoice {
  NetworkSetup setup = NetworkSetup::Loopback;
  Capability capability;
};
NetworkChoice choose_network(const NetworkPolicy& policy, const NetworkHostFacts& facts);
std::string_view to_string(NetworkSetup setup);

// A run's network while it lives: what init handed over and what the
// supervisor made for it, undone by tear_down_network().
struct RunNetwork {
  NetworkSetup setup = NetworkSetup::Loopback;
  core::UniqueFd route_socket, netfilter_socket, proxy_listener;
  std::unique_ptr<network::HttpProxy> proxy;
  std::string veth;       // the host side's name
  std::string nat_table;  // the host's nftables table for this run
  pid_t pasta = -1;
  std::mutex accesses_mutex;
  // The first kMaxRecordedAccesses decisions one by one; the rest counted in
  // `beyond` (the command controls how many there are).
  std::vector<NetworkAccess> accesses;
  std::uint64_t beyond_allowed = 0, beyond_refused = 0;
  NetworkAccess beyond;

  RunNetwork();
  ~RunNetwork();
  RunNetwork(const RunNetwork&) = delete;
  RunNetwork& operator=(const RunNetwork&) = delete;
};

// Before PlanReady: resolves the allowlist's host names (the rebinding
// guard), writes the run's hosts file, and adds the proxy's variables to the
// command's environment.
core::Status plan_network(SandboxRun& run, const ExecutionRequest& request);
// Before PlanReady too: takes init's sockets and makes the veth, the filter
// and the NAT, or starts the proxy.
core::Status make_network(SandboxRun& run, const ExecutionRequest& request,
                          const NetworkHostFacts& facts);
// After the run: stops the proxy (its last records are then in accesses).
void stop_network(SandboxRun& run);
// After stop_network: the run's decisions, with one record counting those
// past the limit.
std::vector<NetworkAccess> take_accesses(RunNetwork& net);
// At teardown (idempotent): the NAT table and the host side of the veth.
void tear_down_network(SandboxRun& run);
// reconcile(): the NAT tables whose veth is gone. A table is named after
// its run's veth ("pulsebox-pbx0a1b"), and a veth lives exactly as long as
// its sandbox's namespace (the kernel removes the pair with it), so a table
// without its veth belongs to no live run, whichever state directory
// started it.
std::vector<std::string> reconcile_network(const NetworkHostFacts& facts);

}  // namespace pulsebox::backends::native
