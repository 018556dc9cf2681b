#include "helpers/test_support.h"

#include <grp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <dirent.h>

#include <algorithm>
#include <cstdio>
#include <thread>

#include "core/sha256.h"

namespace pulsebox::testing {

std::map<std::string, std::string> listing(const std::filesystem::path& root) {
  std::map<std::string, std::string> out;
  for (auto it = std::filesystem::recursive_directory_iterator(root);
       it != std::filesystem::recursive_directory_iterator(); ++it) {
    // lexically_relative: relative() would resolve a symlink to its target.
    const auto relative = it->path().lexically_relative(root).string();
    if (relative == ".agent") {
      it.disable_recursion_pending();
      continue;
    }
    struct stat st {};
    ::lstat(it->path().c_str(), &st);
    char mode[16];
    std::snprintf(mode, sizeof mode, "%06o", st.st_mode);
    std::string description = mode;
    if (S_ISREG(st.st_mode)) description += " " + core::sha256_hex(read_file(it->path()));
    if (S_ISLNK(st.st_mode)) {
      description += " -> " + std::filesystem::read_symlink(it->path()).string();
    }
    out[relative] = description;
  }
  return out;
}

std::map<std::string, std::string> parse_report(const std::string& text) {
  std::map<std::string, std::string> values;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    const auto eq = line.find('=');
    if (eq != std::string::npos) values[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return values;
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  pointers.reserve(strings.size() + 1);
  for (auto& text : strings)
    pointers.push_back(text.data());
  pointers.push_back(nullptr);
  return pointers;
}

int processes_with_marker(const std::string& marker) {
  int found = 0;
  DIR* proc = ::opendir("/proc");
  while (dirent* entry = ::readdir(proc)) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    std::string cmdline = read_file(std::string("/proc/") + entry->d_name + "/cmdline");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (cmdline.find(marker) != std::string::npos) ++found;
  }
  ::closedir(proc);
  return found;
}

std::string run_concurrently(int clients, const std::function<std::string(int)>& client) {
  std::vector<std::string> failures(static_cast<std::size_t>(clients));
  std::vector<std::thread> threads;
  for (int i = 0; i < clients; ++i) {
    threads.emplace_back([&, i] {
      try {
        failures[static_cast<std::size_t>(i)] = client(i);
      } catch (const std::exception& error) {
        failures[static_cast<std::size_t>(i)] = error.what();
      }
    });
  }
  for (auto& thread : threads)
    thread.join();
  std::string report;
  for (int i = 0; i < clients; ++i) {
    if (!failures[static_cast<std::size_t>(i)].empty()) {
      report += "client " + std::to_string(i) + ": " + failures[static_cast<std::size_t>(i)] + "\n";
    }
  }
  return report;
}

int run_as_ordinary_user(const std::function<int()>& body) {
  const bool root = ::geteuid() == 0;
  const pid_t child = ::fork();
  if (child < 0) return -3;
  if (child == 0) {
    if (root && (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0))
      ::_exit(100);
    try {
      ::_exit(body());
    } catch (const std::exception& error) {
      std::fprintf(stderr, "%s\n", error.what());
      ::_exit(101);
    } catch (...) {
      ::_exit(102);
    }
  }
  int status = 0;
  if (::waitpid(child, &status, 0) != child) return -4;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

bool hand_to_ordinary_user(const std::filesystem::path& base) {
  if (::geteuid() != 0) return true;
  for (const auto& item : std::filesystem::recursive_directory_iterator(base)) {
    if (::lchown(item.path().c_str(), 65534, 65534) != 0) return false;
  }
  return ::chown(base.c_str(), 65534, 65534) == 0;
}

bool poll_until(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (condition()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

int free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof address;
  const bool bound = ::bind(fd, reinterpret_cast<sockaddr*>(&address), size) == 0 &&
                     ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size) == 0;
  ::close(fd);
  return bound ? ntohs(address.sin_port) : -1;
}

}  // namespace pulsebox::testing
