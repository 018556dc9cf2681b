// libFuzzer target: the seccomp profile parser (and the line scanner behind
// its messages) must never crash or throw; what it accepts must compile or be
// refused with an error, never abort libseccomp.
#include <cstdint>
#include <string_view>

#include "seccomp/compiler.h"
#include "seccomp/profile.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto parsed = pulsebox::seccomp::parse_profile(text, "fuzz");
  if (!parsed.ok()) return 0;
  (void)pulsebox::seccomp::compile(parsed.value());
  return 0;
}
