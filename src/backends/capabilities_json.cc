// What a backend enforces, row by row (capabilities_json.h).
#include "backends/capabilities_json.h"

namespace pulsebox::backends {

std::vector<CapabilityRow> capability_rows(const Backend& backend) {
  std::vector<CapabilityRow> rows;
  for (auto mode : {NetworkMode::DenyAll, NetworkMode::LocalhostOnly, NetworkMode::Allowlist,
                    NetworkMode::Proxy, NetworkMode::AllowAll}) {
    NetworkPolicy policy;
    policy.mode = mode;
    rows.push_back({"network." + std::string(to_string(mode)), backend.network_capability(policy)});
  }
  for (auto mode : {SecretMode::DenyAll, SecretMode::AllowExplicit, SecretMode::AllowAll}) {
    rows.push_back(
        {"secrets." + std::string(to_string(mode)), backend.secrets_capability({mode, {}})});
  }
  rows.push_back({"filesystem", backend.filesystem_capability()});
  for (LimitKind kind : kAllLimitKinds) {
    rows.push_back({"limits." + std::string(to_string(kind)), backend.limit_capability(kind)});
  }
  for (const char* profile : {"default", "strict", "permissive", "unconfined"}) {
    rows.push_back({"syscalls." + std::string(profile), backend.syscall_capability(profile)});
  }
  rows.push_back({"process_containment", backend.process_containment_capability()});
  return rows;
}

nlohmann::json capabilities_json(const Backend& backend) {
  const Availability availability = backend.availability();
  nlohmann::json out = {{"available", availability.available},
                        {"reason", availability.reason},
                        {"unsafe", backend.is_unsafe()}};
  for (const auto& row : capability_rows(backend)) {
    out["capabilities"][row.what] = {{"level", std::string(to_string(row.capability.level))},
                                     {"reason", row.capability.reason},
                                     {"fix", row.capability.fix}};
  }
  return out;
}

}  // namespace pulsebox::backends
