#include "oci/cgroups.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <set>
#include <sstream>
#include <thread>

#include "core/fs.h"
#include "linux/syscalls.h"

namespace pulsebox::oci {

namespace {

core::Error invalid(std::string message) {
  return core::Error(core::ErrorKind::kInvalidInput, "oci", std::move(message));
}

core::Error unavailable(std::string message) {
  return core::Error(core::ErrorKind::kUnavailable, "cgroup", std::move(message));
}

std::vector<std::string> components(std::string_view path) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (start <= path.size()) {
    const auto slash = path.find('/', start);
    const auto part = path.substr(start, slash == std::string_view::npos ? slash : slash - start);
    if (!part.empty()) parts.emplace_back(part);
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return parts;
}

// Every pid listed in <dir>/cgroup.procs (none when it cannot be read).
std::vector<pid_t> listed_pids(const std::string& dir) {
  std::vector<pid_t> pids;
  core::UniqueFd fd(::open((dir + "/cgroup.procs").c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return pids;
  auto text = core::read_all(fd.get(), 16 << 20, "cgroup.procs");
  if (!text) return pids;
  std::istringstream in(*text);
  for (long pid = 0; in >> pid;) {
    if (pid > 0) pids.push_back(static_cast<pid_t>(pid));
  }
  return pids;
}

bool is_cgroup2(const std::string& dir) {
  struct statfs fs {};
  return ::statfs(dir.c_str(), &fs) == 0 && fs.f_type == CGROUP2_SUPER_MAGIC;
}

std::string bytes(std::int64_t value, bool v2) {
  if (value < 0) return v2 ? "max" : "-1";
  return std::to_string(value);
}

bool set(const std::optional<std::int64_t>& value) {
  return value && *value != 0;
}

// The rmdir of a leaf, retried while a dying process still holds it (a v1
// cgroup keeps an unreaped zombie).
core::Status remove_leaf(const std::string& dir) {
  constexpr int kAttempts = 50;
  for (int attempt = 0;; ++attempt) {
    if (::rmdir(dir.c_str()) == 0 || errno == ENOENT) return core::ok_status();
    if (errno != EBUSY || attempt + 1 == kAttempts) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return core::Error::from_errno("cgroup", "removing the container's cgroup " + dir);
}

}  // namespace

core::Result<CgroupsPath> parse_cgroups_path(std::string_view text, bool systemd_flag,
                                             std::string_view id) {
  if (systemd_flag) return invalid(std::string(kSystemdCgroupRefusal));
  if (text.find(':') != std::string_view::npos)
    return invalid(
        "linux.cgroupsPath \"" + std::string(text) +
        "\" is systemd's slice:prefix:name syntax: " + std::string(kSystemdCgroupRefusal));
  CgroupsPath path;
  if (text.empty()) {
    path.relative = "pulsebox-oci/" + std::string(id);
    return path;
  }
  path.from_own_cgroup = text[0] != '/';
  for (const auto& part : components(text)) {
    if (part == "." || part == "..")
      return invalid("linux.cgroupsPath \"" + std::string(text) +
                     "\": \".\" and \"..\" are not allowed; give the path without them");
    if (part.rfind("cgroup.", 0) == 0)
      return invalid("linux.cgroupsPath \"" + std::string(text) + "\": \"" + part +
                     "\" is the name of a cgroup control file");
    path.relative += (path.relative.empty() ? "" : "/") + part;
  }
  if (path.relative.empty())
    return invalid("linux.cgroupsPath \"" + std::string(text) +
                   "\" names the root cgroup: give a cgroup of the container's own");
  return path;
}

core::Result<std::vector<CgroupWrite>> plan_cgroup_writes(const CgroupResources& r, bool v2) {
  std::vector<CgroupWrite> writes;
  const auto add = [&](const char* v1_hierarchy, std::string file, std::string value,
                       const char* resource) {
    writes.push_back({v2 ? "" : v1_hierarchy, std::move(file), std::move(value), resource});
  };
  if (set(r.memory_limit))
    add("memory", v2 ? "memory.max" : "memory.limit_in_bytes", bytes(*r.memory_limit, v2),
        "linux.resources.memory.limit");
  if (set(r.memory_swap)) {
    const bool limited = set(r.memory_limit) && *r.memory_limit > 0;
    if (*r.memory_swap > 0 && !limited)
      return invalid(
          "linux.resources.memory.swap: a swap limit needs linux.resources.memory.limit "
          "(OCI's swap is memory plus swap); set both or neither");
    if (*r.memory_swap > 0 && *r.memory_swap < *r.memory_limit)
      return invalid("linux.resources.memory.swap (" + std::to_string(*r.memory_swap) +
                     ") is below linux.resources.memory.limit (" + std::to_string(*r.memory_limit) +
                     "): it counts memory plus swap");
    if (v2) {
      add("", "memory.swap.max",
          *r.memory_swap < 0 ? "max" : std::to_string(*r.memory_swap - *r.memory_limit),
          "linux.resources.memory.swap");
    } else {
      add("memory", "memory.memsw.limit_in_bytes", bytes(*r.memory_swap, false),
          "linux.resources.memory.swap");
    }
  }
  if (set(r.memory_reservation))
    add("memory", v2 ? "memory.low" : "memory.soft_limit_in_bytes",
        bytes(*r.memory_reservation, v2), "linux.resources.memory.reservation");
  if (set(r.pids_limit))
    add("pids", "pids.max", *r.pids_limit < 0 ? "max" : std::to_string(*r.pids_limit),
        "linux.resources.pids.limit");
  if (r.cpu_shares && *r.cpu_shares != 0) {
    if (v2) {
      if (*r.cpu_shares < 2 || *r.cpu_shares > 262144)
        return invalid("linux.resources.cpu.shares " + std::to_string(*r.cpu_shares) +
                       ": give a value from 2 to 262144");
      add("", "cpu.weight", std::to_string(1 + ((*r.cpu_shares - 2) * 9999) / 262142),
          "linux.resources.cpu.shares");
    } else {
      add("cpu", "cpu.shares", std::to_string(*r.cpu_shares), "linux.resources.cpu.shares");
    }
  }
  const bool quota = set(r.cpu_quota);
  const bool period = r.cpu_period && *r.cpu_period != 0;
  if (v2 && (quota || period)) {
    add("", "cpu.max",
        (quota && *r.cpu_quota > 0 ? std::to_string(*r.cpu_quota) : "max") + " " +
            std::to_string(period ? *r.cpu_period : 100000),
        quota ? "linux.resources.cpu.quota" : "linux.resources.cpu.period");
  } else if (!v2) {
    // The period first: a quota is checked against the period in place.
    if (period)
      add("cpu", "cpu.cfs_period_us", std::to_string(*r.cpu_period), "linux.resources.cpu.period");
    if (quota)
      add("cpu", "cpu.cfs_quota_us", std::to_string(*r.cpu_quota < 0 ? -1 : *r.cpu_quota),
          "linux.resources.cpu.quota");
  }
  return writes;
}

core::Result<ContainerCgroup> ContainerCgroup::create(const linux_api::CgroupHost& host,
                                                      const CgroupsPath& path,
                                                      const CgroupResources& resources) {
  const bool v2 = !host.hybrid;
  PB_TRY(writes, plan_cgroup_writes(resources, v2));

  // The hierarchies: the unified one always; on a hybrid host the v1 ones
  // a container is always placed in, when mounted (a missing one is an
  // error only when a limit needs it).
  std::vector<std::string> keys;
  if (host.hierarchy_mounts.count("")) keys.emplace_back("");
  if (host.hybrid) {
    for (const char* name : {"memory", "pids", "cpu", "cpuacct", "devices"}) {
      if (host.hierarchy_mounts.count(name)) keys.emplace_back(name);
    }
  }
  for (const auto& write : writes) {
    if (std::find(keys.begin(), keys.end(), write.hierarchy) == keys.end())
      return unavailable(write.resource + ": this host has no " +
                         (write.hierarchy.empty() ? "cgroup2" : write.hierarchy) +
                         " hierarchy mounted; remove the limit or mount the controller");
  }

  ContainerCgroup cgroup;
  std::vector<std::string> made;  // leaves this call created, removed on failure
  std::vector<std::pair<std::string, std::string>> leaf_of;  // key -> leaf
  const auto fail = [&](core::Error error) -> core::Error {
    for (auto it = made.rbegin(); it != made.rend(); ++it)
      (void)remove_leaf(*it);
    return error;
  };
  for (const auto& key : keys) {
    const auto& bases = path.from_own_cgroup ? host.own_cgroup_dirs : host.hierarchy_mounts;
    const auto found = bases.find(key);
    if (found == bases.end())
      return fail(unavailable("no own cgroup found in the " + (key.empty() ? "cgroup2" : key) +
                              " hierarchy for the relative linux.cgroupsPath " + path.relative));
    const std::string& base = found->second;
    const auto parts = components(path.relative);
    // Co-mounted controllers (cpu,cpuacct) share one directory.
    std::string leaf = base;
    for (const auto& part : parts)
      leaf += "/" + part;
    leaf_of.emplace_back(key, leaf);
    if (std::find(cgroup.leaf_dirs_.begin(), cgroup.leaf_dirs_.end(), leaf) !=
        cgroup.leaf_dirs_.end())
      continue;
    std::string dir = base;
    for (std::size_t i = 0; i < parts.size(); ++i) {
      dir += "/" + parts[i];
      if (::mkdir(dir.c_str(), 0755) == 0) {
        if (i + 1 == parts.size()) made.push_back(dir);
        continue;
      }
      if (errno != EEXIST)
        return fail(core::Error::from_errno("cgroup", "making the cgroup " + dir)
                        .with_kind(core::ErrorKind::kUnavailable));
      if (i + 1 == parts.size() && !listed_pids(dir).empty())
        return fail(unavailable("the cgroup " + dir +
                                " already holds processes: pulsebox never adopts a populated "
                                "cgroup; give the container another linux.cgroupsPath"));
    }
    cgroup.leaf_dirs_.push_back(leaf);
    if (key.empty()) cgroup.unified_leaf_ = leaf;
  }
  // On cgroup v2 a controller's files appear in the leaf only when every
  // level above it, from the hierarchy's root (or this process's own
  // cgroup) down, enables it in cgroup.subtree_control.
  if (v2 && !cgroup.unified_leaf_.empty()) {
    std::string enable;  // "+memory +pids": one write per level
    for (const auto& write : writes) {
      const std::string controller = "+" + write.file.substr(0, write.file.find('.'));
      if ((" " + enable + " ").find(" " + controller + " ") == std::string::npos)
        enable += (enable.empty() ? "" : " ") + controller;
    }
    const auto& bases = path.from_own_cgroup ? host.own_cgroup_dirs : host.hierarchy_mounts;
    std::string dir = bases.at("");
    const auto parts = components(path.relative);
    for (std::size_t i = 0; !enable.empty() && i < parts.size(); ++i) {
      core::UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
      auto status = fd ? linux_api::write_limit(fd.get(), "cgroup.subtree_control", enable)
                       : core::Status(core::Error::from_errno("cgroup", "opening " + dir));
      if (!status.ok())
        return fail(
            unavailable("cannot enable " + enable + " in " + dir +
                        "/cgroup.subtree_control for the container's limits: " +
                        std::strerror(status.error().error_number()) +
                        " (a cgroup holding processes cannot enable controllers for its children; "
                        "give the container a linux.cgroupsPath in a delegated subtree)"));
      dir += "/" + parts[i];
    }
  }
  if (!cgroup.unified_leaf_.empty()) {
    cgroup.unified_fd_.reset(
        ::open(cgroup.unified_leaf_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!cgroup.unified_fd_)
      return fail(core::Error::from_errno("cgroup", "opening " + cgroup.unified_leaf_));
  }
  for (const auto& write : writes) {
    const auto it = std::find_if(leaf_of.begin(), leaf_of.end(),
                                 [&](const auto& entry) { return entry.first == write.hierarchy; });
    core::UniqueFd dir(::open(it->second.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    auto status = dir ? linux_api::write_limit(dir.get(), write.file.c_str(), write.value)
                      : core::Status(core::Error::from_errno("cgroup", "opening " + it->second));
    if (!status.ok()) {
      const int err = status.error().error_number();
      return fail(unavailable(
          write.resource + ": cannot write " + write.value + " to " + it->second + "/" +
          write.file + ": " + std::strerror(err) +
          (err == ENOENT ? " (this host lacks the control file: the controller is not enabled "
                           "there, or swap accounting is off); remove the limit"
                         : "")));
    }
  }
  return cgroup;
}

ContainerCgroup ContainerCgroup::from_record(const std::vector<std::string>& leaf_dirs) {
  ContainerCgroup cgroup;
  cgroup.leaf_dirs_ = leaf_dirs;
  for (const auto& leaf : leaf_dirs) {
    if (cgroup.unified_leaf_.empty() && is_cgroup2(leaf)) cgroup.unified_leaf_ = leaf;
  }
  if (!cgroup.unified_leaf_.empty())
    cgroup.unified_fd_.reset(
        ::open(cgroup.unified_leaf_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  return cgroup;
}

core::Status ContainerCgroup::attach(pid_t pid, bool into_unified_done) const {
  const std::string text = std::to_string(pid);
  for (const auto& leaf : leaf_dirs_) {
    if (into_unified_done && leaf == unified_leaf_) continue;
    core::UniqueFd dir(::open(leaf.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!dir) return core::Error::from_errno("cgroup", "opening " + leaf);
    PB_CHECK(linux_api::write_limit(dir.get(), "cgroup.procs", text));
  }
  return core::ok_status();
}

core::Result<std::vector<pid_t>> ContainerCgroup::pids() const {
  std::set<pid_t> all;
  for (const auto& leaf : leaf_dirs_) {
    if (!unified_leaf_.empty() && leaf != unified_leaf_) continue;
    for (pid_t pid : listed_pids(leaf))
      all.insert(pid);
  }
  return std::vector<pid_t>(all.begin(), all.end());
}

core::Status ContainerCgroup::kill_all(int signal) const {
  if (signal == SIGKILL && unified_fd_ &&
      linux_api::write_limit(unified_fd_.get(), "cgroup.kill", "1").ok())
    return core::ok_status();
  // Each pid through its own pidfd, opened before the pid is checked to be
  // still in the cgroup: a pid that died and was reused in between is
  // signalled only if the newcomer is a member too.
  std::set<pid_t> signalled;
  constexpr int kRounds = 10;
  for (int round = 0; round < kRounds; ++round) {
    PB_TRY(listed, pids());
    bool fresh = false;
    for (pid_t pid : listed) {
      if (!signalled.insert(pid).second) continue;
      fresh = true;
      core::UniqueFd pidfd(linux_api::sys_pidfd_open(pid));
      if (!pidfd) continue;
      PB_TRY(again, pids());
      if (std::find(again.begin(), again.end(), pid) == again.end()) continue;
      (void)linux_api::sys_pidfd_send_signal(pidfd.get(), signal);
    }
    if (!fresh) break;
  }
  return core::ok_status();
}

core::Status ContainerCgroup::remove() {
  for (auto it = leaf_dirs_.rbegin(); it != leaf_dirs_.rend(); ++it)
    PB_CHECK(remove_leaf(*it));
  unified_fd_.reset();
  return core::ok_status();
}

}  // namespace pulsebox::oci
