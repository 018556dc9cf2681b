// Sockets init makes inside the sandbox's network namespace and hands to
// the supervisor (runtime::ChildMessageKind::Network). A socket belongs to
// the namespace it was made in, whoever later uses it.
#pragma once

#include <cstdint>

#include "linux/clone.h"

namespace pulsebox::linux_api {

// Child side: a TCP listener on 127.0.0.1:port. Returns the fd or -errno.
PULSEBOX_CHILD_CODE long open_loopback_listener(std::uint16_t port) noexcept;
// Child side: a netlink socket of `protocol` (NETLINK_ROUTE,
// NETLINK_NETFILTER). Returns the fd or -errno.
PULSEBOX_CHILD_CODE long open_netlink_socket(int protocol) noexcept;

}  // namespace pulsebox::linux_api
