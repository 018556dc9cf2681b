#include "oci/commands/signal_forwarding.h"

#include <poll.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "linux/syscalls.h"

namespace pulsebox::oci::commands {

namespace {

constexpr int kForwarded[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH};

void forward_pending(int signal_fd, int pidfd) {
  signalfd_siginfo info{};
  while (::read(signal_fd, &info, sizeof info) == static_cast<ssize_t>(sizeof info))
    (void)linux_api::sys_pidfd_send_signal(pidfd, static_cast<int>(info.ssi_signo));
}

}  // namespace

ForwardedSignals::ForwardedSignals() {
  ::sigemptyset(&set_);
  for (const int signal : kForwarded)
    ::sigaddset(&set_, signal);
  blocked_ = ::pthread_sigmask(SIG_BLOCK, &set_, &previous_) == 0;
}

ForwardedSignals::~ForwardedSignals() {
  if (!blocked_) return;
  timespec none{};
  while (::sigtimedwait(&set_, nullptr, &none) > 0) {
  }
  ::pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
}

core::Result<core::UniqueFd> ForwardedSignals::open_fd() const {
  if (!blocked_) return core::Error::from_errno("oci", "blocking the signals to forward");
  core::UniqueFd fd(::signalfd(-1, &set_, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!fd) return core::Error::from_errno("oci", "signalfd for the signals to forward");
  return fd;
}

core::Result<int> wait_forwarding(int pidfd, int signal_fd, const std::string& what) {
  for (;;) {
    pollfd ready[2] = {{pidfd, POLLIN, 0}, {signal_fd, POLLIN, 0}};
    if (::poll(ready, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return core::Error::from_errno("oci", "waiting for " + what);
    }
    if ((ready[1].revents & POLLIN) != 0) forward_pending(signal_fd, pidfd);
    if (ready[0].revents == 0) continue;
    siginfo_t info{};
    int rc = 0;
    do {
      rc = ::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd), &info, WEXITED);
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) return core::Error::from_errno("oci", "waiting for " + what);
    return info.si_code == CLD_EXITED ? info.si_status : 128 + info.si_status;
  }
}

}  // namespace pulsebox::oci::commands
