// `run` (design §1.7): create and start in one process, which stays the
// container's parent, passes the signals a terminal or a supervisor sends
// it on to the container's pid 1, waits for it and deletes it.
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <optional>

#include "linux/syscalls.h"
#include "oci/commands/commands.h"

namespace pulsebox::oci::commands {
namespace {

// What `kill` of run means for the container (runc forwards the same set,
// less the job-control ones).
constexpr int kForwarded[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH};

// The forwarded signals are blocked while this lives and read from a
// signalfd instead: one sent during create waits there and is passed on
// once the process exists. The container's process unblocks them (the
// launch resets its mask).
class ForwardedSignals {
 public:
  ForwardedSignals() {
    ::sigemptyset(&set_);
    for (const int signal : kForwarded)
      ::sigaddset(&set_, signal);
    blocked_ = ::pthread_sigmask(SIG_BLOCK, &set_, &previous_) == 0;
  }
  ~ForwardedSignals() {
    if (!blocked_) return;
    // Anything still pending would act on run once unblocked: it was meant
    // for a container that has ended.
    timespec none{};
    while (::sigtimedwait(&set_, nullptr, &none) > 0) {
    }
    ::pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
  }
  ForwardedSignals(const ForwardedSignals&) = delete;
  ForwardedSignals& operator=(const ForwardedSignals&) = delete;

  core::Result<core::UniqueFd> open_fd() const {
    if (!blocked_) return core::Error::from_errno("oci", "blocking the signals run forwards");
    core::UniqueFd fd(::signalfd(-1, &set_, SFD_CLOEXEC | SFD_NONBLOCK));
    if (!fd) return core::Error::from_errno("oci", "signalfd for the signals run forwards");
    return fd;
  }

 private:
  sigset_t set_{};
  sigset_t previous_{};
  bool blocked_ = false;
};

// Passes each pending signal to the process behind `pidfd` (the one clone
// returned, so never another process under a reused pid).
void forward_pending(int signal_fd, int pidfd) {
  signalfd_siginfo info{};
  while (::read(signal_fd, &info, sizeof info) == static_cast<ssize_t>(sizeof info))
    (void)linux_api::sys_pidfd_send_signal(pidfd, static_cast<int>(info.ssi_signo));
}

// Waits for the container's process to end, forwarding signals meanwhile;
// its status, 128 + n after signal n.
core::Result<int> wait_forwarding(int pidfd, int signal_fd, const std::string& id) {
  for (;;) {
    pollfd ready[2] = {{pidfd, POLLIN, 0}, {signal_fd, POLLIN, 0}};
    if (::poll(ready, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return core::Error::from_errno("oci", "waiting for container " + id);
    }
    if ((ready[1].revents & POLLIN) != 0) forward_pending(signal_fd, pidfd);
    if (ready[0].revents == 0) continue;
    siginfo_t info{};
    int rc = 0;
    do {
      rc = ::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd), &info, WEXITED);
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) return core::Error::from_errno("oci", "waiting for container " + id);
    return info.si_code == CLD_EXITED ? info.si_status : 128 + info.si_status;
  }
}

}  // namespace

core::Result<int> run(StateStore& store, const CreateOptions& options, bool detach, bool keep) {
  std::optional<ForwardedSignals> forwarded;
  core::UniqueFd signal_fd;
  if (!detach) {
    forwarded.emplace();
    PB_TRY(fd, forwarded->open_fd());
    signal_fd = std::move(fd);
  }
  PB_TRY(created, create(store, options));
  if (auto started = start(store, options.id); !started.ok()) {
    (void)remove(store, options.id, true);
    return std::move(started).error();
  }
  if (detach) return 0;
  auto status = wait_forwarding(created.process.pidfd(), signal_fd.get(), options.id);
  if (!status) {
    (void)remove(store, options.id, true);
    return std::move(status).error();
  }
  if (!keep) PB_CHECK(remove(store, options.id, true));
  return *status;
}

}  // namespace pulsebox::oci::commands
