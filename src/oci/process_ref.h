// A container's process as state.json records it: its pid and the start time
// /proc gave it. A pid alone is not an identity: once the container exits,
// the kernel may hand the same number to any other process, and a `kill`
// through the bare pid would signal that stranger. So every signal goes
// through a pidfd opened by open_verified_pidfd(), which checks the start
// time after the pidfd pins the process.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string_view>

#include "core/result.h"
#include "core/unique_fd.h"

namespace pulsebox::oci {

struct ProcessRef {
  pid_t pid = 0;
  std::uint64_t start_time = 0;  // /proc/<pid>/stat field 22, in clock ticks since boot
};

// What /proc/<pid>/stat says of a process: field 3 (R, S, Z, X, ...), field
// 22, and field 9's PF_EXITING.
struct ProcessStat {
  char state = '?';
  std::uint64_t start_time = 0;
  // In the kernel's exit path: it runs no code of its own any more. A pid
  // namespace's init stays there until every process of its namespace is
  // reaped, by parents that may be outside it.
  bool exiting = false;
};

// Parses the text of /proc/<pid>/stat (the name in parentheses may hold
// spaces and parentheses of its own); nullopt when it is not that format.
std::optional<ProcessStat> parse_process_stat(std::string_view text);
std::optional<ProcessStat> read_process_stat(pid_t pid);
std::optional<std::uint64_t> process_start_time(pid_t pid);

// A pidfd naming exactly the recorded process. pidfd_open comes first and the
// start time is compared after it: a pid reused before the open shows another
// start time, and a death after the open leaves the pidfd naming the dead
// process (pidfd_send_signal then fails with ESRCH), never a newcomer.
// kUnavailable when the process is gone, a zombie, or not the recorded one.
core::Result<core::UniqueFd> open_verified_pidfd(const ProcessRef& ref);

// A signal as engines and users give it: a number ("9"), a name with or
// without "SIG" ("KILL", "SIGKILL", case-insensitive), or "RTMIN+n" /
// "RTMAX-n". kInvalidInput naming `text` otherwise.
core::Result<int> parse_signal(std::string_view text);

}  // namespace pulsebox::oci
