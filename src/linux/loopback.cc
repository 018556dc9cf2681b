#include "linux/loopback.h"

#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "linux/syscalls.h"

namespace pulsebox::linux_api {

// Raw system calls: init shares the supervisor's memory (linux/clone.h).
int bring_loopback_up() noexcept {
  const long fd = raw(SYS_socket, AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return raw_error(fd);
  ifreq request{};
  request.ifr_name[0] = 'l';
  request.ifr_name[1] = 'o';
  int error = raw_error(raw(SYS_ioctl, fd, SIOCGIFFLAGS, &request));
  if (error == 0) {
    request.ifr_flags = static_cast<short>(request.ifr_flags | IFF_UP);
    error = raw_error(raw(SYS_ioctl, fd, SIOCSIFFLAGS, &request));
  }
  raw(SYS_close, fd);
  return error;
}

}  // namespace pulsebox::linux_api
