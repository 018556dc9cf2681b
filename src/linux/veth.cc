#include "linux/veth.h"

#include <linux/if_addr.h>
#include <net/if.h>
#include <netlink/errno.h>
#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/link/veth.h>
#include <netlink/route/route.h>
#include <netlink/socket.h>

#include <cerrno>
#include <memory>

#include "linux/netlink_socket.h"

namespace pulsebox::linux_api {
namespace {

const std::string kStage = "veth";

using LinkPtr = std::unique_ptr<rtnl_link, FreeWith<rtnl_link_put>>;
using AddrPtr = std::unique_ptr<rtnl_addr, FreeWith<rtnl_addr_put>>;
using NlAddrPtr = std::unique_ptr<nl_addr, FreeWith<nl_addr_put>>;
using RoutePtr = std::unique_ptr<rtnl_route, FreeWith<rtnl_route_put>>;
using CachePtr = std::unique_ptr<nl_cache, FreeWith<nl_cache_free>>;

// A libnl socket that remembers the kernel's errno of the last failed
// request: libnl folds errnos into its own codes (ENODEV and ENOENT both
// become NLE_OBJ_NOTFOUND), and callers need the exact one (EEXIST, ENODEV).
class RouteSocket {
 public:
  static core::Result<std::unique_ptr<RouteSocket>> own() {
    auto socket = std::unique_ptr<RouteSocket>(new RouteSocket);
    if (!socket->sock_) return core::Error(core::ErrorKind::kResource, kStage, "nl_socket_alloc");
    if (const int rc = nl_connect(socket->sock_, NETLINK_ROUTE); rc < 0)
      return core::Error(core::ErrorKind::kIo, kStage,
                         std::string("opening a NETLINK_ROUTE socket: ") + nl_geterror(rc));
    return socket;
  }

  static core::Result<std::unique_ptr<RouteSocket>> adopt(int fd) {
    PB_TRY(copy, adopt_netlink_socket(fd, NETLINK_ROUTE, kStage));
    auto socket = std::unique_ptr<RouteSocket>(new RouteSocket);
    if (!socket->sock_) return core::Error(core::ErrorKind::kResource, kStage, "nl_socket_alloc");
    if (const int rc = nl_socket_set_fd(socket->sock_, NETLINK_ROUTE, copy.get()); rc < 0)
      return core::Error(core::ErrorKind::kIo, kStage,
                         std::string("using the passed NETLINK_ROUTE socket: ") + nl_geterror(rc));
    copy.release();  // nl_socket_free closes it
    return socket;
  }

  ~RouteSocket() {
    if (sock_) nl_socket_free(sock_);
  }
  RouteSocket(const RouteSocket&) = delete;
  RouteSocket& operator=(const RouteSocket&) = delete;

  // Runs one request (a libnl call returning 0 or -NLE_*); on failure the
  // Error carries the kernel's errno when the kernel refused it.
  template <class Call>
  core::Status run(const std::string& what, Call&& call) {
    kernel_errno_ = 0;
    const int rc = call(sock_);
    if (rc >= 0) return core::ok_status();
    if (kernel_errno_ != 0) return core::Error::from_errno(kStage, what, kernel_errno_);
    return core::Error(core::ErrorKind::kIo, kStage, what + ": " + nl_geterror(rc));
  }

  int kernel_errno() const { return kernel_errno_; }
  nl_sock* get() { return sock_; }

 private:
  RouteSocket() : sock_(nl_socket_alloc()) {
    if (sock_) nl_socket_modify_err_cb(sock_, NL_CB_CUSTOM, &RouteSocket::on_error, &kernel_errno_);
  }

  static int on_error(sockaddr_nl*, nlmsgerr* error, void* arg) {
    *static_cast<int*>(arg) = -error->error;
    return NL_STOP;
  }

  nl_sock* sock_;
  int kernel_errno_ = 0;
};

core::Result<NlAddrPtr> to_nl_addr(const LinkAddress& address) {
  const std::size_t length = address_length(address.family);
  if (length == 0 || address.prefix < 0 || address.prefix > static_cast<int>(length * 8))
    return core::Error(core::ErrorKind::kInvalidInput, kStage,
                       "an address of family " + std::to_string(address.family) + " with prefix " +
                           std::to_string(address.prefix));
  NlAddrPtr built(nl_addr_build(address.family, address.bytes.data(), length));
  if (!built) return core::Error(core::ErrorKind::kResource, kStage, "nl_addr_build");
  nl_addr_set_prefixlen(built.get(), address.prefix);
  return built;
}

core::Result<int> link_index(RouteSocket& socket, const std::string& name) {
  rtnl_link* found = nullptr;
  PB_CHECK(socket.run("finding link " + name, [&](nl_sock* sock) {
    return rtnl_link_get_kernel(sock, 0, name.c_str(), &found);
  }));
  LinkPtr link(found);
  return rtnl_link_get_ifindex(link.get());
}

core::Status add_addresses(RouteSocket& socket, int index, const std::string& name,
                           const std::vector<LinkAddress>& addresses) {
  for (const LinkAddress& address : addresses) {
    PB_TRY(local, to_nl_addr(address));
    AddrPtr request(rtnl_addr_alloc());
    if (!request) return core::Error(core::ErrorKind::kResource, kStage, "rtnl_addr_alloc");
    rtnl_addr_set_ifindex(request.get(), index);
    rtnl_addr_set_family(request.get(), address.family);
    if (const int rc = rtnl_addr_set_local(request.get(), local.get()); rc < 0)
      return core::Error(core::ErrorKind::kInternal, kStage, nl_geterror(rc));
    rtnl_addr_set_prefixlen(request.get(), address.prefix);
    // Without duplicate address detection an IPv6 address is usable at once
    // (a tentative one cannot be a source or a gateway); the link is ours.
    if (address.family == AF_INET6) rtnl_addr_set_flags(request.get(), IFA_F_NODAD);
    PB_CHECK(socket.run("adding an address to " + name,
                        [&](nl_sock* sock) { return rtnl_addr_add(sock, request.get(), 0); }));
  }
  return core::ok_status();
}

core::Status bring_up(RouteSocket& socket, int index, const std::string& name) {
  LinkPtr original(rtnl_link_alloc());
  LinkPtr change(rtnl_link_alloc());
  if (!original || !change)
    return core::Error(core::ErrorKind::kResource, kStage, "rtnl_link_alloc");
  rtnl_link_set_ifindex(original.get(), index);
  rtnl_link_set_flags(change.get(), IFF_UP);
  return socket.run("bringing " + name + " up", [&](nl_sock* sock) {
    return rtnl_link_change(sock, original.get(), change.get(), 0);
  });
}

core::Status add_default_route(RouteSocket& socket, int index, const LinkAddress& gateway) {
  LinkAddress any{.family = gateway.family, .bytes = {}, .prefix = 0};
  PB_TRY(destination, to_nl_addr(any));
  LinkAddress gateway_host = gateway;
  gateway_host.prefix = static_cast<int>(address_length(gateway.family) * 8);
  PB_TRY(via, to_nl_addr(gateway_host));
  RoutePtr route(rtnl_route_alloc());
  rtnl_nexthop* hop = rtnl_route_nh_alloc();
  if (!route || !hop) {
    if (hop) rtnl_route_nh_free(hop);
    return core::Error(core::ErrorKind::kResource, kStage, "rtnl_route_alloc");
  }
  rtnl_route_set_family(route.get(), static_cast<std::uint8_t>(gateway.family));
  rtnl_route_set_table(route.get(), RT_TABLE_MAIN);
  rtnl_route_set_protocol(route.get(), RTPROT_STATIC);
  if (const int rc = rtnl_route_set_dst(route.get(), destination.get()); rc < 0)
    return core::Error(core::ErrorKind::kInternal, kStage, nl_geterror(rc));
  rtnl_route_nh_set_ifindex(hop, index);
  rtnl_route_nh_set_gateway(hop, via.get());
  rtnl_route_add_nexthop(route.get(), hop);  // the route owns it now
  return socket.run(
      std::string("adding the default ") + (gateway.family == AF_INET ? "IPv4" : "IPv6") + " route",
      [&](nl_sock* sock) { return rtnl_route_add(sock, route.get(), NLM_F_EXCL); });
}

}  // namespace

core::Status create_veth(const VethPlan& plan) {
  if (plan.host_name.empty() || plan.host_name.size() >= IFNAMSIZ || plan.sandbox_name.empty() ||
      plan.sandbox_name.size() >= IFNAMSIZ || plan.sandbox_pid <= 0)
    return core::Error(core::ErrorKind::kInvalidInput, kStage,
                       "a veth plan needs two interface names of 1 to 15 bytes and a sandbox pid");
  PB_TRY(socket, RouteSocket::own());
  PB_CHECK(socket->run("creating veth " + plan.host_name, [&](nl_sock* sock) {
    return rtnl_link_veth_add(sock, plan.host_name.c_str(), plan.sandbox_name.c_str(),
                              plan.sandbox_pid);
  }));
  auto configure = [&]() -> core::Status {
    PB_TRY(index, link_index(*socket, plan.host_name));
    PB_CHECK(add_addresses(*socket, index, plan.host_name, plan.host_addresses));
    return bring_up(*socket, index, plan.host_name);
  };
  core::Status configured = configure();
  if (!configured.ok()) {
    (void)delete_link(plan.host_name);  // the first error is the one to report
    return configured;
  }
  return core::ok_status();
}

core::Status configure_sandbox_side(int route_socket, const VethPlan& plan) {
  PB_TRY(socket, RouteSocket::adopt(route_socket));
  PB_TRY(index, link_index(*socket, plan.sandbox_name));
  PB_CHECK(add_addresses(*socket, index, plan.sandbox_name, plan.sandbox_addresses));
  PB_CHECK(bring_up(*socket, index, plan.sandbox_name));
  for (const LinkAddress& gateway : plan.sandbox_gateways)
    PB_CHECK(add_default_route(*socket, index, gateway));
  return core::ok_status();
}

core::Status delete_link(const std::string& name) {
  PB_TRY(socket, RouteSocket::own());
  LinkPtr link(rtnl_link_alloc());
  if (!link) return core::Error(core::ErrorKind::kResource, kStage, "rtnl_link_alloc");
  rtnl_link_set_name(link.get(), name.c_str());
  core::Status deleted = socket->run(
      "deleting link " + name, [&](nl_sock* sock) { return rtnl_link_delete(sock, link.get()); });
  if (!deleted.ok() && socket->kernel_errno() == ENODEV) return core::ok_status();
  return deleted;
}

core::Result<std::vector<std::string>> links_with_prefix(std::string_view prefix) {
  PB_TRY(socket, RouteSocket::own());
  nl_cache* filled = nullptr;
  PB_CHECK(socket->run("listing links", [&](nl_sock* sock) {
    return rtnl_link_alloc_cache(sock, AF_UNSPEC, &filled);
  }));
  CachePtr cache(filled);
  std::vector<std::string> names;
  for (nl_object* object = nl_cache_get_first(cache.get()); object != nullptr;
       object = nl_cache_get_next(object)) {
    const char* name = rtnl_link_get_name(reinterpret_cast<rtnl_link*>(object));
    if (name != nullptr && std::string_view(name).starts_with(prefix)) names.emplace_back(name);
  }
  return names;
}

}  // namespace pulsebox::linux_api
