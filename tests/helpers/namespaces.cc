#include "helpers/namespaces.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace pulsebox::testing {

bool write_proc(const char* path, const std::string& text) {
  const int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok;
}

ChildOutcome run_in_namespaces(NamespaceKind kind, const std::function<int()>& fn) {
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) return {true, "pipe failed", -1};
  const uid_t uid = ::getuid();
  const gid_t gid = ::getgid();
  const pid_t pid = ::fork();
  if (pid < 0) return {true, "fork failed", -1};
  if (pid == 0) {
    ::close(report[0]);
    auto fail = [&](const std::string& what) {
      const std::string text = what + ": " + std::strerror(errno);
      (void)!::write(report[1], text.data(), text.size());
      ::_exit(120);
    };
    if (kind == NamespaceKind::kUserAndMount || kind == NamespaceKind::kNoNestedUserNamespaces) {
      if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) fail("unshare(CLONE_NEWUSER|CLONE_NEWNS)");
      if (!write_proc("/proc/self/setgroups", "deny")) fail("writing setgroups");
      if (!write_proc("/proc/self/uid_map", "0 " + std::to_string(uid) + " 1")) fail("uid_map");
      if (!write_proc("/proc/self/gid_map", "0 " + std::to_string(gid) + " 1")) fail("gid_map");
    } else if (::unshare(CLONE_NEWNS) != 0) {
      fail("unshare(CLONE_NEWNS)");
    }
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) fail("making / private");
    if (kind == NamespaceKind::kNoNestedUserNamespaces &&
        !write_proc("/proc/sys/user/max_user_namespaces", "0")) {
      fail("limiting user.max_user_namespaces in the test's own namespace");
    }
    ::close(report[1]);
    ::_exit(fn());
  }
  ::close(report[1]);
  char buffer[512];
  const ssize_t n = ::read(report[0], buffer, sizeof buffer);
  ::close(report[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ChildOutcome outcome;
  if (n > 0) {
    outcome.setup_failed = true;
    outcome.setup_error.assign(buffer, static_cast<std::size_t>(n));
    return outcome;
  }
  outcome.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return outcome;
}

int mount_overlay(const std::string& lower, const std::string& upper, const std::string& work,
                  const std::string& merged, bool userxattr) {
  std::string options =
      "lowerdir=" + lower + ",upperdir=" + upper + ",workdir=" + work + ",index=off,xino=off";
  if (userxattr) options += ",userxattr";
  return ::mount("overlay", merged.c_str(), "overlay", 0, options.c_str()) == 0 ? 0 : errno;
}

}  // namespace pulsebox::testing
