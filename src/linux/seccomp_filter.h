// (Not named seccomp.h: -Isrc would shadow <linux/seccomp.h>.)
// Installing a compiled seccomp filter: the child's last step before execve.
#pragma once

#include <linux/filter.h>

namespace pulsebox::linux_api {

// seccomp(SECCOMP_SET_MODE_FILTER) with `program`; with `want_listener`, the
// new listener fd is stored in *listener_fd. `load_flags` are the profile's
// own (SECCOMP_FILTER_FLAG_LOG, _SPEC_ALLOW, _TSYNC). Needs no_new_privs (or
// CAP_SYS_ADMIN). Returns 0 or the errno.
int install_seccomp_filter(const sock_fprog& program, bool want_listener, int* listener_fd,
                           unsigned load_flags = 0) noexcept;

}  // namespace pulsebox::linux_api
