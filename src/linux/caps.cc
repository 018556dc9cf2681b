#include "linux/caps.h"

#include <sys/prctl.h>

#include <cerrno>

namespace pulsebox::linux_api {

CapabilityDrop prepare_capability_drop() {
  CapabilityDrop drop;
  drop.empty = ::cap_init();
  drop.last_capability = static_cast<int>(::cap_max_bits()) - 1;
  return drop;
}

void release_capability_drop(CapabilityDrop& drop) {
  if (drop.empty != nullptr) ::cap_free(drop.empty);
  drop.empty = nullptr;
}

int drop_bounding_and_ambient(const CapabilityDrop& drop) noexcept {
  for (int cap = 0; cap <= drop.last_capability; ++cap) {
    if (::cap_drop_bound(static_cast<cap_value_t>(cap)) != 0 && errno != EINVAL) return errno;
  }
  if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0) return errno;
  return 0;
}

int clear_process_capabilities(const CapabilityDrop& drop) noexcept {
  if (drop.empty == nullptr) return ENOMEM;
  return ::cap_set_proc(drop.empty) == 0 ? 0 : errno;
}

}  // namespace pulsebox::linux_api
