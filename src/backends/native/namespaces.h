// The namespaces every native sandbox gets (the network namespace too unless
// the run shares the host's, --net all). The cgroup namespace is made by
// the command once it is in its cgroups (LaunchPlan::new_cgroup_namespace).
#pragma once

#include <sched.h>

#include <cstdint>

namespace pulsebox::backends::native {

inline constexpr std::uint64_t kSandboxNamespaces =
    CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS;

}  // namespace pulsebox::backends::native
