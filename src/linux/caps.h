// Dropping every capability, with libcap. The parent prepares (libcap
// allocates); the child only calls the functions below, which are prctl(2)
// and capset(2) underneath.
#pragma once

#include <sys/capability.h>

namespace pulsebox::linux_api {

struct CapabilityDrop {
  cap_t empty = nullptr;  // all three sets clear
  int last_capability = 0;
};

// Parent side. The returned object lives as long as the plan.
CapabilityDrop prepare_capability_drop();
void release_capability_drop(CapabilityDrop& drop);

// Child side, in this order: bounding and ambient sets first (dropping the
// bounding set needs CAP_SETPCAP), then the uid switch, then the process's
// own sets. Each returns 0 or the errno.
int drop_bounding_and_ambient(const CapabilityDrop& drop) noexcept;
int clear_process_capabilities(const CapabilityDrop& drop) noexcept;

}  // namespace pulsebox::linux_api
