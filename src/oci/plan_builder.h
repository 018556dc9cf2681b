// From a bundle's config.json (oci/spec) to the container process's plan
// (oci/launch/container_plan.h): pure data, no system change. create and
// `run` fill PlanInputs with the descriptors they opened and pass the plan
// to spawn_container.
//
//   PB_TRY(spec, spec::read_spec(bundle));
//   PlanInputs inputs;  inputs.exec_fifo_fd = ...; inputs.cgroup_fd = cgroup.unified_fd();
//   PB_TRY(plan, build_container_plan(spec, inputs));
//   PB_TRY(limits, cgroup_resources(spec.linux.resources));
//
// What the launcher cannot do yet is refused here, naming the config.json
// path and what to do, before anything is made (design §3: nothing is
// silently ignored).
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/result.h"
#include "oci/cgroups.h"
#include "oci/launch/container_plan.h"
#include "oci/spec/spec.h"

namespace pulsebox::oci {

// One of the container's own cgroup leaves as its `type: cgroup` mount
// shows it: `name` is the directory under the mount point ("memory",
// "unified"; "" on a cgroup v2 host, where the leaf is the mount itself).
struct CgroupView {
  std::string name;
  std::string leaf;  // host path
};

// What create adds to the config: the descriptors it opened (all -1 when
// absent) and its flags.
struct PlanInputs {
  int stdio[3] = {-1, -1, -1};
  int preserved_fds = 0;
  int exec_fifo_fd = -1;
  int exec_fifo_writer_fd = -1;
  int console_socket_fd = -1;
  int cgroup_fd = -1;
  std::vector<int> cgroup_task_fds;  // ContainerCgroup::self_join_fds()
  bool new_session_keyring = true;   // --no-new-keyring clears it
  // Whether the container runs in a user namespace is read from the spec;
  // this says whether devices may be made with mknod (real root) or must be
  // bound from the host. Tests set it; create takes geteuid() == 0.
  bool can_mknod = true;
  // The leaves create made; a `type: cgroup` mount shows these and nothing
  // else of the host's hierarchies (runc's layout without a cgroup
  // namespace: a read-only tmpfs with one read-only bind per hierarchy).
  std::vector<CgroupView> cgroup_views;
  // mounts[i] with `tmpcopyup`: the detached tmpfs create filled
  // (tmpcopyup.h), attached in place of a new one.
  std::map<std::size_t, int> copy_up_fds;
  // The container's ID, for the state createContainer and startContainer
  // hooks read.
  std::string container_id;
  // linux.namespaces[i] with a path: the namespace create opened and
  // checked (launch/join.h), joined in place of a new one.
  std::map<std::size_t, int> namespace_fds;
};

// The indexes of the mounts with `tmpcopyup`, for create to fill.
std::vector<std::size_t> copy_up_mounts(const spec::Spec& spec);
// A mount's flags (MS_NOSUID, ...) and filesystem data, as the plan reads them.
core::Result<std::pair<unsigned long, std::string>> mount_flags_and_data(const spec::Spec& spec,
                                                                         std::size_t index);

// The plan for `spec` (read_spec's output). The program is looked up along
// the PATH of process.env (runc's default PATH when it has none).
core::Result<launch::ContainerPlan> build_container_plan(const spec::Spec& spec,
                                                         const PlanInputs& inputs);

// exec's process (design §1.6): `process` (exec --process F, or the inline
// flags) with the container's seccomp profile and, when the process gives
// none, its rlimits, from the container's config.json copy. No mounts and
// no namespaces are made; the caller sets join_pidfd.
core::Result<launch::ContainerPlan> build_exec_plan(const spec::Spec& spec,
                                                    const spec::Process& process,
                                                    const PlanInputs& inputs);

// The cgroup device rules the container gets: a deny of everything, then
// linux.resources.devices in order, then an allow of mknod ("m") for any
// character and block node, an allow (rwm) for each default device (null,
// zero, full, random, urandom, tty, console, ptmx, the pts) and each
// linux.devices entry, as runc appends them.
std::vector<spec::DeviceRule> device_rules(const spec::Spec& spec);

// linux.resources as the cgroup package applies them. A limit it does not
// apply yet is refused naming its path; the device rules are left to
// device_rules().
core::Result<CgroupResources> cgroup_resources(const spec::Resources& resources);

}  // namespace pulsebox::oci
