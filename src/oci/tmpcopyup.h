// podman's `tmpcopyup` mount option (design §2.3): a tmpfs that starts with
// a copy of what the image holds at its destination. create builds it in
// the parent as a detached tmpfs (fsopen/fsmount: nothing is mounted
// anywhere) and the container's process attaches it (MountOp::AttachFd).
//
// The image is hostile: its directory is resolved inside the root
// (openat2 RESOLVE_IN_ROOT), and the copy walks it by descriptor with
// O_NOFOLLOW, copying only directories, regular files and symlinks (never
// followed), with their modes and owners; anything else is left out. The
// copy is bounded in depth and entries, and the tmpfs's own size option
// bounds the bytes.
#pragma once

#include <string>

#include "core/result.h"
#include "core/unique_fd.h"

namespace pulsebox::oci {

// A detached tmpfs with `data` ("mode=755,size=64k") and mount attributes
// from `flags` (MS_NOSUID, ...), holding a copy of `destination` inside
// `rootfs` (empty when the image has nothing there).
core::Result<core::UniqueFd> make_tmpcopyup(const std::string& rootfs,
                                            const std::string& destination, const std::string& data,
                                            unsigned long flags);

}  // namespace pulsebox::oci
