// -t on the user's side: their terminal in raw mode for the run (every key,
// Ctrl-C and Ctrl-Z included, goes to the command's own terminal, whose
// line discipline acts on it), restored on every way out: the destructor,
// and a handler of the signals that end this process, which restores it and
// ends the process as the signal would have. SIGWINCH is written into a
// pipe (resize_fd) the relay reads (ExecuteOptions::terminal_resize_fd).
//
// Usage:
//   auto raw = run::RawTerminal::enter(STDIN_FILENO);   // one at a time
//   execute.terminal_resize_fd = raw.value()->resize_fd();
//   ... raw.value().reset();                             // before the summary
#pragma once

#include <termios.h>

#include <memory>

#include "core/result.h"
#include "core/unique_fd.h"

namespace pulsebox::run {

class RawTerminal {
 public:
  static core::Result<std::unique_ptr<RawTerminal>> enter(int fd);
  ~RawTerminal();
  RawTerminal(const RawTerminal&) = delete;
  RawTerminal& operator=(const RawTerminal&) = delete;

  int resize_fd() const { return resize_read_.get(); }

 private:
  RawTerminal() = default;
  int fd_ = -1;
  termios saved_{};
  core::UniqueFd resize_read_, resize_write_;
};

}  // namespace pulsebox::run
