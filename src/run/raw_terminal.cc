#include "run/raw_terminal.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>

namespace pulsebox::run {

using core::Error;

namespace {

// What the handlers need: set before they are installed, cleared after
// they are removed.
int g_fd = -1;
termios g_saved{};
int g_resize = -1;

constexpr int kEndingSignals[] = {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGABRT, SIGSEGV, SIGBUS};

extern "C" void restore_and_die(int signal) {
  (void)::tcsetattr(g_fd, TCSANOW, &g_saved);
  ::signal(signal, SIG_DFL);
  ::raise(signal);
}

extern "C" void note_resize(int) {
  const int saved_errno = errno;
  (void)!::write(g_resize, "w", 1);
  errno = saved_errno;
}

}  // namespace

core::Result<std::unique_ptr<RawTerminal>> RawTerminal::enter(int fd) {
  std::unique_ptr<RawTerminal> terminal(new RawTerminal());
  if (::tcgetattr(fd, &terminal->saved_) != 0)
    return Error::from_errno("terminal", "reading the terminal's settings");
  int ends[2];
  if (::pipe2(ends, O_CLOEXEC | O_NONBLOCK) != 0)
    return Error::from_errno("terminal", "creating the resize pipe");
  terminal->resize_read_.reset(ends[0]);
  terminal->resize_write_.reset(ends[1]);
  terminal->fd_ = fd;
  g_fd = fd;
  g_saved = terminal->saved_;
  g_resize = ends[1];
  struct sigaction action {};
  sigemptyset(&action.sa_mask);
  action.sa_handler = restore_and_die;
  for (const int signal : kEndingSignals)
    ::sigaction(signal, &action, nullptr);
  action.sa_handler = note_resize;
  action.sa_flags = SA_RESTART;
  ::sigaction(SIGWINCH, &action, nullptr);
  termios raw = terminal->saved_;
  ::cfmakeraw(&raw);
  if (::tcsetattr(fd, TCSANOW, &raw) != 0)
    return Error::from_errno("terminal", "setting the terminal to raw mode");
  return terminal;
}

RawTerminal::~RawTerminal() {
  (void)::tcsetattr(fd_, TCSANOW, &saved_);
  for (const int signal : kEndingSignals)
    ::signal(signal, SIG_DFL);
  ::signal(SIGWINCH, SIG_DFL);
  g_fd = -1;
  g_resize = -1;
}

}  // namespace pulsebox::run
