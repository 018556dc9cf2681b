// (Not named seccomp.h: -Isrc would shadow <linux/seccomp.h>.)
// Installing a compiled seccomp filter: the child's last step before execve.
#pragma once

#include <linux/filter.h>

namespace pulsebox::linux_api {

// seccomp(SECCOMP_SET_MODE_FILTER) with `program`; with `want_listener`, the
// new listener fd is stored in *listener_fd. Needs no_new_privs (or
// CAP_SYS_ADMIN). Returns 0 or the errno.
int install_seccomp_filter(const sock_fprog& program, bool want_listener,
                           int* listener_fd) noexcept;

}  // namespace pulsebox::linux_api
