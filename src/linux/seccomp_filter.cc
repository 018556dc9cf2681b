#include "linux/seccomp_filter.h"

#include <linux/seccomp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "linux/syscalls.h"

namespace pulsebox::linux_api {

int install_seccomp_filter(const sock_fprog& program, bool want_listener, int* listener_fd,
                           unsigned load_flags) noexcept {
  const unsigned flags = load_flags | (want_listener ? SECCOMP_FILTER_FLAG_NEW_LISTENER : 0);
  // Raw: the command shares the supervisor's memory until execve.
  const long rc = raw(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &program);
  if (rc < 0) return raw_error(rc);
  if (want_listener) *listener_fd = static_cast<int>(rc);
  return 0;
}

}  // namespace pulsebox::linux_api
