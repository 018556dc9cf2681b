#include "oci/device_filter.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

#include "core/unique_fd.h"
#include "oci/invalid_input.h"

namespace pulsebox::oci {
namespace {

// Registers: r1 the context (struct bpf_cgroup_dev_ctx), r2 the device type,
// r3 the requested access bits, r4 major, r5 minor, r6 scratch, r0 the
// verdict (1 allow, 0 deny).
constexpr std::uint8_t kCtx = BPF_REG_1, kType = BPF_REG_2, kAccess = BPF_REG_3, kMajor = BPF_REG_4,
                       kMinor = BPF_REG_5, kScratch = BPF_REG_6;

bpf_insn insn(std::uint8_t code, std::uint8_t dst, std::uint8_t src, std::int16_t off,
              std::int32_t imm) {
  bpf_insn result{};
  result.code = code;
  result.dst_reg = dst & 0xf;
  result.src_reg = src & 0xf;
  result.off = off;
  result.imm = imm;
  return result;
}

// Forward jumps to labels, patched once the label's place is known.
class Assembler {
 public:
  int new_label() {
    places_.push_back(-1);
    return static_cast<int>(places_.size()) - 1;
  }
  void bind(int label) { places_[label] = static_cast<int>(code_.size()); }
  void emit(bpf_insn instruction) { code_.push_back(instruction); }
  // if (dst OP imm) goto label; OP a BPF_JMP32 comparison (32-bit, so an
  // unsigned number above 2^31 compares exactly).
  void jump32_imm(std::uint8_t op, std::uint8_t dst, std::uint32_t imm, int label) {
    fixups_.emplace_back(code_.size(), label);
    emit(insn(BPF_JMP32 | op | BPF_K, dst, 0, 0, static_cast<std::int32_t>(imm)));
  }
  void jump(int label) {
    fixups_.emplace_back(code_.size(), label);
    emit(insn(BPF_JMP | BPF_JA, 0, 0, 0, 0));
  }
  void verdict(int allow) {
    emit(insn(BPF_ALU | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, allow));
    emit(insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0));
  }
  core::Result<std::vector<bpf_insn>> finish() {
    for (const auto& [at, label] : fixups_) {
      const long offset = static_cast<long>(places_[label]) - static_cast<long>(at) - 1;
      if (places_[label] < 0 || offset < 0 || offset > std::numeric_limits<std::int16_t>::max())
        return oci::invalid("linux.resources.devices: too many rules for one device program");
      code_[at].off = static_cast<std::int16_t>(offset);
    }
    return std::move(code_);
  }

 private:
  std::vector<bpf_insn> code_;
  std::vector<int> places_;
  std::vector<std::pair<std::size_t, int>> fixups_;
};

struct Rule {
  bool allow;
  int type;  // BPF_DEVCG_DEV_*, 0 for any
  std::int64_t major, minor;
  unsigned access;  // BPF_DEVCG_ACC_*
};

core::Result<Rule> read_rule(const spec::DeviceRule& rule, std::size_t index) {
  // The rule's JSON path, as the spec reader names its fields.
  const std::string where = "linux.resources.devices[" + std::to_string(index) + "]: ";
  const auto refuse = [&](const std::string& why) {
    return oci::invalid("config.json: " + where + why);
  };
  Rule result{rule.allow, 0, rule.major, rule.minor, 0};
  switch (rule.type) {
    case 'a':
      break;
    case 'c':
      result.type = BPF_DEVCG_DEV_CHAR;
      break;
    case 'b':
      result.type = BPF_DEVCG_DEV_BLOCK;
      break;
    default:
      return refuse(std::string("type \"") + rule.type + "\": use a, c or b");
  }
  for (const char letter : rule.access) {
    switch (letter) {
      case 'r':
        result.access |= BPF_DEVCG_ACC_READ;
        break;
      case 'w':
        result.access |= BPF_DEVCG_ACC_WRITE;
        break;
      case 'm':
        result.access |= BPF_DEVCG_ACC_MKNOD;
        break;
      default:
        return refuse("access \"" + rule.access + "\": use the letters r, w and m");
    }
  }
  constexpr std::int64_t kMax = std::numeric_limits<std::uint32_t>::max();
  if (rule.major > kMax || rule.minor > kMax || rule.major < -1 || rule.minor < -1)
    return refuse("major " + std::to_string(rule.major) + ", minor " + std::to_string(rule.minor) +
                  ": give -1 (any) or a number below 2^32");
  return result;
}

}  // namespace

core::Result<std::vector<bpf_insn>> device_filter_program(
    const std::vector<spec::DeviceRule>& rules) {
  std::vector<Rule> read;
  for (std::size_t i = 0; i < rules.size(); ++i) {
    PB_TRY(rule, read_rule(rules[i], i));
    read.push_back(rule);
  }
  Assembler code;
  // access_type is (BPF_DEVCG_ACC_* << 16) | BPF_DEVCG_DEV_*.
  code.emit(insn(BPF_LDX | BPF_MEM | BPF_W, kType, kCtx, 0, 0));
  code.emit(insn(BPF_ALU | BPF_AND | BPF_K, kType, 0, 0, 0xffff));
  code.emit(insn(BPF_LDX | BPF_MEM | BPF_W, kAccess, kCtx, 0, 0));
  code.emit(insn(BPF_ALU | BPF_RSH | BPF_K, kAccess, 0, 0, 16));
  code.emit(insn(BPF_LDX | BPF_MEM | BPF_W, kMajor, kCtx, 4, 0));
  code.emit(insn(BPF_LDX | BPF_MEM | BPF_W, kMinor, kCtx, 8, 0));
  // Each requested bit in turn: the last matching rule naming it decides;
  // a deny ends the program, an allow goes on to the next bit.
  for (const unsigned bit : {BPF_DEVCG_ACC_MKNOD, BPF_DEVCG_ACC_READ, BPF_DEVCG_ACC_WRITE}) {
    const int next_bit = code.new_label();
    code.emit(insn(BPF_ALU | BPF_MOV | BPF_X, kScratch, kAccess, 0, 0));
    code.emit(insn(BPF_ALU | BPF_AND | BPF_K, kScratch, 0, 0, static_cast<std::int32_t>(bit)));
    code.jump32_imm(BPF_JEQ, kScratch, 0, next_bit);
    bool decided = false;  // a rule matching every device ends the walk
    for (auto rule = read.rbegin(); rule != read.rend() && !decided; ++rule) {
      if ((rule->access & bit) == 0) continue;
      // The verifier refuses unreachable code, so nothing is emitted for
      // the rules such a rule shadows.
      decided = rule->type == 0 && rule->major < 0 && rule->minor < 0;
      const int next_rule = code.new_label();
      if (rule->type != 0) code.jump32_imm(BPF_JNE, kType, rule->type, next_rule);
      if (rule->major >= 0)
        code.jump32_imm(BPF_JNE, kMajor, static_cast<std::uint32_t>(rule->major), next_rule);
      if (rule->minor >= 0)
        code.jump32_imm(BPF_JNE, kMinor, static_cast<std::uint32_t>(rule->minor), next_rule);
      if (rule->allow) {
        code.jump(next_bit);
      } else {
        code.verdict(0);
      }
      code.bind(next_rule);
    }
    if (!decided) code.verdict(0);  // no rule names this bit
    code.bind(next_bit);
  }
  code.verdict(1);
  return code.finish();
}

core::Status attach_device_filter(int cgroup_fd, const std::vector<bpf_insn>& program) {
  static const char kLicense[] = "Apache";  // runc's; the kernel asks for one
  bpf_attr load{};
  load.prog_type = BPF_PROG_TYPE_CGROUP_DEVICE;
  load.insns = reinterpret_cast<std::uintptr_t>(program.data());
  load.insn_cnt = static_cast<std::uint32_t>(program.size());
  load.license = reinterpret_cast<std::uintptr_t>(kLicense);
  core::UniqueFd prog(static_cast<int>(::syscall(SYS_bpf, BPF_PROG_LOAD, &load, sizeof load)));
  char log[4096] = {};
  if (!prog && (errno == EINVAL || errno == EACCES)) {
    // Again with the verifier's log, for the error (ENOSPC: it did not fit).
    load.log_buf = reinterpret_cast<std::uintptr_t>(log);
    load.log_size = sizeof log;
    load.log_level = 1;
    prog.reset(static_cast<int>(::syscall(SYS_bpf, BPF_PROG_LOAD, &load, sizeof load)));
  }
  if (!prog) {
    const int error = errno;
    std::string message = "linux.resources.devices: loading the cgroup v2 device program";
    if (error == EPERM)
      message += " needs CAP_SYS_ADMIN (a user namespace's root has not got it for BPF)";
    if (log[0] != '\0') message += "; the verifier said: " + std::string(log);
    errno = error;
    return core::Error::from_errno("oci", message);
  }
  bpf_attr attach{};
  attach.target_fd = static_cast<std::uint32_t>(cgroup_fd);
  attach.attach_bpf_fd = static_cast<std::uint32_t>(prog.get());
  attach.attach_type = BPF_CGROUP_DEVICE;
  attach.attach_flags = BPF_F_ALLOW_MULTI;
  if (::syscall(SYS_bpf, BPF_PROG_ATTACH, &attach, sizeof attach) != 0)
    return core::Error::from_errno(
        "oci", "linux.resources.devices: attaching the device program to the container's cgroup");
  return core::ok_status();
}

}  // namespace pulsebox::oci
