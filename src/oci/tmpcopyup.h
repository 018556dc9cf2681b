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
//
// In a user namespace the image's owners are the container's ids: an entry
// owned by u in the image gets the host id u maps to (uid 0 inside =
// 100000 on the host with 0 -> 100000), chowned by descriptor
// (AT_SYMLINK_NOFOLLOW) in the parent, so it shows as u inside. An id the
// maps leave out gets the kernel's overflow id (nobody inside).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"
#include "core/unique_fd.h"
#include "linux/userns.h"

namespace pulsebox::oci {

// The host id `id` inside the container maps to through `map`, else
// `overflow`.
std::uint32_t shifted_id(const std::vector<linux_api::IdMapping>& map, std::uint32_t id,
                         std::uint32_t overflow);

// A detached tmpfs with `data` ("mode=755,size=64k") and mount attributes
// from `flags` (MS_NOSUID, ...), holding a copy of `destination` inside
// `rootfs` (empty when the image has nothing there). `maps` (null: no user
// namespace) shifts the copy's owners.
core::Result<core::UniqueFd> make_tmpcopyup(const std::string& rootfs,
                                            const std::string& destination, const std::string& data,
                                            unsigned long flags,
                                            const linux_api::IdMaps* maps = nullptr);

// The same for an ordinary user, who may not make a tmpfs out here: a
// helper joins a user namespace with the container's `maps` and makes the
// copy there, so the owners are kept as that namespace sees them (runc's
// result: the user's own files are root's inside). An owner the maps leave
// out is refused, naming the file.
core::Result<core::UniqueFd> make_tmpcopyup_in_user_namespace(const std::string& rootfs,
                                                              const std::string& destination,
                                                              const std::string& data,
                                                              unsigned long flags,
                                                              const linux_api::IdMaps& maps);

}  // namespace pulsebox::oci
