// The resource policy: what one sandboxed run may consume.
//
// Defaults are the reference's: 100 % of one CPU, 1 GiB memory, 1 GiB swap,
// 64 processes, 256 open files, 5 MiB of output, 30 s wall clock, 1.5 s grace
// between SIGTERM and SIGKILL; CPU time, disk and working-directory size are
// unlimited unless set. Every value set must be > 0 (validate() throws
// SandboxConfigError naming the field), except swap_bytes = 0 (no swap) and
// wall_time_seconds = kNoWallTimeLimit.
//
// Sizes are written as bytes or with a binary suffix: "512M", "1.5G", "64K",
// "2GiB", "1T" (K = 1024). Durations are seconds, bare or with a unit:
// "30", "1.5", "500ms", "90s", "15m", "1h". Where a limit is optional,
// parse_size_limit/parse_duration_limit also take "none" (and a duration
// "0") for no limit; the CLI and config files use these same parsers.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "pulsebox/export.h"

namespace pulsebox {

// wall_time_seconds for a run without a wall-clock limit.
inline constexpr double kNoWallTimeLimit = std::numeric_limits<double>::infinity();

struct ResourcePolicy {
  double cpu_quota_percent = 100.0;
  std::optional<double> cpu_time_seconds;
  std::uint64_t memory_bytes = 1ull << 30;
  std::optional<std::uint64_t> swap_bytes = 1ull << 30;
  std::optional<std::uint64_t> disk_bytes;
  std::uint64_t max_processes = 64;
  std::uint64_t max_open_files = 256;
  std::uint64_t max_output_bytes = 5ull << 20;
  // Past max_output_bytes: true (the reference) stops the run
  // (termination_reason output_limit); false keeps it running and drops the
  // rest of its output (truncated). A build's log is no reason to kill it.
  bool stop_at_output_limit = true;
  // Where no cgroup can hold memory_bytes, a per-process RLIMIT_DATA stands
  // in for it (true). false runs without it: sanitizer builds (ASan, TSan)
  // reserve terabytes of writable shadow memory, which any memory rlimit
  // counts; the memory limit is then reported as not enforced for the run.
  bool memory_rlimit_fallback = true;
  double wall_time_seconds = 30.0;
  double termination_grace_seconds = 1.5;
  std::optional<std::uint64_t> working_directory_bytes;

  // Throws SandboxConfigError naming the first invalid field.
  PULSEBOX_API void validate() const;
};

// Throw SandboxConfigError; `what` names the input in the message
// (e.g. "--memory").
PULSEBOX_API std::uint64_t parse_size(std::string_view text, std::string_view what = "size");
PULSEBOX_API double parse_duration_seconds(std::string_view text,
                                           std::string_view what = "duration");
// An optional limit: nullopt for "none"; a size may be 0 ("0", "0M"), a
// duration of 0 is nullopt. Throw SandboxConfigError naming `what` and the
// grammar.
PULSEBOX_API std::optional<std::uint64_t> parse_size_limit(std::string_view text,
                                                           std::string_view what = "size");
PULSEBOX_API std::optional<double> parse_duration_limit(std::string_view text,
                                                        std::string_view what = "duration");
// "1.5 GiB", "512 MiB", "17 B".
PULSEBOX_API std::string format_size(std::uint64_t bytes);

}  // namespace pulsebox
