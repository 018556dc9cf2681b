// A veth pair between the caller's network namespace and a sandbox's, made
// with libnl-route. The supervisor creates the pair and addresses its own
// side; the sandbox's side is configured through a NETLINK_ROUTE socket that
// init opened inside the sandbox's namespace and passed over SCM_RIGHTS, so
// no process has to enter that namespace.
//
//   create_veth(plan)                         // host side up, peer born in plan.sandbox_pid's
//   namespace configure_sandbox_side(route_fd, plan)    // addresses, link up, default routes
//   ... run ...
//   delete_link(plan.host_name)               // the peer goes with it
//
// The pair lives as long as the sandbox's namespace: when its last process
// exits and the last socket opened in it is closed (the supervisor's copies
// of the passed sockets count: close them once configured), the kernel
// deletes the peer and with it the host side. Names are chosen by the caller
// under one prefix ("pbx-"), so that links_with_prefix() finds any left.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "linux/link_address.h"

namespace pulsebox::linux_api {

struct VethPlan {
  std::string host_name;  // in the caller's network namespace, at most 15 bytes
  std::string sandbox_name = "eth0";
  pid_t sandbox_pid = -1;  // the peer is created in this process's network namespace
  std::vector<LinkAddress> host_addresses, sandbox_addresses;  // e.g. an IPv4 /30 and an IPv6 /64
  std::vector<LinkAddress> sandbox_gateways;  // default routes (one per family) via the host side
};

// Creates the pair (NLM_F_EXCL: an existing host_name fails with the error's
// error_number() == EEXIST, so that the caller can pick another name; so
// would an existing sandbox_name, which a fresh namespace does not have), then
// addresses the host side and brings it up. On a failure after the pair
// exists, the pair is deleted again.
core::Status create_veth(const VethPlan& plan);

// route_socket: a NETLINK_ROUTE socket opened in the sandbox's namespace; it
// is used (bound first if it is not yet) and left open. Adds the sandbox
// side's addresses (IPv6 ones with IFA_F_NODAD, usable at once), brings the
// link up and adds a default route through each gateway.
core::Status configure_sandbox_side(int route_socket, const VethPlan& plan);

// Deletes a link of the caller's namespace (a veth's peer goes with it). A
// link that is gone already is success.
core::Status delete_link(const std::string& name);

// The names of the caller's namespace's links that start with `prefix`.
core::Result<std::vector<std::string>> links_with_prefix(std::string_view prefix);

}  // namespace pulsebox::linux_api
