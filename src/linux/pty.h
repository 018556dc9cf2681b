// Pseudo-terminals: a pair opened in the sandbox (child code, raw system
// calls), and the relay between the user's terminal and the master.
#pragma once

#include <sys/ioctl.h>

#include <thread>

#include "core/unique_fd.h"
#include "linux/clone.h"

namespace pulsebox::linux_api {

// In the caller's /dev/ptmx (the sandbox's devpts instance, runtime/plan.cc):
// a new pair, unlocked, the slave of `window`'s size and the caller's
// controlling terminal (the caller leads a session that has none). 0 or the
// errno; *master and *slave are CLOEXEC.
PULSEBOX_CHILD_CODE int open_controlling_pty(const winsize& window, int* master,
                                             int* slave) noexcept;

// Sends `master` over the unix socket `socket` (SCM_RIGHTS) with `name`
// (the slave's path) as the payload: runc's console-socket protocol, which
// conmon and containerd's shim receive. Child code. 0 or the errno.
PULSEBOX_CHILD_CODE int send_console_master(int socket, int master, const char* name) noexcept;

// Copies `input` (the user's terminal) into `master` and applies the size of
// `input` to `master` whenever `resized` (a pipe a SIGWINCH handler writes)
// is readable, until stop() or `input` ends. Not owned: the caller keeps
// the descriptors open until stop() returned.
class PtyInputRelay {
 public:
  PtyInputRelay(int input, int resized, int master);
  ~PtyInputRelay() { stop(); }
  PtyInputRelay(const PtyInputRelay&) = delete;
  PtyInputRelay& operator=(const PtyInputRelay&) = delete;
  void stop();

 private:
  void run(int input, int resized, int master);
  core::UniqueFd stop_;
  std::thread thread_;
};

}  // namespace pulsebox::linux_api
