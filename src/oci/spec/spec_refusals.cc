#include "oci/spec/spec_refusals.h"

#include <algorithm>

namespace pulsebox::oci::spec {

namespace {

using Kind = Refusal::Kind;

constexpr std::string_view kRemove = "remove it from the config";
constexpr std::string_view kNoLsm =
    "pulsebox oci has no LSM support (AppArmor, SELinux), so the label would not be applied";
constexpr std::string_view kNotLinux = "it is not a Linux setting";
constexpr std::string_view kNotManaged = "pulsebox oci does not manage it";
constexpr std::string_view kNoAgents = "pulsebox oci runs no seccomp agents";
constexpr std::string_view kNoIdmap =
    "idmapped and nofollow mounts are not implemented in pulsebox oci yet";

constexpr Refusal kRefusals[] = {
    {Kind::Key, "process.apparmorProfile", kNoLsm, kRemove},
    {Kind::Key, "process.selinuxLabel", kNoLsm, kRemove},
    {Kind::Key, "linux.mountLabel", kNoLsm, kRemove},
    {Kind::Key, "process.scheduler", "scheduling policies are not implemented", kRemove},
    {Kind::Key, "process.ioPriority", "I/O priorities are not implemented", kRemove},
    {Kind::Key, "process.execCPUAffinity", "exec CPU affinity is not implemented", kRemove},
    {Kind::Value, "linux.namespaces[].type=time", "time namespaces are not implemented",
     "remove the time namespace"},
    {Kind::Key, "linux.timeOffsets", "time namespaces are not implemented", kRemove},
    {Kind::Key, "process.user.username", "it is a Windows setting",
     "give process.user.uid and gid instead"},
    {Kind::Key, "process.commandLine", "it is a Windows setting", "give process.args instead"},
    {Kind::Key, "windows", kNotLinux, kRemove},
    {Kind::Key, "solaris", kNotLinux, kRemove},
    {Kind::Key, "vm", "pulsebox oci runs containers, not virtual machines", kRemove},
    {Kind::Key, "zos", kNotLinux, kRemove},
    {Kind::Key, "freebsd", kNotLinux, kRemove},
    {Kind::Value, "process.capabilities.*[]=unknown",
     "the capability is not known to this kernel (libcap's list up to its last capability)",
     "remove it or correct its name"},
    {Kind::Key, "linux.intelRdt", "pulsebox oci does not manage Intel RDT", kRemove},
    {Kind::Key, "linux.resources.rdma", "pulsebox oci does not manage the RDMA controller",
     kRemove},
    {Kind::Key, "linux.resources.network",
     "pulsebox oci does not manage net_cls/net_prio (cgroup v2 has neither)", kRemove},
    {Kind::Key, "linux.netDevices", "moving network devices is a runtime-spec 1.3 feature",
     kRemove},
    {Kind::Key, "linux.memoryPolicy", "memory policies are a runtime-spec 1.3 feature", kRemove},
    {Kind::Key, "linux.resources.memory.kernel",
     "kernel memory limits are deprecated by the kernel", kRemove},
    {Kind::Key, "linux.resources.memory.kernelTCP",
     "kernel TCP memory limits are deprecated by the kernel", kRemove},
    {Kind::Value, "linux.resources.cpu.realtime*!=0",
     "real-time CPU bandwidth is not managed by pulsebox oci", "remove it or set it to 0"},
    {Kind::Key, "linux.seccomp.listenerPath", kNoAgents, kRemove},
    {Kind::Key, "linux.seccomp.listenerMetadata", kNoAgents, kRemove},
    {Kind::Value, "linux.seccomp.*action=SCMP_ACT_NOTIFY", kNoAgents, "use another action"},
    {Kind::Value, "linux.seccomp.flags[]=SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV", kNoAgents,
     "remove the flag"},
    {Kind::Key, "mounts[].uidMappings", kNoIdmap, kRemove},
    {Kind::Key, "mounts[].gidMappings", kNoIdmap, kRemove},
    {Kind::Value, "mounts[].options[]=idmap", kNoIdmap, "remove the option"},
    {Kind::Value, "mounts[].options[]=ridmap", kNoIdmap, "remove the option"},
    {Kind::Value, "mounts[].options[]=copy-symlink", kNoIdmap, "remove the option"},
    {Kind::Value, "mounts[].options[]=src-nofollow", kNoIdmap, "remove the option"},
    {Kind::Value, "mounts[].options[]=dest-nofollow", kNoIdmap, "remove the option"},
    {Kind::Value, "--no-pivot", "pivot_root is required (chroot leaves the host's root reachable)",
     "drop --no-pivot"},
};

}  // namespace

std::span<const Refusal> refusals() {
  return kRefusals;
}

const Refusal* find_refusal(std::string_view pattern) {
  const auto* it = std::find_if(std::begin(kRefusals), std::end(kRefusals),
                                [&](const Refusal& r) { return r.path == pattern; });
  return it == std::end(kRefusals) ? nullptr : it;
}

core::Error refusal_error(const Refusal& row, std::string_view source, std::string_view path) {
  return core::Error(core::ErrorKind::kUnsupported, "oci",
                     std::string(source) + ": " + std::string(path) +
                         ": not supported: " + std::string(row.why) + "; " + std::string(row.fix));
}

}  // namespace pulsebox::oci::spec
