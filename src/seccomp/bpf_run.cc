#include "seccomp/bpf_run.h"

#include <cstring>

namespace pulsebox::seccomp {

std::optional<std::uint32_t> run_program(const std::vector<sock_filter>& program,
                                         const seccomp_data& call) {
  std::uint32_t a = 0;
  std::uint32_t x = 0;
  std::uint32_t memory[BPF_MEMWORDS] = {};
  const auto* bytes = reinterpret_cast<const unsigned char*>(&call);
  for (std::size_t pc = 0; pc < program.size(); ++pc) {
    const sock_filter& op = program[pc];
    switch (op.code) {
      case BPF_LD | BPF_W | BPF_ABS:
        if (op.k % 4 != 0 || op.k > sizeof call - 4) return std::nullopt;
        std::memcpy(&a, bytes + op.k, 4);
        break;
      case BPF_LD | BPF_IMM:
        a = op.k;
        break;
      case BPF_LDX | BPF_IMM:
        x = op.k;
        break;
      case BPF_LD | BPF_MEM:
        if (op.k >= BPF_MEMWORDS) return std::nullopt;
        a = memory[op.k];
        break;
      case BPF_LDX | BPF_MEM:
        if (op.k >= BPF_MEMWORDS) return std::nullopt;
        x = memory[op.k];
        break;
      case BPF_ST:
        if (op.k >= BPF_MEMWORDS) return std::nullopt;
        memory[op.k] = a;
        break;
      case BPF_STX:
        if (op.k >= BPF_MEMWORDS) return std::nullopt;
        memory[op.k] = x;
        break;
      case BPF_ALU | BPF_AND | BPF_K:
        a &= op.k;
        break;
      case BPF_ALU | BPF_OR | BPF_K:
        a |= op.k;
        break;
      case BPF_MISC | BPF_TAX:
        x = a;
        break;
      case BPF_MISC | BPF_TXA:
        a = x;
        break;
      case BPF_JMP | BPF_JA:
        pc += op.k;
        break;
      case BPF_JMP | BPF_JEQ | BPF_K:
        pc += a == op.k ? op.jt : op.jf;
        break;
      case BPF_JMP | BPF_JGT | BPF_K:
        pc += a > op.k ? op.jt : op.jf;
        break;
      case BPF_JMP | BPF_JGE | BPF_K:
        pc += a >= op.k ? op.jt : op.jf;
        break;
      case BPF_JMP | BPF_JSET | BPF_K:
        pc += (a & op.k) != 0 ? op.jt : op.jf;
        break;
      case BPF_JMP | BPF_JEQ | BPF_X:
        pc += a == x ? op.jt : op.jf;
        break;
      case BPF_JMP | BPF_JGT | BPF_X:
        pc += a > x ? op.jt : op.jf;
        break;
      case BPF_JMP | BPF_JGE | BPF_X:
        pc += a >= x ? op.jt : op.jf;
        break;
      case BPF_JMP | BPF_JSET | BPF_X:
        pc += (a & x) != 0 ? op.jt : op.jf;
        break;
      case BPF_RET | BPF_K:
        return op.k;
      case BPF_RET | BPF_A:
        return a;
      default:
        return std::nullopt;
    }
  }
  return std::nullopt;
}

}  // namespace pulsebox::seccomp
