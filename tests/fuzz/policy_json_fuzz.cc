// libFuzzer target: the policy JSON loader must never crash or throw, and
// whatever it accepts must survive a save/load round trip unchanged.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "policy/policy_json.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto parsed = pulsebox::policy::parse_policy_json(text, "fuzz");
  if (!parsed.ok()) return 0;
  const std::string saved = pulsebox::policy::policy_to_json(*parsed);
  auto reloaded = pulsebox::policy::parse_policy_json(saved, "fuzz-roundtrip");
  if (!reloaded.ok() || reloaded->rules() != parsed->rules()) std::abort();
  for (pulsebox::ActionType action : pulsebox::kAllActionTypes) {
    if (reloaded->default_for(action) != parsed->default_for(action)) std::abort();
    (void)parsed->evaluate(action, text);
  }
  return 0;
}
