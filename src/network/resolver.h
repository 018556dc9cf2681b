// The DNS-rebinding guard: a name is resolved by pulsebox, and every
// address that is not a public one (loopback, private, link-local, cloud
// metadata, multicast, unspecified, reserved; IPv6 forms that carry an IPv4
// address count as that address) is refused unless the user listed a range
// holding it (--allow ADDR or CIDR).
//
// The rule the proxy applies (destination_allowed): a name is refused as a
// whole when ANY of its addresses is refused, not only when all are. The
// proxy would connect only to allowed addresses either way; refusing the
// whole name makes a name that points inside (the rebinding attack's tell)
// a visible, audited refusal instead of a connection that sometimes works.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/result.h"
#include "network/address.h"

namespace pulsebox::network {

struct GuardedAddresses {
  std::vector<IpAddress> allowed;
  std::vector<std::pair<IpAddress, AddressKind>> refused;
};

// Splits `addresses` by the guard (duplicates dropped, order kept).
GuardedAddresses guard_addresses(const std::vector<IpAddress>& addresses,
                                 const std::vector<IpRange>& listed);

// Resolves `host` (getaddrinfo, both families) and guards its addresses. An
// IP literal ("192.0.2.1", "[2001:db8::1]") goes through the same guard.
// Errors (kUnavailable) name the host when it does not resolve; a host that
// is neither an address nor a valid name is kInvalidInput.
core::Result<GuardedAddresses> resolve_guarded(const std::string& host,
                                               const std::vector<IpRange>& listed);

// Moves every allowed address that is one of this host's own (assigned to
// one of its interfaces in the caller's network namespace) and not listed to
// refused, as ThisHost. The guard's classes cannot see these: a public
// address of the host's is Public, yet connecting to it from the host's
// namespace reaches every service the host binds to any address.
core::Status refuse_own_addresses(GuardedAddresses& addresses, const std::vector<IpRange>& listed);

// Whether a destination may be reached: something allowed, nothing refused.
bool destination_allowed(const GuardedAddresses& addresses);

}  // namespace pulsebox::network
