// Starting a sandbox from a LaunchPlan: clone3 (or clone) into the plan's
// namespaces with a pidfd, id maps written from here, then "go".
#pragma once

#include <sys/types.h>

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
core::Result<LaunchedSandbox> launch_sandbox(LaunchPlan& plan, core::UniqueFd supervisor_end);

}  // namespace pulsebox::runtime
