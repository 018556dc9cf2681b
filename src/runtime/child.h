// The sandbox's init process and the command process (see launch_plan.h).
// Called in the child of clone(); never returns. Failures are sent on
// plan.channel_fd as {stage, errno, detail}.
#pragma once

#include "runtime/launch_plan.h"

namespace pulsebox::runtime {

[[noreturn]] void run_sandbox_init(const LaunchPlan& plan) noexcept;

}  // namespace pulsebox::runtime
