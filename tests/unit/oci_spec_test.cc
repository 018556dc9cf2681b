// The OCI config.json reader: each supported field, each refusal row and
// cross-field check (the message names the JSON path and why), unknown keys,
// wrong types, and the configs podman and ctr wrote on this host.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/personality.h>
#include <sys/resource.h>

#include <cctype>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "helpers/test_support.h"
#include "oci/spec/spec.h"
#include "oci/spec/spec_refusals.h"

namespace pulsebox::oci::spec {
namespace {

using json = nlohmann::json;

json minimal() {
  return json::parse(R"({
    "ociVersion": "1.2.1",
    "root": {"path": "rootfs"},
    "process": {"user": {"uid": 0, "gid": 0}, "args": ["sh"], "cwd": "/"},
    "linux": {"namespaces": [{"type": "pid"}, {"type": "mount"}]}
  })");
}

core::Result<Spec> parse(const json& config) {
  return parse_spec(config.dump(), "/bundle");
}

std::string error_of(const json& config) {
  auto spec = parse(config);
  return spec.ok() ? "(parsed)" : spec.error().message();
}

std::string read_data(const std::string& name) {
  std::ifstream in(std::string(PULSEBOX_OCI_TEST_DATA) + "/" + name);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(OciSpec, MinimalConfigParses) {
  auto spec = parse(minimal());
  ASSERT_TRUE(spec.ok()) << spec.error().message();
  EXPECT_EQ(spec->oci_version, "1.2.1");
  EXPECT_EQ(spec->bundle.string(), "/bundle");
  EXPECT_EQ(spec->root_path.string(), "/bundle/rootfs");
  EXPECT_FALSE(spec->root_readonly);
  ASSERT_TRUE(spec->process);
  EXPECT_EQ(spec->process->args, std::vector<std::string>{"sh"});
  ASSERT_EQ(spec->linux.namespaces.size(), 2u);
  EXPECT_EQ(spec->linux.namespaces[0].clone_flag, CLONE_NEWPID);
  EXPECT_NE(spec->find_namespace(CLONE_NEWNS), nullptr);
  EXPECT_EQ(spec->find_namespace(CLONE_NEWNET), nullptr);
}

TEST(OciSpec, EverySupportedFieldIsRead) {
  json config = minimal();
  config["root"] = {{"path", "/abs/root"}, {"readonly", true}};
  config["hostname"] = "box";
  config["domainname"] = "example";
  config["annotations"] = {{"io.example", "1"}};
  config["process"] = json::parse(R"({
    "terminal": true, "consoleSize": {"height": 24, "width": 80},
    "user": {"uid": 1000, "gid": 1000, "umask": 18, "additionalGids": [5, 6]},
    "args": ["sh", "-c", "true"], "env": ["A=1", "B="], "cwd": "/home",
    "capabilities": {"bounding": ["CAP_CHOWN", "CAP_KILL"], "effective": ["CAP_KILL"],
                     "permitted": ["CAP_KILL"], "inheritable": [], "ambient": ["CAP_KILL"]},
    "rlimits": [{"type": "RLIMIT_NOFILE", "soft": 10, "hard": 20}],
    "noNewPrivileges": true, "oomScoreAdj": -500})");
  config["mounts"] = json::parse(R"([
    {"destination": "/data", "type": "bind", "source": "/srv", "options": ["rbind", "ro"]},
    {"destination": "/b", "source": "/srv", "options": ["bind"]},
    {"destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": ["mode=1777", "tmpcopyup"]},
    {"destination": "/proc", "type": "proc"}, {"destination": "/sys", "type": "sysfs"},
    {"destination": "/dev/pts", "type": "devpts", "options": ["newinstance", "gid=5"]},
    {"destination": "/dev/mqueue", "type": "mqueue"},
    {"destination": "/sys/fs/cgroup", "type": "cgroup"},
    {"destination": "/c2", "type": "cgroup2"}])");
  config["linux"] = json::parse(R"({
    "namespaces": [{"type": "pid"}, {"type": "network", "path": "/run/netns/x"},
                   {"type": "mount"}, {"type": "ipc"}, {"type": "uts"}, {"type": "user"},
                   {"type": "cgroup"}],
    "uidMappings": [{"containerID": 0, "hostID": 100000, "size": 65536}],
    "gidMappings": [{"containerID": 0, "hostID": 100000, "size": 65536}],
    "sysctl": {"net.ipv4.ip_forward": "1", "kernel.shmmax": "1", "fs.mqueue.msg_max": "3",
               "kernel.msgmax": "9", "kernel.sem": "1 2 3 4", "net/core/somaxconn": "5",
               "net/ipv4/conf/eth0.100/forwarding": "1", "net.ipv6.conf.eth0/7.mtu": "1400"},
    "resources": {
      "devices": [{"allow": false, "access": "rwm"},
                  {"allow": true, "type": "c", "major": 1, "minor": 3, "access": "rw"}],
      "memory": {"limit": 100, "reservation": 50, "swap": 200, "swappiness": 10,
                 "disableOOMKiller": false, "useHierarchy": true, "checkBeforeUpdate": false},
      "cpu": {"shares": 1024, "quota": 5000, "period": 10000, "burst": 1, "cpus": "0-1",
              "mems": "0", "idle": 0, "realtimeRuntime": 0, "realtimePeriod": 0},
      "pids": {"limit": 16},
      "blockIO": {"weight": 10, "leafWeight": 10,
                  "weightDevice": [{"major": 8, "minor": 0, "weight": 5}],
                  "throttleReadBpsDevice": [{"major": 8, "minor": 0, "rate": 100}],
                  "throttleWriteBpsDevice": [], "throttleReadIOPSDevice": [],
                  "throttleWriteIOPSDevice": [{"major": 8, "minor": 0, "rate": 7}]},
      "hugepageLimits": [{"pageSize": "2MB", "limit": 0}],
      "unified": {"memory.high": "1000"}},
    "cgroupsPath": "/default/t1",
    "devices": [{"type": "c", "path": "/dev/fuse", "major": 10, "minor": 229,
                 "fileMode": 438, "uid": 0, "gid": 0}],
    "seccomp": {"defaultAction": "SCMP_ACT_ERRNO", "defaultErrnoRet": 38,
                "architectures": ["SCMP_ARCH_X86_64"], "flags": ["SECCOMP_FILTER_FLAG_LOG"],
                "syscalls": [{"names": ["read"], "action": "SCMP_ACT_ALLOW"},
                             {"names": ["ptrace"], "action": "SCMP_ACT_KILL_PROCESS"}]},
    "rootfsPropagation": "rslave",
    "maskedPaths": ["/proc/kcore"], "readonlyPaths": ["/proc/sys"],
    "personality": {"domain": "LINUX32"}})");
  auto spec = parse(config);
  ASSERT_TRUE(spec.ok()) << spec.error().message();
  EXPECT_EQ(spec->root_path.string(), "/abs/root");
  EXPECT_TRUE(spec->root_readonly);
  EXPECT_EQ(spec->hostname, "box");
  EXPECT_EQ(spec->domainname, "example");
  EXPECT_EQ(spec->annotations.at("io.example"), "1");
  const Process& p = *spec->process;
  EXPECT_TRUE(p.terminal);
  ASSERT_TRUE(p.console_size);
  EXPECT_EQ(p.console_size->first, 24);
  EXPECT_EQ(p.console_size->second, 80);
  EXPECT_EQ(p.user.uid, 1000u);
  EXPECT_EQ(p.user.umask, 18u);
  EXPECT_EQ(p.user.additional_gids, (std::vector<std::uint32_t>{5, 6}));
  EXPECT_EQ(p.env, (std::vector<std::string>{"A=1", "B="}));
  EXPECT_EQ(p.cwd, "/home");
  EXPECT_EQ(p.capabilities.bounding, (1u << 0) | (1u << 5));  // CAP_CHOWN, CAP_KILL
  EXPECT_EQ(p.capabilities.effective, 1u << 5);
  EXPECT_EQ(p.capabilities.ambient, 1u << 5);
  EXPECT_EQ(p.capabilities.inheritable, 0u);
  ASSERT_EQ(p.rlimits.size(), 1u);
  EXPECT_EQ(p.rlimits[0].resource, RLIMIT_NOFILE);
  EXPECT_EQ(p.rlimits[0].hard, 20u);
  EXPECT_TRUE(p.no_new_privileges);
  EXPECT_EQ(p.oom_score_adj, -500);
  ASSERT_EQ(spec->mounts.size(), 9u);
  EXPECT_EQ(spec->mounts[1].type, "bind");  // no type + bind option
  EXPECT_EQ(spec->mounts[2].options, (std::vector<std::string>{"mode=1777", "tmpcopyup"}));
  const Linux& l = spec->linux;
  EXPECT_EQ(l.namespaces[1].path, "/run/netns/x");
  EXPECT_EQ(l.id_maps.uids[0].outside, 100000u);
  EXPECT_EQ(l.id_maps.gids[0].count, 65536u);
  EXPECT_FALSE(l.id_maps.deny_setgroups);
  EXPECT_EQ(l.sysctl.at("net.core.somaxconn"), "5");
  // sysctl(8)'s two spellings: the first separator separates, the other
  // character is a dot inside a name.
  EXPECT_EQ(l.sysctl.at("net.ipv4.conf.eth0/100.forwarding"), "1");
  EXPECT_EQ(l.sysctl.at("net.ipv6.conf.eth0/7.mtu"), "1400");
  EXPECT_EQ(l.resources.devices.size(), 2u);
  EXPECT_EQ(l.resources.devices[1].major, 1);
  EXPECT_EQ(l.resources.devices[1].access, "rw");
  EXPECT_EQ(l.resources.devices[0].type, 'a');
  EXPECT_EQ(l.resources.memory->swap, 200);
  EXPECT_EQ(l.resources.memory->swappiness, 10u);
  EXPECT_EQ(l.resources.cpu->shares, 1024u);
  EXPECT_EQ(l.resources.cpu->cpus, "0-1");
  EXPECT_EQ(l.resources.pids_limit, 16);
  EXPECT_EQ(l.resources.block_io->weight_device[0].weight, 5);
  EXPECT_EQ(l.resources.block_io->throttle_write_iops[0].rate, 7u);
  EXPECT_EQ(l.resources.hugepage_limits[0].page_size, "2MB");
  EXPECT_EQ(l.resources.unified.at("memory.high"), "1000");
  EXPECT_EQ(l.cgroups_path, "/default/t1");
  EXPECT_EQ(l.devices[0].path, "/dev/fuse");
  EXPECT_EQ(l.devices[0].file_mode, 0666u);
  ASSERT_TRUE(l.seccomp);
  EXPECT_EQ(l.seccomp->default_errno, 38);
  EXPECT_EQ(l.seccomp->filter_flags, seccomp::kFlagLog);
  EXPECT_EQ(l.seccomp->rules.size(), 2u);
  EXPECT_EQ(l.rootfs_propagation, "rslave");
  EXPECT_EQ(l.masked_paths, std::vector<std::string>{"/proc/kcore"});
  EXPECT_EQ(l.readonly_paths, std::vector<std::string>{"/proc/sys"});
  EXPECT_EQ(l.personality, static_cast<unsigned long>(PER_LINUX32));
}

// Every refusal names its path, says it is not supported and why, and what to do.
struct RefusalCase {
  const char* name;
  const char* json_pointer;  // where to put the value
  const char* value;
  const char* expected;  // start of the message after "config.json: "
};

class OciRefusals : public ::testing::TestWithParam<RefusalCase> {};

TEST_P(OciRefusals, AreRefusedWithThePathAndTheReason) {
  const RefusalCase& c = GetParam();
  json config = minimal();
  config[json::json_pointer(c.json_pointer)] = json::parse(c.value);
  auto spec = parse(config);
  ASSERT_FALSE(spec.ok()) << c.name;
  const std::string message = spec.error().message();
  EXPECT_EQ(message.rfind(std::string("config.json: ") + c.expected, 0), 0u) << message;
  EXPECT_TRUE(message.find("not supported") != std::string::npos ||
              message.find("not namespaced") != std::string::npos)
      << message;
  EXPECT_NE(message.find("; "), std::string::npos) << message;  // what to do
  EXPECT_EQ(spec.error().kind(), core::ErrorKind::kUnsupported) << message;
}

INSTANTIATE_TEST_SUITE_P(
    Table, OciRefusals,
    ::testing::Values(
        RefusalCase{"apparmor", "/process/apparmorProfile", R"("p")",
                    "process.apparmorProfile: not supported: pulsebox oci has no LSM"},
        RefusalCase{"selinux", "/process/selinuxLabel", R"("l")",
                    "process.selinuxLabel: not supported: pulsebox oci has no LSM"},
        RefusalCase{"mountLabel", "/linux/mountLabel", R"("l")", "linux.mountLabel: not supported"},
        RefusalCase{"scheduler", "/process/scheduler", R"({"policy": "SCHED_OTHER"})",
                    "process.scheduler: not supported: scheduling"},
        RefusalCase{"ioPriority", "/process/ioPriority", R"({"class": "IOPRIO_CLASS_BE"})",
                    "process.ioPriority: not supported"},
        RefusalCase{"execCPUAffinity", "/process/execCPUAffinity", R"({"initial": "0"})",
                    "process.execCPUAffinity: not supported"},
        RefusalCase{"time ns", "/linux/namespaces/2", R"({"type": "time"})",
                    "linux.namespaces[2].type \"time\": not supported: time namespaces"},
        RefusalCase{"timeOffsets", "/linux/timeOffsets", R"({})",
                    "linux.timeOffsets: not supported"},
        RefusalCase{"username", "/process/user/username", R"("root")",
                    "process.user.username: not supported: it is a Windows"},
        RefusalCase{"commandLine", "/process/commandLine", R"("sh")",
                    "process.commandLine: not supported"},
        RefusalCase{"windows", "/windows", R"({})", "windows: not supported: it is not a Linux"},
        RefusalCase{"solaris", "/solaris", R"({})", "solaris: not supported"},
        RefusalCase{"vm", "/vm", R"({})", "vm: not supported"},
        RefusalCase{"zos", "/zos", R"({})", "zos: not supported"},
        RefusalCase{"freebsd", "/freebsd", R"({})", "freebsd: not supported"},
        RefusalCase{"capability", "/process/capabilities",
                    R"({"bounding": ["CAP_CHOWN", "CAP_FLY"]})",
                    "process.capabilities.bounding[1] \"CAP_FLY\": not supported: the capability "
                    "is not known"},
        RefusalCase{"intelRdt", "/linux/intelRdt", R"({})", "linux.intelRdt: not supported"},
        RefusalCase{"rdma", "/linux/resources", R"({"rdma": {}})",
                    "linux.resources.rdma: not supported: pulsebox oci does not manage the RDMA"},
        RefusalCase{"network", "/linux/resources", R"({"network": {}})",
                    "linux.resources.network: not supported"},
        RefusalCase{"netDevices", "/linux/netDevices", R"({})", "linux.netDevices: not supported"},
        RefusalCase{"memoryPolicy", "/linux/memoryPolicy", R"({})",
                    "linux.memoryPolicy: not supported"},
        RefusalCase{"kernel", "/linux/resources", R"({"memory": {"kernel": 1}})",
                    "linux.resources.memory.kernel: not supported: kernel memory"},
        RefusalCase{"kernelTCP", "/linux/resources", R"({"memory": {"kernelTCP": 1}})",
                    "linux.resources.memory.kernelTCP: not supported"},
        RefusalCase{"realtime", "/linux/resources", R"({"cpu": {"realtimeRuntime": 5}})",
                    "linux.resources.cpu.realtimeRuntime: not supported: real-time"},
        RefusalCase{
            "listenerPath", "/linux/seccomp",
            R"({"defaultAction": "SCMP_ACT_ALLOW", "listenerPath": "/s"})",
            "linux.seccomp.listenerPath: not supported: pulsebox oci runs no seccomp agents"},
        RefusalCase{"listenerMetadata", "/linux/seccomp",
                    R"({"defaultAction": "SCMP_ACT_ALLOW", "listenerMetadata": "m"})",
                    "linux.seccomp.listenerMetadata: not supported"},
        RefusalCase{
            "notify", "/linux/seccomp",
            R"({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["read"], "action": "SCMP_ACT_NOTIFY"}]})",
            "linux.seccomp.syscalls[0].action: SCMP_ACT_NOTIFY: not supported"},
        RefusalCase{
            "killable flag", "/linux/seccomp",
            R"({"defaultAction": "SCMP_ACT_ALLOW", "flags": ["SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV"]})",
            "linux.seccomp.flags[0]: not supported"},
        RefusalCase{"uidMappings", "/mounts",
                    R"([{"destination": "/d", "type": "bind", "source": "/s", "uidMappings": []}])",
                    "mounts[0].uidMappings: not supported: idmapped"},
        RefusalCase{"gidMappings", "/mounts",
                    R"([{"destination": "/d", "type": "bind", "source": "/s", "gidMappings": []}])",
                    "mounts[0].gidMappings: not supported"},
        RefusalCase{
            "idmap", "/mounts",
            R"([{"destination": "/d", "type": "bind", "source": "/s", "options": ["bind", "idmap"]}])",
            "mounts[0].options[1] \"idmap\": not supported"},
        RefusalCase{
            "ridmap", "/mounts",
            R"([{"destination": "/d", "type": "bind", "source": "/s", "options": ["ridmap"]}])",
            "mounts[0].options[0] \"ridmap\": not supported"},
        RefusalCase{"copy-symlink", "/mounts",
                    R"([{"destination": "/d", "type": "tmpfs", "options": ["copy-symlink"]}])",
                    "mounts[0].options[0] \"copy-symlink\": not supported"},
        RefusalCase{
            "src-nofollow", "/mounts",
            R"([{"destination": "/d", "type": "bind", "source": "/s", "options": ["src-nofollow"]}])",
            "mounts[0].options[0] \"src-nofollow\": not supported"},
        RefusalCase{
            "dest-nofollow", "/mounts",
            R"([{"destination": "/d", "type": "bind", "source": "/s", "options": ["dest-nofollow"]}])",
            "mounts[0].options[0] \"dest-nofollow\": not supported"},
        RefusalCase{"mount type", "/mounts",
                    R"([{"destination": "/d", "type": "overlay", "source": "o"}])",
                    "mounts[0].type: not supported: \"overlay\""},
        RefusalCase{"oci 2", "/ociVersion", R"("2.0.0")", "ociVersion: not supported: \"2.0.0\""},
        RefusalCase{"sysctl host", "/linux/sysctl", R"({"vm.swappiness": "1"})",
                    "linux.sysctl.vm.swappiness: not namespaced: it would change the host"},
        RefusalCase{"personality flags", "/linux/personality",
                    R"({"domain": "LINUX", "flags": ["x"]})",
                    "linux.personality.flags: not supported"}),
    [](const ::testing::TestParamInfo<RefusalCase>& param) {
      std::string name;
      for (char c : std::string(param.param.name))
        name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
      return name;
    });

// Each row of the table is exercised above, one case per row, but for
// --no-pivot (a command-line flag, not config.json); a new row without a case
// here is noticed.
TEST(OciSpec, EveryRefusalRowHasACase) {
  EXPECT_EQ(refusals().size(), 36u) << "add a case to OciRefusals for the new row";
  for (const auto& row : refusals()) {
    EXPECT_FALSE(row.why.empty()) << row.path;
    EXPECT_FALSE(row.fix.empty()) << row.path;
  }
}

struct InvalidCase {
  const char* name;
  const char* json_pointer;
  const char* value;
  const char* expected;
};

class OciInvalid : public ::testing::TestWithParam<InvalidCase> {};

TEST_P(OciInvalid, NamesThePathAndWhy) {
  const InvalidCase& c = GetParam();
  json config = minimal();
  if (std::string(c.value) == "DELETE") {
    const json::json_pointer ptr(c.json_pointer);
    config[ptr.parent_pointer()].erase(ptr.back());
  } else {
    config[json::json_pointer(c.json_pointer)] = json::parse(c.value);
  }
  const std::string message = error_of(config);
  EXPECT_EQ(message.rfind(std::string("config.json: ") + c.expected, 0), 0u)
      << c.name << ": " << message;
  EXPECT_NE(message.find("; "), std::string::npos) << message;
}

INSTANTIATE_TEST_SUITE_P(
    Checks, OciInvalid,
    ::testing::Values(
        // Unknown keys at every level, by their path.
        InvalidCase{"unknown top", "/extra", "1", "extra: unknown key"},
        InvalidCase{"unknown process", "/process/argv", R"(["x"])", "process.argv: unknown key"},
        InvalidCase{"unknown user", "/process/user/groups", "[]",
                    "process.user.groups: unknown key"},
        InvalidCase{"unknown linux", "/linux/sysctls", "{}", "linux.sysctls: unknown key"},
        InvalidCase{"unknown resources", "/linux/resources", R"({"memory": {"limt": 1}})",
                    "linux.resources.memory.limt: unknown key"},
        InvalidCase{"unknown mount", "/mounts",
                    R"([{"destination": "/p", "type": "proc", "flags": 1}])",
                    "mounts[0].flags: unknown key"},
        InvalidCase{"unknown ns", "/linux/namespaces/0/name", R"("x")",
                    "linux.namespaces[0].name: unknown key"},
        InvalidCase{"unknown seccomp", "/linux/seccomp",
                    R"({"defaultAction": "SCMP_ACT_ALLOW", "archMap": []})",
                    "linux.seccomp.archMap: unknown key"},
        InvalidCase{
            "docker includes", "/linux/seccomp",
            R"({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["read"], "action": "SCMP_ACT_ALLOW", "includes": {}}]})",
            "linux.seccomp.syscalls[0].includes: unknown key"},
        // Wrong types name the expected type.
        InvalidCase{"args type", "/process/args", R"("sh")",
                    "process.args: expected an array of strings, got a string"},
        InvalidCase{"uid type", "/process/user/uid", "-1",
                    "process.user.uid: expected a non-negative integer, got a negative integer"},
        InvalidCase{"uid range", "/process/user/uid", "4294967296",
                    "process.user.uid: 4294967296 is over the limit"},
        InvalidCase{"terminal type", "/process/terminal", R"("yes")",
                    "process.terminal: expected a boolean, got a string"},
        InvalidCase{"root type", "/root", R"("rootfs")", "root: expected an object, got a string"},
        InvalidCase{"mounts type", "/mounts", "{}", "mounts: expected an array, got an object"},
        InvalidCase{"limit type", "/linux/resources", R"({"memory": {"limit": 1.5}})",
                    "linux.resources.memory.limit: expected an integer, got a fractional number"},
        InvalidCase{"annotation type", "/annotations", R"({"a": 1})",
                    "annotations.a: expected a string, got a non-negative integer"},
        // Missing and malformed fields.
        InvalidCase{"no version", "/ociVersion", "DELETE", "ociVersion: missing"},
        InvalidCase{"no root", "/root", "DELETE", "root: missing"},
        InvalidCase{"no process", "/process", "DELETE",
                    "process: missing: create needs the process"},
        InvalidCase{"empty args", "/process/args", "[]", "process.args: empty or missing"},
        InvalidCase{"relative cwd", "/process/cwd", R"("home")",
                    "process.cwd: \"home\" is not an absolute path"},
        InvalidCase{"bad env", "/process/env", R"(["NOEQUALS"])",
                    "process.env[0]: \"NOEQUALS\" is not KEY=value"},
        InvalidCase{"bad rlimit", "/process/rlimits",
                    R"([{"type": "RLIMIT_FLY", "soft": 1, "hard": 1}])",
                    "process.rlimits[0].type: unknown resource"},
        InvalidCase{"soft over hard", "/process/rlimits",
                    R"([{"type": "RLIMIT_NOFILE", "soft": 2, "hard": 1}])",
                    "process.rlimits[0]: soft is above hard"},
        InvalidCase{"oom range", "/process/oomScoreAdj", "1001",
                    "process.oomScoreAdj: 1001 is outside"},
        InvalidCase{"relative dest", "/mounts", R"([{"destination": "tmp", "type": "tmpfs"}])",
                    "mounts[0].destination: \"tmp\" is not an absolute path without \"..\""},
        InvalidCase{
            "climbing dest", "/mounts", R"([{"destination": "/etc/../../x", "type": "tmpfs"}])",
            "mounts[0].destination: \"/etc/../../x\" is not an absolute path without \"..\""},
        InvalidCase{"climbing masked", "/linux/maskedPaths", R"(["/proc/.."])",
                    "linux.maskedPaths[0]: \"/proc/..\" is not an absolute path without \"..\""},
        InvalidCase{"climbing device", "/linux/devices",
                    R"([{"type": "c", "path": "/dev/../etc/x", "major": 1, "minor": 1}])",
                    "linux.devices[0].path: \"/dev/../etc/x\" is not under /dev"},
        InvalidCase{"typeless", "/mounts", R"([{"destination": "/t", "source": "/s"}])",
                    "mounts[0].type: no type and no bind or rbind option"},
        InvalidCase{"bind no source", "/mounts", R"([{"destination": "/t", "type": "bind"}])",
                    "mounts[0].source: missing for a bind mount"},
        InvalidCase{"unknown ns type", "/linux/namespaces/0/type", R"("net")",
                    "linux.namespaces[0].type: unknown namespace type \"net\""},
        InvalidCase{"relative ns path", "/linux/namespaces/0/path", R"("proc/1/ns/pid")",
                    "linux.namespaces[0].path: \"proc/1/ns/pid\" is not an absolute path"},
        InvalidCase{"device rule type", "/linux/resources",
                    R"({"devices": [{"allow": true, "type": "x"}]})",
                    "linux.resources.devices[0].type: \"x\" is not a, c or b"},
        InvalidCase{"device rule access", "/linux/resources",
                    R"({"devices": [{"allow": true, "access": "rwx"}]})",
                    "linux.resources.devices[0].access: \"rwx\" is not made of r, w and m"},
        InvalidCase{"swap below limit", "/linux/resources",
                    R"({"memory": {"limit": 100, "swap": 50}})",
                    "linux.resources.memory.swap: memory+swap 50 is below the limit 100"},
        InvalidCase{"device outside dev", "/linux/devices",
                    R"([{"type": "c", "path": "/etc/x", "major": 1, "minor": 1}])",
                    "linux.devices[0].path: \"/etc/x\" is not under /dev"},
        InvalidCase{"sysctl name", "/linux/sysctl", R"({"net/../../x": "1"})",
                    "linux.sysctl.net/../../x: not a sysctl name"},
        InvalidCase{"sysctl dot-dot name", "/linux/sysctl", R"({"net.ipv4.conf.//.x": "1"})",
                    "linux.sysctl.net.ipv4.conf.//.x: not a sysctl name"},
        InvalidCase{"sysctl empty name", "/linux/sysctl", R"({"net..x": "1"})",
                    "linux.sysctl.net..x: not a sysctl name"},
        InvalidCase{"unified name", "/linux/resources", R"({"unified": {"../x": "1"}})",
                    "linux.resources.unified.../x: not a cgroup file name"},
        InvalidCase{"propagation", "/linux/rootfsPropagation", R"("everywhere")",
                    "linux.rootfsPropagation: \"everywhere\" is not a propagation"},
        InvalidCase{"masked relative", "/linux/maskedPaths", R"(["proc"])",
                    "linux.maskedPaths[0]: \"proc\" is not an absolute path"},
        InvalidCase{"personality domain", "/linux/personality", R"({"domain": "BSD"})",
                    "linux.personality.domain: \"BSD\" is not LINUX or LINUX32"},
        // Cross-field checks.
        InvalidCase{
            "duplicate ns", "/linux/namespaces/2", R"({"type": "pid"})",
            "linux.namespaces[2].type: a second \"pid\" namespace (also linux.namespaces[0])"},
        InvalidCase{"maps without userns", "/linux/uidMappings",
                    R"([{"containerID": 0, "hostID": 1000, "size": 1}])",
                    "linux.uidMappings: mappings without a user namespace"},
        InvalidCase{"userns without maps", "/linux/namespaces/2", R"({"type": "user"})",
                    "linux.namespaces: a new user namespace without linux.uidMappings"},
        InvalidCase{"hostname without uts", "/hostname", R"("box")",
                    "hostname: set without a uts namespace"},
        InvalidCase{"domainname without uts", "/domainname", R"("box")",
                    "domainname: set without a uts namespace"},
        InvalidCase{"net sysctl without netns", "/linux/sysctl", R"({"net.ipv4.ip_forward": "1"})",
                    "linux.sysctl.net.ipv4.ip_forward: needs a network namespace"},
        InvalidCase{"ipc sysctl without ipcns", "/linux/sysctl", R"({"kernel.shmmax": "1"})",
                    "linux.sysctl.kernel.shmmax: needs a ipc namespace"},
        InvalidCase{"uts sysctl without utsns", "/linux/sysctl", R"({"kernel.hostname": "x"})",
                    "linux.sysctl.kernel.hostname: needs a uts namespace"},
        InvalidCase{"reserved annotation", "/annotations", R"({"org.pulsebox.enforced": "x"})",
                    "annotations.org.pulsebox.enforced: the org.pulsebox. prefix is reserved"}),
    [](const ::testing::TestParamInfo<InvalidCase>& param) {
      std::string name;
      for (char c : std::string(param.param.name))
        name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
      return name;
    });

TEST(OciSpec, AdditionalGidsAreRefusedWhereSetgroupsIsDenied) {
  json config = minimal();
  config["linux"]["namespaces"].push_back({{"type", "user"}});
  config["linux"]["uidMappings"] =
      json::parse(R"([{"containerID": 0, "hostID": 1000, "size": 1}])");
  config["linux"]["gidMappings"] =
      json::parse(R"([{"containerID": 0, "hostID": 1000, "size": 1}])");
  auto spec = parse(config);
  ASSERT_TRUE(spec.ok()) << spec.error().message();
  EXPECT_TRUE(spec->linux.id_maps.deny_setgroups);
  config["process"]["user"]["additionalGids"] = {5};
  EXPECT_EQ(
      error_of(config).rfind("config.json: process.user.additionalGids: setgroups is denied", 0),
      0u)
      << error_of(config);
}

TEST(OciSpec, SyntaxErrorsAndDepthAreBounded) {
  EXPECT_NE(parse_spec("{", "/b").error().message().find("config.json"), std::string::npos);
  EXPECT_FALSE(parse_spec(std::string(1000, '[') + std::string(1000, ']'), "/b").ok());
  EXPECT_EQ(parse_spec("[]", "/b")
                .error()
                .message()
                .rfind("config.json: the document: expected an object", 0),
            0u);
}

TEST(OciSpec, ReadSpecReadsTheBundleBounded) {
  testing::TempDir dir;
  {
    std::ofstream out(dir.path() / "config.json");
    out << minimal().dump();
  }
  auto spec = read_spec(dir.path());
  ASSERT_TRUE(spec.ok()) << spec.error().message();
  EXPECT_EQ(spec->root_path.string(), (dir.path() / "rootfs").string());
  testing::TempDir empty;
  EXPECT_NE(read_spec(empty.path()).error().message().find("config.json"), std::string::npos);
  testing::TempDir big;
  {
    std::ofstream out(big.path() / "config.json");
    out << std::string(kMaxConfigBytes + 1, ' ');
  }
  EXPECT_EQ(read_spec(big.path()).error().kind(), core::ErrorKind::kResource);
}

TEST(OciSpec, CapturedEngineConfigsParseWithoutRefusal) {
  for (const char* name :
       {"podman-run-none-mem-pids-ro-v.config.json", "podman-run-d-default-network.config.json",
        "ctr-run-memory.config.json"}) {
    const std::string text = read_data(name);
    ASSERT_FALSE(text.empty()) << name;
    auto spec = parse_spec(text, "/run/bundle");
    ASSERT_TRUE(spec.ok()) << name << ": " << spec.error().message();
    EXPECT_FALSE(spec->process->args.empty()) << name;
    EXPECT_NE(spec->process->capabilities.bounding, 0u) << name;
  }
  auto podman = parse_spec(read_data("podman-run-none-mem-pids-ro-v.config.json"), "/b").value();
  EXPECT_TRUE(podman.root_readonly);
  EXPECT_EQ(podman.linux.resources.memory->limit, 33554432);
  EXPECT_EQ(podman.linux.resources.memory->swap, 67108864);
  EXPECT_EQ(podman.linux.resources.pids_limit, 16);
  ASSERT_TRUE(podman.linux.seccomp);
  EXPECT_EQ(podman.linux.seccomp->default_errno, 38);
  EXPECT_EQ(podman.process->user.umask, 18u);
  EXPECT_EQ(podman.process->rlimits.size(), 2u);
  auto ctr = parse_spec(read_data("ctr-run-memory.config.json"), "/run/bundle").value();
  EXPECT_EQ(ctr.root_path.string(), "/run/bundle/rootfs");  // relative root.path
  EXPECT_EQ(ctr.linux.resources.cpu->shares, 1024u);
  EXPECT_EQ(ctr.linux.resources.devices.size(), 10u);
  EXPECT_TRUE(ctr.process->no_new_privileges);
  auto joined = parse_spec(read_data("podman-run-d-default-network.config.json"), "/b").value();
  EXPECT_EQ(joined.find_namespace(CLONE_NEWNET)->path.rfind("/run/netns/", 0), 0u);
}

TEST(OciSpec, CapturedExecProcessesParse) {
  for (const char* name : {"podman-exec.process.json", "ctr-exec.process.json"}) {
    auto process = parse_process(read_data(name), name);
    ASSERT_TRUE(process.ok()) << name << ": " << process.error().message();
    EXPECT_FALSE(process->args.empty());
  }
}

TEST(OciSpec, ProcessErrorsNameTheFileAndTheField) {
  auto process = parse_process(R"({"user": {"uid": 0, "gid": 0}, "args": [], "cwd": "/"})",
                               "/tmp/runc-process1");
  ASSERT_FALSE(process.ok());
  EXPECT_EQ(process.error().message().rfind("/tmp/runc-process1: args: empty or missing", 0), 0u)
      << process.error().message();
  auto refused = parse_process(
      R"({"user": {"uid": 0, "gid": 0}, "args": ["x"], "cwd": "/", "apparmorProfile": "p"})",
      "/tmp/p");
  EXPECT_EQ(refused.error().message().rfind("/tmp/p: apparmorProfile: not supported", 0), 0u)
      << refused.error().message();
}

}  // namespace
}  // namespace pulsebox::oci::spec
