#include "core/trace.h"

#include <signal.h>
#include <sys/resource.h>
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace pulsebox::core {
namespace {

double monotonic_ms() {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<double>(now.tv_sec) * 1000.0 + static_cast<double>(now.tv_nsec) / 1e6;
}

// VmHWM, the peak RSS of this program image. (getrusage's ru_maxrss would
// include the parent's RSS from before execve: Linux carries it over.)
long peak_rss_kib() {
  std::FILE* status = std::fopen("/proc/self/status", "re");
  if (status == nullptr) return -1;
  char line[256];
  long kib = -1;
  while (std::fgets(line, sizeof line, status) != nullptr) {
    if (std::sscanf(line, "VmHWM: %ld kB", &kib) == 1) break;
  }
  std::fclose(status);
  return kib;
}

// Page faults are worth watching: on a virtual machine a copy-on-write
// fault after fork is expensive.
long faults_now() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt + usage.ru_majflt;
}

// Lines are kept per thread and printed by trace_flush(): printing each as
// it came (a write, and /proc/self/status for the peak RSS) distorted the
// very times the trace shows.
struct Line {
  double at_ms;
  long faults;
  const char* prefix;
  const char* name;  // a string literal (the callers pass only those)
};
constexpr std::size_t kFlushAt = 256;

thread_local double thread_start_ms = 0;  // a server restarts it per request
// Whatever was not flushed is printed when the thread (or the program) ends.
struct Lines : std::vector<Line> {
  ~Lines();
};
thread_local Lines lines;

double trace_start_ms() {
  if (thread_start_ms == 0) thread_start_ms = monotonic_ms();
  return thread_start_ms;
}

void add_line(double at_ms, const char* prefix, const char* name) {
  lines.push_back({at_ms - trace_start_ms(), faults_now(), prefix, name});
  if (lines.size() >= kFlushAt) trace_flush();
}

}  // namespace

bool trace_enabled() {
  static const bool enabled = [] {
    const char* value = std::getenv("PULSEBOX_TRACE");
    return value != nullptr && std::strcmp(value, "1") == 0;
  }();
  return enabled;
}

bool trace_stops_at(const char* name) {
  // PULSEBOX_TRACE_STOP_AT's phase, or null.
  static const char* const phase = [] {
    const char* value = std::getenv("PULSEBOX_TRACE_STOP_AT");
    return value != nullptr && value[0] != '\0' ? value : nullptr;
  }();
  return phase != nullptr && std::strcmp(name, phase) == 0;
}

void trace_phase(const char* name) {
  if (trace_stops_at(name)) {
    if (trace_enabled()) trace_flush();  // what led here is seen while it waits
    ::raise(SIGSTOP);
  }
  if (!trace_enabled()) return;
  trace_start_ms();
  add_line(monotonic_ms(), "", name);
}

void trace_restart() {
  thread_start_ms = 0;
}

void trace_flush() {
  if (lines.empty()) return;
  const long peak = peak_rss_kib();
  for (const Line& line : lines) {
    std::fprintf(stderr, "pulsebox trace: %8.3f ms  peak rss %6ld kB  faults %5ld  %s%s\n",
                 line.at_ms, peak, line.faults, line.prefix, line.name);
  }
  lines.clear();
}

Lines::~Lines() {
  if (!empty()) trace_flush();
}

void ChildTrace::mark(const char* label) noexcept {
  const int index = count.fetch_add(1, std::memory_order_relaxed);
  if (index >= kCapacity) return;
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  marks[index] = {label, static_cast<std::int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec};
}

void ChildTrace::print() const {
  const int marked = count.load() < kCapacity ? count.load() : kCapacity;
  for (int i = 0; i < marked; ++i)
    add_line(static_cast<double>(marks[i].monotonic_ns) / 1e6, "child: ", marks[i].label);
}

}  // namespace pulsebox::core
