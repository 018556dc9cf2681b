// What a finished process becomes in its ProcessResult, the same for every
// backend: the supervision's outcome, the wait status, the kernel's usage
// counters, an execve that failed, the elapsed time. A backend records these
// and adds only what is its own (the native backend: init's report, the
// cgroup's counters and what they say about a failure, seccomp).
#pragma once

#include <sys/resource.h>

#include <string_view>

#include "pulsebox/result.h"
#include "runtime/supervisor.h"

namespace pulsebox::runtime {

// timed_out, truncated, the reason of the first stop, the output kept.
void record_supervision(ProcessResult& result, const SupervisionOutcome& supervision);

// The exit code of a wait status: the command's own, or 128 + the signal
// that ended it (also in `signal`). A signal is the reason when none was
// recorded before: CpuTime for SIGXCPU (the CPU time rlimit), Signal for any
// other.
void record_wait_status(ProcessResult& result, int status);

// CPU time (user and system) and peak resident memory from getrusage(2) or
// wait4(2).
void record_rusage(ExecutionMetrics& metrics, const rusage& usage);

// An execve of `program` that failed with `error_number`: a launch error,
// "cannot execute <program>: ENOENT (No such file or directory)", exit code
// 127 when there is no such file, 126 otherwise (as a shell does).
void record_exec_failure(ProcessResult& result, std::string_view program, int error_number);

// The wall-clock time from `start` to `end`: elapsed_ms and duration_ms.
void record_elapsed(ProcessResult& result, Clock::time_point start,
                    Clock::time_point end = Clock::now());

}  // namespace pulsebox::runtime
