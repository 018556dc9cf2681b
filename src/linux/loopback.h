// Bringing up the loopback interface of a fresh network namespace.
#pragma once

namespace pulsebox::linux_api {

// Child side: one socket and two ioctls. Returns 0 or the errno.
int bring_loopback_up() noexcept;

}  // namespace pulsebox::linux_api
