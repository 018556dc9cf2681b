#include "backends/capability_texts.h"

namespace pulsebox::backends {

Capability output_capability(const std::string& what) {
  return {EnforcementLevel::StronglyEnforced,
          "pulsebox reads all output and stops " + what + " at the cap", ""};
}

Capability open_files_capability() {
  return {EnforcementLevel::StronglyEnforced, "RLIMIT_NOFILE is set for every process", ""};
}

Capability all_secrets_passed_capability() {
  return {EnforcementLevel::StronglyEnforced, "every host variable is passed, as requested", ""};
}

Capability per_process_memory_capability(const std::string& why_not, const std::string& fix) {
  return {EnforcementLevel::PartiallyEnforced,
          "RLIMIT_AS caps each process's address space, not the sandbox's memory" + why_not, fix};
}

Capability per_process_cpu_time_capability(const std::string& why_not, const std::string& fix) {
  return {EnforcementLevel::PartiallyEnforced,
          "RLIMIT_CPU caps each process, not the sandbox" + why_not, fix};
}

}  // namespace pulsebox::backends
