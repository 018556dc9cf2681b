// Driving oci/launch/spawn.h by hand, without the CLI: a busybox root, a
// plan that works as root (no user namespace) and as an ordinary user (a
// user namespace mapping uid and gid 0 to the caller's), and one launch
// through the whole handshake with the exec fifo.
#pragma once

#include <filesystem>
#include <string>

#include "oci/launch/container_plan.h"

namespace pulsebox::testing {

inline constexpr const char* kBusybox = "/bin/busybox";

// Empty when the launch can run here, else why not (for a skip).
std::string oci_launch_unavailable();

// `root` gets bin/busybox (the static host one) and links for the applets
// the tests use, and /proc, /dev, /tmp directories.
void make_busybox_root(const std::filesystem::path& root);

// /bin/sh -c `script` in `root`: new pid, mount, uts, ipc and network
// namespaces (plus a user namespace for an ordinary user), /proc, a tmpfs
// /dev with the host's /dev/null bound in, every capability dropped.
oci::launch::ContainerPlan busybox_plan(const std::filesystem::path& root,
                                        const std::string& script);

struct OciLaunch {
  std::string setup_error;  // the failed step, as "stage: detail (errno N)"
  int setup_errno = 0;
  std::string setup_stage;
  std::string before_start;  // output seen before the fifo was written
  std::string output;        // stdout and stderr after start
  int wait_status = -1;
  std::string console_name;  // with a console: the name sent with the master
};

// spawn, Go, Ready, Detach; then the fifo is written and the output read
// to its end. A failed setup is returned as data (the process is killed).
// With `console`, a console socket is passed, the master received on it,
// and the output read from the master.
OciLaunch launch_busybox(oci::launch::ContainerPlan plan, bool console = false);

// The pseudo-terminal master (and its name) a container sends on a console
// socket, waited for a bounded time; -1 when none came.
int receive_master(int socket, std::string& name);

// A devpts at /dev/pts and /dev/ptmx leading to it, for a console.
void add_devpts(oci::launch::ContainerPlan& plan);

}  // namespace pulsebox::testing
