// The syscall-number part of a seccomp program, laid out by pulsebox.
//
// libseccomp compares the syscall number with each listed syscall in turn
// (one instruction per syscall, in a tree or a list): `default` is 439
// instructions. The kernel pays for every instruction when the program is
// loaded (checking, converting and JIT-compiling it, and running it once
// per syscall number for its cache), once per sandboxed command. Most
// syscalls' decision does not depend on their arguments, and consecutive
// numbers mostly share a decision, so ranges of numbers decide them in a
// few dozen comparisons. The syscalls whose decision does depend on their
// arguments (and other architectures, and x32 numbers) are left to a
// program libseccomp compiled from just their rules: the remainder.
#pragma once

#include <linux/filter.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace pulsebox::seccomp {

// The numbers from `first` up to the next interval's first (the last one:
// up to 2^32 - 1) are decided by returning `action`, or, without one, by
// the remainder program.
struct NumberInterval {
  std::uint32_t first = 0;
  std::optional<std::uint32_t> action;
};

// The first syscall number x32 callers use on x86_64: from here on, the
// remainder decides (libseccomp knows what x32 means).
inline constexpr std::uint32_t kX32SyscallBit = 0x40000000;

// [arch check][number tree][one return per action][remainder]. `intervals`
// starts at 0, is sorted and never ends below kX32SyscallBit with an action.
// nullopt if a conditional jump would not fit its 8 bits (a profile with
// hundreds of separate ranges): libseccomp's program is used instead.
std::optional<std::vector<sock_filter>> ranged_program(const std::vector<NumberInterval>& intervals,
                                                       std::uint32_t native_arch,
                                                       const std::vector<sock_filter>& remainder);

}  // namespace pulsebox::seccomp
