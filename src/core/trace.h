// Phase timings for profiling a run: with PULSEBOX_TRACE=1 in the
// environment, each trace_phase() call records a line that trace_flush()
// prints to stderr: "pulsebox trace: 12.345 ms peak rss 6789 kB faults 321
// NAME" (time since the thread's first call, made at the top of main() or
// for each request a server takes; the page faults so far; the process's
// peak RSS at the flush). Off by default; when off, a call costs one cached
// flag test. `name` must be a string literal (it is kept, not copied).
//
// A debugging aid beside it: with PULSEBOX_TRACE_STOP_AT=NAME, the
// trace_phase(NAME) call stops the process (raise(SIGSTOP)) until a
// SIGCONT, so a debugger can attach or a test can kill it right there
// (tests/oci/oci_crash_test.cc kills `create` at each of its phases). It
// works with or without PULSEBOX_TRACE.
#pragma once

#include <atomic>
#include <cstdint>

namespace pulsebox::core {

bool trace_enabled();
// Whether PULSEBOX_TRACE_STOP_AT names NAME (a phase, or a point a child
// stops at itself).
bool trace_stops_at(const char* name);
// Records NAME (with PULSEBOX_TRACE=1) and stops the process there when
// PULSEBOX_TRACE_STOP_AT names it.
void trace_phase(const char* name);
// Times from here on count from the next trace_phase() of this thread (a
// server, for each request).
void trace_restart();
// Prints this thread's lines (also done every 256 lines).
void trace_flush();

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
  // Records the marks, in order, as trace lines ("child: LABEL").
  void print() const;
};

}  // namespace pulsebox::core
