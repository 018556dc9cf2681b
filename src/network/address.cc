#include "network/address.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <charconv>
#include <cstring>

namespace pulsebox::network {
namespace {

IpAddress v4(std::uint8_t a, std::uint8_t b, std::uint8_t c, std::uint8_t d) {
  IpAddress address;
  address.family = AF_INET;
  address.bytes[0] = a;
  address.bytes[1] = b;
  address.bytes[2] = c;
  address.bytes[3] = d;
  return address;
}

bool prefix_matches(const IpAddress& base, int prefix, const IpAddress& address) {
  if (base.family != address.family) return false;
  const int whole = prefix / 8;
  if (!std::equal(base.bytes.begin(), base.bytes.begin() + whole, address.bytes.begin()))
    return false;
  const int rest = prefix % 8;
  if (rest == 0) return true;
  const auto mask = static_cast<std::uint8_t>(0xff << (8 - rest));
  return (base.bytes[whole] & mask) == (address.bytes[whole] & mask);
}

bool in(const IpAddress& address, std::string_view range) {
  const auto parsed = parse_ip_range(range);
  return parsed && prefix_matches(parsed->base, parsed->prefix, address);
}

// The IPv4 address an IPv6 address carries in a form that reaches it
// (mapped, translated, compatible, NAT64, 6to4), if any.
std::optional<IpAddress> embedded_ipv4(const IpAddress& address) {
  if (address.family != AF_INET6) return std::nullopt;
  const auto& b = address.bytes;
  if (in(address, "::ffff:0:0/96") || in(address, "::ffff:0:0:0/96") ||
      in(address, "64:ff9b::/96") || in(address, "::/96")) {
    return v4(b[12], b[13], b[14], b[15]);
  }
  if (in(address, "2002::/16")) return v4(b[2], b[3], b[4], b[5]);
  return std::nullopt;
}

AddressKind classify_v4(const IpAddress& a) {
  if (a == v4(0, 0, 0, 0)) return AddressKind::Unspecified;
  if (a == v4(169, 254, 169, 254) || a == v4(169, 254, 170, 2) || a == v4(100, 100, 100, 200))
    return AddressKind::Metadata;
  if (in(a, "127.0.0.0/8")) return AddressKind::Loopback;
  if (in(a, "169.254.0.0/16")) return AddressKind::LinkLocal;
  for (const char* range : {"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10"}) {
    if (in(a, range)) return AddressKind::Private;
  }
  if (in(a, "224.0.0.0/4")) return AddressKind::Multicast;
  for (const char* range : {"0.0.0.0/8", "192.0.0.0/24", "192.0.2.0/24", "192.88.99.0/24",
                            "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24", "240.0.0.0/4"}) {
    if (in(a, range)) return AddressKind::Reserved;  // 240/4 holds 255.255.255.255
  }
  return AddressKind::Public;
}

AddressKind classify_v6(const IpAddress& a) {
  if (in(a, "::/128")) return AddressKind::Unspecified;
  if (in(a, "::1/128")) return AddressKind::Loopback;
  if (const auto carried = embedded_ipv4(a)) return classify_v4(*carried);
  if (in(a, "fd00:ec2::254/128")) return AddressKind::Metadata;
  if (in(a, "fc00::/7") || in(a, "fec0::/10") || in(a, "64:ff9b:1::/48"))
    return AddressKind::Private;
  if (in(a, "fe80::/10")) return AddressKind::LinkLocal;
  if (in(a, "ff00::/8")) return AddressKind::Multicast;
  // 2001::/23 holds Teredo (2001::/32), which carries an obfuscated IPv4.
  for (const char* range : {"2001::/23", "2001:db8::/32", "3fff::/20"}) {
    if (in(a, range)) return AddressKind::Reserved;
  }
  if (!in(a, "2000::/3")) return AddressKind::Reserved;
  return AddressKind::Public;
}

}  // namespace

std::optional<IpAddress> parse_ip_address(std::string_view text) {
  if (text.size() >= 2 && text.front() == '[' && text.back() == ']') {
    text = text.substr(1, text.size() - 2);
    if (text.find(':') == std::string_view::npos) return std::nullopt;  // "[1.2.3.4]"
  }
  // inet_pton needs a terminated string; an embedded NUL must not cut it.
  if (text.empty() || text.size() > INET6_ADDRSTRLEN || text.find('\0') != std::string_view::npos) {
    return std::nullopt;
  }
  const std::string terminated(text);
  IpAddress address;
  if (terminated.find(':') == std::string::npos) {
    address.family = AF_INET;
  } else {
    address.family = AF_INET6;
  }
  if (::inet_pton(address.family, terminated.c_str(), address.bytes.data()) != 1)
    return std::nullopt;
  return address;
}

std::string to_string(const IpAddress& address) {
  char text[INET6_ADDRSTRLEN] = {};
  if (::inet_ntop(address.family, address.bytes.data(), text, sizeof text) == nullptr) return "?";
  return text;
}

std::optional<IpRange> parse_ip_range(std::string_view text) {
  const auto slash = text.find('/');
  const auto address = parse_ip_address(text.substr(0, slash));
  if (!address) return std::nullopt;
  const int max = address->family == AF_INET ? 32 : 128;
  int prefix = max;
  if (slash != std::string_view::npos) {
    const std::string_view digits = text.substr(slash + 1);
    if (digits.empty() || digits.size() > 3 || (digits.size() > 1 && digits[0] == '0'))
      return std::nullopt;
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), prefix);
    if (error != std::errc() || end != digits.data() + digits.size() || prefix < 0 ||
        prefix > max) {
      return std::nullopt;
    }
  }
  // Host bits set: refused (see the header).
  IpAddress masked = *address;
  for (int bit = prefix; bit < max; ++bit) {
    masked.bytes[bit / 8] = static_cast<std::uint8_t>(masked.bytes[bit / 8] & ~(0x80 >> (bit % 8)));
  }
  if (!(masked == *address)) return std::nullopt;
  return IpRange{*address, prefix};
}

std::string to_string(const IpRange& range) {
  return to_string(range.base) + "/" + std::to_string(range.prefix);
}

bool contains(const IpRange& range, const IpAddress& address) {
  if (prefix_matches(range.base, range.prefix, address)) return true;
  if (range.base.family == AF_INET && address.family == AF_INET6 && in(address, "::ffff:0:0/96")) {
    const auto& b = address.bytes;
    return prefix_matches(range.base, range.prefix, v4(b[12], b[13], b[14], b[15]));
  }
  return false;
}

AddressKind classify(const IpAddress& address) {
  return address.family == AF_INET ? classify_v4(address) : classify_v6(address);
}

std::string_view to_string(AddressKind kind) {
  switch (kind) {
    case AddressKind::Public:
      return "public";
    case AddressKind::Loopback:
      return "loopback";
    case AddressKind::Private:
      return "private";
    case AddressKind::LinkLocal:
      return "link-local";
    case AddressKind::Metadata:
      return "cloud metadata";
    case AddressKind::Multicast:
      return "multicast";
    case AddressKind::Unspecified:
      return "unspecified";
    case AddressKind::Reserved:
      return "reserved";
    case AddressKind::ThisHost:
      return "this host's own";
  }
  return "reserved";
}

sockaddr_storage socket_address(const IpAddress& address, int port, socklen_t* length) {
  sockaddr_storage storage{};
  if (address.family == AF_INET) {
    auto* in4 = reinterpret_cast<sockaddr_in*>(&storage);
    in4->sin_family = AF_INET;
    in4->sin_port = htons(static_cast<std::uint16_t>(port));
    std::memcpy(&in4->sin_addr, address.bytes.data(), 4);
    *length = sizeof(sockaddr_in);
  } else {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&storage);
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(static_cast<std::uint16_t>(port));
    std::memcpy(&in6->sin6_addr, address.bytes.data(), 16);
    *length = sizeof(sockaddr_in6);
  }
  return storage;
}

}  // namespace pulsebox::network
