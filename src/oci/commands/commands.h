// The OCI runtime's commands that work from the state directory alone
// (design §1.4-1.5): state, kill, delete, list, reconcile. The CLI
// (src/cli/cmd_oci.cc) parses flags and prints; these do the work.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "oci/state_store.h"

namespace pulsebox::oci::commands {

// runc's state document of `id`, as one line of JSON text.
core::Result<std::string> state(StateStore& store, std::string_view id);

// `list`: "table" (ID PID STATUS BUNDLE CREATED OWNER) or "json" (an array
// of state documents).
core::Result<std::string> list(StateStore& store, std::string_view format);

// `ps --format json|table ID`: the pids in the container's cgroup, as a JSON
// array (what containerd's `ctr task ps` reads) or one per line under "PID".
core::Result<std::string> processes(StateStore& store, std::string_view id,
                                    std::string_view format);

// Sends `signal` to the container's process through a verified pidfd, or
// with `all` to every process of its cgroup. "container ID is not running"
// unless it is created or running.
core::Status kill(StateStore& store, std::string_view id, int signal, bool all);

// Destroys the container: kills what is left (pidfd and cgroup), waits for
// the process to end, removes the cgroup leaves and the directory. A
// running container needs `force`.
core::Status remove(StateStore& store, std::string_view id, bool force);

// Runs the delete steps for every container whose lock is free and whose
// status is stopped (records without a pid, directories without a record
// included), and the staging directories of creates killed before their
// rename. Returns what it removed; `problems` gets one line per
// container that could not be.
std::vector<std::string> reconcile(StateStore& store, std::vector<std::string>& problems);

}  // namespace pulsebox::oci::commands
