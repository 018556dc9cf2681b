// `pulsebox oci features`: the document has runtime-spec's features shape
// (features-schema.json and features-linux.json, checked here field by
// field), and what it announces is what the config reader accepts.
#include <gtest/gtest.h>

#include <bit>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "oci/spec/features.h"
#include "oci/spec/spec.h"
#include "oci/spec/spec_refusals.h"

namespace pulsebox::oci::spec {
namespace {

using json = nlohmann::json;

bool is_string_array(const json& value) {
  if (!value.is_array()) return false;
  for (const auto& item : value) {
    if (!item.is_string()) return false;
  }
  return true;
}

// Every item of `value` is one of `allowed` (the schema's enums in defs-linux.json).
void expect_subset(const json& value, const std::set<std::string>& allowed, const char* what) {
  ASSERT_TRUE(is_string_array(value)) << what;
  for (const auto& item : value) {
    EXPECT_TRUE(allowed.contains(item.get<std::string>())) << what << ": " << item;
  }
}

json base_config() {
  return json::parse(R"({"ociVersion": "1.2.1", "root": {"path": "r"},
    "process": {"user": {"uid": 0, "gid": 0}, "args": ["sh"], "cwd": "/"},
    "linux": {}})");
}

TEST(OciFeatures, DocumentHasTheSchemaShape) {
  const json doc = features_document();
  ASSERT_TRUE(doc.is_object());
  const std::set<std::string> top = {"ociVersionMin", "ociVersionMax",
                                     "hooks",         "mountOptions",
                                     "annotations",   "potentiallyUnsafeConfigAnnotations",
                                     "linux"};
  for (const auto& [key, value] : doc.items())
    EXPECT_TRUE(top.contains(key)) << key;
  const std::regex version(R"(^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-.+)?$)");
  ASSERT_TRUE(doc.contains("ociVersionMin") && doc["ociVersionMin"].is_string());
  ASSERT_TRUE(doc.contains("ociVersionMax") && doc["ociVersionMax"].is_string());
  EXPECT_TRUE(std::regex_match(doc["ociVersionMin"].get<std::string>(), version));
  EXPECT_EQ(doc["ociVersionMax"], "1.2.1");
  EXPECT_TRUE(is_string_array(doc["hooks"]));
  EXPECT_TRUE(is_string_array(doc["mountOptions"]));
  ASSERT_TRUE(doc["annotations"].is_object());
  for (const auto& [key, value] : doc["annotations"].items())
    EXPECT_TRUE(value.is_string()) << key;
  EXPECT_TRUE(doc["annotations"].contains("org.pulsebox.version"));
  EXPECT_TRUE(doc["annotations"].contains("io.github.seccomp.libseccomp.version"));

  const json& linux_part = doc["linux"];
  ASSERT_TRUE(linux_part.is_object());
  expect_subset(linux_part["namespaces"],
                {"mount", "pid", "network", "uts", "ipc", "user", "cgroup", "time"}, "namespaces");
  ASSERT_TRUE(is_string_array(linux_part["capabilities"]));
  const std::regex cap(R"(^CAP_[A-Z_]+$)");
  for (const auto& name : linux_part["capabilities"])
    EXPECT_TRUE(std::regex_match(name.get<std::string>(), cap)) << name;
  for (const char* key : {"v1", "v2", "systemd", "systemdUser", "rdma"})
    EXPECT_TRUE(linux_part["cgroup"][key].is_boolean()) << key;
  EXPECT_EQ(linux_part["cgroup"]["systemd"], false);
  const json& seccomp = linux_part["seccomp"];
  EXPECT_EQ(seccomp["enabled"], true);
  expect_subset(seccomp["actions"],
                {"SCMP_ACT_KILL", "SCMP_ACT_KILL_PROCESS", "SCMP_ACT_KILL_THREAD", "SCMP_ACT_TRAP",
                 "SCMP_ACT_ERRNO", "SCMP_ACT_TRACE", "SCMP_ACT_ALLOW", "SCMP_ACT_LOG"},
                "actions (no SCMP_ACT_NOTIFY: no agents)");
  expect_subset(seccomp["operators"],
                {"SCMP_CMP_NE", "SCMP_CMP_LT", "SCMP_CMP_LE", "SCMP_CMP_EQ", "SCMP_CMP_GE",
                 "SCMP_CMP_GT", "SCMP_CMP_MASKED_EQ"},
                "operators");
  expect_subset(
      seccomp["archs"],
      {"SCMP_ARCH_X86",     "SCMP_ARCH_X86_64",   "SCMP_ARCH_X32",         "SCMP_ARCH_ARM",
       "SCMP_ARCH_AARCH64", "SCMP_ARCH_MIPS",     "SCMP_ARCH_MIPS64",      "SCMP_ARCH_MIPS64N32",
       "SCMP_ARCH_MIPSEL",  "SCMP_ARCH_MIPSEL64", "SCMP_ARCH_MIPSEL64N32", "SCMP_ARCH_PPC",
       "SCMP_ARCH_PPC64",   "SCMP_ARCH_PPC64LE",  "SCMP_ARCH_S390",        "SCMP_ARCH_S390X",
       "SCMP_ARCH_PARISC",  "SCMP_ARCH_PARISC64", "SCMP_ARCH_RISCV64",     "SCMP_ARCH_LOONGARCH64"},
      "archs");
  const std::set<std::string> flags = {"SECCOMP_FILTER_FLAG_TSYNC", "SECCOMP_FILTER_FLAG_LOG",
                                       "SECCOMP_FILTER_FLAG_SPEC_ALLOW",
                                       "SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV"};
  expect_subset(seccomp["knownFlags"], flags, "knownFlags");
  expect_subset(seccomp["supportedFlags"], flags, "supportedFlags");
  for (const char* key : {"apparmor", "selinux", "intelRdt"})
    EXPECT_EQ(linux_part[key]["enabled"], false) << key;
  EXPECT_EQ(linux_part["mountExtensions"]["idmap"]["enabled"], false);
}

// What the document announces, the reader accepts.
TEST(OciFeatures, AnnouncedValuesAreAccepted) {
  const json doc = features_document();
  for (const auto& option : doc["mountOptions"]) {
    json config = base_config();
    json mount = {{"destination", "/t"}, {"type", "tmpfs"}, {"options", json::array({option})}};
    config["mounts"] = json::array({mount});
    auto spec = parse_spec(config.dump(), "/b");
    EXPECT_TRUE(spec.ok()) << option << ": " << spec.error().message();
  }
  for (const auto& type : doc["linux"]["namespaces"]) {
    json config = base_config();
    config["linux"]["namespaces"] = json::array({json{{"type", type}}});
    if (type == "user") {
      const json one = json::array({json{{"containerID", 0}, {"hostID", 1000}, {"size", 1}}});
      config["linux"]["uidMappings"] = one;
      config["linux"]["gidMappings"] = one;
    }
    auto spec = parse_spec(config.dump(), "/b");
    EXPECT_TRUE(spec.ok()) << type << ": " << spec.error().message();
  }
  json all_caps = base_config();
  all_caps["process"]["capabilities"]["bounding"] = doc["linux"]["capabilities"];
  auto caps = parse_spec(all_caps.dump(), "/b");
  ASSERT_TRUE(caps.ok()) << caps.error().message();
  EXPECT_EQ(std::popcount(caps->process->capabilities.bounding),
            static_cast<int>(doc["linux"]["capabilities"].size()));
  EXPECT_GE(doc["linux"]["capabilities"].size(), 38u);  // CAP_CHECKPOINT_RESTORE is 40
  const json& seccomp = doc["linux"]["seccomp"];
  for (const auto& action : seccomp["actions"]) {
    json config = base_config();
    config["linux"]["seccomp"] = {{"defaultAction", action}};
    auto spec = parse_spec(config.dump(), "/b");
    EXPECT_TRUE(spec.ok()) << action << ": " << spec.error().message();
  }
  json flagged = base_config();
  flagged["linux"]["seccomp"] = {{"defaultAction", "SCMP_ACT_ALLOW"},
                                 {"flags", seccomp["supportedFlags"]},
                                 {"architectures", seccomp["archs"]}};
  for (const auto& op : seccomp["operators"]) {
    const json arg = {{"index", 0}, {"value", 1}, {"op", op}};
    flagged["linux"]["seccomp"]["syscalls"].push_back(json{{"names", json::array({"read"})},
                                                           {"action", "SCMP_ACT_ERRNO"},
                                                           {"args", json::array({arg})}});
  }
  auto spec = parse_spec(flagged.dump(), "/b");
  EXPECT_TRUE(spec.ok()) << spec.error().message();
}

TEST(OciFeatures, RefusedAnnotationListsTheRefusalTable) {
  const std::string refused = features_document()["annotations"]["org.pulsebox.refused"];
  for (const auto& row : refusals())
    EXPECT_NE(refused.find(std::string(row.path)), std::string::npos) << row.path;
  EXPECT_NE(refused.find("linux.resources.rdma"), std::string::npos);
}

}  // namespace
}  // namespace pulsebox::oci::spec
