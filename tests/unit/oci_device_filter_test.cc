// The cgroup v2 device program (oci/device_filter.h) as data: the kernel
// cannot test-run a CGROUP_DEVICE program (BPF_PROG_TEST_RUN has no runner
// for that type), so a small interpreter here runs the generated
// instructions on a context the way the kernel passes it, and the table
// says what each (type, major, minor, access) must get. Where the caller
// may load BPF (root), the kernel's verifier must accept each program too.
#include "oci/device_filter.h"

#include <linux/bpf.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "core/unique_fd.h"

namespace pulsebox::oci {
namespace {

using spec::DeviceRule;

DeviceRule rule(bool allow, char type, std::int64_t major, std::int64_t minor,
                std::string access = "rwm") {
  DeviceRule result;
  result.allow = allow;
  result.type = type;
  result.major = major;
  result.minor = minor;
  result.access = std::move(access);
  return result;
}
const DeviceRule kDenyAll = rule(false, 'a', -1, -1);

struct Request {
  char type;  // 'c' or 'b'
  std::uint32_t major, minor;
  std::string access;  // letters of r, w, m
};

std::uint32_t access_bits(const std::string& access) {
  std::uint32_t bits = 0;
  for (char letter : access)
    bits |= letter == 'r'   ? BPF_DEVCG_ACC_READ
            : letter == 'w' ? BPF_DEVCG_ACC_WRITE
                            : BPF_DEVCG_ACC_MKNOD;
  return bits;
}

// Runs `program` as the kernel would on this request. Only the instructions
// the generator may emit are known; anything else, a backward or
// out-of-range jump, or falling off the end fails the test (nullopt).
std::optional<bool> run(const std::vector<bpf_insn>& program, const Request& request) {
  const std::uint32_t ctx[3] = {
      (access_bits(request.access) << 16) |
          static_cast<std::uint32_t>(request.type == 'b' ? BPF_DEVCG_DEV_BLOCK
                                                         : BPF_DEVCG_DEV_CHAR),
      request.major, request.minor};
  std::uint64_t reg[11] = {};
  bool set[11] = {};
  set[1] = true;  // r1 points at ctx; loads read it by offset
  for (std::size_t pc = 0; pc < program.size(); ++pc) {
    const bpf_insn& in = program[pc];
    const auto use = [&](int r) {
      if (!set[r]) ADD_FAILURE() << "r" << r << " read before written at " << pc;
      return reg[r];
    };
    const auto jump = [&](bool taken) -> bool {
      if (in.off < 0 || pc + 1 + in.off >= program.size()) {
        ADD_FAILURE() << "bad jump at " << pc;
        return false;
      }
      if (taken) pc += in.off;
      return true;
    };
    switch (in.code) {
      case BPF_LDX | BPF_MEM | BPF_W:
        if (in.src_reg != 1 || in.off < 0 || in.off > 8 || in.off % 4 != 0) return std::nullopt;
        reg[in.dst_reg] = ctx[in.off / 4];
        set[in.dst_reg] = true;
        break;
      case BPF_ALU | BPF_AND | BPF_K:
        reg[in.dst_reg] =
            static_cast<std::uint32_t>(use(in.dst_reg) & static_cast<std::uint32_t>(in.imm));
        break;
      case BPF_ALU | BPF_RSH | BPF_K:
        reg[in.dst_reg] = static_cast<std::uint32_t>(use(in.dst_reg)) >> in.imm;
        break;
      case BPF_ALU | BPF_MOV | BPF_X:
        reg[in.dst_reg] = static_cast<std::uint32_t>(use(in.src_reg));
        set[in.dst_reg] = true;
        break;
      case BPF_ALU | BPF_MOV | BPF_K:
        reg[in.dst_reg] = static_cast<std::uint32_t>(in.imm);
        set[in.dst_reg] = true;
        break;
      case BPF_JMP32 | BPF_JEQ | BPF_K:
        if (!jump(static_cast<std::uint32_t>(use(in.dst_reg)) ==
                  static_cast<std::uint32_t>(in.imm)))
          return std::nullopt;
        break;
      case BPF_JMP32 | BPF_JNE | BPF_K:
        if (!jump(static_cast<std::uint32_t>(use(in.dst_reg)) !=
                  static_cast<std::uint32_t>(in.imm)))
          return std::nullopt;
        break;
      case BPF_JMP | BPF_JA:
        if (!jump(true)) return std::nullopt;
        break;
      case BPF_JMP | BPF_EXIT:
        if (!set[0]) return std::nullopt;
        if (reg[0] > 1) ADD_FAILURE() << "verdict " << reg[0];
        return reg[0] == 1;
      default:
        ADD_FAILURE() << "unexpected opcode " << int(in.code) << " at " << pc;
        return std::nullopt;
    }
  }
  ADD_FAILURE() << "the program ran off its end";
  return std::nullopt;
}

// Whether the kernel's verifier accepts the program (nullopt: this caller may
// not load BPF, so it is not checked).
std::optional<std::string> kernel_rejects(const std::vector<bpf_insn>& program) {
  static const char kLicense[] = "Apache";
  bpf_attr load{};
  load.prog_type = BPF_PROG_TYPE_CGROUP_DEVICE;
  load.insns = reinterpret_cast<std::uintptr_t>(program.data());
  load.insn_cnt = static_cast<std::uint32_t>(program.size());
  load.license = reinterpret_cast<std::uintptr_t>(kLicense);
  core::UniqueFd fd(static_cast<int>(::syscall(SYS_bpf, BPF_PROG_LOAD, &load, sizeof load)));
  if (fd) return std::string();
  if (errno == EPERM) return std::nullopt;
  std::string why = std::strerror(errno);
  static char log[1 << 20];
  load.log_buf = reinterpret_cast<std::uintptr_t>(log);
  load.log_size = sizeof log;
  load.log_level = 1;
  fd.reset(static_cast<int>(::syscall(SYS_bpf, BPF_PROG_LOAD, &load, sizeof load)));
  return why + ": " + std::string(log, ::strnlen(log, 4000));
}

struct Case {
  Request request;
  bool allowed;
};

void check(const std::vector<DeviceRule>& rules, const std::vector<Case>& cases) {
  auto program = device_filter_program(rules);
  ASSERT_TRUE(program) << program.error().message();
  for (const auto& c : cases) {
    const auto verdict = run(*program, c.request);
    ASSERT_TRUE(verdict.has_value());
    EXPECT_EQ(*verdict, c.allowed) << c.request.type << " " << c.request.major << ":"
                                   << c.request.minor << " " << c.request.access;
  }
  if (const auto why = kernel_rejects(*program); why && !why->empty())
    ADD_FAILURE() << "the kernel refuses the program: " << *why;
}

TEST(OciDeviceFilter, NoRulesDeniesEverything) {
  check({}, {{{'c', 1, 3, "r"}, false}, {{'b', 8, 0, "m"}, false}});
}

TEST(OciDeviceFilter, DenyAllThenOneDevice) {
  check({kDenyAll, rule(true, 'c', 1, 3)}, {
                                               {{'c', 1, 3, "rw"}, true},
                                               {{'c', 1, 3, "m"}, true},
                                               {{'c', 1, 3, "rwm"}, true},
                                               {{'c', 1, 5, "r"}, false},
                                               {{'b', 1, 3, "r"}, false},
                                               {{'b', 8, 0, "r"}, false},
                                               {{'b', 8, 0, "m"}, false},
                                           });
}

TEST(OciDeviceFilter, WildcardMinorAndMajor) {
  check({kDenyAll, rule(true, 'c', 136, -1), rule(true, 'b', -1, 7, "r")},
        {
            {{'c', 136, 0, "rw"}, true},
            {{'c', 136, 4095, "rwm"}, true},
            {{'c', 137, 0, "r"}, false},
            {{'b', 136, 0, "r"}, false},
            {{'b', 3, 7, "r"}, true},
            {{'b', 3, 7, "w"}, false},
            {{'c', 3, 7, "r"}, false},
        });
}

TEST(OciDeviceFilter, EveryRequestedBitMustBeAllowed) {
  check({kDenyAll, rule(true, 'c', 1, 3, "r")}, {
                                                    {{'c', 1, 3, "r"}, true},
                                                    {{'c', 1, 3, "rw"}, false},
                                                    {{'c', 1, 3, "w"}, false},
                                                    {{'c', 1, 3, "m"}, false},
                                                });
  // Two allows of one device add up, as in cgroup v1.
  check({kDenyAll, rule(true, 'c', 1, 3, "r"), rule(true, 'c', 1, 3, "w")},
        {{{'c', 1, 3, "rw"}, true}, {{'c', 1, 3, "rwm"}, false}});
}

TEST(OciDeviceFilter, TheLastMatchingRuleWins) {
  // A later deny takes back part of an earlier allow ...
  check({kDenyAll, rule(true, 'c', 1, 3), rule(false, 'c', -1, -1, "w")},
        {
            {{'c', 1, 3, "r"}, true},
            {{'c', 1, 3, "m"}, true},
            {{'c', 1, 3, "w"}, false},
            {{'c', 1, 3, "rw"}, false},
        });
  // ... and a later allow reopens what an earlier deny closed.
  check({rule(true, 'a', -1, -1), rule(false, 'b', 8, 0, "rw"), rule(true, 'b', 8, 0, "r")},
        {
            {{'b', 8, 0, "r"}, true},
            {{'b', 8, 0, "w"}, false},
            {{'b', 8, 0, "m"}, true},
            {{'b', 8, 1, "rw"}, true},
            {{'c', 4, 1, "rwm"}, true},
        });
  // An allow of everything last opens every device: the list is obeyed.
  check({kDenyAll, rule(true, 'a', -1, -1)}, {{{'b', 8, 0, "rwm"}, true}});
}

TEST(OciDeviceFilter, PodmansRulesWithTheImplicitAllows) {
  // What create builds for podman's config: its deny of everything, then
  // runc's defaults (null, zero, full, random, urandom, tty, console, ptmx,
  // the pts).
  std::vector<DeviceRule> rules = {kDenyAll, kDenyAll};
  for (const auto& [major, minor] : std::vector<std::pair<int, int>>{
           {1, 3}, {1, 5}, {1, 7}, {1, 8}, {1, 9}, {5, 0}, {5, 1}, {5, 2}, {136, -1}})
    rules.push_back(rule(true, 'c', major, minor));
  check(rules, {
                   {{'c', 1, 3, "rw"}, true},
                   {{'c', 1, 9, "r"}, true},
                   {{'c', 136, 2, "rw"}, true},
                   {{'c', 5, 2, "rw"}, true},
                   {{'c', 5, 3, "rw"}, false},
                   {{'c', 1, 1, "r"}, false},      // /dev/mem
                   {{'c', 10, 200, "rw"}, false},  // /dev/net/tun
                   {{'b', 8, 0, "r"}, false},      // /dev/sda
                   {{'b', 8, 0, "m"}, false},
                   {{'b', 7, 0, "rw"}, false},  // a loop device
               });
}

TEST(OciDeviceFilter, LargeNumbersCompareExactly) {
  // The numbers are unsigned 32-bit in the kernel's context.
  check({kDenyAll, rule(true, 'c', 4294967295, 2147483648)},
        {
            {{'c', 4294967295u, 2147483648u, "r"}, true},
            {{'c', 4294967295u, 2147483647u, "r"}, false},
            {{'c', 2147483647u, 2147483648u, "r"}, false},
        });
}

TEST(OciDeviceFilter, BadRulesAreRefusedByPath) {
  for (const auto& bad : {rule(true, 'x', 1, 3), rule(true, 'c', 1, 3, "rx"),
                          rule(true, 'c', 4294967296, 3), rule(true, 'c', 1, -2)}) {
    const auto program = device_filter_program({kDenyAll, bad});
    ASSERT_FALSE(program);
    EXPECT_NE(program.error().message().find("config.json: linux.resources.devices[1]: "),
              std::string::npos)
        << program.error().message();
  }
}

TEST(OciDeviceFilter, ManyRulesStillLoad) {
  std::vector<DeviceRule> rules = {kDenyAll};
  for (int minor = 0; minor < 200; ++minor)
    rules.push_back(rule(minor % 3 != 0, 'c', 10, minor, minor % 2 ? "rw" : "rwm"));
  std::vector<Case> cases;
  for (std::uint32_t minor = 0; minor < 200; minor += 7)
    cases.push_back({{'c', 10, minor, "r"}, minor % 3 != 0});
  cases.push_back({{'c', 10, 1, "m"}, false});  // "rw" only
  cases.push_back({{'c', 10, 2, "m"}, true});
  cases.push_back({{'c', 10, 300, "r"}, false});
  check(rules, cases);
}

}  // namespace
}  // namespace pulsebox::oci
