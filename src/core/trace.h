// Phase timings for profiling a run: with PULSEBOX_TRACE=1 in the
// environment, each trace_phase() call prints "pulsebox trace: 12.345 ms
// peak rss 6789 kB faults 321 NAME" (time since the first call, made at the
// top of main(); this process's own peak RSS and page faults so far) to
// stderr. Off by default; when off, a call costs one cached flag test.
#pragma once

#include <atomic>
#include <cstdint>

namespace pulsebox::core {

bool trace_enabled();
void trace_phase(const char* name);

// Marks from the sandbox's child processes, which may not print: they
// record (label, CLOCK_MONOTONIC time) here, in memory they share with the
// supervisor, and the supervisor prints them after the run.
struct ChildTrace {
  static constexpr int kCapacity = 32;
  struct Mark {
    const char* label;
    std::int64_t monotonic_ns;
  };
  std::atomic<int> count{0};
  Mark marks[kCapacity];

  // Async-signal-safe, no errno, no allocation (clock_gettime is the vDSO's).
  void mark(const char* label) noexcept;
  // Prints the marks, in order, as trace lines ("child: LABEL").
  void print() const;
};

}  // namespace pulsebox::core
