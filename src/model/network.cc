#include <charconv>

#include "core/result.h"
#include "core/text.h"
#include "core/throw_error.h"
#include "pulsebox/backend.h"
#include "pulsebox/network.h"

namespace pulsebox {

std::string_view to_string(NetworkMode mode) {
  switch (mode) {
    case NetworkMode::DenyAll:
      return "deny_all";
    case NetworkMode::LocalhostOnly:
      return "localhost_only";
    case NetworkMode::Allowlist:
      return "allowlist";
    case NetworkMode::Proxy:
      return "proxy";
    case NetworkMode::AllowAll:
      return "allow_all";
  }
  return "deny_all";
}

std::optional<NetworkMode> parse_network_mode_cli(std::string_view word) {
  const std::string lower = core::ascii_lower(word);
  if (lower == "none") return NetworkMode::DenyAll;
  if (lower == "localhost") return NetworkMode::LocalhostOnly;
  if (lower == "allowlist") return NetworkMode::Allowlist;
  if (lower == "proxy") return NetworkMode::Proxy;
  if (lower == "all") return NetworkMode::AllowAll;
  for (auto mode : {NetworkMode::DenyAll, NetworkMode::LocalhostOnly, NetworkMode::Allowlist,
                    NetworkMode::Proxy, NetworkMode::AllowAll}) {
    if (to_string(mode) == lower) return mode;
  }
  return std::nullopt;
}

NetworkRule parse_network_rule(std::string_view text) {
  const std::string given(text);
  auto invalid = [&](const std::string& why) {
    core::throw_error(core::Error(core::ErrorKind::kInvalidInput, "network",
                                  "--allow \"" + given + "\": " + why));
  };
  auto parse_port = [&](std::string_view port_text) {
    int port = 0;
    const auto [ptr, ec] =
        std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (ec != std::errc() || ptr != port_text.data() + port_text.size() || port < 1 ||
        port > 65535) {
      invalid("expected a port from 1 to 65535 after ':'");
    }
    return port;
  };
  NetworkRule rule;
  if (const auto slash = text.rfind('/'); slash != std::string_view::npos) {
    const std::string protocol = core::ascii_lower(text.substr(slash + 1));
    if (protocol == "tcp" || protocol == "udp") {
      rule.protocol = protocol == "tcp" ? NetworkProtocol::Tcp : NetworkProtocol::Udp;
      text = text.substr(0, slash);
    } else if (protocol.empty() || !std::isdigit(static_cast<unsigned char>(protocol[0]))) {
      invalid("expected tcp or udp after the last '/'");
    }
  }
  std::string_view destination = text;
  // "[v6]:port", "host:port", or a bare destination (a bare IPv6 has several colons).
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string_view::npos) invalid("unterminated '['");
    destination = text.substr(1, close - 1);
    if (close + 1 < text.size()) {
      if (text[close + 1] != ':') invalid("expected ':' after ']'");
      rule.port = parse_port(text.substr(close + 2));
    }
  } else if (const auto colon = text.rfind(':');
             colon != std::string_view::npos && text.find(':') == colon) {
    destination = text.substr(0, colon);
    rule.port = parse_port(text.substr(colon + 1));
  }
  if (destination.empty()) invalid("expected a destination (an IP, a CIDR or a host name)");
  for (char c : destination) {
    const bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' ||
                    c == '*' || c == ':' || c == '/' || c == '_';
    if (!ok) invalid(std::string("unexpected character '") + c + "'");
  }
  rule.destination = std::string(destination);
  return rule;
}

std::string_view to_string(Dimension dimension) {
  switch (dimension) {
    case Dimension::Network:
      return "network";
    case Dimension::Secrets:
      return "secrets";
    case Dimension::Filesystem:
      return "filesystem";
    case Dimension::Limits:
      return "limits";
    case Dimension::Syscalls:
      return "syscalls";
  }
  return "network";
}

std::optional<Dimension> parse_dimension(std::string_view word) {
  const std::string lower = core::ascii_lower(word);
  for (Dimension dimension : kAllDimensions) {
    if (to_string(dimension) == lower) return dimension;
  }
  return std::nullopt;
}

std::string_view to_string(LimitKind kind) {
  switch (kind) {
    case LimitKind::Memory:
      return "memory";
    case LimitKind::Swap:
      return "swap";
    case LimitKind::Processes:
      return "pids";
    case LimitKind::Cpu:
      return "cpus";
    case LimitKind::CpuTime:
      return "cpu-time";
    case LimitKind::WallTime:
      return "timeout";
    case LimitKind::Output:
      return "max-output";
    case LimitKind::Disk:
      return "disk";
    case LimitKind::OpenFiles:
      return "open-files";
  }
  return "memory";
}

}  // namespace pulsebox
