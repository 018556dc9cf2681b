#include "run/stdin_source.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <string>

namespace pulsebox::run {

using core::Error;
using core::UniqueFd;

namespace {

bool is_dev_null(const struct stat& st) {
  return S_ISCHR(st.st_mode) && major(st.st_rdev) == 1 && minor(st.st_rdev) == 3;
}

// Waits until `fd` has `events` or `stop` is readable: false for stop.
bool wait_for(int fd, short events, int stop) {
  for (;;) {
    pollfd fds[2] = {{fd, events, 0}, {stop, POLLIN, 0}};
    const int n = ::poll(fds, 2, -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 || fds[1].revents != 0) return false;
    if (fds[0].revents != 0) return true;
  }
}

}  // namespace

core::Result<std::unique_ptr<StdinSource>> StdinSource::open(int in_fd, bool interactive) {
  std::unique_ptr<StdinSource> source(new StdinSource());
  struct stat st {};
  if (in_fd < 0 || ::fstat(in_fd, &st) != 0 || is_dev_null(st)) return source;
  const int flags = ::fcntl(in_fd, F_GETFL);
  if (flags < 0) return Error::from_errno("stdin", "reading stdin's flags");
  const bool read_only = (flags & O_ACCMODE) == O_RDONLY;
  if (S_ISREG(st.st_mode) && read_only) {
    source->fd_ = in_fd;
    return source;
  }
  if (S_ISREG(st.st_mode)) {
    // Opened for writing too (`<>`): the sandbox gets a read-only one.
    const std::string self = "/proc/self/fd/" + std::to_string(in_fd);
    UniqueFd reopened(::open(self.c_str(), O_RDONLY | O_CLOEXEC));
    if (!reopened) return Error::from_errno("stdin", "reopening stdin read-only");
    const off_t offset = ::lseek(in_fd, 0, SEEK_CUR);
    if (offset > 0 && ::lseek(reopened.get(), offset, SEEK_SET) < 0)
      return Error::from_errno("stdin", "seeking the reopened stdin");
    source->fd_ = reopened.get();
    source->owned_ = std::move(reopened);
    return source;
  }
  if (S_ISFIFO(st.st_mode) && read_only) {
    source->fd_ = in_fd;
    return source;
  }
  // Without -i a terminal is not read: the command does not wait for keys
  // the user meant for the shell after it.
  if (::isatty(in_fd) == 1 && !interactive) return source;
  int ends[2];
  if (::pipe2(ends, O_CLOEXEC) != 0) return Error::from_errno("stdin", "creating stdin's pipe");
  source->owned_.reset(ends[0]);
  source->write_end_.reset(ends[1]);
  // Never blocked in a write: the relay must hear stop_ while the command
  // does not read.
  if (::fcntl(ends[1], F_SETFL, O_NONBLOCK) != 0)
    return Error::from_errno("stdin", "setting up stdin's relay");
  source->stop_.reset(::eventfd(0, EFD_CLOEXEC));
  if (!source->stop_) return Error::from_errno("stdin", "creating stdin's relay");
  source->fd_ = ends[0];
  source->relay_ = std::thread([raw = source.get(), in_fd] { raw->relay(in_fd); });
  return source;
}

// Copies `from` into the pipe until EOF, an error, the command closing its
// end, or stop_. The pipe's write end closes with it (EOF for the command).
void StdinSource::relay(int from) {
  sigset_t pipe_signal;
  sigemptyset(&pipe_signal);
  sigaddset(&pipe_signal, SIGPIPE);
  // EPIPE instead: the signal is this thread's and stays pending.
  pthread_sigmask(SIG_BLOCK, &pipe_signal, nullptr);
  char buffer[16384];
  while (wait_for(from, POLLIN, stop_.get())) {
    const ssize_t n = ::read(from, buffer, sizeof buffer);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) break;
    for (ssize_t done = 0; done < n;) {
      if (!wait_for(write_end_.get(), POLLOUT, stop_.get())) return;
      const ssize_t written =
          ::write(write_end_.get(), buffer + done, static_cast<size_t>(n - done));
      if (written < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (written <= 0) return;
      done += written;
    }
  }
  write_end_.reset();
}

StdinSource::~StdinSource() {
  if (!relay_.joinable()) return;
  const std::uint64_t one = 1;
  (void)!::write(stop_.get(), &one, sizeof one);
  relay_.join();
}

}  // namespace pulsebox::run
