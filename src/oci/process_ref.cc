#include "oci/process_ref.h"

#include <fcntl.h>
#include <signal.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <string>

#include "core/fs.h"
#include "linux/syscalls.h"
#include "oci/invalid_input.h"

namespace pulsebox::oci {

namespace {

std::optional<std::uint64_t> to_number(std::string_view text) {
  std::uint64_t value = 0;
  const auto* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

core::Error gone(const ProcessRef& ref, std::string why) {
  return core::Error(core::ErrorKind::kUnavailable, "oci",
                     "process " + std::to_string(ref.pid) + " " + std::move(why));
}

}  // namespace

std::optional<ProcessStat> parse_process_stat(std::string_view text) {
  // The name (field 2) is whatever the process chose; only the last ')' ends it.
  const auto close = text.rfind(')');
  if (close == std::string_view::npos || close + 2 >= text.size()) return std::nullopt;
  std::string_view rest = text.substr(close + 2);
  ProcessStat stat;
  int field = 3;
  while (!rest.empty() && field <= 22) {
    const auto space = rest.find(' ');
    const std::string_view word = rest.substr(0, space);
    if (field == 3) {
      if (word.size() != 1) return std::nullopt;
      stat.state = word[0];
    } else if (field == 9) {
      constexpr std::uint64_t kPfExiting = 0x4;  // include/linux/sched.h
      const auto flags = to_number(word);
      if (!flags) return std::nullopt;
      stat.exiting = (*flags & kPfExiting) != 0;
    } else if (field == 22) {
      auto start = to_number(word.substr(0, word.find('\n')));
      if (!start) return std::nullopt;
      stat.start_time = *start;
      return stat;
    }
    if (space == std::string_view::npos) break;
    rest.remove_prefix(space + 1);
    ++field;
  }
  return std::nullopt;
}

std::optional<ProcessStat> read_process_stat(pid_t pid) {
  if (pid <= 0) return std::nullopt;
  core::UniqueFd fd(
      ::open(("/proc/" + std::to_string(pid) + "/stat").c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return std::nullopt;
  auto text = core::read_all(fd.get(), 4096, "/proc/<pid>/stat");
  if (!text) return std::nullopt;
  return parse_process_stat(*text);
}

std::optional<std::uint64_t> process_start_time(pid_t pid) {
  const auto stat = read_process_stat(pid);
  if (!stat) return std::nullopt;
  return stat->start_time;
}

core::Result<core::UniqueFd> open_verified_pidfd(const ProcessRef& ref) {
  if (ref.pid <= 0) return gone(ref, "is not recorded");
  core::UniqueFd pidfd(linux_api::sys_pidfd_open(ref.pid));
  if (!pidfd) {
    if (errno == ESRCH) return gone(ref, "has exited");
    return core::Error::from_errno("oci", "pidfd_open(" + std::to_string(ref.pid) + ")");
  }
  const auto stat = read_process_stat(ref.pid);
  if (!stat) return gone(ref, "has exited");
  if (stat->start_time != ref.start_time)
    return gone(ref, "has exited (the pid now names another process)");
  if (stat->state == 'Z' || stat->state == 'X') return gone(ref, "has exited");
  return pidfd;
}

core::Result<int> parse_signal(std::string_view text) {
  const auto invalid = [&] {
    return oci::invalid("invalid signal \"" + std::string(text) +
                        "\": give a number (15), a name (TERM, SIGKILL) or RTMIN+n");
  };
  if (const auto number = to_number(text)) {
    if (*number < 1 || *number > static_cast<std::uint64_t>(SIGRTMAX)) return invalid();
    return static_cast<int>(*number);
  }
  std::string name(text);
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  if (name.rfind("SIG", 0) == 0) name.erase(0, 3);
  const auto realtime = [&](std::string_view base, int origin, int sign) -> core::Result<int> {
    std::string_view rest = std::string_view(name).substr(base.size());
    int value = origin;
    if (!rest.empty()) {
      if (rest[0] != (sign > 0 ? '+' : '-')) return invalid();
      const auto offset = to_number(rest.substr(1));
      if (!offset) return invalid();
      value = origin + sign * static_cast<int>(std::min<std::uint64_t>(*offset, 1000));
    }
    if (value < SIGRTMIN || value > SIGRTMAX) return invalid();
    return value;
  };
  if (name.rfind("RTMIN", 0) == 0) return realtime("RTMIN", SIGRTMIN, 1);
  if (name.rfind("RTMAX", 0) == 0) return realtime("RTMAX", SIGRTMAX, -1);
  static constexpr std::pair<std::string_view, int> kNames[] = {
      {"HUP", SIGHUP},       {"INT", SIGINT},   {"QUIT", SIGQUIT},     {"ILL", SIGILL},
      {"TRAP", SIGTRAP},     {"ABRT", SIGABRT}, {"IOT", SIGIOT},       {"BUS", SIGBUS},
      {"FPE", SIGFPE},       {"KILL", SIGKILL}, {"USR1", SIGUSR1},     {"SEGV", SIGSEGV},
      {"USR2", SIGUSR2},     {"PIPE", SIGPIPE}, {"ALRM", SIGALRM},     {"TERM", SIGTERM},
      {"STKFLT", SIGSTKFLT}, {"CHLD", SIGCHLD}, {"CONT", SIGCONT},     {"STOP", SIGSTOP},
      {"TSTP", SIGTSTP},     {"TTIN", SIGTTIN}, {"TTOU", SIGTTOU},     {"URG", SIGURG},
      {"XCPU", SIGXCPU},     {"XFSZ", SIGXFSZ}, {"VTALRM", SIGVTALRM}, {"PROF", SIGPROF},
      {"WINCH", SIGWINCH},   {"IO", SIGIO},     {"POLL", SIGPOLL},     {"PWR", SIGPWR},
      {"SYS", SIGSYS},
  };
  for (const auto& [known, number] : kNames) {
    if (name == known) return number;
  }
  return invalid();
}

}  // namespace pulsebox::oci
