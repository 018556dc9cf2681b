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

namespace {

// capset(2)'s version 3 structures (64 capability bits in two words).
struct CapHeader {
  std::uint32_t version;
  int pid;
};
struct CapData {
  std::uint32_t effective, permitted, inheritable;
};
constexpr std::uint32_t kCapabilityVersion3 = 0x20080522;

}  // namespace

int clear_process_capabilities() noexcept {
  CapHeader header{kCapabilityVersion3, 0};
  CapData none[2] = {};
  return raw_error(raw(SYS_capset, &header, none));
}

int drop_bounding_except(std::uint64_t keep, int last_capability) noexcept {
  for (int cap = 0; cap <= last_capability && cap < 64; ++cap) {
    if ((keep >> cap) & 1) continue;
    const int error = raw_error(raw(SYS_prctl, PR_CAPBSET_DROP, cap, 0, 0, 0));
    if (error != 0 && error != EINVAL) return error;  // EINVAL: not a capability here
  }
  return 0;
}

int apply_process_capabilities(const CapabilitySets& sets, int last_capability) noexcept {
  CapHeader header{kCapabilityVersion3, 0};
  const auto low = [](std::uint64_t bits) { return static_cast<std::uint32_t>(bits); };
  const auto high = [](std::uint64_t bits) { return static_cast<std::uint32_t>(bits >> 32); };
  CapData data[2] = {{low(sets.effective), low(sets.permitted), low(sets.inheritable)},
                     {high(sets.effective), high(sets.permitted), high(sets.inheritable)}};
  if (const int e = raw_error(raw(SYS_capset, &header, data)); e != 0) return e;
  if (const int e = raw_error(raw(SYS_prctl, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0));
      e != 0) {
    return e;
  }
  // A raise needs the bit in both the permitted and the inheritable set.
  for (int cap = 0; cap <= last_capability && cap < 64; ++cap) {
    if (((sets.ambient >> cap) & 1) == 0) continue;
    if (const int e = raw_error(raw(SYS_prctl, PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, cap, 0, 0));
        e != 0) {
      return e;
    }
  }
  return 0;
}

}  // namespace pulsebox::linux_api
