// config.json's `linux` object, and the checks across fields.
#include <sched.h>
#include <sys/mount.h>
#include <sys/personality.h>

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

#include "oci/spec/spec_internal.h"
#include "oci/spec/spec_refusals.h"

namespace pulsebox::oci::spec {

using json = nlohmann::json;

namespace {

constexpr std::pair<std::string_view, int> kNamespaceTypes[] = {
    {"pid", CLONE_NEWPID},       {"network", CLONE_NEWNET}, {"mount", CLONE_NEWNS},
    {"ipc", CLONE_NEWIPC},       {"uts", CLONE_NEWUTS},     {"user", CLONE_NEWUSER},
    {"cgroup", CLONE_NEWCGROUP},
};

// runtime-spec's propagation options.
constexpr std::pair<std::string_view, unsigned long> kPropagations[] = {
    {"private", MS_PRIVATE},       {"rprivate", MS_PRIVATE | MS_REC},
    {"slave", MS_SLAVE},           {"rslave", MS_SLAVE | MS_REC},
    {"unbindable", MS_UNBINDABLE}, {"runbindable", MS_UNBINDABLE | MS_REC},
    {"shared", MS_SHARED},         {"rshared", MS_SHARED | MS_REC},
};

std::string indexed(const std::string& path, std::size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

core::Result<std::vector<Namespace>> read_namespaces(const ReadContext& ctx, const json* value) {
  std::vector<Namespace> out;
  PB_CHECK(expect_array(ctx, value, "linux.namespaces"));
  if (value == nullptr) return out;
  for (std::size_t i = 0; i < value->size(); ++i) {
    FieldReader reader(ctx, (*value)[i], indexed("linux.namespaces", i), "linux.namespaces[]");
    PB_CHECK(reader.status());
    PB_TRY(type, reader.string("type"));
    PB_TRY(path, reader.string("path"));
    PB_CHECK(reader.finish());
    if (!type) return reader.error(reader.child_path("type"), "missing", "give the type");
    if (const Refusal* row = find_refusal("linux.namespaces[].type=" + *type)) {
      return refusal_error(*row, ctx.source, reader.child_path("type") + " \"" + *type + "\"");
    }
    const auto* it = std::find_if(std::begin(kNamespaceTypes), std::end(kNamespaceTypes),
                                  [&](const auto& row) { return row.first == *type; });
    if (it == std::end(kNamespaceTypes)) {
      return reader.error(reader.child_path("type"), "unknown namespace type \"" + *type + "\"",
                          "use pid, network, mount, ipc, uts, user or cgroup");
    }
    if (path && (path->empty() || path->front() != '/')) {
      return reader.error(reader.child_path("path"), "\"" + *path + "\" is not an absolute path",
                          "give the namespace file's absolute path, or no path for a new one");
    }
    for (std::size_t j = 0; j < out.size(); ++j) {
      if (out[j].clone_flag == it->second) {
        return reader.error(reader.child_path("type"),
                            "a second \"" + *type + "\" namespace (also linux.namespaces[" +
                                std::to_string(j) + "])",
                            "list each namespace type once");
      }
    }
    out.push_back({it->second, path.value_or("")});
  }
  return out;
}

core::Result<std::vector<linux_api::IdMapping>> read_id_mappings(const ReadContext& ctx,
                                                                 const json* value,
                                                                 const std::string& path) {
  std::vector<linux_api::IdMapping> out;
  PB_CHECK(expect_array(ctx, value, path));
  if (value == nullptr) return out;
  for (std::size_t i = 0; i < value->size(); ++i) {
    FieldReader reader(ctx, (*value)[i], indexed(path, i), path + "[]");
    PB_CHECK(reader.status());
    PB_TRY(inside, reader.u64("containerID", UINT32_MAX));
    PB_TRY(outside, reader.u64("hostID", UINT32_MAX));
    PB_TRY(size, reader.u64("size", UINT32_MAX));
    PB_CHECK(reader.finish());
    if (!inside || !outside || !size || *size == 0) {
      return reader.error(reader.path(), "needs containerID, hostID and a size above 0",
                          "give all three");
    }
    out.push_back({static_cast<std::uint32_t>(*inside), static_cast<std::uint32_t>(*outside),
                   static_cast<std::uint32_t>(*size)});
  }
  return out;
}

// "net.ipv4.ip_forward" or "net/ipv4/ip_forward", read as sysctl(8) reads
// them: the first separator is the separator, and the other character
// stands for itself inside a name, so "net.ipv4.conf.eth0/100.forwarding"
// and "net/ipv4/conf/eth0.100/forwarding" both name the VLAN interface
// eth0.100's. The result is the dotted form (Linux::sysctl). Each name is
// plain (letters, digits, '_', '-', '.'), never "." or "..": the key
// becomes a path under /proc/sys, so nothing may climb out of it.
core::Result<std::string> sysctl_key(const ReadContext& ctx, const std::string& key) {
  const std::size_t first = key.find_first_of("./");
  const char separator = first != std::string::npos && key[first] == '/' ? '/' : '.';
  std::string out;
  bool ok = !key.empty();
  std::size_t start = 0;
  while (ok && start <= key.size()) {
    std::size_t end = key.find(separator, start);
    if (end == std::string::npos) end = key.size();
    std::string name = key.substr(start, end - start);
    if (separator == '.') std::replace(name.begin(), name.end(), '/', '.');
    ok = !name.empty() && name != "." && name != "..";
    for (char c : name) {
      ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.');
    }
    // Dotted form: a dot inside a name is written '/'.
    std::replace(name.begin(), name.end(), '.', '/');
    out += (out.empty() ? "" : ".") + name;
    start = end + 1;
  }
  if (!ok) {
    return invalid(ctx, "linux.sysctl." + key, "not a sysctl name",
                   "give a name such as net.ipv4.ip_forward");
  }
  return out;
}

core::Result<std::vector<BlockIoDevice>> read_block_devices(const ReadContext& ctx,
                                                            FieldReader& parent,
                                                            std::string_view key, bool weights) {
  std::vector<BlockIoDevice> out;
  const json* value = parent.take(key);
  const std::string path = parent.child_path(key);
  PB_CHECK(expect_array(ctx, value, path));
  if (value == nullptr) return out;
  for (std::size_t i = 0; i < value->size(); ++i) {
    FieldReader reader(ctx, (*value)[i], indexed(path, i), parent.child_pattern(key) + "[]");
    PB_CHECK(reader.status());
    BlockIoDevice device;
    PB_TRY(major, reader.i64("major"));
    PB_TRY(minor, reader.i64("minor"));
    if (!major || !minor) return reader.error(reader.path(), "needs major and minor", "give both");
    device.major = *major;
    device.minor = *minor;
    if (weights) {
      PB_TRY(weight, reader.u64("weight", UINT16_MAX));
      PB_TRY(leaf, reader.u64("leafWeight", UINT16_MAX));
      if (weight) device.weight = static_cast<std::uint16_t>(*weight);
      if (leaf) device.leaf_weight = static_cast<std::uint16_t>(*leaf);
    } else {
      PB_TRY(rate, reader.u64("rate"));
      if (!rate) return reader.error(reader.path(), "needs a rate", "give the rate");
      device.rate = *rate;
    }
    PB_CHECK(reader.finish());
    out.push_back(device);
  }
  return out;
}

core::Result<std::vector<DeviceRule>> read_device_rules(const ReadContext& ctx, const json* value) {
  std::vector<DeviceRule> out;
  const std::string path = "linux.resources.devices";
  PB_CHECK(expect_array(ctx, value, path));
  if (value == nullptr) return out;
  for (std::size_t i = 0; i < value->size(); ++i) {
    FieldReader reader(ctx, (*value)[i], indexed(path, i), path + "[]");
    PB_CHECK(reader.status());
    DeviceRule rule;
    PB_TRY(allow, reader.boolean("allow"));
    if (!allow) return reader.error(reader.child_path("allow"), "missing", "give true or false");
    rule.allow = *allow;
    PB_TRY(type, reader.string("type"));
    if (type) {
      if (*type != "a" && *type != "c" && *type != "b") {
        return reader.error(reader.child_path("type"), "\"" + *type + "\" is not a, c or b",
                            "give a (all), c (char) or b (block)");
      }
      rule.type = (*type)[0];
    }
    PB_TRY(major, reader.i64("major"));
    PB_TRY(minor, reader.i64("minor"));
    rule.major = major.value_or(-1);
    rule.minor = minor.value_or(-1);
    if (rule.major < -1 || rule.minor < -1) {
      return reader.error(reader.path(), "a negative device number other than -1 (any)",
                          "give a number, or leave it out for any");
    }
    PB_TRY(access, reader.string("access"));
    if (access) {
      const bool valid = !access->empty() && access->size() <= 3 &&
                         access->find_first_not_of("rwm") == std::string::npos;
      if (!valid) {
        return reader.error(reader.child_path("access"),
                            "\"" + *access + "\" is not made of r, w and m",
                            "give a combination of r, w and m");
      }
      rule.access = *access;
    }
    PB_CHECK(reader.finish());
    out.push_back(rule);
  }
  return out;
}

core::Result<Resources> read_resources(const ReadContext& ctx, const json& value) {
  FieldReader reader(ctx, value, "linux.resources", "linux.resources");
  PB_CHECK(reader.status());
  Resources resources;
  PB_TRY(devices, read_device_rules(ctx, reader.take("devices")));
  resources.devices = std::move(devices);
  if (const json* memory = reader.take("memory")) {
    FieldReader sub(ctx, *memory, "linux.resources.memory", "linux.resources.memory");
    PB_CHECK(sub.status());
    MemoryResources out;
    PB_TRY(limit, sub.i64("limit"));
    PB_TRY(reservation, sub.i64("reservation"));
    PB_TRY(swap, sub.i64("swap"));
    PB_TRY(swappiness, sub.u64("swappiness", 100));
    PB_TRY(no_oom, sub.boolean("disableOOMKiller"));
    PB_TRY(hierarchy, sub.boolean("useHierarchy"));
    PB_TRY(check, sub.boolean("checkBeforeUpdate"));
    PB_CHECK(sub.finish());
    out.limit = limit;
    out.reservation = reservation;
    out.swap = swap;
    out.swappiness = swappiness;
    out.disable_oom_killer = no_oom;
    out.use_hierarchy = hierarchy;
    out.check_before_update = check;
    if (limit && swap && *limit > 0 && *swap > 0 && *swap < *limit) {
      return reader.error(
          "linux.resources.memory.swap",
          "memory+swap " + std::to_string(*swap) + " is below the limit " + std::to_string(*limit),
          "give swap >= limit (it counts memory and swap together)");
    }
    resources.memory = out;
  }
  if (const json* cpu = reader.take("cpu")) {
    FieldReader sub(ctx, *cpu, "linux.resources.cpu", "linux.resources.cpu");
    PB_CHECK(sub.status());
    CpuResources out;
    PB_TRY(shares, sub.u64("shares"));
    PB_TRY(quota, sub.i64("quota"));
    PB_TRY(burst, sub.u64("burst"));
    PB_TRY(period, sub.u64("period"));
    PB_TRY(idle, sub.i64("idle"));
    PB_TRY(cpus, sub.string("cpus"));
    PB_TRY(mems, sub.string("mems"));
    for (const char* key : {"realtimeRuntime", "realtimePeriod"}) {
      const json* rt = sub.take(key);
      if (rt == nullptr) continue;
      PB_TRY(number, as_i64(ctx, *rt, sub.child_path(key)));
      if (number != 0) {
        return refusal_error(*find_refusal("linux.resources.cpu.realtime*!=0"), ctx.source,
                             sub.child_path(key));
      }
    }
    PB_CHECK(sub.finish());
    out.shares = shares;
    out.quota = quota;
    out.burst = burst;
    out.period = period;
    out.idle = idle;
    out.cpus = cpus.value_or("");
    out.mems = mems.value_or("");
    resources.cpu = out;
  }
  if (const json* pids = reader.take("pids")) {
    FieldReader sub(ctx, *pids, "linux.resources.pids", "linux.resources.pids");
    PB_CHECK(sub.status());
    PB_TRY(limit, sub.i64("limit"));
    PB_CHECK(sub.finish());
    if (!limit) return sub.error(sub.child_path("limit"), "missing", "give the limit (-1: none)");
    resources.pids_limit = limit;
  }
  if (const json* block_io = reader.take("blockIO")) {
    FieldReader sub(ctx, *block_io, "linux.resources.blockIO", "linux.resources.blockIO");
    PB_CHECK(sub.status());
    BlockIoResources out;
    PB_TRY(weight, sub.u64("weight", UINT16_MAX));
    PB_TRY(leaf, sub.u64("leafWeight", UINT16_MAX));
    if (weight) out.weight = static_cast<std::uint16_t>(*weight);
    if (leaf) out.leaf_weight = static_cast<std::uint16_t>(*leaf);
    PB_TRY(weights, read_block_devices(ctx, sub, "weightDevice", true));
    PB_TRY(read_bps, read_block_devices(ctx, sub, "throttleReadBpsDevice", false));
    PB_TRY(write_bps, read_block_devices(ctx, sub, "throttleWriteBpsDevice", false));
    PB_TRY(read_iops, read_block_devices(ctx, sub, "throttleReadIOPSDevice", false));
    PB_TRY(write_iops, read_block_devices(ctx, sub, "throttleWriteIOPSDevice", false));
    PB_CHECK(sub.finish());
    out.weight_device = std::move(weights);
    out.throttle_read_bps = std::move(read_bps);
    out.throttle_write_bps = std::move(write_bps);
    out.throttle_read_iops = std::move(read_iops);
    out.throttle_write_iops = std::move(write_iops);
    resources.block_io = std::move(out);
  }
  if (const json* pages = reader.take("hugepageLimits")) {
    PB_CHECK(expect_array(ctx, pages, "linux.resources.hugepageLimits"));
    for (std::size_t i = 0; i < pages->size(); ++i) {
      FieldReader sub(ctx, (*pages)[i], indexed("linux.resources.hugepageLimits", i),
                      "linux.resources.hugepageLimits[]");
      PB_CHECK(sub.status());
      PB_TRY(size, sub.string("pageSize"));
      PB_TRY(limit, sub.u64("limit"));
      PB_CHECK(sub.finish());
      if (!size || !limit) return sub.error(sub.path(), "needs pageSize and limit", "give both");
      resources.hugepage_limits.push_back({*size, *limit});
    }
  }
  if (const json* unified = reader.take("unified")) {
    if (!unified->is_object()) {
      return reader.error("linux.resources.unified", "expected an object of strings",
                          "correct the value's type");
    }
    for (const auto& [key, item] : unified->items()) {
      PB_TRY(text, as_string(ctx, item, "linux.resources.unified." + key));
      // The key names a file in the container's cgroup: a plain name only.
      if (key.empty() || key.find('/') != std::string::npos || key.front() == '.') {
        return reader.error("linux.resources.unified." + key, "not a cgroup file name",
                            "give a name such as memory.high");
      }
      resources.unified.emplace(key, std::move(text));
    }
  }
  PB_CHECK(reader.finish());
  return resources;
}

core::Result<std::vector<Device>> read_devices(const ReadContext& ctx, const json* value) {
  std::vector<Device> out;
  PB_CHECK(expect_array(ctx, value, "linux.devices"));
  if (value == nullptr) return out;
  for (std::size_t i = 0; i < value->size(); ++i) {
    FieldReader reader(ctx, (*value)[i], indexed("linux.devices", i), "linux.devices[]");
    PB_CHECK(reader.status());
    Device device;
    PB_TRY(type, reader.string("type"));
    PB_TRY(path, reader.string("path"));
    PB_TRY(major, reader.i64("major"));
    PB_TRY(minor, reader.i64("minor"));
    PB_TRY(mode, reader.u64("fileMode", 07777));
    PB_TRY(uid, reader.u64("uid", UINT32_MAX));
    PB_TRY(gid, reader.u64("gid", UINT32_MAX));
    PB_CHECK(reader.finish());
    if (!type || type->size() != 1 ||
        std::string_view("cbup").find((*type)[0]) == std::string::npos) {
      return reader.error(reader.child_path("type"),
                          type ? "\"" + *type + "\" is not c, b, u or p" : std::string("missing"),
                          "give c, b, u or p");
    }
    device.type = (*type)[0];
    if (!path || path->rfind("/dev/", 0) != 0 || has_dot_dot(*path)) {
      return reader.error(reader.child_path("path"),
                          path ? "\"" + *path + "\" is not under /dev" : std::string("missing"),
                          "give the device's path under /dev");
    }
    device.path = *path;
    if (device.type != 'p' && (!major || !minor || *major < 0 || *minor < 0)) {
      return reader.error(reader.path(), "a c, b or u device needs major and minor numbers",
                          "give both");
    }
    device.major = major.value_or(0);
    device.minor = minor.value_or(0);
    if (mode) device.file_mode = static_cast<std::uint32_t>(*mode);
    if (uid) device.uid = static_cast<std::uint32_t>(*uid);
    if (gid) device.gid = static_cast<std::uint32_t>(*gid);
    out.push_back(std::move(device));
  }
  return out;
}

core::Result<std::vector<std::string>> absolute_paths(const ReadContext& ctx, FieldReader& reader,
                                                      std::string_view key) {
  PB_TRY(paths, reader.strings(key));
  for (std::size_t i = 0; i < paths.size(); ++i) {
    if (paths[i].empty() || paths[i].front() != '/' || has_dot_dot(paths[i])) {
      return invalid(ctx, indexed(reader.child_path(key), i),
                     "\"" + paths[i] + "\" is not an absolute path without \"..\"",
                     "give an absolute path inside the container");
    }
  }
  return paths;
}

}  // namespace

std::string_view namespace_name(int flag) {
  for (const auto& [name, value] : kNamespaceTypes) {
    if (value == flag) return name;
  }
  return "?";
}

int sysctl_namespace(std::string_view key) {
  const auto starts = [key](std::string_view prefix) { return key.rfind(prefix, 0) == 0; };
  if (starts("net.")) return CLONE_NEWNET;
  if (starts("kernel.shm") || starts("kernel.msg") || key == "kernel.sem" || starts("fs.mqueue."))
    return CLONE_NEWIPC;
  if (key == "kernel.hostname" || key == "kernel.domainname") return CLONE_NEWUTS;
  return 0;
}

std::optional<unsigned long> propagation_flags(std::string_view option) {
  for (const auto& [name, flags] : kPropagations) {
    if (name == option) return flags;
  }
  return std::nullopt;
}

core::Result<Linux> read_linux(const ReadContext& ctx, const json& value) {
  FieldReader reader(ctx, value, "linux", "linux");
  PB_CHECK(reader.status());
  Linux out;
  PB_TRY(namespaces, read_namespaces(ctx, reader.take("namespaces")));
  out.namespaces = std::move(namespaces);
  PB_TRY(uids, read_id_mappings(ctx, reader.take("uidMappings"), "linux.uidMappings"));
  PB_TRY(gids, read_id_mappings(ctx, reader.take("gidMappings"), "linux.gidMappings"));
  out.id_maps.uids = std::move(uids);
  out.id_maps.gids = std::move(gids);
  // One gid mapped is what an ordinary user may write itself, and the
  // kernel then requires setgroups to be denied.
  out.id_maps.deny_setgroups = out.id_maps.gids.size() == 1 && out.id_maps.gids[0].count == 1;
  if (const json* sysctl = reader.take("sysctl")) {
    if (!sysctl->is_object()) {
      return reader.error("linux.sysctl", "expected an object of strings",
                          "correct the value's type");
    }
    for (const auto& [key, item] : sysctl->items()) {
      PB_TRY(text, as_string(ctx, item, "linux.sysctl." + key));
      PB_TRY(name, sysctl_key(ctx, key));
      out.sysctl[name] = std::move(text);
    }
  }
  if (const json* resources = reader.take("resources")) {
    PB_TRY(parsed, read_resources(ctx, *resources));
    out.resources = std::move(parsed);
  }
  PB_TRY(cgroups_path, reader.string("cgroupsPath"));
  out.cgroups_path = cgroups_path.value_or("");
  PB_TRY(devices, read_devices(ctx, reader.take("devices")));
  out.devices = std::move(devices);
  if (const json* seccomp_value = reader.take("seccomp")) {
    auto profile = seccomp::parse_profile(seccomp_value->dump(), ctx.source + ": linux.seccomp",
                                          {.format = seccomp::Format::Oci});
    if (!profile.ok()) return std::move(profile).error();
    out.seccomp = std::move(profile).value();
  }
  PB_TRY(propagation, reader.string("rootfsPropagation"));
  if (propagation) {
    if (!propagation_flags(*propagation)) {
      return reader.error("linux.rootfsPropagation",
                          "\"" + *propagation + "\" is not a propagation",
                          "give shared, slave, private or unbindable (r-prefixed for recursive)");
    }
    out.rootfs_propagation = *propagation;
  }
  PB_TRY(masked, absolute_paths(ctx, reader, "maskedPaths"));
  out.masked_paths = std::move(masked);
  PB_TRY(readonly, absolute_paths(ctx, reader, "readonlyPaths"));
  out.readonly_paths = std::move(readonly);
  if (const json* personality = reader.take("personality")) {
    FieldReader sub(ctx, *personality, "linux.personality", "linux.personality");
    PB_CHECK(sub.status());
    PB_TRY(domain, sub.string("domain"));
    PB_TRY(flags, sub.strings("flags"));
    PB_CHECK(sub.finish());
    if (domain == "LINUX") {
      out.personality = PER_LINUX;
    } else if (domain == "LINUX32") {
      out.personality = PER_LINUX32;
    } else {
      return sub.error(
          "linux.personality.domain",
          domain ? "\"" + *domain + "\" is not LINUX or LINUX32" : std::string("missing"),
          "give LINUX or LINUX32");
    }
    if (!flags.empty()) {
      return core::Error(core::ErrorKind::kUnsupported, "oci",
                         ctx.source +
                             ": linux.personality.flags: not supported: personality flags are "
                             "not implemented; remove them");
    }
  }
  PB_CHECK(reader.finish());
  return out;
}

core::Status check_cross_fields(const ReadContext& ctx, const Spec& spec) {
  const Namespace* user_ns = spec.find_namespace(CLONE_NEWUSER);
  const auto& maps = spec.linux.id_maps;
  if (!user_ns && (!maps.uids.empty() || !maps.gids.empty())) {
    return invalid(ctx, maps.uids.empty() ? "linux.gidMappings" : "linux.uidMappings",
                   "mappings without a user namespace in linux.namespaces",
                   "add {\"type\": \"user\"} to linux.namespaces or remove the mappings");
  }
  if (user_ns && user_ns->path.empty() && (maps.uids.empty() || maps.gids.empty())) {
    return invalid(ctx, "linux.namespaces",
                   "a new user namespace without linux.uidMappings and linux.gidMappings",
                   "give both mappings");
  }
  const auto needs_uts = [&](const char* path, const std::string& value) -> core::Status {
    if (!value.empty() && !spec.find_namespace(CLONE_NEWUTS)) {
      return invalid(ctx, path,
                     "set without a uts namespace in linux.namespaces: it would "
                     "change the host's",
                     "add {\"type\": \"uts\"} to linux.namespaces");
    }
    return {};
  };
  PB_CHECK(needs_uts("hostname", spec.hostname));
  PB_CHECK(needs_uts("domainname", spec.domainname));
  for (const auto& [key, value] : spec.linux.sysctl) {
    const int needed = sysctl_namespace(key);
    if (needed == 0) {
      return core::Error(core::ErrorKind::kUnsupported, "oci",
                         ctx.source + ": linux.sysctl." + key +
                             ": not namespaced: it would change the host; remove it");
    }
    if (!spec.find_namespace(needed)) {
      const std::string type(namespace_name(needed));
      return invalid(ctx, "linux.sysctl." + key,
                     "needs a " + type +
                         " namespace, and linux.namespaces has none: it would "
                         "change the host's",
                     "add {\"type\": \"" + type + "\"} to linux.namespaces");
    }
  }
  if (spec.process && !spec.process->user.additional_gids.empty() && user_ns &&
      maps.deny_setgroups) {
    return invalid(ctx, "process.user.additionalGids",
                   "setgroups is denied in a user namespace with one gid mapped "
                   "(linux.gidMappings)",
                   "map more gids (newgidmap) or remove the additional gids");
  }
  return {};
}

}  // namespace pulsebox::oci::spec

namespace pulsebox::oci::spec {

std::vector<std::string> supported_namespace_types() {
  std::vector<std::string> out;
  for (const auto& [name, flag] : kNamespaceTypes)
    out.emplace_back(name);
  return out;
}

}  // namespace pulsebox::oci::spec
