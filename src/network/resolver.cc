#include "network/resolver.h"

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

bool destination_allowed(const GuardedAddresses& addresses) {
  return addresses.refused.empty() && !addresses.allowed.empty();
}

}  // namespace pulsebox::network
