// The OCI container's process from clone to execve (design §2.1): one flat,
// ordered list of raw system calls on the plan's data, no allocation. A
// failed step is sent on `channel` as {stage, errno, detail} and the
// process exits with runtime::kSetupFailed.
#pragma once

#include "oci/launch/container_plan.h"

namespace pulsebox::oci::launch {

[[noreturn]] void run_container_init(const ContainerPlan& plan, int channel) noexcept;

// Step 9 of the list, shared with exec's process (join.h): the bounding
// set, the groups and ids, the capability sets, no_new_privs and seccomp,
// in runc's order. A failure is reported on `channel` and the process exits.
void apply_identity(const ContainerPlan& plan, int channel) noexcept;

}  // namespace pulsebox::oci::launch
