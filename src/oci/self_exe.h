// The runtime's own binary, out of the container's reach (CVE-2019-5736).
//
// While create, run and exec set a container up, its process is a copy of
// the runtime, and the kernel resolves a script interpreter of
// `/proc/self/exe` in that process: an image can make the runtime's binary
// its own program and then, through /proc/<pid>/exe, write the file the
// host runs next. Like runc and crun, these commands therefore run from a
// binary no container can write: a read-only overlayfs over its directory (root) or
// a sealed memfd copy (an ordinary user whose binary it may write).
#pragma once

#include "core/result.h"

namespace pulsebox::oci {

// Returns ok when the running image is one a container cannot write: on a
// read-only mount, a sealed memfd, or (an ordinary user) a file this user
// may not write. Otherwise re-executes this same command line from such a
// copy and returns only an error.
core::Status run_from_unwritable_binary();

}  // namespace pulsebox::oci
