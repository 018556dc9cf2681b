// The CLI's approver (approval.h).
#include "run/approval.h"

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>

#include "core/fs.h"
#include "core/text.h"
#include "core/unique_fd.h"
#include "linux/syscalls.h"

extern char** environ;

namespace pulsebox::run {
namespace {

using Clock = std::chrono::steady_clock;

ApprovalAnswer denied(std::string approver, std::string detail) {
  return {.approved = false, .approver = std::move(approver), .detail = std::move(detail)};
}

// `sh -c command`, the request on its stdin, its stdout and stderr on the
// run's stderr (never mixed into --json on stdout), in a process group of
// its own so that a timeout ends everything it started.
ApprovalAnswer run_approver(const std::string& command, unsigned timeout_seconds,
                            const ApprovalRequest& request, int err_fd) {
  const std::string who = "--approve-with " + command;
  int pair[2];
  // A socket, not a pipe: an approver that never reads must not stop this
  // process with SIGPIPE (MSG_NOSIGNAL) nor block it past the deadline.
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
    return denied(who, std::string("socketpair: ") + std::strerror(errno));
  }
  core::UniqueFd ours(pair[0]);
  core::UniqueFd theirs(pair[1]);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, theirs.get(), STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_fd, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_fd, STDERR_FILENO);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setpgroup(&attributes, 0);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK);
  const char* argv[] = {"sh", "-c", command.c_str(), nullptr};
  pid_t pid = -1;
  const int spawned = ::posix_spawn(&pid, "/bin/sh", &actions, &attributes,
                                    const_cast<char* const*>(argv), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  theirs.reset();
  if (spawned != 0) return denied(who, std::string("cannot start: ") + std::strerror(spawned));
  core::UniqueFd exited(linux_api::sys_pidfd_open(pid));

  const std::string input = request.to_json() + "\n";
  std::size_t sent = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(timeout_seconds);
  bool ended = false;
  while (!ended) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) break;
    pollfd fds[2] = {{exited.get(), POLLIN, 0}, {ours.get(), POLLOUT, 0}};
    const nfds_t count = ours.get() >= 0 ? 2 : 1;
    if (::poll(fds, count, static_cast<int>(left)) < 0 && errno != EINTR) break;
    if (fds[0].revents != 0) ended = true;
    if (count == 2 && fds[1].revents != 0) {
      const ssize_t n =
          ::send(ours.get(), input.data() + sent, input.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) sent += static_cast<std::size_t>(n);
      // All sent (end of input for the approver), or it stopped reading.
      if (sent == input.size() || (n < 0 && errno != EAGAIN && errno != EINTR)) ours.reset();
    }
  }
  if (!ended) ::kill(-pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!ended) return denied(who, "no answer within " + std::to_string(timeout_seconds) + " s");
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return {.approved = true, .approver = who};
  return denied(who, WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status))
                                       : "killed by signal " + std::to_string(WTERMSIG(status)));
}

// One line from the terminal: y or yes allows.
ApprovalAnswer ask_terminal(const ApprovalRequest& request, int in_fd, int err_fd) {
  const std::string question = "pulsebox: the policy asks before " +
                               std::string(to_string(request.action)) + " \"" +
                               core::escape_for_terminal(request.target) +
                               "\": " + core::escape_for_terminal(request.evaluation.describe()) +
                               "\npulsebox: allow it? [y/N] ";
  if (!core::write_all(err_fd, question, "the approval prompt")) {
    return denied("terminal", "cannot write the prompt");
  }
  std::string line;
  char c = 0;
  while (line.size() < 64) {
    const ssize_t n = ::read(in_fd, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || c == '\n') break;
    line.push_back(c);
  }
  while (!line.empty() && (line.back() == '\r' || line.back() == ' '))
    line.pop_back();
  if (line == "y" || line == "Y" || line == "yes" || line == "Yes") {
    return {.approved = true, .approver = "terminal"};
  }
  return denied("terminal", line.empty() ? "no answer" : "answered no");
}

}  // namespace

Approver make_cli_approver(const RunOptions& o, const RunIo& io) {
  if (o.yes) {
    return [](const ApprovalRequest&) { return ApprovalAnswer{true, "--yes", ""}; };
  }
  if (!o.approve_with.empty()) {
    const int err_fd = io.err_fd;
    return [command = o.approve_with, timeout = o.approve_timeout,
            err_fd](const ApprovalRequest& request) {
      return run_approver(command, timeout, request, err_fd);
    };
  }
  if (io.prompt_fd >= 0 && ::isatty(io.prompt_fd) == 1 && ::isatty(io.err_fd) == 1) {
    return [in_fd = io.prompt_fd, err_fd = io.err_fd](const ApprovalRequest& request) {
      return ask_terminal(request, in_fd, err_fd);
    };
  }
  return {};
}

}  // namespace pulsebox::run
