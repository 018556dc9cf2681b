#include "linux/pty.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "linux/syscalls.h"

namespace pulsebox::linux_api {

PULSEBOX_CHILD_CODE int open_controlling_pty(const winsize& window, int* master,
                                             int* slave) noexcept {
  const long opened = raw(SYS_openat, AT_FDCWD, "/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (opened < 0) return raw_error(opened);
  const int unlock = 0;
  long peer = raw(SYS_ioctl, opened, TIOCSPTLCK, &unlock);
  // The slave through the master: never a path another devpts could answer.
  if (peer == 0) peer = raw(SYS_ioctl, opened, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (peer < 0) {
    raw(SYS_close, opened);
    return raw_error(peer);
  }
  long rc = raw(SYS_ioctl, peer, TIOCSCTTY, 0);
  if (rc == 0 && window.ws_row != 0) rc = raw(SYS_ioctl, peer, TIOCSWINSZ, &window);
  if (rc != 0) {
    raw(SYS_close, peer);
    raw(SYS_close, opened);
    return raw_error(rc);
  }
  *master = static_cast<int>(opened);
  *slave = static_cast<int>(peer);
  return 0;
}

PULSEBOX_CHILD_CODE int send_console_master(int socket, int master, const char* name) noexcept {
  std::size_t length = 0;
  while (name[length] != '\0')
    ++length;
  iovec data{const_cast<char*>(name), length};
  msghdr header{};
  header.msg_iov = &data;
  header.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  header.msg_control = control;
  header.msg_controllen = sizeof control;
  cmsghdr* item = CMSG_FIRSTHDR(&header);
  item->cmsg_level = SOL_SOCKET;
  item->cmsg_type = SCM_RIGHTS;
  item->cmsg_len = CMSG_LEN(sizeof(int));
  __builtin_memcpy(CMSG_DATA(item), &master, sizeof master);
  for (;;) {
    const long sent = raw(SYS_sendmsg, socket, &header, MSG_NOSIGNAL);
    if (sent != -EINTR) return raw_error(sent);
  }
}

namespace {

// Waits for `fd` (`events`), `resized` or stop: which one, -1 for stop or an
// error.
enum class Ready { Fd, Resized, Stop };
Ready wait(int fd, short events, int resized, int stop) {
  for (;;) {
    pollfd fds[3] = {{fd, events, 0}, {resized, POLLIN, 0}, {stop, POLLIN, 0}};
    const int n = ::poll(fds, 3, -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 || fds[2].revents != 0) return Ready::Stop;
    if (fds[1].revents != 0) return Ready::Resized;
    if (fds[0].revents != 0) return Ready::Fd;
  }
}

void apply_size(int from, int resized, int master) {
  char drained[64];
  while (::read(resized, drained, sizeof drained) > 0) {
  }
  winsize size{};
  if (::ioctl(from, TIOCGWINSZ, &size) == 0) (void)::ioctl(master, TIOCSWINSZ, &size);
}

}  // namespace

PtyInputRelay::PtyInputRelay(int input, int resized, int master)
    : stop_(::eventfd(0, EFD_CLOEXEC)) {
  // Never blocked in a write: the relay must hear stop while the command
  // does not read (O_NONBLOCK is the master's open file's: only this
  // process holds it).
  (void)::fcntl(master, F_SETFL, ::fcntl(master, F_GETFL) | O_NONBLOCK);
  thread_ = std::thread([this, input, resized, master] { run(input, resized, master); });
}

void PtyInputRelay::run(int input, int resized, int master) {
  char buffer[4096];
  for (;;) {
    const Ready ready = wait(input, POLLIN, resized, stop_.get());
    if (ready == Ready::Stop) return;
    if (ready == Ready::Resized) {
      apply_size(input, resized, master);
      continue;
    }
    const ssize_t n = ::read(input, buffer, sizeof buffer);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return;
    for (ssize_t done = 0; done < n;) {
      const Ready room = wait(master, POLLOUT, resized, stop_.get());
      if (room == Ready::Stop) return;
      if (room == Ready::Resized) {
        apply_size(input, resized, master);
        continue;
      }
      const ssize_t written = ::write(master, buffer + done, static_cast<size_t>(n - done));
      if (written < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (written <= 0) return;
      done += written;
    }
  }
}

void PtyInputRelay::stop() {
  if (!thread_.joinable()) return;
  const std::uint64_t one = 1;
  (void)!::write(stop_.get(), &one, sizeof one);
  thread_.join();
}

}  // namespace pulsebox::linux_api
