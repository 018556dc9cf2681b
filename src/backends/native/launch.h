// The shape of a launch, as text: what init is given before PlanReady (the
// namespaces, ids, cgroup limits and every base mount step), in
// length-prefixed fields so no value can run into the next. Two launches of
// the same shape give init the same sandbox up to its workspace.
#pragma once

#include <string>

#include "backends/native/sandbox_run.h"
#include "linux/cgroup.h"
#include "runtime/launch_plan.h"

namespace pulsebox::backends::native {

// What a spec asks for that a shape depends on (its id aside), as text: how
// a run finds a sandbox started ahead for it at once. Only a first match:
// the sandbox's shape is compared with shape_of() before its command starts.
std::string spec_key(const LaunchSpec& spec);

std::string shape_text(const runtime::LaunchPlan& plan, const linux_api::CgroupSettings& settings,
                       bool idmapped_workspace);

}  // namespace pulsebox::backends::native
