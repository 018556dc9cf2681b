// Netlink sockets passed in from another network namespace (init opens them
// in the sandbox's namespace and hands them to the supervisor): a socket
// keeps the namespace it was created in, so requests sent on it act there.
#pragma once

#include <string>

#include "core/result.h"
#include "core/unique_fd.h"

namespace pulsebox::linux_api {

// Checks that `fd` is a netlink socket of `protocol` (NETLINK_ROUTE,
// NETLINK_NETFILTER), binds it if it is not bound yet (libnl and libmnl need
// its port id) and returns a close-on-exec duplicate: the libraries close the
// socket they are given, and the caller keeps `fd`.
core::Result<core::UniqueFd> adopt_netlink_socket(int fd, int protocol, const std::string& stage);

// A std::unique_ptr deleter calling the C library's own free function for
// its objects (libnl's rtnl_link_put, libnftnl's nftnl_rule_free, ...).
template <auto Free>
struct FreeWith {
  template <class T>
  void operator()(T* object) const {
    Free(object);
  }
};

}  // namespace pulsebox::linux_api
