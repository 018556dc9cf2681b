// Runs a seccomp program on one call in user space, as the kernel's classic
// BPF interpreter would. compile() uses it to check a program pulsebox laid
// out itself against libseccomp's before either is used; the tests use it
// to ask what a profile decides.
#pragma once

#include <linux/filter.h>
#include <linux/seccomp.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace pulsebox::seccomp {

// The program's return value for `call`; nullopt if it uses an instruction
// this interpreter does not know, loads beyond seccomp_data, or runs off its
// end (the kernel's own checks would refuse such a program).
std::optional<std::uint32_t> run_program(const std::vector<sock_filter>& program,
                                         const seccomp_data& call);

}  // namespace pulsebox::seccomp
