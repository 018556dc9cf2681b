// Network policy: what a sandboxed command may reach.
//
// Modes (the reference's): DenyAll (no network at all), LocalhostOnly (a
// loopback interface of its own), Allowlist (only the listed destinations,
// through a veth pair or pasta, filtered by nftables in the sandbox's own
// namespace), Proxy (only through pulsebox's HTTP proxy, for the host names
// `domains` allows), AllowAll (everything, through a veth with NAT or
// pasta; the host's own namespace only when accepted as weaker).
// docs/network.md says how each is enforced.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pulsebox/export.h"

namespace pulsebox {

enum class NetworkMode { DenyAll, LocalhostOnly, Allowlist, Proxy, AllowAll };
enum class NetworkProtocol { Tcp, Udp, Any };

struct NetworkRule {
  std::string destination;  // an IP, a CIDR or a host name
  std::optional<int> port;
  NetworkProtocol protocol = NetworkProtocol::Any;
};

struct NetworkPolicy {
  NetworkMode mode = NetworkMode::DenyAll;
  // Allowlist: what passes. Proxy: addresses the DNS-rebinding guard would
  // refuse that may still be reached (and IP-literal targets).
  std::vector<NetworkRule> rules;
  // Proxy: the host names allowed ("api.example.test", "*.example.test").
  std::vector<std::string> domains;
  std::string proxy_url;
};

// One decision of the network policy during a run: a proxy request, or a
// host name resolved for an allowlist. Hosts are scrubbed of secrets.
struct NetworkAccess {
  std::string method;  // "CONNECT", "GET", ... or "resolve"
  std::string host;
  int port = 0;
  bool allowed = false;
  std::string reason;
  std::vector<std::string> addresses;
  std::uint64_t bytes_up = 0;
  std::uint64_t bytes_down = 0;
};

// "deny_all", "localhost_only", ...; the CLI spellings are none, localhost,
// allowlist, proxy, all.
PULSEBOX_API std::string_view to_string(NetworkMode mode);
PULSEBOX_API std::optional<NetworkMode> parse_network_mode_cli(std::string_view word);
// "DEST[:PORT][/PROTO]" as given to --allow (PROTO tcp or udp); throws
// SandboxConfigError.
PULSEBOX_API NetworkRule parse_network_rule(std::string_view text);

}  // namespace pulsebox
