// IP addresses and ranges as the network policy uses them, and the kind of
// an address (public, loopback, private, link-local, cloud metadata...)
// that the DNS-rebinding guard (network/resolver.h) decides on.
#pragma once

#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace pulsebox::network {

// AF_INET uses the first 4 bytes of `bytes`; the rest stay zero.
struct IpAddress {
  int family = 0;  // AF_INET or AF_INET6
  std::array<std::uint8_t, 16> bytes{};
  bool operator==(const IpAddress&) const = default;
};

// "192.0.2.1", "2001:db8::1" or "[2001:db8::1]". Nothing else: no scope id,
// no shorthand IPv4 forms ("127.1", "0x7f000001"), no leading zeros.
std::optional<IpAddress> parse_ip_address(std::string_view text);
std::string to_string(const IpAddress& address);

struct IpRange {
  IpAddress base;
  int prefix = 0;  // 0..32 or 0..128
};

// "10.0.0.0/8", "fd00::/8", "[fd00::]/8", or a bare address (/32, /128).
// A range with host bits set ("10.0.0.1/8") is refused, not normalised: it
// is most likely a typo for a single address, and guessing would widen it.
std::optional<IpRange> parse_ip_range(std::string_view text);
std::string to_string(const IpRange& range);

// Whether `range` holds `address`. An IPv4 range also holds the IPv4-mapped
// IPv6 form of its addresses (::ffff:a.b.c.d reaches a.b.c.d).
bool contains(const IpRange& range, const IpAddress& address);

// `address` and `port` as a socket address for connect()/bind(); *length
// gets its size.
sockaddr_storage socket_address(const IpAddress& address, int port, socklen_t* length);

enum class AddressKind {
  Public,
  Loopback,
  Private,
  LinkLocal,
  Metadata,  // cloud instance metadata services
  Multicast,
  Unspecified,
  Reserved,  // documentation, benchmarking, broadcast, future use...
  ThisHost,  // an address of one of this host's interfaces (refuse_own_addresses)
};

// IPv4-mapped, IPv4-translated, IPv4-compatible, NAT64 (64:ff9b::/96) and
// 6to4 (2002::/16) IPv6 addresses are classified by the IPv4 address they
// carry: "::ffff:169.254.169.254" is Metadata, not Public.
// An IPv6 address outside 2000::/3 that no rule names is Reserved.
AddressKind classify(const IpAddress& address);
std::string_view to_string(AddressKind kind);

}  // namespace pulsebox::network
