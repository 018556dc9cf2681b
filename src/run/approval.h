// The CLI's approver for ASK decisions of the action policy (SandboxOptions::
// approver): -y accepts; --approve-with CMD runs CMD with the request's JSON
// on its stdin (exit 0 allows, anything else or no exit within
// --approve-timeout denies); else a terminal on RunIo::prompt_fd is asked;
// else none, and an ASK is refused (exit 125, naming the rule).
#pragma once

#include "pulsebox/sandbox.h"
#include "run/run_command.h"

namespace pulsebox::run {

// Empty when there is no way to ask.
Approver make_cli_approver(const RunOptions& options, const RunIo& io);

}  // namespace pulsebox::run
