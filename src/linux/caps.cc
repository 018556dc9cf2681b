#include "linux/caps.h"

#include <sys/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include <cerrno>
#include <cstdint>

#include "linux/syscalls.h"

namespace pulsebox::linux_api {

CapabilityDrop prepare_capability_drop() {
  CapabilityDrop drop;
  drop.last_capability = static_cast<int>(::cap_max_bits()) - 1;
  return drop;
}

int drop_bounding_and_ambient(const CapabilityDrop& drop) noexcept {
  for (int cap = 0; cap <= drop.last_capability; ++cap) {
    const int error = raw_error(raw(SYS_prctl, PR_CAPBSET_DROP, cap, 0, 0, 0));
    if (error != 0 && error != EINVAL) return error;  // EINVAL: not a capability here
  }
  return raw_error(raw(SYS_prctl, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0));
}

int clear_process_capabilities() noexcept {
  // capset(2)'s version 3 structures (64 capability bits in two words).
  struct Header {
    std::uint32_t version;
    int pid;
  } header{0x20080522, 0};
  struct Data {
    std::uint32_t effective, permitted, inheritable;
  } none[2] = {};
  return raw_error(raw(SYS_capset, &header, none));
}

}  // namespace pulsebox::linux_api
