// Steps both child processes share: the sandbox's init (runtime/child.cc)
// and an OCI container's process (oci/launch/container_init.cc). Raw system
// calls only, no allocation: they run between clone() and execve().
#pragma once

#include "linux/clone.h"
#include "runtime/sync_channel.h"

namespace pulsebox::runtime {

// The exit status of a child whose setup failed (runc and crun use it too).
inline constexpr int kSetupFailed = 125;

[[noreturn]] void exit_now(int code) noexcept;

// The most descriptors close_all_except keeps (it sorts them on its stack).
inline constexpr int kMaxKeptFds = 32;

// Closes every descriptor from `first` up except those in `keep` (at most
// kMaxKeptFds; callers check, as nothing beyond it would be kept).
void close_all_except(unsigned first, const int* keep, int count) noexcept;

// Every signal's action back to SIG_DFL, and an empty signal mask.
void reset_signals() noexcept;

// Reports a failed step as {stage, errno, detail} on the channel and exits
// with kSetupFailed.
struct Failure {
  int channel;
  [[noreturn]] PULSEBOX_CHILD_CODE void operator()(const char* stage, int error_number,
                                                   const char* detail = "") const noexcept {
    send_child_error(channel, stage, detail, error_number);
    exit_now(kSetupFailed);
  }
};

}  // namespace pulsebox::runtime
