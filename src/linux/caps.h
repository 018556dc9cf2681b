// Dropping every capability. The parent learns how many capabilities this
// kernel has (libcap); the child only makes prctl(2) and capset(2) calls,
// raw (it shares the supervisor's memory, see linux/clone.h).
#pragma once

namespace pulsebox::linux_api {

struct CapabilityDrop {
  int last_capability = 0;
};

// Parent side.
CapabilityDrop prepare_capability_drop();

// Child side, in this order: bounding and ambient sets first (dropping the
// bounding set needs CAP_SETPCAP), then the uid switch, then the process's
// own sets. Each returns 0 or the errno.
int drop_bounding_and_ambient(const CapabilityDrop& drop) noexcept;
int clear_process_capabilities() noexcept;

}  // namespace pulsebox::linux_api
