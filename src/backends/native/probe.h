// Whether this host can make the sandbox's namespaces at all (user
// namespaces may be disabled or restricted), found by trying once.
#pragma once

#include <filesystem>
#include <string>

namespace pulsebox::backends::native {

struct HostProbe {
  bool namespaces_ok = false;
  std::string namespaces_reason;  // when not: what failed
};

// The probe's answer. A success is remembered in <state>/host-probe, keyed by
// what decides it (the boot, this process's user namespace and seccomp mode,
// the user-namespace sysctls), so most processes skip the probe's clone. A
// later failure still surfaces as a clear launch error.
HostProbe remembered_or_fresh_probe(const std::filesystem::path& state_dir);

// What an administrator changes to allow the namespaces.
std::string namespaces_fix();

}  // namespace pulsebox::backends::native
