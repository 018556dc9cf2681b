// libFuzzer target: policy target normalisation (NFC, '\' to '/', lower
// case, drive letter and slashes trimmed) takes any bytes. It always gives
// a name, and that name is well-formed UTF-8 with no backslash, no empty
// component and no slash at either end.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/text.h"
#include "pulsebox/policy.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view target(reinterpret_cast<const char*>(data), size);
  const auto normalized = pulsebox::normalize_policy_target(target);
  if (!normalized) std::abort();
  const std::string& name = *normalized;
  if (!pulsebox::core::is_valid_utf8(name)) std::abort();
  if (name.find('\\') != std::string::npos || name.find("//") != std::string::npos) std::abort();
  if (!name.empty() && (name.front() == '/' || name.back() == '/')) std::abort();
  if (pulsebox::normalize_policy_target(target) != normalized) std::abort();
  return 0;
}
