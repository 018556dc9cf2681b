#include "http/shutdown_signals.h"

#include <pthread.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

namespace pulsebox::http {

core::Status watch_shutdown_signals(std::function<void()> on_signal) {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  if (const int err = ::pthread_sigmask(SIG_BLOCK, &signals, nullptr); err != 0)
    return core::Error::from_errno("signals", "pthread_sigmask", err);
  const int fd = ::signalfd(-1, &signals, SFD_CLOEXEC);
  if (fd < 0) return core::Error::from_errno("signals", "signalfd");
  std::thread([fd, on_signal = std::move(on_signal)] {
    signalfd_siginfo info{};
    while (true) {
      const ssize_t n = ::read(fd, &info, sizeof info);
      if (n < 0 && errno == EINTR) continue;
      if (n != sizeof info) return;
      on_signal();
    }
  }).detach();
  return core::Status();
}

}  // namespace pulsebox::http
