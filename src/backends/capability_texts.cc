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
          "RLIMIT_DATA caps each process's private writable memory (heap, anonymous "
          "mappings), not the sandbox's memory; address space reserved but not made writable "
          "(the JVM's, Go's) is not counted, but AddressSanitizer's and ThreadSanitizer's "
          "writable shadow is, so their builds need a memory cgroup" +
              why_not,
          fix};
}

Capability per_process_cpu_time_capability(const std::string& why_not, const std::string& fix) {
  return {EnforcementLevel::PartiallyEnforced,
          "RLIMIT_CPU caps each process, not the sandbox" + why_not, fix};
}

}  // namespace pulsebox::backends
