#include "core/trace.h"

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

}  // namespace

void trace_phase(const char* name) {
  static const bool enabled = [] {
    const char* value = std::getenv("PULSEBOX_TRACE");
    return value != nullptr && std::strcmp(value, "1") == 0;
  }();
  if (!enabled) return;
  static const double start = monotonic_ms();
  std::fprintf(stderr, "pulsebox trace: %8.3f ms  %s\n", monotonic_ms() - start, name);
}

}  // namespace pulsebox::core
