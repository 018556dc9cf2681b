// `pulsebox serve --local`: a resident supervisor for one user's runs.
//
// `pulsebox run` started by the same user, with the same pulsebox binary and
// state directory, sends its arguments here instead of building the sandbox
// itself; the result is the same (same code, same checks, same audit log),
// without the per-process start-up, and with each run's sandbox started
// ahead of it (backends/native_runtime.h): the next run begins at its
// workspace mounts. Anything the server cannot do exactly as the client
// would (another binary, another user or mount namespace, fewer
// capabilities, another backend, unparsable arguments) is answered with
// "fallback" and the client runs the command itself.
//
// Call order: serve_locally() blocks until SIGTERM, SIGINT or SIGHUP; runs in
// progress finish first (a second signal ends them at once).
#pragma once

#include <filesystem>

namespace pulsebox::server {

struct LocalServerOptions {
  std::filesystem::path state_dir;    // the native backend's (must be absolute)
  std::filesystem::path socket_path;  // default: <state_dir>/server.sock
  bool prestart = true;               // start each run's sandbox ahead
  bool verbose = false;               // one line per run on stderr
};

// The socket a client of this state directory looks for.
std::filesystem::path default_socket_path(const std::filesystem::path& state_dir);
// The protocol's socket beside it (docs/protocol.md "Local socket"): any
// client of the same user, newline-delimited JSON. <dir>/server.json.sock
// for <dir>/server.sock.
std::filesystem::path protocol_socket_path(const std::filesystem::path& socket_path);

// Returns the exit status for `pulsebox serve` (0 after a signal, 125 when
// it could not start: the reason is printed).
int serve_locally(const LocalServerOptions& options);

}  // namespace pulsebox::server
