// The signals `run` and `exec` pass on to the process they wait for (the
// set runc forwards, less the job-control ones), and the wait itself.
//
// Call order: construct ForwardedSignals before the process is cloned (a
// signal sent meanwhile waits, blocked, instead of ending the command and
// orphaning the process; the process's own mask is emptied at launch) ->
// open_fd() -> wait_forwarding(pidfd, fd) once it runs -> destroy.
#pragma once

#include <signal.h>

#include <string>

#include "core/result.h"
#include "core/unique_fd.h"

namespace pulsebox::oci::commands {

class ForwardedSignals {
 public:
  // Blocks them in this thread (the commands are single-threaded).
  ForwardedSignals();
  // Drops what is still pending (it was meant for a process that has ended),
  // then restores the mask.
  ~ForwardedSignals();
  ForwardedSignals(const ForwardedSignals&) = delete;
  ForwardedSignals& operator=(const ForwardedSignals&) = delete;

  // A non-blocking signalfd for them.
  core::Result<core::UniqueFd> open_fd() const;

 private:
  sigset_t set_{};
  sigset_t previous_{};
  bool blocked_ = false;
};

// Waits for the process behind `pidfd` to end, passing each signal read
// from `signal_fd` to it (through the pidfd: never another process under a
// reused pid); its status, 128 + n after signal n. `what` names the process
// in errors ("container ID").
core::Result<int> wait_forwarding(int pidfd, int signal_fd, const std::string& what);

}  // namespace pulsebox::oci::commands
