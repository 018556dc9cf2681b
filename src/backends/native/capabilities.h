// How strongly the native backend enforces each part of a policy on this
// host, and why: the texts `pulsebox capabilities` and the enforcement
// verdicts show. Limits depend on the host's cgroups (linux/cgroup.h).
#pragma once

#include <string>

#include "linux/cgroup.h"
#include "pulsebox/backend.h"

namespace pulsebox::backends::native {

Capability network_capability(const NetworkPolicy& policy);
Capability secrets_capability(const SecretPolicy& policy);
Capability filesystem_capability();
Capability limit_capability(LimitKind kind, const linux_api::CgroupHost& host);
Capability syscall_capability(const std::string& profile);
Capability process_containment_capability();

}  // namespace pulsebox::backends::native
