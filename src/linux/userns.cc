#include "linux/userns.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <optional>
#include <string_view>

#include "core/fs.h"
#include "linux/clone.h"
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

// Runs newuidmap/newgidmap PID inside outside count ..., with its stderr in
// the error message.
core::Status run_map_helper(const char* helper, pid_t pid, const std::vector<IdMapping>& maps) {
  std::vector<std::string> args = {helper, std::to_string(pid)};
  for (const auto& m : maps) {
    args.push_back(std::to_string(m.inside));
    args.push_back(std::to_string(m.outside));
    args.push_back(std::to_string(m.count));
  }
  std::vector<char*> argv;
  for (auto& arg : args)
    argv.push_back(arg.data());
  argv.push_back(nullptr);
  int err_pipe[2];
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) return Error::from_errno("userns", "pipe2");
  UniqueFd err_read(err_pipe[0]), err_write(err_pipe[1]);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, err_write.get(), 2);
  pid_t child = 0;
  char* empty_env[] = {nullptr};
  const int rc = ::posix_spawn(&child, helper, &actions, nullptr, argv.data(), empty_env);
  posix_spawn_file_actions_destroy(&actions);
  err_write.reset();
  if (rc != 0) {
    return Error(ErrorKind::kUnavailable, "userns", std::string("cannot run ") + helper, rc);
  }
  std::string message;
  char buffer[512];
  ssize_t n;
  while ((n = ::read(err_read.get(), buffer, sizeof buffer)) > 0)
    message.append(buffer, static_cast<std::size_t>(n));
  int status = 0;
  ::waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    while (!message.empty() && message.back() == '\n')
      message.pop_back();
    return Error(ErrorKind::kUnavailable, "userns",
                 std::string(helper) + " failed" + (message.empty() ? "" : ": " + message));
  }
  return {};
}

}  // namespace

core::Status write_id_maps(pid_t pid, const IdMaps& maps) {
  if (maps.use_helpers) {
    PB_CHECK(run_map_helper(kNewUidMap, pid, maps.uids));
    return run_map_helper(kNewGidMap, pid, maps.gids);
  }
  if (maps.deny_setgroups) PB_CHECK(write_proc(pid, "setgroups", "deny"));
  PB_CHECK(write_proc(pid, "uid_map", render(maps.uids)));
  PB_CHECK(write_proc(pid, "gid_map", render(maps.gids)));
  return {};
}

namespace {

// The holder of the mapping namespace: it only waits for the pipe to close.
// It shares the parent's memory on a stack of its own (linux/clone.h), so it
// must not touch anything the parent uses, errno included: raw system calls.
// The pipe's read end comes as the argument's value: the parent may have
// returned (and reused its stack) before the holder runs at all.
PULSEBOX_CHILD_CODE int hold_namespace(void* argument) {
  const int read_end = static_cast<int>(reinterpret_cast<std::intptr_t>(argument));
  // Keep only the read end. Its copy of the write end, and of any other
  // thread's hold pipe, would keep EOF from coming: two concurrent holders
  // would wait for each other forever.
  if (read_end > 0) raw(SYS_close_range, 0, read_end - 1, 0);
  raw(SYS_close_range, read_end + 1, ~0U, 0);
  char byte;
  raw(SYS_read, read_end, &byte, 1);
  return 0;
}

}  // namespace

core::Result<MappingNamespace> create_mapping_namespace(const IdMaps& maps) {
  int hold[2];
  if (::pipe2(hold, O_CLOEXEC) != 0) return Error::from_errno("userns", "pipe2");
  UniqueFd hold_read(hold[0]), hold_write(hold[1]);
  PB_TRY(stack, ChildStack::allocate(64 * 1024));
  int pidfd = -1;
  const long pid = clone_on_stack(
      CLONE_NEWUSER | CLONE_VM | CLONE_PIDFD | SIGCHLD, stack.top(), &pidfd, hold_namespace,
      reinterpret_cast<void*>(static_cast<std::intptr_t>(hold_read.get())));
  if (pid < 0) {
    return Error(ErrorKind::kIo, "userns", "clone(CLONE_NEWUSER) for an idmapped mount",
                 static_cast<int>(-pid));
  }
  // From here `helper` reaps it (before its stack goes) on every path, once
  // the pipe's write end is closed.
  MappingHelper helper(UniqueFd(pidfd), std::move(stack));
  core::Result<UniqueFd> ns = [&]() -> core::Result<UniqueFd> {
    PB_CHECK(write_id_maps(static_cast<pid_t>(pid), maps));
    const std::string path = "/proc/" + std::to_string(pid) + "/ns/user";
    UniqueFd opened(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!opened) return Error::from_errno("userns", path);
    return opened;
  }();
  hold_write.reset();  // the helper exits
  if (!ns) return std::move(ns).error();
  return MappingNamespace{std::move(ns).value(), std::move(helper)};
}

MappingHelper::MappingHelper(MappingHelper&& other) noexcept
    : pidfd_(std::move(other.pidfd_)), stack_(std::move(other.stack_)) {}

MappingHelper& MappingHelper::operator=(MappingHelper&& other) noexcept {
  if (this != &other) {
    reap();
    pidfd_ = std::move(other.pidfd_);
    stack_ = std::move(other.stack_);
  }
  return *this;
}

MappingHelper::~MappingHelper() {
  reap();
}

// Waits for the helper (its stack goes after this). Another waiter may have
// reaped it already (ECHILD): it has exited either way.
void MappingHelper::reap() {
  if (!pidfd_) return;
  siginfo_t info{};
  while (::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd_.get()), &info, WEXITED) <
             0 &&
         errno == EINTR) {
  }
  pidfd_.reset();
}

bool MappingHelper::try_reap() {
  if (!pidfd_) return true;
  siginfo_t info{};
  const int waited = ::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd_.get()),
                              &info, WEXITED | WNOHANG);
  if (waited == 0 && info.si_pid == 0) return false;  // WNOHANG: still running
  if (waited < 0 && errno == EINTR) return false;
  pidfd_.reset();  // reaped, or by another waiter (ECHILD): gone either way
  return true;
}

namespace {

// The lines of a system id file. A missing, unreadable, oversized or
// non-regular one (a FIFO would block, /dev/zero never end) lists nobody.
std::vector<std::string_view> id_file_lines(const std::string& file, std::string& storage) {
  auto text = core::read_regular_file(file, core::kDefaultReadLimit, "id file");
  if (!text) return {};
  storage = std::move(text).value();
  std::vector<std::string_view> lines;
  std::string_view rest = storage;
  while (!rest.empty()) {
    const auto end = rest.find('\n');
    lines.push_back(rest.substr(0, end));
    rest.remove_prefix(end == std::string_view::npos ? rest.size() : end + 1);
  }
  return lines;
}

}  // namespace

std::optional<std::uint32_t> subordinate_id_base(const std::string& file, const std::string& user,
                                                 std::uint32_t count) {
  std::string storage;
  for (const std::string_view line : id_file_lines(file, storage)) {
    const auto first = line.find(':');
    const auto second = line.find(':', first == std::string::npos ? first : first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    if (line.substr(0, first) != user) continue;
    try {
      const unsigned long base =
          std::stoul(std::string(line.substr(first + 1, second - first - 1)));
      const unsigned long size = std::stoul(std::string(line.substr(second + 1)));
      if (size >= count && base + count <= 0xFFFFFFFFul) return static_cast<std::uint32_t>(base);
    } catch (const std::exception&) {
    }
  }
  return std::nullopt;
}

std::optional<std::string> user_name_in_passwd(const std::string& file, std::uint32_t uid) {
  std::string storage;
  const std::string wanted = std::to_string(uid);
  for (const std::string_view line : id_file_lines(file, storage)) {
    // name:password:uid:...
    const auto name_end = line.find(':');
    if (name_end == std::string::npos) continue;
    const auto uid_start = line.find(':', name_end + 1);
    if (uid_start == std::string::npos) continue;
    const auto uid_end = line.find(':', uid_start + 1);
    if (uid_end == std::string::npos) continue;
    if (line.compare(uid_start + 1, uid_end - uid_start - 1, wanted) == 0) {
      return std::string(line.substr(0, name_end));
    }
  }
  return std::nullopt;
}

std::optional<std::uint32_t> own_subordinate_id_base(const std::string& file, std::uint32_t count) {
  const uid_t uid = ::geteuid();
  if (auto by_number = subordinate_id_base(file, std::to_string(uid), count)) return by_number;
  const auto name = user_name_in_passwd("/etc/passwd", uid);
  if (!name) return std::nullopt;
  return subordinate_id_base(file, *name, count);
}

}  // namespace pulsebox::linux_api
