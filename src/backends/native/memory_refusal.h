// Which failed setup steps the memory cgroup may have caused. The kernel
// does not say "out of memory" the same way everywhere: each step's
// refused allocation has its own error. Only a run whose cgroup recorded a
// refused charge (CgroupUsage::memory_limit_hits) takes one of these for
// its memory limit's doing; without one, it stays a launch error.
#pragma once

#include "runtime/sync_channel.h"

namespace pulsebox::backends::native {

// Whether `error` (init's or the command's failed step) is what the kernel
// says when it cannot charge the step's memory:
// - the command's execve: ENOMEM, or E2BIG for the arguments' pages;
// - any other step: ENOMEM, ENOBUFS, ENOSPC (a tmpfs that cannot charge an
//   inode or a page);
// - the workspace's overlay mount: EINVAL too. overlayfs clones each
//   layer's mount, and clone_private_mount() reports the failed allocation
//   as EINVAL (the kernel logs "overlayfs: failed to clone lowerpath").
bool is_memory_refusal(const runtime::ChildMessage& error);

}  // namespace pulsebox::backends::native
