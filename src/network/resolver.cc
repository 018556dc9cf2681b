#include "network/resolver.h"

#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "network/domain_pattern.h"

namespace pulsebox::network {

GuardedAddresses guard_addresses(const std::vector<IpAddress>& addresses,
                                 const std::vector<IpRange>& listed) {
  GuardedAddresses guarded;
  std::vector<IpAddress> seen;
  for (const auto& address : addresses) {
    if (std::find(seen.begin(), seen.end(), address) != seen.end()) continue;
    seen.push_back(address);
    const AddressKind kind = classify(address);
    const bool is_listed = std::any_of(listed.begin(), listed.end(),
                                       [&](const IpRange& r) { return contains(r, address); });
    if (kind == AddressKind::Public || is_listed) {
      guarded.allowed.push_back(address);
    } else {
      guarded.refused.emplace_back(address, kind);
    }
  }
  return guarded;
}

core::Result<GuardedAddresses> resolve_guarded(const std::string& host,
                                               const std::vector<IpRange>& listed) {
  if (const auto literal = parse_ip_address(host)) return guard_addresses({*literal}, listed);
  const auto name = normalise_host_name(host);
  if (!name) {
    return core::Error(core::ErrorKind::kInvalidInput, "network",
                       "\"" + host.substr(0, 260) + "\" is not a host name");
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(name->c_str(), nullptr, &hints, &found);
  if (rc != 0) {
    const std::string why = rc == EAI_SYSTEM ? std::strerror(errno) : ::gai_strerror(rc);
    return core::Error(core::ErrorKind::kUnavailable, "network",
                       *name + " does not resolve: " + why);
  }
  const std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owned(found, ::freeaddrinfo);
  std::vector<IpAddress> addresses;
  for (const addrinfo* entry = found; entry != nullptr; entry = entry->ai_next) {
    IpAddress address;
    address.family = entry->ai_family;
    if (entry->ai_family == AF_INET) {
      const auto* in4 = reinterpret_cast<const sockaddr_in*>(entry->ai_addr);
      std::memcpy(address.bytes.data(), &in4->sin_addr, 4);
    } else if (entry->ai_family == AF_INET6) {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(entry->ai_addr);
      std::memcpy(address.bytes.data(), &in6->sin6_addr, 16);
    } else {
      continue;
    }
    addresses.push_back(address);
  }
  if (addresses.empty()) {
    return core::Error(core::ErrorKind::kUnavailable, "network",
                       *name + " does not resolve to an IP address");
  }
  return guard_addresses(addresses, listed);
}

core::Status refuse_own_addresses(GuardedAddresses& addresses, const std::vector<IpRange>& listed) {
  ifaddrs* interfaces = nullptr;
  if (::getifaddrs(&interfaces) != 0)
    return core::Error::from_errno("network", "listing this host's own addresses");
  const std::unique_ptr<ifaddrs, decltype(&::freeifaddrs)> owned(interfaces, ::freeifaddrs);
  std::vector<IpRange> own;
  for (const ifaddrs* entry = interfaces; entry != nullptr; entry = entry->ifa_next) {
    if (entry->ifa_addr == nullptr) continue;
    IpRange range{.base = {}, .prefix = 0};
    range.base.family = entry->ifa_addr->sa_family;
    if (range.base.family == AF_INET) {
      const auto* in4 = reinterpret_cast<const sockaddr_in*>(entry->ifa_addr);
      std::memcpy(range.base.bytes.data(), &in4->sin_addr, 4);
      range.prefix = 32;
    } else if (range.base.family == AF_INET6) {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(entry->ifa_addr);
      std::memcpy(range.base.bytes.data(), &in6->sin6_addr, 16);
      range.prefix = 128;
    } else {
      continue;
    }
    own.push_back(range);
  }
  auto is_own = [&](const IpAddress& address) {
    const bool listed_here = std::any_of(listed.begin(), listed.end(),
                                         [&](const IpRange& r) { return contains(r, address); });
    // contains() also matches an IPv4 address's mapped IPv6 form.
    return !listed_here && std::any_of(own.begin(), own.end(),
                                       [&](const IpRange& r) { return contains(r, address); });
  };
  for (auto it = addresses.allowed.begin(); it != addresses.allowed.end();) {
    if (is_own(*it)) {
      addresses.refused.emplace_back(*it, AddressKind::ThisHost);
      it = addresses.allowed.erase(it);
    } else {
      ++it;
    }
  }
  return core::ok_status();
}

bool destination_allowed(const GuardedAddresses& addresses) {
  return addresses.refused.empty() && !addresses.allowed.empty();
}

}  // namespace pulsebox::network
