#include "linux/cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <thread>

namespace pulsebox::linux_api {

using core::Error;
using core::ErrorKind;
using core::UniqueFd;

namespace {

constexpr const char* kRootSubtree = "pulsebox";
constexpr const char* kSupervisorLeaf = "pulsebox-supervisor";
constexpr const char* kSandboxPrefix = "sandbox-";

// These files are read on every launch: plain reads, no iostreams (whose
// first use in a process costs more than the parsing).
std::string read_small_file(const std::string& path) {
  std::string text;
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return text;
  char buffer[4096];
  for (;;) {
    const ssize_t got = ::read(fd.get(), buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    text.append(buffer, static_cast<std::size_t>(got));
  }
  return text;
}

// The pieces of `text` between separators (empty ones left out).
std::vector<std::string_view> pieces(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  while (!text.empty()) {
    const auto end = text.find(separator);
    const std::string_view part = text.substr(0, end);
    if (!part.empty()) parts.push_back(part);
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return parts;
}

bool exists(const std::string& path) {
  return ::access(path.c_str(), F_OK) == 0;
}

std::set<std::string> words(const std::string& text) {
  std::set<std::string> result;
  for (const std::string_view line : pieces(text, '\n')) {
    for (const std::string_view word : pieces(line, ' '))
      result.emplace(word);
  }
  return result;
}

// A "key value" line of a flat-keyed cgroup file's text (memory.events, cpu.stat).
std::optional<std::uint64_t> keyed_value(const std::string& text, const std::string& key) {
  for (const std::string_view line : pieces(text, '\n')) {
    const auto words_in_line = pieces(line, ' ');
    if (words_in_line.size() < 2 || words_in_line[0] != key) continue;
    const std::string value(words_in_line[1]);
    char* end = nullptr;
    errno = 0;
    const std::uint64_t number = std::strtoull(value.c_str(), &end, 10);
    if (errno != 0 || end == value.c_str() || *end != '\0') return std::nullopt;
    return number;
  }
  return std::nullopt;
}

std::optional<std::uint64_t> number_in(const std::string& text) {
  if (text.empty() || text[0] < '0' || text[0] > '9') return std::nullopt;
  return std::strtoull(text.c_str(), nullptr, 10);
}

// A counter file kept open, read again from its start ("" when it is not
// there). Opening a cgroup file is slow (docs/benchmarks.md): the counters
// are opened when the cgroup is made, and read when the run ends.
std::string read_counter(const UniqueFd& fd) {
  if (!fd) return "";
  char buffer[4096];
  const ssize_t n = ::pread(fd.get(), buffer, sizeof buffer, 0);
  return n > 0 ? std::string(buffer, static_cast<std::size_t>(n)) : "";
}

UniqueFd open_counter(const std::string& path) {
  return UniqueFd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
}

core::Status write_text(const std::string& path, const std::string& value) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd || ::write(fd.get(), value.data(), value.size()) != static_cast<ssize_t>(value.size())) {
    return Error::from_errno("cgroup", "writing \"" + value + "\" to " + path)
        .with_kind(ErrorKind::kUnavailable);
  }
  return core::ok_status();
}

core::Status make_directory(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
    return Error::from_errno("cgroup", "creating the cgroup " + path)
        .with_kind(ErrorKind::kUnavailable);
  }
  return core::ok_status();
}

std::vector<pid_t> listed_processes(const std::string& dir) {
  std::vector<pid_t> pids;
  const std::string text = read_small_file(dir + "/cgroup.procs");
  for (const std::string_view line : pieces(text, '\n')) {
    const std::string number(line);
    const long pid = std::strtol(number.c_str(), nullptr, 10);
    if (pid > 0) pids.push_back(static_cast<pid_t>(pid));
  }
  return pids;
}

// Ends every process in `dir` (a cgroup pulsebox created): cgroup.kill when
// the kernel has it, else SIGKILL to each listed process until none is left.
void kill_cgroup(const std::string& dir) {
  if (exists(dir + "/cgroup.kill")) {
    (void)write_text(dir + "/cgroup.kill", "1");
  }
  for (int attempt = 0; attempt < 200; ++attempt) {
    const auto pids = listed_processes(dir);
    if (pids.empty()) return;
    for (pid_t pid : pids)
      ::kill(pid, SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// rmdir, retried while the last processes finish exiting (bounded);
// whatever is still inside is killed first.
core::Status remove_cgroup_dir(const std::string& dir) {
  for (int attempt = 0; attempt < 400; ++attempt) {
    if (::rmdir(dir.c_str()) == 0 || errno == ENOENT) return core::ok_status();
    if (errno != EBUSY) break;
    if (attempt % 20 == 0) kill_cgroup(dir);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return Error::from_errno("cgroup", "removing the cgroup " + dir);
}

struct Hierarchy {
  std::string mount_point;
  std::string own_dir;  // this process's cgroup in it
};

std::string parent_of(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
}

std::string base_name(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool owned_and_writable(const std::string& dir) {
  struct stat st {};
  return ::stat(dir.c_str(), &st) == 0 && st.st_uid == ::geteuid() &&
         ::access((dir + "/cgroup.procs").c_str(), W_OK) == 0 && ::access(dir.c_str(), W_OK) == 0;
}

std::string delegation_fix(bool pure_v2) {
  if (pure_v2) {
    return "start pulsebox in a cgroup delegated to this user: systemd-run --user --scope -p "
           "Delegate=yes pulsebox run ...; or, as root, create one (mkdir "
           "/sys/fs/cgroup/pulsebox-$USER, chown $USER to it and to its cgroup.procs, "
           "cgroup.subtree_control and cgroup.threads, enable the controllers in "
           "/sys/fs/cgroup/cgroup.subtree_control) and start pulsebox inside it";
  }
  return "as root, give this user a cgroup in each v1 hierarchy (mkdir "
         "/sys/fs/cgroup/{memory,pids,cpu,cpuacct}/pulsebox-$USER and chown -R $USER them) and "
         "start pulsebox inside them (echo $$ > .../cgroup.procs), or run pulsebox as root";
}

}  // namespace

const char* cgroup_controller_name(CgroupController controller) {
  switch (controller) {
    case CgroupController::Memory:
      return "memory";
    case CgroupController::Pids:
      return "pids";
    case CgroupController::Cpu:
      return "cpu";
    case CgroupController::CpuAccounting:
      return "cpuacct";
  }
  return "?";
}

const ControllerPlace& CgroupHost::place(CgroupController controller) const {
  switch (controller) {
    case CgroupController::Memory:
      return memory;
    case CgroupController::Pids:
      return pids;
    case CgroupController::Cpu:
      return cpu;
    case CgroupController::CpuAccounting:
      break;
  }
  return cpu_accounting;
}

std::string CgroupHost::describe() const {
  if (pure_v2) return "cgroup v2 at " + unified_mount;
  if (!hybrid) {
    return unified_mount.empty() ? "no cgroup hierarchy is mounted"
                                 : "cgroup v2 at " + unified_mount;
  }
  std::string text = "hybrid cgroups (v1 controllers";
  if (!unified_mount.empty()) text += ", unified hierarchy at " + unified_mount;
  return text + ")";
}

CgroupHost discover_cgroups() {
  CgroupHost host;
  std::map<std::string, std::string> v1_mounts;  // controller -> mount point
  std::map<std::string, std::string> mount_roots;
  const std::string mountinfo = read_small_file("/proc/self/mountinfo");
  for (const std::string_view line : pieces(mountinfo, '\n')) {
    // id parent major:minor root point options [optional...] - fstype source super
    const auto dash = line.find(" - ");
    if (dash == std::string_view::npos) continue;
    const auto head = pieces(line.substr(0, dash), ' ');
    const auto tail = pieces(line.substr(dash + 3), ' ');
    if (head.size() < 5 || tail.size() < 3) continue;
    const std::string root(head[3]), point(head[4]);
    const std::string_view fstype = tail[0];
    if (fstype == "cgroup2") {
      if (host.unified_mount.empty() || point == "/sys/fs/cgroup") {
        host.unified_mount = point;
        mount_roots[point] = root;
      }
    } else if (fstype == "cgroup") {
      for (const std::string_view piece : pieces(tail[2], ',')) {
        static const std::set<std::string> kNotControllers = {
            "rw", "ro", "xattr", "noprefix", "clone_children", "cpuset_v2_mode", "favordynmods"};
        const std::string option(piece);
        if (!kNotControllers.count(option) && option.find('=') == std::string::npos &&
            !host.hierarchy_mounts.count(option)) {
          host.hierarchy_mounts[option] = point;
          mount_roots[point] = root;
        }
        if (option == "memory" || option == "pids" || option == "cpu" || option == "cpuacct") {
          v1_mounts[option] = point;
          mount_roots[point] = root;
        }
      }
    }
  }
  host.pure_v2 = host.unified_mount == "/sys/fs/cgroup";
  host.hybrid = !v1_mounts.empty();

  std::map<std::string, std::string> own_paths;  // "" = unified, else controller
  {
    const std::string own = read_small_file("/proc/self/cgroup");
    for (const std::string_view line : pieces(own, '\n')) {
      const auto first = line.find(':');
      const auto second = line.find(':', first + 1);
      if (first == std::string_view::npos || second == std::string_view::npos) continue;
      const std::string_view controllers = line.substr(first + 1, second - first - 1);
      const std::string path(line.substr(second + 1));
      if (controllers.empty()) own_paths[""] = path;
      for (const std::string_view name : pieces(controllers, ','))
        own_paths[std::string(name)] = path;
    }
  }
  auto own_dir = [&](const std::string& mount, const std::string& key) {
    std::string path = own_paths.count(key) ? own_paths[key] : "/";
    const std::string& root = mount_roots[mount];
    if (root != "/" && path.rfind(root, 0) == 0) path = path.substr(root.size());
    if (path.empty() || path == "/") return mount;
    return mount + path;
  };

  if (!host.unified_mount.empty()) host.hierarchy_mounts[""] = host.unified_mount;
  for (const auto& [key, mount] : host.hierarchy_mounts)
    host.own_cgroup_dirs[key] = own_dir(mount, key);

  const bool is_root = ::geteuid() == 0;
  const std::string fix = delegation_fix(host.pure_v2);
  std::set<std::string> unified_controllers;

  // The unified hierarchy.
  if (host.unified_mount.empty()) {
    host.unified.problem = "no cgroup2 hierarchy is mounted";
    host.unified.fix = "mount cgroup2 (mount -t cgroup2 none /sys/fs/cgroup/unified)";
  } else if (is_root) {
    host.unified.parent = host.unified_mount + "/" + kRootSubtree;
    host.unified.usable = ::access(host.unified_mount.c_str(), W_OK) == 0;
    if (!host.unified.usable) {
      host.unified.problem = host.unified_mount + " is not writable (mounted read-only?)";
      host.unified.fix = "give pulsebox a writable cgroup2 mount";
    }
    const std::string source = exists(host.unified.parent + "/cgroup.controllers")
                                   ? host.unified.parent + "/cgroup.controllers"
                                   : host.unified_mount + "/cgroup.subtree_control";
    unified_controllers = words(read_small_file(source));
  } else {
    std::string dir = own_dir(host.unified_mount, "");
    if (base_name(dir) == kSupervisorLeaf && owned_and_writable(parent_of(dir))) {
      dir = parent_of(dir);  // moved there by an earlier create()
    }
    if (owned_and_writable(dir)) {
      host.unified.usable = true;
      host.unified.parent = dir;
      unified_controllers = words(read_small_file(dir + "/cgroup.controllers"));
      if (host.pure_v2 && !listed_processes(dir).empty()) {
        host.move_self_to = dir + "/" + kSupervisorLeaf;
      }
    } else {
      host.unified.problem = "this user's cgroup " + dir + " is not delegated to it";
      host.unified.fix = fix;
    }
  }

  for (CgroupController controller : kAllCgroupControllers) {
    const std::string name = cgroup_controller_name(controller);
    ControllerPlace& place = controller == CgroupController::Memory ? host.memory
                             : controller == CgroupController::Pids ? host.pids
                             : controller == CgroupController::Cpu  ? host.cpu
                                                                    : host.cpu_accounting;
    // cpu.stat (usage_usec) is part of every cgroup2 cgroup.
    const bool in_unified = controller == CgroupController::CpuAccounting
                                ? !host.unified_mount.empty()
                                : unified_controllers.count(name) > 0;
    if (in_unified || (host.pure_v2 && !v1_mounts.count(name))) {
      place = host.unified;
      if (host.unified.usable && !in_unified) {
        place.usable = false;
        place.problem =
            "the " + name + " controller is not enabled for " + parent_of(host.unified.parent);
        place.fix = is_root
                        ? "echo +" + name + " > " + host.unified_mount + "/cgroup.subtree_control"
                        : "delegate it: systemd-run --user --scope -p Delegate=yes ... "
                          "(systemd enables the controllers it may delegate)";
      }
      continue;
    }
    if (!v1_mounts.count(name)) {
      place.problem = "no " + name + " controller is mounted";
      place.fix = "mount it (cgroup v2, or the v1 " + name + " hierarchy)";
      continue;
    }
    place.v1 = true;
    const std::string dir = own_dir(v1_mounts[name], name);
    if (is_root) {
      place.parent = v1_mounts[name] + "/" + kRootSubtree;
      place.usable = ::access(v1_mounts[name].c_str(), W_OK) == 0;
      if (!place.usable) {
        place.problem = v1_mounts[name] + " is not writable (mounted read-only?)";
        place.fix = "give pulsebox a writable " + name + " hierarchy";
      }
    } else if (owned_and_writable(dir)) {
      place.parent = dir;
      place.usable = true;
    } else {
      place.problem = "this user's " + name + " cgroup " + dir + " is not delegated to it";
      place.fix = fix;
    }
  }

  if (host.memory.usable) {
    if (host.memory.v1) {
      host.swap_accounting = exists(v1_mounts["memory"] + "/memory.memsw.limit_in_bytes");
    } else {
      const std::string cmdline = read_small_file("/proc/cmdline");
      host.swap_accounting = cmdline.find("swapaccount=0") == std::string::npos &&
                             cmdline.find("cgroup.memory=noswap") == std::string::npos;
    }
  }
  return host;
}

core::Status write_limit(int dir_fd, const char* file, std::string_view value) {
  UniqueFd fd(::openat(dir_fd, file, O_WRONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd || ::write(fd.get(), value.data(), value.size()) != static_cast<ssize_t>(value.size())) {
    return Error::from_errno("cgroup", "writing \"" + std::string(value) + "\" to " + file)
        .with_kind(ErrorKind::kUnavailable);
  }
  return core::ok_status();
}

SandboxCgroup::~SandboxCgroup() {
  (void)remove();
}

core::Result<SandboxCgroup> SandboxCgroup::make(const CgroupHost& host, const std::string& name,
                                                const CgroupSettings& settings, Hierarchies which) {
  SandboxCgroup group;
  const std::string leaf = kSandboxPrefix + name;
  auto need = [&](const ControllerPlace& place, const char* what) -> core::Result<std::string> {
    if (!place.usable) {
      return Error(
          ErrorKind::kUnavailable, "cgroup",
          std::string(what) + " cannot be limited here: " + place.problem + " (" + place.fix + ")");
    }
    return place.parent + "/" + leaf;
  };

  // Unified controllers for the children of the parent.
  std::set<std::string> enable;
  auto wants_unified = [&](const ControllerPlace& place, const char* controller, bool wanted) {
    if (wanted && place.usable && !place.v1) enable.insert(controller);
  };
  wants_unified(host.memory, "memory", settings.memory_max.has_value());
  wants_unified(host.pids, "pids", settings.pids_max.has_value());
  wants_unified(host.cpu, "cpu", settings.cpu_quota_us.has_value());

  std::vector<std::string> dirs;
  if (host.unified.usable) {
    if (!host.move_self_to.empty() && !enable.empty()) {
      PB_CHECK(make_directory(host.move_self_to));
      PB_CHECK(write_text(host.move_self_to + "/cgroup.procs", "0"));
    }
    PB_CHECK(make_directory(host.unified.parent));
    if (!enable.empty()) {
      std::string line;
      for (const auto& controller : enable)
        line += (line.empty() ? "+" : " +") + controller;
      PB_CHECK(write_text(host.unified.parent + "/cgroup.subtree_control", line));
    }
    group.unified_ = host.unified.parent + "/" + leaf;
    dirs.push_back(group.unified_);
  }
  if (settings.memory_max) {
    PB_TRY(dir, need(host.memory, "memory"));
    group.memory_ = dir;
    group.memory_v1_ = host.memory.v1;
  }
  if (settings.pids_max) {
    PB_TRY(dir, need(host.pids, "the process count"));
    group.pids_ = dir;
  }
  if (settings.cpu_quota_us) {
    PB_TRY(dir, need(host.cpu, "CPU bandwidth"));
    group.cpu_ = dir;
  }
  if (host.cpu_accounting.usable) {
    group.cpu_accounting_ = host.cpu_accounting.parent + "/" + leaf;
    group.cpu_accounting_v1_ = host.cpu_accounting.v1;
  }
  for (const auto* dir : {&group.memory_, &group.pids_, &group.cpu_, &group.cpu_accounting_}) {
    if (dir->empty() || *dir == group.unified_) continue;
    if (std::find(group.others_.begin(), group.others_.end(), *dir) != group.others_.end())
      continue;
    group.others_.push_back(*dir);
  }
  group.settings_ = settings;
  group.swap_accounting_ = host.swap_accounting;
  group.cpu_v1_ = host.cpu.v1;
  PB_CHECK(group.create_directories(dirs));
  if (which == Hierarchies::All) PB_CHECK(group.make_others());
  return group;
}

core::Status SandboxCgroup::make_others() {
  for (const auto& dir : others_)
    PB_CHECK(make_directory(parent_of(dir)));  // the v1 "pulsebox" level (ours)
  PB_CHECK(create_directories(others_));
  others_.clear();
  task_files_.open(directories_, unified_);
  open_counters();
  return core::ok_status();
}

core::Status SandboxCgroup::create_directories(const std::vector<std::string>& dirs) {
  for (const auto& dir : dirs) {
    // mkdir and flock happen under a shared lock on the parent, which
    // reconcile_cgroups() takes exclusively: it never sees a new cgroup
    // before its lock is held.
    UniqueFd parent(::open(parent_of(dir).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!parent || ::flock(parent.get(), LOCK_SH) != 0) {
      return Error::from_errno("cgroup", "locking the cgroup " + parent_of(dir))
          .with_kind(ErrorKind::kUnavailable);
    }
    if (::mkdir(dir.c_str(), 0755) != 0) {
      return Error::from_errno("cgroup", "creating the cgroup " + dir)
          .with_kind(ErrorKind::kUnavailable);
    }
    directories_.push_back(dir);
    UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!fd || ::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
      return Error::from_errno("cgroup", "locking the cgroup " + dir);
    }
    if (dir == unified_) {
      unified_fd_ = std::move(fd);
    } else {
      locks_.push_back(std::move(fd));
    }
    PB_CHECK(write_limits_in(dir));
  }
  return core::ok_status();
}

core::Result<SandboxCgroup> SandboxCgroup::create(const CgroupHost& host, const std::string& name,
                                                  const CgroupSettings& settings) {
  return make(host, name, settings);
}

// Before anything runs in `dir`: a v2 memory.max written below what its
// processes hold makes the kernel run the OOM killer from the writer's call,
// and init, whose memory is its supervisor's, is not always exempt (at its
// exit it is not: docs/security-model.md, case 2).
core::Status SandboxCgroup::write_limits_in(const std::string& dir) {
  const CgroupSettings& settings = settings_;
  if (settings.memory_max && memory_ == dir) {
    const std::string limit = std::to_string(*settings.memory_max);
    if (memory_v1_) {
      PB_CHECK(write_text(memory_ + "/memory.limit_in_bytes", limit));
      if (settings.swap_max && swap_accounting_) {
        PB_CHECK(write_text(memory_ + "/memory.memsw.limit_in_bytes",
                            std::to_string(*settings.memory_max + *settings.swap_max)));
      }
    } else {
      PB_CHECK(write_text(memory_ + "/memory.max", limit));
      if (settings.swap_max && swap_accounting_) {
        PB_CHECK(write_text(memory_ + "/memory.swap.max", std::to_string(*settings.swap_max)));
      }
    }
  }
  if (settings.pids_max && pids_ == dir) {
    PB_CHECK(write_text(pids_ + "/pids.max", std::to_string(*settings.pids_max)));
  }
  if (settings.cpu_quota_us && cpu_ == dir) {
    if (cpu_v1_) {
      PB_CHECK(write_text(cpu_ + "/cpu.cfs_period_us", std::to_string(settings.cpu_period_us)));
      PB_CHECK(write_text(cpu_ + "/cpu.cfs_quota_us", std::to_string(*settings.cpu_quota_us)));
    } else {
      PB_CHECK(write_text(cpu_ + "/cpu.max", std::to_string(*settings.cpu_quota_us) + " " +
                                                 std::to_string(settings.cpu_period_us)));
    }
  }
  return core::ok_status();
}

core::Status SandboxCgroup::attach(pid_t pid, bool into_unified_done) const {
  for (const auto& dir : directories_) {
    if (dir == unified_ && into_unified_done) continue;
    PB_CHECK(write_text(dir + "/cgroup.procs", std::to_string(pid)));
  }
  return core::ok_status();
}

void CgroupTaskFiles::open(const std::vector<std::string>& dirs, const std::string& skip) {
  for (const auto& dir : dirs) {
    if (dir == skip || files_.contains(dir)) continue;
    UniqueFd fd(::open((dir + "/tasks").c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW));
    if (fd) files_.emplace(dir, std::move(fd));
  }
}

std::vector<int> CgroupTaskFiles::fds() const {
  std::vector<int> fds;
  for (const auto& [dir, fd] : files_)
    fds.push_back(fd.get());
  return fds;
}

core::Status SandboxCgroup::attach_rest(pid_t pid, bool into_unified_done) const {
  for (const auto& dir : directories_) {
    if ((dir == unified_ && into_unified_done) || task_files_.has(dir)) continue;
    PB_CHECK(write_text(dir + "/cgroup.procs", std::to_string(pid)));
  }
  return core::ok_status();
}

void SandboxCgroup::open_counters() {
  if (!cpu_accounting_.empty()) {
    counters_.cpu =
        open_counter(cpu_accounting_ + (cpu_accounting_v1_ ? "/cpuacct.usage" : "/cpu.stat"));
  }
  if (!memory_.empty()) {
    counters_.memory_peak =
        open_counter(memory_ + (memory_v1_ ? "/memory.max_usage_in_bytes" : "/memory.peak"));
    counters_.oom = open_counter(memory_ + (memory_v1_ ? "/memory.oom_control" : "/memory.events"));
    if (memory_v1_) counters_.memory_failcnt = open_counter(memory_ + "/memory.failcnt");
  }
  if (!pids_.empty()) {
    counters_.pids_current = open_counter(pids_ + "/pids.current");
    counters_.pids_peak = open_counter(pids_ + "/pids.peak");
    counters_.pids_events = open_counter(pids_ + "/pids.events");
  }
}

CgroupUsage SandboxCgroup::usage() const {
  CgroupUsage usage;
  if (cpu_accounting_v1_) {
    if (auto ns = number_in(read_counter(counters_.cpu))) usage.cpu_usec = *ns / 1000;
  } else {
    usage.cpu_usec = keyed_value(read_counter(counters_.cpu), "usage_usec");
  }
  usage.memory_peak = number_in(read_counter(counters_.memory_peak));
  const std::string oom = read_counter(counters_.oom);
  usage.oom_kills = keyed_value(oom, "oom_kill").value_or(0);
  usage.memory_limit_hits = memory_v1_
                                ? number_in(read_counter(counters_.memory_failcnt)).value_or(0)
                                : keyed_value(oom, "max").value_or(0);
  // The current count only matters where the kernel keeps no peak.
  if (!counters_.pids_peak) usage.pids_current = number_in(read_counter(counters_.pids_current));
  usage.pids_peak = number_in(read_counter(counters_.pids_peak));
  usage.pids_limit_hits = keyed_value(read_counter(counters_.pids_events), "max").value_or(0);
  return usage;
}

bool SandboxCgroup::keeps_pids_peak() const {
  return static_cast<bool>(counters_.pids_peak);
}

void SandboxCgroup::kill() const {
  for (const auto& dir : directories_)
    kill_cgroup(dir);
}

core::Status SandboxCgroup::remove() {
  core::Status status;
  for (auto it = directories_.rbegin(); it != directories_.rend(); ++it) {
    if (auto removed = remove_cgroup_dir(*it); !removed && status) status = std::move(removed);
  }
  directories_.clear();
  unified_fd_.reset();
  locks_.clear();
  counters_ = {};
  return status;
}

std::vector<std::string> reconcile_cgroups(const CgroupHost& host) {
  std::vector<std::string> removed;
  std::set<std::string> parents;
  for (const ControllerPlace* place :
       {&host.unified, &host.memory, &host.pids, &host.cpu, &host.cpu_accounting}) {
    if (place->usable) parents.insert(place->parent);
  }
  for (const auto& parent : parents) {
    UniqueFd parent_lock(::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!parent_lock || ::flock(parent_lock.get(), LOCK_EX) != 0) continue;
    DIR* dir = ::opendir(parent.c_str());
    if (dir == nullptr) continue;
    std::vector<std::string> stale;
    std::vector<UniqueFd> stale_locks;  // held: nobody else can take them now
    while (const dirent* entry = ::readdir(dir)) {
      if (std::strncmp(entry->d_name, kSandboxPrefix, std::strlen(kSandboxPrefix)) != 0) continue;
      const std::string path = parent + "/" + entry->d_name;
      UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
      // A live sandbox holds the lock; a crashed one does not.
      if (!fd || ::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) continue;
      stale.push_back(path);
      stale_locks.push_back(std::move(fd));
    }
    ::closedir(dir);
    parent_lock.reset();
    for (const auto& path : stale) {
      kill_cgroup(path);
      if (remove_cgroup_dir(path)) removed.push_back(path);
    }
  }
  return removed;
}

}  // namespace pulsebox::linux_api
