// Device rules on cgroup v2 (design §2.4): v2 has no devices.allow/deny
// files; the kernel asks a BPF_PROG_TYPE_CGROUP_DEVICE program attached to
// the cgroup instead. This is pulsebox's own generator of that program from
// the rule list create builds (plan_builder.h device_rules(): deny all, the
// config's rules in order, the implicit allows).
//
//   PB_TRY(program, device_filter_program(device_rules(spec)));
//   PB_CHECK(attach_device_filter(cgroup.unified_fd(), program));
//
// Semantics, decided per access bit: a request (type, major, minor, access)
// is allowed when, for each of r, w and m it asks for, the LAST rule that
// matches the type, the numbers and that bit is an allow. A rule of type 'a'
// or with -1 numbers matches any. A bit no rule names is denied. For the
// lists runtimes write (deny all, then allows, then denies of single
// devices) cgroup v1's controller decides the same, so the v1 and v2 paths
// enforce one list alike; where v1 would keep an earlier specific allow
// under a later wildcard deny, the later deny wins here (the stricter
// reading, and the one the list's order says).
#pragma once

#include <linux/bpf.h>

#include <vector>

#include "core/result.h"
#include "oci/spec/spec.h"

namespace pulsebox::oci {

// The program for `rules`. An unknown type or access letter, or a number
// above 2^32-1, is refused naming linux.resources.devices.
core::Result<std::vector<bpf_insn>> device_filter_program(
    const std::vector<spec::DeviceRule>& rules);

// Loads `program` (bpf(BPF_PROG_LOAD), type CGROUP_DEVICE) and attaches it
// to the cgroup v2 directory `cgroup_fd` with BPF_F_ALLOW_MULTI, as runc
// does. The program stays with the cgroup; its fd is closed here. Needs
// CAP_SYS_ADMIN (or CAP_BPF with the cgroup's owner's rights).
core::Status attach_device_filter(int cgroup_fd, const std::vector<bpf_insn>& program);

}  // namespace pulsebox::oci
