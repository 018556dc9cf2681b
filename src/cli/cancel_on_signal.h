// SIGTERM, SIGINT or SIGHUP to an in-process `pulsebox run` cancels the run
// as a server's hung-up client does: the sandbox gets SIGTERM, then
// SIGKILL, and the result (and the audit log) says "cancelled". Without
// it the signal's default action ended pulsebox with no result, no event
// and no audit record of the end. A second signal ends pulsebox at once.
//
// Usage:
//   CancelOnSignal cancel;              // installs the handlers
//   io.cancel_fd = cancel.fd();         // readable once a signal came
//   ... execute_run(...) ...            // the destructor restores them
#pragma once

#include <csignal>

#include "core/unique_fd.h"

namespace pulsebox::cli {

class CancelOnSignal {
 public:
  CancelOnSignal();
  ~CancelOnSignal();
  CancelOnSignal(const CancelOnSignal&) = delete;
  CancelOnSignal& operator=(const CancelOnSignal&) = delete;

  // -1 when the pipe could not be made (nothing is installed then).
  int fd() const { return read_end_.get(); }

 private:
  core::UniqueFd read_end_;
  core::UniqueFd write_end_;
  struct sigaction previous_[3] = {};
};

}  // namespace pulsebox::cli
