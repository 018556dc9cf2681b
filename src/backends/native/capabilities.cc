#include "backends/native/capabilities.h"

#include <algorithm>

#include "backends/capability_texts.h"

namespace pulsebox::backends::native {

std::optional<std::uint64_t> changes_size_limit(const ResourcePolicy& limits) {
  if (limits.disk_bytes && limits.working_directory_bytes)
    return std::min(*limits.disk_bytes, *limits.working_directory_bytes);
  return limits.disk_bytes ? limits.disk_bytes : limits.working_directory_bytes;
}

Capability secrets_capability(const SecretPolicy& policy) {
  if (policy.mode == SecretMode::AllowAll) return all_secrets_passed_capability();
  return {EnforcementLevel::StronglyEnforced,
          "the environment is built from the secret policy only, and no host home directory "
          "(~/.ssh, ~/.aws, ~/.config) is mounted",
          ""};
}
Capability filesystem_capability() {
  return {EnforcementLevel::StronglyEnforced,
          "a tmpfs root with read-only system directories (secrets in /etc hidden), the "
          "workspace through a copy-on-write overlay, private /tmp, /proc and /dev; nothing "
          "else of the host is visible",
          ""};
}
Capability limit_capability(LimitKind kind, const linux_api::CgroupHost& host) {
  const std::string where = " in the sandbox's own cgroup (" + host.describe() + ")";
  auto file = [](const linux_api::ControllerPlace& place, const char* v2, const char* v1) {
    return std::string(place.v1 ? v1 : v2);
  };
  auto unavailable = [](const linux_api::ControllerPlace& place) {
    return " (no cgroup: " + place.problem + ")";
  };
  switch (kind) {
    case LimitKind::WallTime:
      return {EnforcementLevel::StronglyEnforced,
              "the sandbox's init is killed at the deadline, and with it every process in its "
              "pid namespace",
              ""};
    case LimitKind::Output:
      return output_capability("the sandbox");
    case LimitKind::OpenFiles:
      return open_files_capability();
    case LimitKind::Processes:
      if (host.pids.usable) {
        return {EnforcementLevel::StronglyEnforced,
                file(host.pids, "pids.max", "pids.max (v1)") + where +
                    " counts every process and thread of the sandbox",
                ""};
      }
      return {EnforcementLevel::StronglyEnforced,
              "RLIMIT_NPROC, counted per uid inside the sandbox's own user namespace, where "
              "only the sandbox's processes run as that uid (threads count)" +
                  unavailable(host.pids),
              ""};
    case LimitKind::Memory:
      if (host.memory.usable) {
        return {EnforcementLevel::StronglyEnforced,
                file(host.memory, "memory.max", "memory.limit_in_bytes (v1)") + where +
                    ": the kernel's OOM killer acts at the limit, which includes /tmp",
                ""};
      }
      return per_process_memory_capability(unavailable(host.memory), host.memory.fix);
    case LimitKind::Swap:
      if (host.memory.usable && host.swap_accounting) {
        return {EnforcementLevel::StronglyEnforced,
                file(host.memory, "memory.swap.max", "memory.memsw.limit_in_bytes (v1)") + where,
                ""};
      }
      if (host.memory.usable) {
        return {EnforcementLevel::Unsupported,
                "this kernel does not account swap to cgroups (swapaccount=0)",
                "boot with swapaccount=1"};
      }
      return {EnforcementLevel::Unsupported, "swap is not limited" + unavailable(host.memory),
              host.memory.fix};
    case LimitKind::Cpu:
      if (host.cpu.usable) {
        return {EnforcementLevel::StronglyEnforced,
                file(host.cpu, "cpu.max", "cpu.cfs_quota_us (v1)") + where +
                    ": CFS bandwidth for the whole sandbox",
                ""};
      }
      return {EnforcementLevel::Unsupported, "CPU bandwidth is not limited" + unavailable(host.cpu),
              host.cpu.fix};
    case LimitKind::CpuTime:
      if (host.cpu_accounting.usable) {
        return {EnforcementLevel::StronglyEnforced,
                "pulsebox reads the sandbox's CPU time (" +
                    file(host.cpu_accounting, "cpu.stat", "cpuacct.usage (v1)") + where +
                    ") every 100 ms and stops it at the limit (SIGTERM, grace, SIGKILL)",
                ""};
      }
      return per_process_cpu_time_capability(unavailable(host.cpu_accounting),
                                             host.cpu_accounting.fix);
    case LimitKind::Disk:
      return {EnforcementLevel::StronglyEnforced,
              "the run's workspace changes (the overlay's upper directory) are written to a "
              "tmpfs of the run's own, of the limit's size: past it a write fails with ENOSPC "
              "and nothing reaches the host's disk. The tmpfs is memory: " +
                  (host.memory.usable
                       ? "its pages count towards the sandbox's memory limit"
                       : "with no memory cgroup here (" + host.memory.problem +
                             ") its pages are host RAM outside any limit, up to its size") +
                  ". Writable --bind and --home directories are not covered",
              ""};
  }
  return {EnforcementLevel::Unsupported, "unknown limit", ""};
}
Capability syscall_capability(const std::string& profile) {
  if (profile == "unconfined") {
    return {EnforcementLevel::Unsupported,
            "no seccomp filter (--seccomp unconfined); the command still has no capabilities "
            "and no_new_privs",
            "use a seccomp profile (default, strict, permissive or a file)"};
  }
  return {EnforcementLevel::StronglyEnforced,
          "the seccomp profile " + profile +
              " is loaded into the command before execve and inherited by everything it "
              "starts; denied calls fail with the profile's errno, kill actions end the "
              "sandbox and are reported with the syscall's name",
          ""};
}
Capability process_containment_capability() {
  return {EnforcementLevel::StronglyEnforced,
          "a pid namespace: when the command ends, its init kills every process left in the "
          "sandbox before it reports; on a timeout, or if init dies, the kernel kills them all",
          ""};
}

}  // namespace pulsebox::backends::native
