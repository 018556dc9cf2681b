// `pulsebox run` through a `pulsebox serve --local` of the same user (see
// server/local_server.h). Called first thing in main(), before any option
// parsing: when a server answers, the client's whole job is one connect,
// one message each way, and an exit.
//
// Which server: $PULSEBOX_SERVER when it names a socket; "off" (or "0",
// "no", "none") never uses one; unset, <state directory>/server.sock (the
// state directory is the native backend's: $PULSEBOX_STATE_DIR, else
// /var/lib/pulsebox as root and /var/tmp/pulsebox-UID otherwise), where a
// missing or dead socket simply means "no server".
#pragma once

#include <optional>

namespace pulsebox::cli {

// The exit status of a run the server did; nullopt: run it in this process
// (no server, or the server answered "fallback").
std::optional<int> run_through_server(int argc, char** argv);

}  // namespace pulsebox::cli
