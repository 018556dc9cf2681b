// pasta (Debian's `passt`): user-mode networking for a rootless sandbox's
// `--net all` and `--net allowlist`. It joins the sandbox's user and network
// namespaces, makes a tap interface there, and carries the sandbox's
// connections out as ordinary sockets of this user on the host. No host port
// is forwarded in or out (-t/-u/-T/-U none), and the gateway is not mapped to
// the host's loopback (--no-map-gw): the host's own services stay out of
// reach as with a veth.
//
// pasta refuses to run as root (it would drop to nobody, which cannot join
// the namespaces of a sandbox root made): root's sandboxes use a veth pair.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>

#include "core/result.h"

namespace pulsebox::backends::native {

// The pasta program, or "" when none is installed.
std::string find_pasta();
// Whether this user may open /dev/net/tun (pasta's tap needs it; udev makes
// it 0666 on a standard Debian system).
bool tun_usable();

// Starts pasta for the sandbox whose init is `sandbox_pid` and waits until
// its interface is configured (its pid file written); pasta ends with this
// process (a parent-death signal) or stop_pasta(). Its messages go to
// `run_dir`/pasta.log, quoted in an error.
core::Result<pid_t> start_pasta(const std::string& program, pid_t sandbox_pid,
                                const std::filesystem::path& run_dir);
// Kills and reaps it (idempotent for -1).
void stop_pasta(pid_t pid);

}  // namespace pulsebox::backends::native
