// Phase timings for profiling a run: with PULSEBOX_TRACE=1 in the
// environment, each trace_phase() call prints "pulsebox trace: 12.345 ms
// NAME" (time since the first call, made at the top of main()) to stderr.
// Off by default; when off, a call costs one cached flag test.
#pragma once

namespace pulsebox::core {

void trace_phase(const char* name);

}  // namespace pulsebox::core
