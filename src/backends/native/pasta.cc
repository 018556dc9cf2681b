#include "backends/native/pasta.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

namespace pulsebox::backends::native {
namespace {

namespace fs = std::filesystem;
using core::Error;
using core::ErrorKind;

// How long pasta may take to configure the sandbox's interface.
constexpr auto kReadyTimeout = std::chrono::seconds(10);

std::string log_text(const fs::path& log) {
  std::ifstream in(log);
  std::ostringstream text;
  text << in.rdbuf();
  std::string result = text.str();
  while (!result.empty() && (result.back() == '\n' || result.back() == ' '))
    result.pop_back();
  for (char& c : result) {
    if (c == '\n') c = ';';
  }
  return result.size() > 500 ? result.substr(result.size() - 500) : result;
}

}  // namespace

std::string find_pasta() {
  for (const char* candidate : {"/usr/bin/pasta", "/usr/local/bin/pasta", "/bin/pasta"}) {
    if (::access(candidate, X_OK) == 0) return candidate;
  }
  return "";
}

bool tun_usable() {
  return ::access("/dev/net/tun", R_OK | W_OK) == 0;
}

core::Result<pid_t> start_pasta(const std::string& program, pid_t sandbox_pid,
                                const fs::path& run_dir) {
  const fs::path pid_file = run_dir / "pasta.pid";
  const fs::path log = run_dir / "pasta.log";
  const std::string pid_text = std::to_string(sandbox_pid);
  std::vector<std::string> storage = {
      program,       "--config-net", "--foreground", "--quiet",     "--pid",    pid_file.string(),
      "--tcp-ports", "none",         "--udp-ports",  "none",        "--tcp-ns", "none",
      "--udp-ns",    "none",         "--no-map-gw",  "--ns-ifname", "eth0",     pid_text};
  std::vector<char*> argv;
  for (auto& argument : storage)
    argv.push_back(argument.data());
  argv.push_back(nullptr);
  char* environment[] = {const_cast<char*>("PATH=/usr/sbin:/usr/bin:/sbin:/bin"), nullptr};
  const int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (log_fd < 0) return Error::from_errno("network", "creating " + log.string());
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    // Only async-signal-safe calls between fork and execve.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null >= 0) ::dup2(null, 0);
    ::dup2(log_fd, 1);
    ::dup2(log_fd, 2);
    ::execve(argv[0], argv.data(), environment);
    ::_exit(127);
  }
  ::close(log_fd);
  if (pid < 0) return Error::from_errno("network", "starting pasta");
  const auto deadline = std::chrono::steady_clock::now() + kReadyTimeout;
  for (;;) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      return Error(
          ErrorKind::kUnavailable, "network",
          "pasta ended before the sandbox's network was up (exit status " +
              std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status)) +
              "): " + log_text(log));
    }
    std::error_code ec;
    if (fs::file_size(pid_file, ec) > 0 && !ec) return pid;
    if (std::chrono::steady_clock::now() > deadline) {
      stop_pasta(pid);
      return Error(ErrorKind::kUnavailable, "network",
                   "pasta did not set the sandbox's network up in time: " + log_text(log));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
}

void stop_pasta(pid_t pid) {
  if (pid <= 0) return;
  ::kill(pid, SIGKILL);
  while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace pulsebox::backends::native
