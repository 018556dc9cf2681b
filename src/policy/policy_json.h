// Loading and saving the action policy's JSON form. JSON library exceptions
// stop here: every problem becomes an Error naming the source, the field path
// and what was expected.
#pragma once

#include <string>
#include <string_view>

#include "core/result.h"
#include "pulsebox/policy.h"

namespace pulsebox::policy {

core::Result<ActionPolicy> parse_policy_json(std::string_view text, std::string_view source_name);
core::Result<ActionPolicy> load_policy_file(const std::string& path);
std::string policy_to_json(const ActionPolicy& policy);

}  // namespace pulsebox::policy
