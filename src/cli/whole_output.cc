#include "cli/whole_output.h"

#include <poll.h>
#include <sys/sendfile.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <iostream>

#include "core/fs.h"
#include "core/throw_error.h"

namespace pulsebox::cli {

using core::Error;
using core::ErrorKind;

namespace {

// Standard output may be non-blocking (a parent's pipe set O_NONBLOCK):
// EAGAIN waits until it takes more, so nothing held is dropped part way.
bool wait_if_full(int err) {
  if (err == EINTR) return true;
  if (err != EAGAIN) return false;
  pollfd out{.fd = STDOUT_FILENO, .events = POLLOUT, .revents = 0};
  return ::poll(&out, 1, -1) >= 0 || errno == EINTR;
}

[[noreturn]] void throw_write_error() {
  core::throw_error(Error::from_errno("output", "writing standard output"));
}

}  // namespace

WholeOutput::WholeOutput() {
  // A closed descriptor 1 would be the held file itself: main() opens
  // /dev/null on it first.
  if (::isatty(STDOUT_FILENO) == 1) return;
  const char* tmpdir = std::getenv("TMPDIR");
  held_in_ = tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp";
  auto file = core::unnamed_temp_file(held_in_);
  if (!file) {
    core::throw_error(Error(ErrorKind::kIo, "output",
                            file.error().to_string() +
                                " (output to a pipe or file is held there until it is whole; "
                                "set TMPDIR to a directory where it can be)"));
  }
  held_ = std::move(file).value();
}

void WholeOutput::write(std::string_view piece) {
  if (!held_) {
    std::cout << piece;
    return;
  }
  core::check_or_throw(
      core::write_all(held_.get(), piece, "the output held in " + held_in_.string()));
}

void WholeOutput::finish() {
  std::cout.flush();
  if (!held_) return;
  off_t offset = 0;
  for (;;) {
    const ssize_t sent = ::sendfile(STDOUT_FILENO, held_.get(), &offset, 1 << 30);
    if (sent > 0) continue;
    if (sent == 0) return;
    if (wait_if_full(errno)) continue;
    if (errno == EINVAL || errno == ENOSYS) break;
    throw_write_error();
  }
  // Standard output that sendfile cannot write (opened with O_APPEND, for
  // one): copied through a buffer instead.
  char buffer[1 << 16];
  for (;;) {
    const ssize_t got = ::pread(held_.get(), buffer, sizeof buffer, offset);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) core::throw_error(Error::from_errno("output", "reading the held output"));
    if (got == 0) return;
    for (ssize_t done = 0; done < got;) {
      const ssize_t n = ::write(STDOUT_FILENO, buffer + done, static_cast<std::size_t>(got - done));
      if (n > 0) {
        done += n;
      } else if (n < 0 && !wait_if_full(errno)) {
        throw_write_error();
      }
    }
    offset += got;
  }
}

}  // namespace pulsebox::cli
