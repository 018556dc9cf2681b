// The shape of a launch, as text: what init is given before PlanReady (the
// namespaces, ids, cgroup limits and every base mount step), in
// length-prefixed fields so no value can run into the next. Two launches of
// the same shape give init the same sandbox up to its workspace.
#pragma once

#include <string>

#include "linux/cgroup.h"
#include "runtime/launch_plan.h"

namespace pulsebox::backends::native {

std::string shape_text(const runtime::LaunchPlan& plan, const linux_api::CgroupSettings& settings,
                       bool idmapped_workspace);

}  // namespace pulsebox::backends::native
