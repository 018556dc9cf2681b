#include "linux/userns.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <optional>

#include "linux/syscalls.h"

namespace pulsebox::linux_api {

using core::Error;
using core::ErrorKind;
using core::UniqueFd;

namespace {

std::string render(const std::vector<IdMapping>& mappings) {
  std::string text;
  for (const auto& m : mappings) {
    text += std::to_string(m.inside) + " " + std::to_string(m.outside) + " " +
            std::to_string(m.count) + "\n";
  }
  return text;
}

core::Status write_proc(pid_t pid, const char* name, const std::string& text) {
  const std::string path = "/proc/" + std::to_string(pid) + "/" + name;
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd) return Error::from_errno("userns", "opening " + path);
  if (::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    return Error::from_errno("userns",
                             "writing \"" + text.substr(0, text.find('\n')) + "\" to " + path);
  }
  return {};
}

}  // namespace

core::Status write_id_maps(pid_t pid, const IdMaps& maps) {
  if (maps.deny_setgroups) PB_CHECK(write_proc(pid, "setgroups", "deny"));
  PB_CHECK(write_proc(pid, "uid_map", render(maps.uids)));
  PB_CHECK(write_proc(pid, "gid_map", render(maps.gids)));
  return {};
}

core::Result<UniqueFd> create_mapping_namespace(const IdMaps& maps) {
  int hold[2];
  if (::pipe2(hold, O_CLOEXEC) != 0) return Error::from_errno("userns", "pipe2");
  UniqueFd hold_read(hold[0]), hold_write(hold[1]);
  const long pid = sys_clone_fork(CLONE_NEWUSER | SIGCHLD, nullptr);
  if (pid < 0) return Error::from_errno("userns", "clone(CLONE_NEWUSER) for an idmapped mount");
  if (pid == 0) {
    // Wait until the parent has what it needs, then leave.
    char byte;
    hold_write.reset();
    (void)!::read(hold_read.get(), &byte, 1);
    ::_exit(0);
  }
  hold_read.reset();
  core::Result<UniqueFd> result = Error(ErrorKind::kInternal, "userns", "unreachable");
  if (auto written = write_id_maps(static_cast<pid_t>(pid), maps); !written) {
    result = written.error();
  } else {
    const std::string path = "/proc/" + std::to_string(pid) + "/ns/user";
    UniqueFd ns(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    result = ns ? core::Result<UniqueFd>(std::move(ns)) : Error::from_errno("userns", path);
  }
  hold_write.reset();
  int status = 0;
  ::waitpid(static_cast<pid_t>(pid), &status, 0);
  return result;
}

std::optional<std::uint32_t> subordinate_id_base(const std::string& file, const std::string& user,
                                                 std::uint32_t count) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    const auto first = line.find(':');
    const auto second = line.find(':', first == std::string::npos ? first : first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    if (line.substr(0, first) != user) continue;
    try {
      const unsigned long base = std::stoul(line.substr(first + 1, second - first - 1));
      const unsigned long size = std::stoul(line.substr(second + 1));
      if (size >= count && base + count <= 0xFFFFFFFFul) return static_cast<std::uint32_t>(base);
    } catch (const std::exception&) {
    }
  }
  return std::nullopt;
}

}  // namespace pulsebox::linux_api
