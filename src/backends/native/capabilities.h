// How strongly the native backend enforces each part of a policy on this
// host, and why: the texts `pulsebox capabilities` and the enforcement
// verdicts show. Limits depend on the host's cgroups (linux/cgroup.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "linux/cgroup.h"
#include "pulsebox/backend.h"

namespace pulsebox::backends::native {

// The size of the run's tmpfs for its changes: the smaller of --disk
// (disk_bytes) and the reference's working_directory_bytes; nullopt: the
// changes go to the state directory, unlimited.
std::optional<std::uint64_t> changes_size_limit(const ResourcePolicy& limits);

Capability secrets_capability(const SecretPolicy& policy);
Capability filesystem_capability();
Capability limit_capability(LimitKind kind, const linux_api::CgroupHost& host);
Capability syscall_capability(const std::string& profile);
Capability process_containment_capability();

}  // namespace pulsebox::backends::native
