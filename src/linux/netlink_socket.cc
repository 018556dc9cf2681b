#include "linux/netlink_socket.h"

#include <fcntl.h>
#include <linux/netlink.h>
#include <sys/socket.h>

#include <cerrno>

namespace pulsebox::linux_api {

core::Result<core::UniqueFd> adopt_netlink_socket(int fd, int protocol, const std::string& stage) {
  int actual = -1;
  socklen_t length = sizeof(actual);
  if (::getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &actual, &length) != 0)
    return core::Error::from_errno(stage, "reading the passed netlink socket's protocol");
  sockaddr_nl local{};
  length = sizeof(local);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) != 0)
    return core::Error::from_errno(stage, "reading the passed netlink socket's address");
  if (local.nl_family != AF_NETLINK || actual != protocol)
    return core::Error(
        core::ErrorKind::kInternal, stage,
        "the passed socket is not a netlink socket of protocol " + std::to_string(protocol));
  if (local.nl_pid == 0) {
    sockaddr_nl any{};
    any.nl_family = AF_NETLINK;  // port id 0: the kernel assigns one
    if (::bind(fd, reinterpret_cast<const sockaddr*>(&any), sizeof(any)) != 0)
      return core::Error::from_errno(stage, "binding the passed netlink socket");
  }
  core::UniqueFd copy(::fcntl(fd, F_DUPFD_CLOEXEC, 3));
  if (!copy) return core::Error::from_errno(stage, "duplicating the passed netlink socket");
  return copy;
}

}  // namespace pulsebox::linux_api
