// Seccomp profiles as data: parsing (errors with file, line and field),
// Docker's conditions, compilation of the built-in profiles, the cache.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <set>

#include "core/json_lines.h"
#include "helpers/test_support.h"
#include "seccomp/compiler.h"
#include "seccomp/profile.h"

namespace pulsebox::seccomp {
namespace {

using testing::TempDir;

std::string error_of(std::string_view text) {
  auto parsed = parse_profile(text, "p.json");
  return parsed.ok() ? "" : parsed.error().message();
}

TEST(JsonLines, EachValueMapsToTheLineItStartsOn) {
  const auto lines = core::json_value_lines("{\n \"a\": [1,\n  {\"b\": \"x\\\"y\"}],\n \"c\": 2}");
  EXPECT_EQ(lines.at(""), 1);
  EXPECT_EQ(lines.at("a"), 2);
  EXPECT_EQ(lines.at("a[0]"), 2);
  EXPECT_EQ(lines.at("a[1].b"), 3);
  EXPECT_EQ(lines.at("c"), 4);
}

TEST(SeccompProfile, ErrorsNameTheFileTheLineAndTheField) {
  EXPECT_EQ(error_of("{\"defaultAction\": \"SCMP_ACT_ALLOW\",\n\"syscalls\": [\n{\"names\": "
                     "[\"read\"],\n \"action\": \"ALLOW\"}]}"),
            "p.json:4: syscalls[0].action: expected one of SCMP_ACT_ALLOW, SCMP_ACT_ERRNO, "
            "SCMP_ACT_KILL_PROCESS, SCMP_ACT_KILL, SCMP_ACT_KILL_THREAD, SCMP_ACT_TRAP, "
            "SCMP_ACT_LOG, SCMP_ACT_TRACE, got \"ALLOW\"");
  EXPECT_EQ(error_of("{\"defaultAction\": \"SCMP_ACT_ALLOW\", \"sycalls\": []}"),
            "p.json:1: sycalls: unknown key (expected one of defaultAction, defaultErrnoRet, "
            "architectures, archMap, syscalls, flags, listenerPath, listenerMetadata)");
  EXPECT_EQ(error_of("{}"), "p.json:1: the profile: missing \"defaultAction\"");
  EXPECT_EQ(error_of("{\"defaultAction\": \"SCMP_ACT_ALLOW\",\n \"architectures\": "
                     "[\"SCMP_ARCH_Z80\"]}"),
            "p.json:2: architectures[0]: unknown architecture \"SCMP_ARCH_Z80\"");
  EXPECT_EQ(error_of("{\"defaultAction\": \"SCMP_ACT_ALLOW\", \"syscalls\": [{\"names\": "
                     "[\"read\"], \"action\": \"SCMP_ACT_ALLOW\",\n \"args\": [{\"index\": 0, "
                     "\"value\": 1, \"op\": \"SCMP_CMP_ABOUT\"}]}]}"),
            "p.json:2: syscalls[0].args[0].op: expected SCMP_CMP_NE, _LT, _LE, _EQ, _GE, _GT or "
            "_MASKED_EQ, got \"SCMP_CMP_ABOUT\"");
  EXPECT_EQ(error_of("{\"defaultAction\": \"SCMP_ACT_NOTIFY\"}"),
            "p.json:1: defaultAction: SCMP_ACT_NOTIFY is reserved: pulsebox supervises the "
            "sandbox itself");
  EXPECT_EQ(error_of("{\"defaultAction\": \"SCMP_ACT_ALLOW\", \"syscalls\": [{\"action\": "
                     "\"SCMP_ACT_ALLOW\"}]}"),
            "p.json:1: syscalls[0]: missing \"names\"");
  // Found by the fuzzer: nlohmann throws out_of_range, not parse_error, here.
  EXPECT_EQ(error_of("33E333333333333333000"), "p.json: invalid JSON: a number is out of range");
  const std::string syntax = error_of("{\n  \"defaultAction\": \"SCMP_ACT_ALLOW\",,\n}");
  EXPECT_EQ(syntax.rfind("p.json:2:", 0), 0u) << syntax;
  EXPECT_NE(syntax.find("invalid JSON"), std::string::npos) << syntax;
}

TEST(SeccompProfile, DockerConditionsAreResolvedForACapabilityFreeSandbox) {
  auto parsed = parse_profile(R"({"defaultAction": "SCMP_ACT_ERRNO", "syscalls": [
    {"names": ["read"], "action": "SCMP_ACT_ALLOW"},
    {"names": ["mount"], "action": "SCMP_ACT_ALLOW", "includes": {"caps": ["CAP_SYS_ADMIN"]}},
    {"names": ["arch_prctl"], "action": "SCMP_ACT_ALLOW", "includes": {"arches": ["amd64"]}},
    {"names": ["s390_pci_mmio_read"], "action": "SCMP_ACT_ALLOW", "includes": {"arches": ["s390x"]}},
    {"names": ["write"], "action": "SCMP_ACT_ALLOW", "excludes": {"caps": ["CAP_SYS_ADMIN"]}},
    {"names": ["futex_waitv"], "action": "SCMP_ACT_ALLOW", "includes": {"minKernel": "5.16"}},
    {"names": ["future_call"], "action": "SCMP_ACT_ALLOW", "includes": {"minKernel": "99.0"}},
    {"name": "close", "action": "SCMP_ACT_ALLOW", "comment": "the deprecated single name"}]})",
                              "docker.json");
  ASSERT_TRUE(parsed.ok()) << parsed.error().message();
  std::vector<std::string> names;
  for (const auto& rule : parsed->rules)
    names.insert(names.end(), rule.names.begin(), rule.names.end());
#if defined(__x86_64__)
  EXPECT_EQ(names,
            (std::vector<std::string>{"read", "arch_prctl", "write", "futex_waitv", "close"}));
#endif
}

TEST(SeccompProfile, BuiltInProfilesLoadAndCompile) {
  EXPECT_EQ(builtin_profile_names(), (std::vector<std::string>{"default", "strict", "permissive"}));
  for (const auto& name : builtin_profile_names()) {
    auto profile = load_profile(name);
    ASSERT_TRUE(profile.ok()) << name << ": " << profile.error().message();
    auto filter = compile(profile.value());
    ASSERT_TRUE(filter.ok()) << name << ": " << filter.error().message();
    EXPECT_GT(filter.value()->program.size(), 50u) << name;
    EXPECT_EQ(filter.value()->uses_listener, name == "strict") << name;
  }
  auto missing = load_profile("/no/such/profile.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message().find("not a built-in profile (default, strict, permissive)"),
            std::string::npos);
}

TEST(SeccompProfile, TheDefaultProfileDeniesTheDangerousGroups) {
  auto profile = load_profile("default");
  ASSERT_TRUE(profile.ok());
  std::set<std::string> allowed_unconditionally;
  for (const auto& rule : profile->rules) {
    if (rule.action == Action::Allow && rule.args.empty()) {
      allowed_unconditionally.insert(rule.names.begin(), rule.names.end());
    }
  }
  for (const char* name : {"mount",
                           "umount2",
                           "pivot_root",
                           "ptrace",
                           "process_vm_readv",
                           "process_vm_writev",
                           "kexec_load",
                           "kexec_file_load",
                           "bpf",
                           "perf_event_open",
                           "userfaultfd",
                           "keyctl",
                           "add_key",
                           "request_key",
                           "io_uring_setup",
                           "io_uring_enter",
                           "io_uring_register",
                           "open_by_handle_at",
                           "name_to_handle_at",
                           "init_module",
                           "finit_module",
                           "delete_module",
                           "swapon",
                           "swapoff",
                           "reboot",
                           "setns",
                           "unshare",
                           "clone",
                           "clone3",
                           "ioctl",
                           "personality",
                           "iopl",
                           "ioperm",
                           "modify_ldt",
                           "uselib",
                           "_sysctl"}) {
    EXPECT_EQ(allowed_unconditionally.count(name), 0u) << name;
  }
  for (const char* name : {"read", "write", "openat", "execve", "wait4", "mmap", "futex"}) {
    EXPECT_EQ(allowed_unconditionally.count(name), 1u) << name;
  }
}

TEST(FilterCache, CompilesOnceThenServesFromMemoryAndDisk) {
  TempDir dir;
  auto profile = load_profile("default");
  ASSERT_TRUE(profile.ok());
  FilterCache cache(dir.path());
  auto first = cache.get(profile.value());
  ASSERT_TRUE(first.ok());
  auto second = cache.get(profile.value());
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(first.value().get(), second.value().get());
  EXPECT_EQ(cache.stats().compiled, 1);
  EXPECT_EQ(cache.stats().from_memory, 1);

  FilterCache fresh(dir.path());  // a new process, the same state directory
  auto from_disk = fresh.get(profile.value());
  ASSERT_TRUE(from_disk.ok());
  EXPECT_EQ(fresh.stats().from_disk, 1);
  EXPECT_EQ(fresh.stats().compiled, 0);
  ASSERT_EQ(from_disk.value()->program.size(), first.value()->program.size());
  EXPECT_EQ(std::memcmp(from_disk.value()->program.data(), first.value()->program.data(),
                        first.value()->program.size() * sizeof(sock_filter)),
            0);

  // Another text is another key; a damaged cache file is recompiled.
  auto changed = profile.value();
  changed.text += " ";
  EXPECT_NE(cache_key(changed), cache_key(profile.value()));
  std::ofstream(dir / (cache_key(profile.value()) + ".bpf"), std::ios::trunc) << "short";
  FilterCache after_damage(dir.path());
  ASSERT_TRUE(after_damage.get(profile.value()).ok());
  EXPECT_EQ(after_damage.stats().compiled, 1);
}

TEST(FilterCache, ByNameHitsNeedNoParseAndKeepTheListenerFlag) {
  TempDir dir;
  for (const std::string name : {"default", "strict"}) {
    auto expected = compile(load_profile(name).value());
    ASSERT_TRUE(expected.ok()) << name;
    FilterCache cache(dir.path());
    auto first = cache.get(name);
    ASSERT_TRUE(first.ok()) << name;
    EXPECT_EQ(cache.stats().compiled, 1) << name;
    EXPECT_EQ(first.value()->key, cache_key(load_profile(name).value()));

    // A new process: read back from disk, unparsed. Whether the supervisor
    // must hold a listener (strict's kill actions) comes from the program.
    FilterCache fresh(dir.path());
    auto from_disk = fresh.get(name);
    ASSERT_TRUE(from_disk.ok()) << name;
    EXPECT_EQ(fresh.stats().from_disk, 1) << name;
    EXPECT_EQ(fresh.stats().compiled, 0) << name;
    EXPECT_EQ(from_disk.value()->uses_listener, expected.value()->uses_listener) << name;
    EXPECT_EQ(from_disk.value()->program.size(), expected.value()->program.size()) << name;
  }
  EXPECT_TRUE(compile(load_profile("strict").value()).value()->uses_listener);
  EXPECT_FALSE(compile(load_profile("default").value()).value()->uses_listener);

  // A file is keyed by its text: an edited file is compiled again.
  const auto path = dir / "mine.json";
  std::ofstream(path) << R"({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": []})";
  FilterCache cache(dir / "cache");
  ASSERT_TRUE(cache.get(path.string()).ok());
  std::ofstream(path, std::ios::trunc)
      << R"({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["ptrace"],
             "action": "SCMP_ACT_ERRNO"}]})";
  ASSERT_TRUE(cache.get(path.string()).ok());
  EXPECT_EQ(cache.stats().compiled, 2);
  EXPECT_EQ(cache.stats().from_memory, 0);

  // A bad file is an error that names it, and a missing one too.
  std::ofstream(path, std::ios::trunc) << "{";
  auto bad = cache.get(path.string());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("mine.json"), std::string::npos) << bad.error().message();
  auto missing = cache.get((dir / "absent.json").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message().find("absent.json"), std::string::npos);
}

}  // namespace
}  // namespace pulsebox::seccomp
