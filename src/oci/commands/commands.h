// The OCI runtime's commands that work from the state directory alone
// (design §1.4-1.5): state, kill, delete, list, reconcile. The CLI
// (src/cli/cmd_oci.cc) parses flags and prints; these do the work.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "oci/launch/spawn.h"
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

// `create` and `run`'s options (runc's flags).
struct CreateOptions {
  std::string id;
  std::string bundle = ".";
  std::string pid_file;
  std::string console_socket;
  int preserve_fds = 0;
  bool no_new_keyring = false;
  // Where create reports what it does differently from the config and
  // still runs (as runc does); unset: nowhere.
  std::function<void(std::string_view)> warn;
};

// A container set up and waiting on its exec fifo (design §1.3 steps 1-8):
// the process is this one's child until this one exits.
struct Created {
  std::string id;
  launch::ContainerProcess process;
  std::string enforced;  // the enforcement report (§4), for the log
};

// Makes the container. On any failure what was made is removed again (the
// process killed, the cgroup leaves and <id>/ removed) and the error says
// which step failed.
core::Result<Created> create(StateStore& store, const CreateOptions& options);

// `start ID`: writes the byte the created container waits for on its exec
// fifo (and removes the fifo, so the container reads as running).
// "container ID is not created" otherwise.
core::Status start(StateStore& store, std::string_view id);

// `run`: create, start, wait for the process, delete (unless `keep`);
// returns the container's exit status (128 + n after signal n). TERM, INT,
// HUP, QUIT, USR1, USR2 and WINCH sent to this process meanwhile go on to
// the container's. With `detach` it returns 0 once started.
core::Result<int> run(StateStore& store, const CreateOptions& options, bool detach, bool keep);

// `exec`'s options (runc's flags): a process file (--process, as engines
// pass it) or the inline program and changes to the container's process.
struct ExecOptions {
  std::string id;
  std::string process_file;
  std::vector<std::string> args;  // inline form
  std::string cwd;
  std::vector<std::string> env;
  std::string user;  // UID[:GID]
  std::vector<std::string> caps;
  bool tty = false;
  bool no_new_privileges = false;
  bool detach = false;
  std::string pid_file;
  std::string console_socket;
  int preserve_fds = 0;
};

// Runs a process in a created or running container (design §1.6); "container
// ID is not running" otherwise. With `detach` it returns 0 once the process
// runs (its pid in the pid file); else it waits, forwarding TERM, INT, HUP,
// QUIT, USR1, USR2 and WINCH, and returns its status (128 + n for signal n).
core::Result<int> exec(StateStore& store, const ExecOptions& options);

// Runs the delete steps for every container whose lock is free and whose
// status is stopped (records without a pid, directories without a record
// included), and the staging directories of creates killed before their
// rename. Returns what it removed; `problems` gets one line per
// container that could not be.
std::vector<std::string> reconcile(StateStore& store, std::vector<std::string>& problems);

}  // namespace pulsebox::oci::commands
