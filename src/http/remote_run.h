// `pulsebox run` on a remote server (the remote backend; docs/protocol.md
// "The remote backend"). The static CLI runs `pulsebox-http remote-run
// --cli PATH ARGS...` in its place when --backend remote is given, or when
// PULSE_REMOTE_URL or PULSE_REMOTE_TOKEN is set and no backend is named.
//
// 1. The workspace (without .agent/) is hashed as the deterministic tar the
//    server would receive; the server is asked whether it has it, and it
//    is sent only when it has not.
// 2. The run goes as a protocol request; its events come back and are
//    shown as a local run shows them (or passed on: --events, --json).
// 3. The run's changes come back as an archive and become a local
//    transaction, with the conflict detection of a local run (anything the
//    user changed here after the upload began is a conflict).
// An unreachable server (nothing answers at the address) falls back to the
// local native backend only when the server was chosen by the environment,
// as the reference does, saying so on stderr and in the audit log; a wrong
// or missing token is an error, never a fallback.
#pragma once

namespace pulsebox::http {

// argv: what followed "remote-run". Returns the exit status.
int remote_run(int argc, char** argv);

}  // namespace pulsebox::http
