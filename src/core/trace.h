// Phase timings for profiling a run: with PULSEBOX_TRACE=1 in the
// environment, each trace_phase() call prints "pulsebox trace: 12.345 ms
// peak rss 6789 kB NAME" (time since the first call, made at the top of
// main(); this process's own peak RSS so far) to stderr.
// Off by default; when off, a call costs one cached flag test.
#pragma once

namespace pulsebox::core {

void trace_phase(const char* name);

}  // namespace pulsebox::core
