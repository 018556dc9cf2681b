// Seccomp profiles as data: parsing (errors with file, line and field),
// Docker's conditions, compilation of the built-in profiles, the cache.
#include <gtest/gtest.h>

#include <linux/audit.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <sys/socket.h>

#include <cstring>
#include <fstream>
#include <random>
#include <set>

#include "core/json_lines.h"
#include "helpers/test_support.h"
#include "seccomp/bpf_run.h"
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
  const std::string_view text = "{\n \"a\": [1,\n  {\"b\": \"x\\\"y\"}],\n \"c\": 2}";
  EXPECT_EQ(core::json_value_line(text, ""), 1);
  EXPECT_EQ(core::json_value_line(text, "a"), 2);
  EXPECT_EQ(core::json_value_line(text, "a[0]"), 2);
  EXPECT_EQ(core::json_value_line(text, "a[1].b"), 3);
  EXPECT_EQ(core::json_value_line(text, "c"), 4);
  EXPECT_EQ(core::json_value_line(text, "a[2]"), std::nullopt);
  EXPECT_EQ(core::json_value_line(text, "b"), std::nullopt);
  EXPECT_EQ(core::json_value_line(text, "a.b"), std::nullopt);
}

// The line table this replaced kept every value's full path: a long key
// over a long array (600 KB here) asked for tens of gigabytes.
TEST(JsonLines, ALongKeyOverALongArrayCostsOnePass) {
  std::string text = "{\"" + std::string(200000, 'k') + "\": [";
  for (int i = 0; i < 200000; ++i)
    text += i == 0 ? "0" : ",0";
  text += "],\n\"x\": 1}";
  EXPECT_EQ(core::json_value_line(text, std::string(200000, 'k') + "[199999]"), 1);
  EXPECT_EQ(core::json_value_line(text, "x"), 2);
  EXPECT_EQ(error_of(text).substr(0, 9), "p.json:1:");
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

// What a program decides for one call (seccomp/bpf_run.h); a program the
// interpreter cannot run fails the test.
std::uint32_t decide(const std::vector<sock_filter>& program, const seccomp_data& data) {
  const auto decided = run_program(program, data);
  if (!decided) ADD_FAILURE() << "a program the interpreter cannot run";
  return decided.value_or(0);
}

// The binary tree and the ranges load faster than libseccomp's linear
// layout; they must decide every call exactly as it does: every syscall
// number (and beyond), the x32 and i386 entry points, and for calls with
// argument rules the rules' own values, their neighbours and random ones in
// every argument; with kills compiled as notifications and as the kernel's.
TEST(SeccompCompiler, TheTreeAndTheRangesDecideEveryCallAsTheLinearLayout) {
  std::mt19937_64 random(20261130);
  for (const auto& name : builtin_profile_names()) {
    for (const KillActions kills : {KillActions::Notify, KillActions::Kernel}) {
      auto profile = load_profile(name);
      ASSERT_TRUE(profile.ok()) << name;
      auto linear = compile(profile.value(), Layout::Linear, kills);
      auto tree = compile(profile.value(), Layout::BinaryTree, kills);
      auto ranges = compile(profile.value(), Layout::Ranges, kills);
      ASSERT_TRUE(tree.ok() && linear.ok() && ranges.ok()) << name;
      EXPECT_NE(tree.value()->program.size(), linear.value()->program.size())
          << name << ": the layouts should differ";
      // Shorter, or compile() fell back to the tree.
      EXPECT_LT(ranges.value()->program.size(), tree.value()->program.size()) << name;

      std::set<std::uint64_t> values = {0,          1,          2,           0x7fffffff,
                                        0x80000000, 0xffffffff, 0x100000000, ~std::uint64_t{0}};
      std::set<int> argument_checked;
      for (const auto& rule : profile.value().rules) {
        if (rule.args.empty()) continue;
        for (const auto& syscall : rule.names) {
          const int nr = ::seccomp_syscall_resolve_name(syscall.c_str());
          if (nr >= 0) argument_checked.insert(nr);
        }
        for (const auto& check : rule.args) {
          for (std::uint64_t v : {check.value, check.value_two}) {
            for (std::uint64_t near : {v, v - 1, v + 1, ~v, v | check.value_two, v << 32})
              values.insert(near);
          }
        }
      }
      const std::vector<std::uint64_t> pool(values.begin(), values.end());
      int compared = 0;
      auto compare = [&](const seccomp_data& data) {
        ++compared;
        const std::uint32_t expected = decide(linear.value()->program, data);
        const std::uint32_t by_tree = decide(tree.value()->program, data);
        const std::uint32_t by_ranges = decide(ranges.value()->program, data);
        if (expected != by_tree || expected != by_ranges) {
          ADD_FAILURE() << name << ": syscall " << data.nr << " arch 0x" << std::hex << data.arch
                        << " args " << data.args[0] << " " << data.args[1] << " " << data.args[2]
                        << ": linear 0x" << expected << ", tree 0x" << by_tree << ", ranges 0x"
                        << by_ranges;
          return false;
        }
        return true;
      };
      for (std::uint32_t arch :
           {std::uint32_t{AUDIT_ARCH_X86_64}, std::uint32_t{AUDIT_ARCH_I386}}) {
        for (int nr = 0; nr < 600; ++nr) {
          for (int x32 : {0, 0x40000000}) {
            seccomp_data data{};
            data.arch = arch;
            data.nr = nr | x32;
            if (!compare(data)) return;
            if (!argument_checked.count(nr) || x32 != 0 || arch != AUDIT_ARCH_X86_64) continue;
            for (int index = 0; index < 6; ++index) {
              for (std::uint64_t value : pool) {
                seccomp_data one = data;
                one.args[index] = value;
                if (!compare(one)) return;
              }
            }
            for (int round = 0; round < 200; ++round) {
              seccomp_data mixed = data;
              for (auto& arg : mixed.args)
                arg = random() % 3 == 0 ? random() : pool[random() % pool.size()];
              if (!compare(mixed)) return;
            }
          }
        }
      }
      for (const std::uint32_t nr :
           {0x3fffffffU, 0x7fffffffU, 0x80000000U, 0xfffffffeU, 0xffffffffU}) {
        seccomp_data data{};
        data.arch = AUDIT_ARCH_X86_64;
        data.nr = static_cast<int>(nr);
        if (!compare(data)) return;
      }
      EXPECT_GT(compared, 2400) << name;
    }
  }
}

// What a built-in profile decides for one call with these arguments.
std::uint32_t decision(const std::string& profile_name, const char* syscall,
                       std::initializer_list<std::uint64_t> args) {
  auto profile = load_profile(profile_name);
  auto filter = compile(profile.value());
  seccomp_data data{};
  data.arch = AUDIT_ARCH_X86_64;
  data.nr = ::seccomp_syscall_resolve_name(syscall);
  std::size_t index = 0;
  for (std::uint64_t arg : args)
    data.args[index++] = arg;
  return decide(filter.value()->program, data);
}

constexpr std::uint32_t kEafnosupport = SECCOMP_RET_ERRNO | EAFNOSUPPORT;

// AF_VSOCK has one port space for the host and its hypervisor: a sandbox
// with --net none could bind the host's ports. socket()'s family is an int,
// so a family with bits set above it must be refused too (the kernel drops
// them, a 64-bit comparison would not).
TEST(SeccompProfile, AddressFamiliesNoNetworkNamespaceConfinesAreRefused) {
  const std::uint64_t vsock = AF_VSOCK;
  for (const std::string name : {"default", "permissive"}) {
    SCOPED_TRACE(name);
    for (const char* call : {"socket", "socketpair"}) {
      for (std::uint64_t family :
           {vsock, vsock | (std::uint64_t{1} << 32), vsock | std::uint64_t{0xffffffff00000000},
            std::uint64_t{AF_ALG}, std::uint64_t{AF_QIPCRTR}, std::uint64_t{AF_RDS},
            std::uint64_t{AF_BLUETOOTH}}) {
        EXPECT_EQ(decision(name, call, {family, SOCK_STREAM, 0}), kEafnosupport)
            << call << " family 0x" << std::hex << family;
      }
      for (std::uint64_t family : {AF_UNIX, AF_INET, AF_INET6, AF_NETLINK, AF_PACKET}) {
        EXPECT_EQ(decision(name, call, {family, SOCK_STREAM, 0}), SECCOMP_RET_ALLOW)
            << call << " family " << family;
      }
    }
    // An io_uring could open the socket without the socket() call.
    EXPECT_NE(decision(name, "io_uring_setup", {1, 0}), SECCOMP_RET_ALLOW);
  }
  // strict: Unix sockets and pairs only.
  for (const char* call : {"socket", "socketpair"}) {
    EXPECT_EQ(decision("strict", call, {AF_UNIX, SOCK_STREAM, 0}), SECCOMP_RET_ALLOW) << call;
    EXPECT_NE(decision("strict", call, {vsock, SOCK_STREAM, 0}), SECCOMP_RET_ALLOW) << call;
    EXPECT_NE(decision("strict", call, {vsock | (std::uint64_t{1} << 32), SOCK_STREAM, 0}),
              SECCOMP_RET_ALLOW)
        << call;
  }
}

// The table in seccomp-profiles/README.md: every family the kernel numbers
// has a decision in `default`, and `permissive` refuses the same ones.
TEST(SeccompProfile, EveryAddressFamilyHasADecisionAndThePermissiveOneAgrees) {
  for (std::uint64_t family = 0; family < AF_MAX; ++family) {
    const std::uint32_t in_default = decision("default", "socket", {family, SOCK_DGRAM, 0});
    EXPECT_TRUE(in_default == SECCOMP_RET_ALLOW || in_default == kEafnosupport)
        << "family " << family << ": 0x" << std::hex << in_default;
    const std::uint32_t in_permissive = decision("permissive", "socket", {family, SOCK_DGRAM, 0});
    EXPECT_EQ(in_permissive, in_default) << "family " << family;
  }
}

// ioctl's request is an unsigned int: TIOCSTI with a bit set above it is
// TIOCSTI to the kernel. The permissive profile refuses it on the low 32
// bits. (default cannot: libseccomp refuses a masked refusal next to its
// "every request but TIOCSTI" allow; its sandboxes hold no terminal.)
TEST(SeccompProfile, ThePermissiveProfileRefusesTiocstiWithHighBitsSet) {
  constexpr std::uint64_t kTiocsti = 0x5412;
  for (std::uint64_t request : {kTiocsti, kTiocsti | (std::uint64_t{1} << 32),
                                kTiocsti | std::uint64_t{0xffffffff00000000}}) {
    EXPECT_EQ(decision("permissive", "ioctl", {0, request, 0}), SECCOMP_RET_ERRNO | EPERM)
        << std::hex << request;
  }
  EXPECT_EQ(decision("permissive", "ioctl", {0, 0x5401 /*TCGETS*/, 0}), SECCOMP_RET_ALLOW);
}

// An OCI runtime has no supervisor: its kills are the kernel's own.
TEST(SeccompCompiler, KernelKillActionsNeedNoListener) {
  auto profile = parse_profile(R"({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [
      {"names": ["ptrace"], "action": "SCMP_ACT_KILL_PROCESS"},
      {"names": ["kcmp"], "action": "SCMP_ACT_KILL_THREAD"}]})",
                               "p.json");
  ASSERT_TRUE(profile.ok()) << profile.error().message();
  const auto on = [](const CompiledFilter& filter, const char* syscall) {
    seccomp_data data{};
    data.arch = AUDIT_ARCH_X86_64;
    data.nr = ::seccomp_syscall_resolve_name(syscall);
    return decide(filter.program, data) & SECCOMP_RET_ACTION_FULL;
  };
  auto notify = compile(profile.value());
  ASSERT_TRUE(notify.ok());
  EXPECT_TRUE(notify.value()->uses_listener);
  EXPECT_EQ(on(*notify.value(), "ptrace"), SECCOMP_RET_USER_NOTIF);
  EXPECT_EQ(on(*notify.value(), "kcmp"), SECCOMP_RET_USER_NOTIF);

  auto kernel = compile(profile.value(), Layout::BinaryTree, KillActions::Kernel);
  ASSERT_TRUE(kernel.ok());
  EXPECT_FALSE(kernel.value()->uses_listener);
  EXPECT_EQ(on(*kernel.value(), "ptrace"), SECCOMP_RET_KILL_PROCESS);
  EXPECT_EQ(on(*kernel.value(), "kcmp"), SECCOMP_RET_KILL_THREAD);
  EXPECT_EQ(on(*kernel.value(), "read"), SECCOMP_RET_ALLOW);
  EXPECT_NE(kernel.value()->key, notify.value()->key);
}

TEST(SeccompProfile, OciFormatAcceptsOnlyOciKeysAndHonoursFlags) {
  const ParseOptions oci{.format = Format::Oci};
  auto parsed = parse_profile(
      R"({"defaultAction": "SCMP_ACT_ERRNO", "flags": ["SECCOMP_FILTER_FLAG_TSYNC",
          "SECCOMP_FILTER_FLAG_SPEC_ALLOW"], "syscalls": [{"names": ["read"], "action":
          "SCMP_ACT_ALLOW", "args": [{"index": 0, "value": 0, "op": "SCMP_CMP_EQ"}]}]})",
      "config.json: linux.seccomp", oci);
  ASSERT_TRUE(parsed.ok()) << parsed.error().message();
  EXPECT_EQ(parsed->filter_flags, kFlagTsync | kFlagSpecAllow);
  auto filter = compile(parsed.value(), Layout::BinaryTree, KillActions::Kernel);
  ASSERT_TRUE(filter.ok());
  EXPECT_EQ(filter.value()->load_flags,
            unsigned{SECCOMP_FILTER_FLAG_TSYNC | SECCOMP_FILTER_FLAG_SPEC_ALLOW});
  // The Docker format keeps ignoring flags, as before.
  EXPECT_EQ(parse_profile(R"({"defaultAction": "SCMP_ACT_ALLOW", "flags": ["x"]})", "p.json")
                ->filter_flags,
            0u);

  const auto oci_error = [&](std::string_view text) {
    auto result = parse_profile(text, "config.json: linux.seccomp", oci);
    return result.ok() ? std::string("(parsed)") : result.error().message();
  };
  // Docker-only keys are unknown in an OCI profile, whatever the Docker parser does.
  for (const char* key : {"includes", "excludes", "comment", "name"}) {
    const std::string text = std::string(R"({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [)") +
                             R"({"names": ["read"], "action": "SCMP_ACT_ALLOW", ")" + key +
                             R"(": {}}]})";
    EXPECT_EQ(
        oci_error(text).rfind(
            std::string("config.json: linux.seccomp.syscalls[0].") + key + ": unknown key", 0),
        0u)
        << oci_error(text);
  }
  EXPECT_EQ(oci_error(R"({"defaultAction": "SCMP_ACT_ALLOW", "archMap": []})")
                .rfind("config.json: linux.seccomp.archMap: unknown key", 0),
            0u);
  EXPECT_EQ(oci_error(R"({"defaultAction": "SCMP_ACT_NOTIFY"})"),
            "config.json: linux.seccomp.defaultAction: SCMP_ACT_NOTIFY: not supported: pulsebox "
            "oci runs no seccomp agents; use another action");
  EXPECT_EQ(oci_error(R"({"defaultAction": "SCMP_ACT_ALLOW", "listenerPath": "/s"})")
                .rfind("config.json: linux.seccomp.listenerPath: not supported", 0),
            0u);
  EXPECT_EQ(
      oci_error(
          R"({"defaultAction": "SCMP_ACT_ALLOW", "flags": ["SECCOMP_FILTER_FLAG_NEW_LISTENER"]})")
          .rfind("config.json: linux.seccomp.flags[0]: not supported", 0),
      0u);
  // Docker's profile still takes its own keys.
  EXPECT_TRUE(parse_profile(R"({"defaultAction": "SCMP_ACT_ALLOW", "archMap": [], "syscalls": [
      {"names": ["read"], "action": "SCMP_ACT_ALLOW", "comment": "c"}]})",
                            "p.json")
                  .ok());
}

}  // namespace
}  // namespace pulsebox::seccomp
