// What the native and host backends say alike about how they enforce a
// policy: the capabilities both implement the same way, and the rlimit
// stand-ins the native backend also falls back to without cgroups.
#pragma once

#include <string>

#include "pulsebox/backend.h"

namespace pulsebox::backends {

// pulsebox reads all output and stops `what` ("the sandbox") at the cap.
Capability output_capability(const std::string& what);
Capability open_files_capability();
// SecretMode::AllowAll: every host variable is passed, as asked.
Capability all_secrets_passed_capability();
// RLIMIT_DATA / RLIMIT_CPU: per process, not for the whole sandbox. `why_not`
// is appended to the reason (what keeps the real limit from being used).
Capability per_process_memory_capability(const std::string& why_not, const std::string& fix);
Capability per_process_cpu_time_capability(const std::string& why_not, const std::string& fix);

}  // namespace pulsebox::backends
