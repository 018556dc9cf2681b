#include "oci/spec/features.h"

#include <seccomp.h>

#include "oci/spec/spec.h"
#include "oci/spec/spec_refusals.h"
#include "pulsebox/version.h"
#include "seccomp/profile.h"

namespace pulsebox::oci::spec {

using json = nlohmann::json;

json features_document() {
  const scmp_version* libseccomp = ::seccomp_version();
  std::string refused;
  for (const auto& row : refusals())
    refused += (refused.empty() ? "" : ",") + std::string(row.path);
  json seccomp_part = {
      {"enabled", true},
      {"actions", seccomp::oci_action_names()},
      {"operators", seccomp::oci_operator_names()},
      {"archs", seccomp::oci_architecture_names()},
      {"knownFlags", seccomp::oci_flag_names()},
      {"supportedFlags", seccomp::oci_flag_names()},
  };
  return {
      {"ociVersionMin", std::string(kOciVersionMin)},
      {"ociVersionMax", std::string(kOciVersionMax)},
      {"hooks",
       {"prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop"}},
      {"mountOptions", supported_mount_options()},
      {"linux",
       {
           {"namespaces", supported_namespace_types()},
           {"capabilities", known_capability_names()},
           {"cgroup",
            {{"v1", true},
             {"v2", true},
             {"systemd", false},
             {"systemdUser", false},
             {"rdma", false}}},
           {"seccomp", seccomp_part},
           {"apparmor", {{"enabled", false}}},
           {"selinux", {{"enabled", false}}},
           {"intelRdt", {{"enabled", false}}},
           {"mountExtensions", {{"idmap", {{"enabled", false}}}}},
       }},
      {"annotations",
       {
           {"org.pulsebox.version", std::string(pulsebox::version())},
           {"io.github.seccomp.libseccomp.version", std::to_string(libseccomp->major) + "." +
                                                        std::to_string(libseccomp->minor) + "." +
                                                        std::to_string(libseccomp->micro)},
           {"org.pulsebox.refused", refused},
       }},
  };
}

}  // namespace pulsebox::oci::spec
