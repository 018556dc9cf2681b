// The command's stdin, from the user's (RunIo::in_fd): what the sandbox may
// be given as it is, and a relay through a pipe for the rest.
//
//   a pipe read-only             given as it is
//   a file opened read-only      given as it is (its offset is shared)
//   a file opened for writing    reopened read-only at the same offset
//   none (closed), /dev/null     /dev/null
//   a terminal                   /dev/null, or with -i relayed
//   a socket, another device     relayed
//
// A relay is a thread copying into a pipe whose read end is the command's
// stdin: the sandbox never holds the host's terminal (TIOCSTI, its
// settings) or socket (peer, sendmsg), only the pipe.
//
// Usage:
//   auto source = run::StdinSource::open(io.in_fd, options.interactive);
//   execute.stdin_fd = source.value()->fd();   // for the run's duration
#pragma once

#include <atomic>
#include <memory>
#include <thread>

#include "core/result.h"
#include "core/unique_fd.h"

namespace pulsebox::run {

class StdinSource {
 public:
  // `in_fd`: the user's stdin (-1 or closed: none); `interactive`: -i.
  static core::Result<std::unique_ptr<StdinSource>> open(int in_fd, bool interactive);
  ~StdinSource();
  StdinSource(const StdinSource&) = delete;
  StdinSource& operator=(const StdinSource&) = delete;

  // For ExecuteOptions::stdin_fd: -1 means /dev/null.
  int fd() const { return fd_; }

 private:
  StdinSource() = default;
  void relay(int from);

  int fd_ = -1;
  core::UniqueFd owned_;      // a reopened file, or the relay pipe's read end
  core::UniqueFd write_end_;  // the relay pipe's write end
  core::UniqueFd stop_;       // an eventfd: the relay ends when it is readable
  std::thread relay_;
};

}  // namespace pulsebox::run
