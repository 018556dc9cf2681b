// nftables rules made with libnftnl and sent through libmnl, each install one
// batched transaction (all of it applies or none).
//
// The sandbox's egress filter (install_egress_filter), in the sandbox's own
// network namespace, through a NETLINK_NETFILTER socket init opened there and
// passed to the supervisor; table inet "pulsebox":
//   output (hook output, policy drop):
//     oifname "lo" accept
//     ct state established,related accept
//     ICMPv6 neighbour discovery (types 133-136) to fe80::/10, ff02::/16 or an
//       on-link prefix accept
//     each EgressRule: destination prefix [+ protocol] [+ destination port] accept
//       (a rule without protocol or port allows all of the destination's
//       traffic, ICMP and ICMPv6 included; a port without a protocol means TCP
//       and UDP)
//     meta l4proto tcp reject with tcp reset          -> connect() fails with ECONNREFUSED at once
//     reject with icmpx admin-prohibited              -> EHOSTUNREACH (IPv4) / EACCES (IPv6) at
//     once
//   input (hook input, policy drop):
//     iifname "lo" accept; ct state established,related accept; ICMPv6 ND accept
// Outgoing neighbour discovery is confined to the link's destinations: a
// solicitation or advertisement to any other address would be routed on by
// the host, a channel out that no allow rule opened.
//
// Why the sandboxed command cannot undo the rules: changing nftables, routes
// or addresses of a network namespace needs CAP_NET_ADMIN in the user
// namespace that owns it. The command has dropped every capability (bounding
// set included) and runs with no_new_privs, so neither an execve of a setuid
// or file-capability binary nor anything else gives one back in this
// namespace. A new user namespace it creates gives it capabilities only over
// namespaces that new user namespace owns, never over the sandbox's network
// namespace (owned by the sandbox's user namespace, or the host's as root).
// If it unshares a new network namespace it gets one with only a loopback
// interface, no veth and no route out: it is more isolated, not less.
//
// The host side of `--net all` as root (install_masquerade), in the caller's
// namespace, a table of its own per run (inet "pulsebox-<suffix>"):
//   postrouting (nat, hook postrouting, priority srcnat):
//     each sandbox subnet as source, leaving by an interface other than host_link: masquerade
//   forward (filter, hook forward, policy accept):
//     iifname host_link accept; oifname host_link accept
// delete_table() removes all of it. Forwarding itself
// (net.ipv4.ip_forward, net.ipv6.conf.all.forwarding) is the caller's, and a
// host firewall that drops forwarded traffic in another table still drops it
// (an accept verdict ends one base chain, not the others on the hook).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "linux/link_address.h"

namespace pulsebox::linux_api {

inline constexpr std::string_view kEgressTable = "pulsebox";

struct EgressRule {
  LinkAddress destination;  // a prefix: prefix bits of bytes are compared
  int protocol = 0;         // 0 any, IPPROTO_TCP, IPPROTO_UDP
  std::optional<std::uint16_t> port;
};

// netfilter_socket: a NETLINK_NETFILTER socket opened in the sandbox's
// namespace; it is used (bound first if it is not yet) and left open.
// on_link_prefixes: the sandbox side's own prefixes (VethPlan's
// sandbox_addresses), to which neighbour discovery may go besides
// link-local and link-scope multicast (the host side answers a solicitation
// from its own address on the link, fd00:...::1, and expects the
// advertisement there). Replaces a previous "pulsebox" table there, in the
// same transaction.
core::Status install_egress_filter(int netfilter_socket, const std::vector<EgressRule>& rules,
                                   const std::vector<LinkAddress>& on_link_prefixes = {});

// In the caller's namespace (root on the host). Fails with EEXIST when
// `table` exists already.
core::Status install_masquerade(const std::string& table, const std::string& host_link,
                                const std::vector<LinkAddress>& sandbox_subnets);

// Removes an inet table of the caller's namespace; one that is gone already
// is success.
core::Status delete_table(const std::string& table);

// The names of the caller's namespace's inet tables that start with `prefix`.
core::Result<std::vector<std::string>> tables_with_prefix(std::string_view prefix);

}  // namespace pulsebox::linux_api
