#include "helpers/private_network.h"

#include "helpers/namespaces.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

namespace pulsebox::testing {
namespace {

bool entered = false;

std::string failure(const std::string& what) {
  return what + ": " + std::strerror(errno);
}

std::string loopback_up() {
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return failure("socket");
  ifreq request{};
  std::strcpy(request.ifr_name, "lo");
  std::string error;
  if (::ioctl(fd, SIOCGIFFLAGS, &request) != 0) {
    error = failure("reading lo's flags");
  } else {
    request.ifr_flags = static_cast<short>(request.ifr_flags | IFF_UP);
    if (::ioctl(fd, SIOCSIFFLAGS, &request) != 0) error = failure("bringing lo up");
  }
  ::close(fd);
  return error;
}

}  // namespace

std::string enter_private_network() {
  if (entered) return "";
  const uid_t uid = ::getuid();
  const gid_t gid = ::getgid();
  if (::geteuid() == 0) {
    if (::unshare(CLONE_NEWNET | CLONE_NEWNS) != 0) return failure("unshare(CLONE_NEWNET|NEWNS)");
  } else {
    if (::unshare(CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWNS) != 0)
      return failure("unshare(CLONE_NEWUSER|NEWNET|NEWNS)");
    if (!write_proc("/proc/self/setgroups", "deny")) return failure("writing setgroups");
    const std::string uid_line = std::to_string(uid) + " " + std::to_string(uid) + " 1";
    const std::string gid_line = std::to_string(gid) + " " + std::to_string(gid) + " 1";
    if (!write_proc("/proc/self/uid_map", uid_line)) return failure("writing uid_map");
    if (!write_proc("/proc/self/gid_map", gid_line)) return failure("writing gid_map");
  }
  // Mounts made here (the hosts file) never reach the host.
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
    return failure("making / private");
  if (auto error = loopback_up(); !error.empty()) return error;
  entered = true;
  return "";
}

bool in_private_network() {
  return entered;
}

int ip_command(const std::string& arguments) {
  if (!entered) return -1;  // never the host's interfaces
  std::vector<std::string> words = {"ip"};
  std::istringstream split(arguments);
  for (std::string word; split >> word;)
    words.push_back(word);
  std::vector<char*> argv;
  for (auto& word : words)
    argv.push_back(word.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return 128;
  if (pid == 0) {
    // An ordinary user's capabilities in its user namespace end at execve;
    // `ip` alone keeps CAP_NET_ADMIN, as an ambient capability (raw calls:
    // the parent may have threads, so no allocation after fork).
    if (::geteuid() != 0) {
      __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
      __user_cap_data_struct data[2] = {};
      if (::syscall(SYS_capget, &header, data) == 0) {
        data[CAP_TO_INDEX(CAP_NET_ADMIN)].inheritable |= CAP_TO_MASK(CAP_NET_ADMIN);
        ::syscall(SYS_capset, &header, data);
        ::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_NET_ADMIN, 0, 0);
      }
    }
    ::execvp("ip", argv.data());
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

std::string override_hosts_file(const std::string& content) {
  if (!entered) return "not in a private network namespace";
  // One file for the process's life, bound once and rewritten after: a
  // file unlinked under its mount could not be a mount target for the
  // sandboxes (mount(2) refuses a deleted file), nor could it be replaced.
  static std::string path;
  const bool first = path.empty();
  if (first) {
    char pattern[] = "/tmp/pulsebox-hosts-XXXXXX";
    const int fd = ::mkstemp(pattern);
    if (fd < 0) return failure("mkstemp");
    ::fchmod(fd, 0644);
    ::close(fd);
    path = pattern;
    std::atexit([] { ::unlink(path.c_str()); });
  }
  const int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) return failure("opening the hosts file");
  const bool written =
      ::write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size());
  ::close(fd);
  if (!written) return failure("writing the hosts file");
  if (first && ::mount(path.c_str(), "/etc/hosts", nullptr, MS_BIND, nullptr) != 0)
    return failure("bind-mounting the hosts file on /etc/hosts");
  return "";
}

}  // namespace pulsebox::testing
