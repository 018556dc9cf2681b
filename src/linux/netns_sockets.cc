#include "linux/netns_sockets.h"

#include <linux/netlink.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "linux/syscalls.h"

namespace pulsebox::linux_api {

// Raw system calls: init shares the supervisor's memory (linux/clone.h).
long open_loopback_listener(std::uint16_t port) noexcept {
  const long fd = raw(SYS_socket, AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return fd;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "network order below");
  address.sin_port = __builtin_bswap16(port);
  address.sin_addr.s_addr = __builtin_bswap32(INADDR_LOOPBACK);
  long rc = raw(SYS_bind, fd, &address, sizeof address);
  if (rc == 0) rc = raw(SYS_listen, fd, 128);
  if (rc < 0) {
    raw(SYS_close, fd);
    return rc;
  }
  return fd;
}

long open_netlink_socket(int protocol) noexcept {
  return raw(SYS_socket, AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, protocol);
}

}  // namespace pulsebox::linux_api
