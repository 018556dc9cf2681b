#include "oci/cgroups.h"

#include "core/trace.h"

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
#include <tuple>

#include "core/fs.h"
#include "linux/syscalls.h"
#include "oci/invalid_input.h"

namespace pulsebox::oci {

namespace {

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

// A cpuset list ("0-3,5"): digits, commas and dashes only, so that the value
// cannot carry anything else into the control file.
bool cpu_list(const std::string& text) {
  return !text.empty() && text.find_first_not_of("0123456789,-") == std::string::npos;
}

// A hugepage size as the kernel names its hugetlb files ("2MB", "1GB").
bool page_size(const std::string& text) {
  const auto digits = text.find_first_not_of("0123456789");
  return digits != 0 && digits != std::string::npos && text.size() == digits + 2 &&
         std::string_view("KMG").find(text[digits]) != std::string_view::npos && text.back() == 'B';
}

std::string device(const BlockDeviceValue& entry) {
  return std::to_string(entry.major) + ":" + std::to_string(entry.minor);
}

core::Status block_io_writes(const BlockIoLimits& b, bool v2, std::vector<CgroupWrite>& writes) {
  const std::string base = "linux.resources.blockIO.";
  const auto weight_range = [&](std::uint64_t weight, const std::string& path) -> core::Status {
    if (weight < 10 || weight > 1000)
      return invalid(path + " " + std::to_string(weight) + ": give a weight from 10 to 1000");
    return core::ok_status();
  };
  const auto v2_refusal = [&](const std::string& path, const char* why) {
    return core::Error(
        core::ErrorKind::kUnsupported, "oci",
        "config.json: " + path + ": not supported on cgroup v2: " + why + "; remove it");
  };
  if (b.weight != 0) {
    PB_CHECK(weight_range(b.weight, base + "weight"));
    const std::string value = std::to_string(b.weight);
    if (v2) {
      // io.weight's range is 1-10000: runc's conversion from blkio's 10-1000.
      writes.push_back({"", "io.bfq.weight", value, base + "weight", "io.weight",
                        std::to_string(1 + (b.weight - 10) * 9999 / 990)});
    } else {
      writes.push_back(
          {"blkio", "blkio.weight", value, base + "weight", "blkio.bfq.weight", value});
    }
  }
  if (b.leaf_weight != 0) {
    if (v2) return v2_refusal(base + "leafWeight", "cgroup v2 has no leaf weight");
    PB_CHECK(weight_range(b.leaf_weight, base + "leafWeight"));
    writes.push_back(
        {"blkio", "blkio.leaf_weight", std::to_string(b.leaf_weight), base + "leafWeight", "", ""});
  }
  for (std::size_t i = 0; i < b.weight_device.size(); ++i) {
    const auto& entry = b.weight_device[i];
    const std::string path = base + "weightDevice[" + std::to_string(i) + "].weight";
    if (entry.value == 0) continue;
    PB_CHECK(weight_range(entry.value, path));
    const std::string value = device(entry) + " " + std::to_string(entry.value);
    if (v2) {
      writes.push_back({"", "io.bfq.weight", value, path, "", ""});
    } else {
      writes.push_back(
          {"blkio", "blkio.weight_device", value, path, "blkio.bfq.weight_device", value});
    }
  }
  for (std::size_t i = 0; i < b.leaf_weight_device.size(); ++i) {
    const auto& entry = b.leaf_weight_device[i];
    const std::string path = base + "weightDevice[" + std::to_string(i) + "].leafWeight";
    if (entry.value == 0) continue;
    if (v2) return v2_refusal(path, "cgroup v2 has no leaf weight");
    PB_CHECK(weight_range(entry.value, path));
    writes.push_back({"blkio", "blkio.leaf_weight_device",
                      device(entry) + " " + std::to_string(entry.value), path, "", ""});
  }
  const std::pair<const std::vector<BlockDeviceValue>*, const char*> throttles[] = {
      {&b.read_bps, "throttleReadBpsDevice"},
      {&b.write_bps, "throttleWriteBpsDevice"},
      {&b.read_iops, "throttleReadIOPSDevice"},
      {&b.write_iops, "throttleWriteIOPSDevice"},
  };
  static const char* const kV1Files[] = {
      "blkio.throttle.read_bps_device", "blkio.throttle.write_bps_device",
      "blkio.throttle.read_iops_device", "blkio.throttle.write_iops_device"};
  static const char* const kV2Keys[] = {"rbps", "wbps", "riops", "wiops"};
  for (std::size_t kind = 0; kind < 4; ++kind) {
    const auto& [entries, name] = throttles[kind];
    for (std::size_t i = 0; i < entries->size(); ++i) {
      const auto& entry = (*entries)[i];
      const std::string path = base + name + "[" + std::to_string(i) + "]";
      if (v2) {
        // 0 lifts the limit: io.max says "max".
        writes.push_back({"", "io.max",
                          device(entry) + " " + kV2Keys[kind] + "=" +
                              (entry.value == 0 ? "max" : std::to_string(entry.value)),
                          path, "", ""});
      } else {
        writes.push_back({"blkio", kV1Files[kind],
                          device(entry) + " " + std::to_string(entry.value), path, "", ""});
      }
    }
  }
  return core::ok_status();
}

// A new v1 cpuset cgroup starts with empty cpus and mems and can then hold
// no process: it gets its parent's, as runc does (the limits are written
// after, and must be a subset of them).
core::Status inherit_cpuset(const std::string& dir) {
  const std::string parent = dir.substr(0, dir.rfind('/'));
  for (const char* file : {"cpuset.cpus", "cpuset.mems"}) {
    std::string value;
    {
      core::UniqueFd fd(::open((parent + "/" + file).c_str(), O_RDONLY | O_CLOEXEC));
      auto text = fd ? core::read_all(fd.get(), 64 << 10, file)
                     : core::Result<std::string>(core::Error::from_errno("cgroup", parent));
      if (!text)
        return unavailable("reading " + parent + "/" + file + " for the new cpuset " + dir);
      value = *text;
    }
    while (!value.empty() && (value.back() == '\n' || value.back() == ' '))
      value.pop_back();
    if (value.empty())
      return unavailable(parent + "/" + file +
                         " is empty: the container's cpuset cgroup can take none from it; give "
                         "the parent cpus and mems, or another linux.cgroupsPath");
    core::UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    auto status = fd ? linux_api::write_limit(fd.get(), file, value)
                     : core::Status(core::Error::from_errno("cgroup", "opening " + dir));
    if (!status.ok())
      return unavailable("copying " + parent + "/" + file + " (" + value + ") into " + dir + ": " +
                         std::strerror(status.error().error_number()));
  }
  return core::ok_status();
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
                       std::string resource) {
    writes.push_back(
        {v2 ? "" : v1_hierarchy, std::move(file), std::move(value), std::move(resource), "", ""});
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
  if (r.memory_swappiness) {
    if (v2)
      return core::Error(core::ErrorKind::kUnsupported, "oci",
                         "config.json: linux.resources.memory.swappiness: not supported on cgroup "
                         "v2 (it has no per-cgroup swappiness); remove it");
    add("memory", "memory.swappiness", std::to_string(*r.memory_swappiness),
        "linux.resources.memory.swappiness");
  }
  if (r.disable_oom_killer) {
    if (v2)
      return core::Error(core::ErrorKind::kUnsupported, "oci",
                         "config.json: linux.resources.memory.disableOOMKiller: not supported on "
                         "cgroup v2 (the OOM killer cannot be turned off for a cgroup there); "
                         "remove it");
    add("memory", "memory.oom_control", "1", "linux.resources.memory.disableOOMKiller");
  }
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
  if (r.cpu_burst && *r.cpu_burst != 0)
    add("cpu", v2 ? "cpu.max.burst" : "cpu.cfs_burst_us", std::to_string(*r.cpu_burst),
        "linux.resources.cpu.burst");
  if (r.cpu_idle && *r.cpu_idle != 0) {
    if (*r.cpu_idle != 1)
      return invalid("linux.resources.cpu.idle " + std::to_string(*r.cpu_idle) + ": give 0 or 1");
    add("cpu", "cpu.idle", "1", "linux.resources.cpu.idle");
  }
  for (const auto& [value, file, path] :
       {std::tuple{&r.cpuset_cpus, "cpuset.cpus", "linux.resources.cpu.cpus"},
        std::tuple{&r.cpuset_mems, "cpuset.mems", "linux.resources.cpu.mems"}}) {
    if (value->empty()) continue;
    if (!cpu_list(*value))
      return invalid(std::string(path) + " \"" + *value +
                     "\": give a list such as 0-2,4 (digits, commas and dashes)");
    add("cpuset", file, *value, path);
  }
  if (r.block_io) PB_CHECK(block_io_writes(*r.block_io, v2, writes));
  for (std::size_t i = 0; i < r.hugepage_limits.size(); ++i) {
    const auto& limit = r.hugepage_limits[i];
    const std::string path = "linux.resources.hugepageLimits[" + std::to_string(i) + "]";
    if (!page_size(limit.page_size))
      return invalid(path + ".pageSize \"" + limit.page_size +
                     "\": give a size such as 2MB or 1GB");
    add("hugetlb", "hugetlb." + limit.page_size + (v2 ? ".max" : ".limit_in_bytes"),
        std::to_string(limit.limit), path);
  }
  // Last, as runc applies them: a key here wins over the fields above.
  for (const auto& [key, value] : r.unified) {
    const std::string path = "linux.resources.unified." + key;
    if (!v2)
      return core::Error(core::ErrorKind::kUnsupported, "oci",
                         "config.json: " + path +
                             ": not supported on this host: its controllers are cgroup v1 and "
                             "unified keys are cgroup v2 files; use the other fields of "
                             "linux.resources");
    if (key.find('/') != std::string::npos || key.find("..") != std::string::npos ||
        key.find('.') == std::string::npos || key.front() == '.')
      return invalid(path + ": not a cgroup file name; give a name such as memory.high");
    if (key.rfind("cgroup.", 0) == 0)
      return core::Error(core::ErrorKind::kUnsupported, "oci",
                         "config.json: " + path +
                             ": the cgroup.* files are the runtime's own (they move and kill "
                             "processes and enable controllers); remove it");
    add("", key, value, path);
  }
  return writes;
}

core::Result<ContainerCgroup> ContainerCgroup::create(const linux_api::CgroupHost& host,
                                                      const CgroupsPath& path,
                                                      const CgroupResources& resources,
                                                      const LeavesPlanned& before_making) {
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
    // These only when a limit needs them (a missing one is refused below).
    for (const char* name : {"cpuset", "blkio", "hugetlb"}) {
      const bool needed = std::any_of(writes.begin(), writes.end(),
                                      [&](const auto& write) { return write.hierarchy == name; });
      if (needed && host.hierarchy_mounts.count(name)) keys.emplace_back(name);
    }
  }
  for (const auto& write : writes) {
    if (std::find(keys.begin(), keys.end(), write.hierarchy) == keys.end())
      return unavailable("config.json: " + write.resource + ": this host has no " +
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
  // Every leaf first (co-mounted controllers, cpu,cpuacct, share one
  // directory), for before_making; then the directories.
  const auto& bases = path.from_own_cgroup ? host.own_cgroup_dirs : host.hierarchy_mounts;
  const auto parts = components(path.relative);
  std::vector<std::string> planned;
  for (const auto& key : keys) {
    const auto found = bases.find(key);
    if (found == bases.end())
      return fail(unavailable("no own cgroup found in the " + (key.empty() ? "cgroup2" : key) +
                              " hierarchy for the relative linux.cgroupsPath " + path.relative));
    std::string leaf = found->second;
    for (const auto& part : parts)
      leaf += "/" + part;
    leaf_of.emplace_back(key, leaf);
    if (std::find(planned.begin(), planned.end(), leaf) == planned.end()) planned.push_back(leaf);
  }
  if (before_making) PB_CHECK(before_making(planned));
  for (const auto& [key, leaf] : leaf_of) {
    const std::string& base = bases.at(key);
    if (std::find(cgroup.leaf_dirs_.begin(), cgroup.leaf_dirs_.end(), leaf) !=
        cgroup.leaf_dirs_.end())
      continue;
    std::string dir = base;
    for (std::size_t i = 0; i < parts.size(); ++i) {
      dir += "/" + parts[i];
      if (::mkdir(dir.c_str(), 0755) == 0) {
        if (i + 1 == parts.size()) made.push_back(dir);
        if (key == "cpuset") {
          if (auto status = inherit_cpuset(dir); !status.ok()) return fail(status.error());
        }
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
  // A crash point (tests/oci/oci_crash_test.cc): the leaves exist, the
  // record does not list them yet.
  core::trace_phase("oci: cgroup leaves made");
  // On cgroup v2 a controller's files appear in the leaf only when every
  // level above it, from the hierarchy's root (or this process's own
  // cgroup) down, enables it in cgroup.subtree_control.
  if (v2 && !cgroup.unified_leaf_.empty()) {
    std::string enable;     // "+memory +pids": one write per level
    std::string needed_by;  // the config paths that need them, for errors
    for (const auto& write : writes) {
      const std::string controller = "+" + write.file.substr(0, write.file.find('.'));
      if ((" " + enable + " ").find(" " + controller + " ") != std::string::npos) continue;
      enable += (enable.empty() ? "" : " ") + controller;
      needed_by += (needed_by.empty() ? "" : ", ") + write.resource;
    }
    std::string dir = bases.at("");
    for (std::size_t i = 0; !enable.empty() && i < parts.size(); ++i) {
      core::UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
      auto status = fd ? linux_api::write_limit(fd.get(), "cgroup.subtree_control", enable)
                       : core::Status(core::Error::from_errno("cgroup", "opening " + dir));
      if (!status.ok())
        return fail(
            unavailable("config.json: " + needed_by + ": cannot enable " + enable + " in " + dir +
                        "/cgroup.subtree_control: " + std::strerror(status.error().error_number()) +
                        " (a controller missing from cgroup.controllers there is not available "
                        "to the container; a cgroup holding processes cannot enable controllers "
                        "for its children: give the container a linux.cgroupsPath in a "
                        "delegated subtree)"));
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
    if (dir && !status.ok() && status.error().error_number() == ENOENT &&
        !write.alternative_file.empty()) {
      status = linux_api::write_limit(dir.get(), write.alternative_file.c_str(),
                                      write.alternative_value);
      if (!status.ok() && status.error().error_number() == ENOENT)
        return fail(unavailable("config.json: " + write.resource + ": this host has neither " +
                                it->second + "/" + write.file + " nor " + write.alternative_file +
                                " (no block I/O scheduler with weights, such as bfq, on its "
                                "devices); remove the weight"));
    }
    if (!status.ok()) {
      const int err = status.error().error_number();
      return fail(unavailable(
          "config.json: " + write.resource + ": cannot write " + write.value + " to " + it->second +
          "/" + write.file + ": " + std::strerror(err) +
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

core::Status ContainerCgroup::attach_rest(pid_t pid, bool into_unified_done) const {
  const std::string text = std::to_string(pid);
  for (const auto& leaf : leaf_dirs_) {
    if ((into_unified_done && leaf == unified_leaf_) || task_files_.has(leaf)) continue;
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
