// Dropping every capability. The parent learns how many capabilities this
// kernel has (libcap); the child only makes prctl(2) and capset(2) calls,
// raw (it shares the supervisor's memory, see linux/clone.h).
#pragma once

#include <cstdint>

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

// An OCI container's five capability sets, one bit per capability number.
struct CapabilitySets {
  std::uint64_t bounding = 0, effective = 0, permitted = 0, inheritable = 0, ambient = 0;
};

// Child side, for the OCI order (runc's, design §2.2): drop_bounding_except
// first (it needs CAP_SETPCAP), then PR_SET_KEEPCAPS 1 and the id switch,
// then apply_process_capabilities (capset, then the ambient raises), then
// PR_SET_KEEPCAPS 0. Each returns 0 or the errno.
int drop_bounding_except(std::uint64_t keep, int last_capability) noexcept;
int apply_process_capabilities(const CapabilitySets& sets, int last_capability) noexcept;

}  // namespace pulsebox::linux_api
