#include "backends/native/probe.h"

#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backends/native/namespaces.h"
#include "backends/native/state_dir.h"
#include "core/fs.h"
#include "core/text.h"
#include "linux/syscalls.h"

namespace pulsebox::backends::native {

namespace fs = std::filesystem;

namespace {

HostProbe probe_host() {
  HostProbe probe;
  // A child in every namespace the sandbox uses, which exits at once.
  const long pid = linux_api::sys_clone_fork(
      kSandboxNamespaces | CLONE_NEWCGROUP | CLONE_NEWNET | SIGCHLD, nullptr);
  if (pid == 0) ::_exit(0);
  if (pid < 0) {
    const int error_number = errno;
    probe.namespaces_reason =
        "creating user, mount, pid, ipc, uts, cgroup and network namespaces "
        "failed: " +
        core::describe_errno(error_number);
  } else {
    int status = 0;
    ::waitpid(static_cast<pid_t>(pid), &status, 0);
    probe.namespaces_ok = true;
  }
  return probe;
}

// The probe costs a clone with every namespace (a network namespace
// included: docs/benchmarks.md), so a success is remembered in the state directory, keyed by
// what decides it: the boot, this process's user namespace, its seccomp
// mode and the user namespace sysctls. A later failure still surfaces as a
// clear launch error.
std::string probe_key() {
  // PR_GET_SECCOMP: 0 none, 2 a filter (strict mode could not run this).
  const int seccomp_mode = ::prctl(PR_GET_SECCOMP, 0, 0, 0, 0);
  struct stat user_ns {};
  ::stat("/proc/self/ns/user", &user_ns);
  const std::string boot_id = core::first_line_of_file("/proc/sys/kernel/random/boot_id");
  if (boot_id.empty()) return "";
  return "namespaces ok, boot " + boot_id + ", userns " + std::to_string(user_ns.st_ino) +
         ", seccomp " + std::to_string(seccomp_mode) + ", max_user_namespaces " +
         core::first_line_of_file("/proc/sys/user/max_user_namespaces") +
         ", unprivileged_userns_clone " +
         core::first_line_of_file("/proc/sys/kernel/unprivileged_userns_clone") + "\n";
}

}  // namespace

HostProbe remembered_or_fresh_probe(const fs::path& state_dir) {
  const fs::path memo = state_dir / "host-probe";
  const std::string expected = probe_key();
  struct stat st {};
  if (!expected.empty() && ::lstat(memo.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
      st.st_uid == ::geteuid() && (st.st_mode & 022) == 0) {
    auto text = core::read_regular_file(memo, 4096, "host probe");
    if (text.ok() && *text == expected) return {true, ""};
  }
  HostProbe probe = probe_host();
  if (probe.namespaces_ok && !expected.empty()) {
    // Not remembered when this fails: the next process probes again.
    if (ensure_private_dir(state_dir, state_dir_mode())) {
      (void)core::write_file_atomic(memo, expected, 0600);
    }
  }
  return probe;
}

std::string namespaces_fix() {
  return "allow unprivileged user namespaces: sysctl -w kernel.unprivileged_userns_clone=1 "
         "(Debian), user.max_user_namespaces > 0, and on Ubuntu "
         "kernel.apparmor_restrict_unprivileged_userns=0 or an AppArmor profile for pulsebox";
}

}  // namespace pulsebox::backends::native
