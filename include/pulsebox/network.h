// Network policy: what a sandboxed command may reach.
//
// Modes (the reference's): DenyAll (no network at all), LocalhostOnly (a
// loopback interface of its own), Allowlist (only the listed destinations),
// Proxy (only through proxy_url), AllowAll (the host's network).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pulsebox/export.h"

namespace pulsebox {

enum class NetworkMode { DenyAll, LocalhostOnly, Allowlist, Proxy, AllowAll };
enum class NetworkProtocol { Tcp, Udp, Any };

struct NetworkRule {
  std::string destination;  // an IP, a CIDR, a host name or "*.domain"
  std::optional<int> port;
  NetworkProtocol protocol = NetworkProtocol::Any;
};

struct NetworkPolicy {
  NetworkMode mode = NetworkMode::DenyAll;
  std::vector<NetworkRule> rules;
  std::string proxy_url;
};

// "deny_all", "localhost_only", ...; the CLI spellings are none, localhost,
// allowlist, proxy, all.
PULSEBOX_API std::string_view to_string(NetworkMode mode);
PULSEBOX_API std::optional<NetworkMode> parse_network_mode_cli(std::string_view word);
// "DEST[:PORT]" as given to --allow; throws SandboxConfigError.
PULSEBOX_API NetworkRule parse_network_rule(std::string_view text);

}  // namespace pulsebox
