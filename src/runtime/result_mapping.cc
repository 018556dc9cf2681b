#include "runtime/result_mapping.h"

#include <signal.h>
#include <sys/wait.h>

#include <cerrno>
#include <string>

#include "core/text.h"

namespace pulsebox::runtime {

void record_supervision(ProcessResult& result, const SupervisionOutcome& supervision) {
  result.timed_out = supervision.timed_out;
  result.truncated = supervision.truncated;
  result.termination_reason = supervision.reason;
  result.metrics.output_bytes = supervision.output_bytes;
}

void record_wait_status(ProcessResult& result, int status) {
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
    result.exit_code = 128 + WTERMSIG(status);
    if (result.termination_reason == TerminationReason::None) {
      result.termination_reason =
          WTERMSIG(status) == SIGXCPU ? TerminationReason::CpuTime : TerminationReason::Signal;
    }
  }
}

void record_rusage(ExecutionMetrics& metrics, const rusage& usage) {
  metrics.cpu_time_ms =
      static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1000.0 +
      static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1000.0;
  metrics.peak_memory_bytes = static_cast<std::uint64_t>(usage.ru_maxrss) * 1024;
}

void record_exec_failure(ProcessResult& result, std::string_view program, int error_number) {
  result.termination_reason = TerminationReason::LaunchError;
  result.exit_code = error_number == ENOENT ? 127 : 126;
  result.termination_detail =
      "cannot execute " + std::string(program) + ": " + core::describe_errno(error_number);
}

void record_elapsed(ProcessResult& result, Clock::time_point start, Clock::time_point end) {
  result.metrics.elapsed_ms = std::chrono::duration<double, std::milli>(end - start).count();
  result.duration_ms = result.metrics.elapsed_ms;
}

}  // namespace pulsebox::runtime
