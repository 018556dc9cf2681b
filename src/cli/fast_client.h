// The client of `pulsebox run` through a server, before the C library
// starts (static builds only). The static CLI's entry point is
// pulsebox_fast_entry: it calls pulsebox_fast_client() with the initial
// stack (argc, argv, envp) and, unless the server did the run, jumps to
// glibc's _start with everything as the kernel left it.
//
// glibc's start-up, the static PIE's relocations and the constructors of
// everything linked in cost a `pulsebox` process more before main() than
// the rest of a client's work (docs/benchmarks.md); a client
// whose server does the run needs none of it. So this code runs before any
// of it: raw system calls only, no C library call (none is set up: no TLS,
// no stack protector, no relocated pointer), nothing but its own stack and
// one mmap-ed buffer. The build checks the object calls nothing outside
// itself (tests/unit/meson.build), and the unit tests check that it speaks
// exactly server/protocol.h's bytes.
//
// It does the plain case only: the default socket or $PULSEBOX_SERVER, a
// server of this user that answers. Anything else (no server, tracing, an
// answer it does not expect) is left to cli/server_client.cc after main(),
// which warns where a user should hear of it; pulsebox_fast_client_verdict
// tells it what was found already.
#pragma once

#include <cstddef>

extern "C" {

enum PulseboxFastVerdict : int {
  kFastNotTried = 0,  // main() decides everything
  kFastNoServer = 1,  // the default socket does not answer: run in-process
  kFastFallback = 2,  // the server answered "fallback": run in-process
};
[[gnu::visibility("hidden")]] extern int pulsebox_fast_client_verdict;

// Returns only when the run is still to be done (see the verdict); a run the
// server did ends the process with its exit status.
void pulsebox_fast_client(long* initial_stack);

// The request bytes for argv[first..argc), envp, cwd, umask and the binary's
// identity, as server::encode(RunRequest) makes them; into `out` (at most
// `capacity` bytes). Returns the size, or 0 when it does not fit. (Exposed
// for the tests.)
std::size_t pulsebox_fast_encode_request(char* out, std::size_t capacity, char** argv, int first,
                                         int argc, char** envp, const char* cwd,
                                         unsigned umask_value, const char* identity);
// The client's identity as server::binary_identity() writes it
// (PULSEBOX_CLIENT_IDENTITY), into `out` (NUL-terminated); false when it
// does not fit.
bool pulsebox_fast_binary_identity(char* out, std::size_t capacity);
}
