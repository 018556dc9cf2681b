// Starting a sandbox from a LaunchPlan: clone3 (or clone) into the plan's
// namespaces with a pidfd, id maps written from here, then "go".
#pragma once

#include <sys/types.h>

#include <functional>

#include "core/result.h"
#include "core/unique_fd.h"
#include "runtime/launch_plan.h"

namespace pulsebox::runtime {

struct LaunchedSandbox {
  pid_t pid = -1;        // init, as seen from here
  core::UniqueFd pidfd;  // init's pidfd
  core::UniqueFd channel;
};

// plan.channel_fd, stdout_fd, stderr_fd are the child's ends; the caller
// closes its copies of the pipe write ends after this returns. On error the
// child (if any) has been killed and reaped.
// `before_go` runs after the id maps are written and before the child does
// anything (it waits for "go"): the place to move it into cgroups.
// `in_cgroup` says clone3 already created it in plan.cgroup_fd.
using BeforeGo = std::function<core::Status(pid_t pid, bool in_cgroup)>;
core::Result<LaunchedSandbox> launch_sandbox(LaunchPlan& plan, core::UniqueFd supervisor_end,
                                             const BeforeGo& before_go = {});

}  // namespace pulsebox::runtime
