#include "core/trace.h"

#include <sys/resource.h>
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

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

double trace_start_ms() {
  static const double start = monotonic_ms();
  return start;
}

struct Footprint {
  long peak_rss_kib;
  long faults;
};

Footprint footprint_now() {
  // Page faults are worth watching: on a virtual machine a copy-on-write
  // fault after fork can cost ~15 us.
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return {peak_rss_kib(), usage.ru_minflt + usage.ru_majflt};
}

void print_line(double at_ms, const Footprint& footprint, const char* prefix, const char* name) {
  std::fprintf(stderr, "pulsebox trace: %8.3f ms  peak rss %6ld kB  faults %5ld  %s%s\n",
               at_ms - trace_start_ms(), footprint.peak_rss_kib, footprint.faults, prefix, name);
}

}  // namespace

bool trace_enabled() {
  static const bool enabled = [] {
    const char* value = std::getenv("PULSEBOX_TRACE");
    return value != nullptr && std::strcmp(value, "1") == 0;
  }();
  return enabled;
}

void trace_phase(const char* name) {
  if (!trace_enabled()) return;
  trace_start_ms();
  const double now = monotonic_ms();
  print_line(now, footprint_now(), "", name);
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
  // The supervisor's footprint, read once: reading it per line cost the
  // trace ~50 us a line.
  const Footprint footprint = footprint_now();
  for (int i = 0; i < marked; ++i) {
    print_line(static_cast<double>(marks[i].monotonic_ns) / 1e6, footprint,
               "child: ", marks[i].label);
  }
}

}  // namespace pulsebox::core
