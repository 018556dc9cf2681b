// pulsebox's own layout of a seccomp program's syscall numbers
// (seccomp/ranges.h): what it decides, when compile() falls back to
// libseccomp's program, and that the kernel loads and enforces it.
#include <gtest/gtest.h>

#include <errno.h>
#include <linux/audit.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "seccomp/bpf_run.h"
#include "seccomp/compiler.h"
#include "seccomp/profile.h"
#include "seccomp/ranges.h"

namespace pulsebox::seccomp {
namespace {

constexpr std::uint32_t kAllow = SECCOMP_RET_ALLOW;
constexpr std::uint32_t kEperm = SECCOMP_RET_ERRNO | EPERM;
constexpr std::uint32_t kRemainderMark = SECCOMP_RET_ERRNO | 4095;

std::uint32_t number_decision(const std::vector<sock_filter>& program, std::uint32_t nr,
                              std::uint32_t arch = AUDIT_ARCH_X86_64) {
  seccomp_data call{};
  call.arch = arch;
  call.nr = static_cast<int>(nr);
  const auto decided = run_program(program, call);
  if (!decided) ADD_FAILURE() << "a program the interpreter cannot run";
  return decided.value_or(0);
}

TEST(SeccompRanges, EachNumberGetsItsIntervalsActionAndTheRestGoToTheRemainder) {
  const std::vector<sock_filter> remainder = {BPF_STMT(BPF_RET | BPF_K, kRemainderMark)};
  const std::vector<NumberInterval> intervals = {
      {0, kAllow}, {10, kEperm}, {20, std::nullopt}, {21, kAllow}, {kX32SyscallBit, std::nullopt}};
  const auto program = ranged_program(intervals, AUDIT_ARCH_X86_64, remainder);
  ASSERT_TRUE(program);
  for (const std::uint32_t nr : {0U, 1U, 9U, 21U, 22U, 450U, kX32SyscallBit - 1})
    EXPECT_EQ(number_decision(*program, nr), kAllow) << nr;
  for (const std::uint32_t nr : {10U, 15U, 19U})
    EXPECT_EQ(number_decision(*program, nr), kEperm) << nr;
  for (const std::uint32_t nr : {20U, kX32SyscallBit, kX32SyscallBit + 1, 0xffffffffU})
    EXPECT_EQ(number_decision(*program, nr), kRemainderMark) << nr;
  // Another architecture: the remainder, whatever the number.
  for (const std::uint32_t nr : {0U, 10U, 21U})
    EXPECT_EQ(number_decision(*program, nr, AUDIT_ARCH_I386), kRemainderMark) << nr;
}

TEST(SeccompRanges, ABadListOrJumpsTooFarForEightBitsGiveNoProgram) {
  const std::vector<sock_filter> remainder = {BPF_STMT(BPF_RET | BPF_K, kRemainderMark)};
  // Not from 0; out of order; an action above the x32 bit.
  EXPECT_FALSE(
      ranged_program({{1, kAllow}, {kX32SyscallBit, std::nullopt}}, AUDIT_ARCH_X86_64, remainder));
  EXPECT_FALSE(ranged_program({{0, kAllow}, {5, kEperm}, {5, kAllow}, {kX32SyscallBit, {}}},
                              AUDIT_ARCH_X86_64, remainder));
  EXPECT_FALSE(
      ranged_program({{0, kAllow}, {kX32SyscallBit, kEperm}}, AUDIT_ARCH_X86_64, remainder));
  // 600 alternating ranges: the returns lie beyond an 8-bit jump.
  std::vector<NumberInterval> many;
  for (std::uint32_t nr = 0; nr < 600; ++nr)
    many.push_back({nr, nr % 2 == 0 ? kAllow : kEperm});
  many.push_back({kX32SyscallBit, std::nullopt});
  EXPECT_FALSE(ranged_program(many, AUDIT_ARCH_X86_64, remainder));
  // 100 of them fit.
  many.erase(many.begin() + 100, many.end() - 1);
  const auto fits = ranged_program(many, AUDIT_ARCH_X86_64, remainder);
  ASSERT_TRUE(fits);
  for (std::uint32_t nr = 0; nr < 100; ++nr)
    EXPECT_EQ(number_decision(*fits, nr), nr % 2 == 0 ? kAllow : kEperm) << nr;
  EXPECT_EQ(number_decision(*fits, 100), kEperm);  // the last range goes on to the x32 bit
  EXPECT_EQ(number_decision(*fits, kX32SyscallBit), kRemainderMark);
}

Profile profile_from(const std::string& text) {
  auto profile = parse_profile(text, "test.json");
  EXPECT_TRUE(profile.ok()) << (profile.ok() ? "" : profile.error().message());
  return profile.value();
}

// Several architectures: libseccomp's program (it knows how their numbers
// and x32's differ), unchanged.
TEST(SeccompRanges, AProfileForSeveralArchitecturesKeepsLibseccompsTree) {
  const Profile profile = profile_from(R"({"defaultAction": "SCMP_ACT_ERRNO",
      "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"],
      "syscalls": [{"names": ["read", "write", "getpid"], "action": "SCMP_ACT_ALLOW"}]})");
  const auto ranges = compile(profile, Layout::Ranges);
  const auto tree = compile(profile, Layout::BinaryTree);
  ASSERT_TRUE(ranges.ok() && tree.ok());
  ASSERT_EQ(ranges.value()->program.size(), tree.value()->program.size());
  EXPECT_EQ(0, std::memcmp(ranges.value()->program.data(), tree.value()->program.data(),
                           tree.value()->program.size() * sizeof(sock_filter)));
}

// Docker's profiles name syscalls of other architectures (socketcall is
// i386's): they mean nothing on x86_64 and do not stop the ranges.
TEST(SeccompRanges, SyscallsOfOtherArchitecturesDoNotStopTheRanges) {
  const Profile profile = profile_from(R"({"defaultAction": "SCMP_ACT_ERRNO",
      "architectures": ["SCMP_ARCH_X86_64"],
      "syscalls": [
        {"names": ["read", "write", "open", "close", "stat", "fstat", "lstat", "poll", "lseek",
                   "mmap", "mprotect", "munmap", "brk", "rt_sigaction", "rt_sigprocmask",
                   "rt_sigreturn", "ioctl", "pread64", "pwrite64", "readv", "writev", "access",
                   "pipe", "select", "sched_yield", "getpid", "socketcall", "exit_group"],
         "action": "SCMP_ACT_ALLOW"},
        {"names": ["mount"], "action": "SCMP_ACT_KILL_PROCESS"},
        {"names": ["getpid"], "action": "SCMP_ACT_ERRNO",
         "args": [{"index": 0, "value": 5, "op": "SCMP_CMP_EQ"}]},
        {"names": ["socket"], "action": "SCMP_ACT_ALLOW",
         "args": [{"index": 0, "value": 1, "op": "SCMP_CMP_EQ"}]}]})");
  const auto ranges = compile(profile, Layout::Ranges);
  const auto tree = compile(profile, Layout::BinaryTree);
  ASSERT_TRUE(ranges.ok() && tree.ok());
  const auto& program = ranges.value()->program;
  EXPECT_LT(program.size(), tree.value()->program.size());
  EXPECT_TRUE(ranges.value()->uses_listener);  // the kill is a notification
  EXPECT_EQ(number_decision(program, SYS_getpid), kAllow);
  // A rule with the default action decides nothing (libseccomp refuses it).
  seccomp_data getpid_five{};
  getpid_five.arch = AUDIT_ARCH_X86_64;
  getpid_five.nr = SYS_getpid;
  getpid_five.args[0] = 5;
  EXPECT_EQ(run_program(program, getpid_five), kAllow);
  EXPECT_EQ(run_program(tree.value()->program, getpid_five), kAllow);
  EXPECT_EQ(number_decision(program, SYS_mount), std::uint32_t{SECCOMP_RET_USER_NOTIF});
  EXPECT_EQ(number_decision(program, SYS_openat), kEperm);
  seccomp_data unix_socket{};
  unix_socket.arch = AUDIT_ARCH_X86_64;
  unix_socket.nr = SYS_socket;
  unix_socket.args[0] = AF_UNIX;
  EXPECT_EQ(run_program(program, unix_socket), kAllow);
  unix_socket.args[0] = AF_INET;
  EXPECT_EQ(run_program(program, unix_socket), kEperm);
}

// A profile whose argument rules would need too many compared calls keeps
// libseccomp's program (a crafted profile cannot make the check run for
// minutes); a smaller one of the same shape gets the ranges.
std::string many_socket_rules(int rules) {
  std::string names;
  for (int nr = 0; nr < 200; ++nr) {
    if (nr == SYS_socket || nr == SYS_socketpair) continue;
    char* name = ::seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);
    if (name == nullptr) continue;
    names += std::string(names.empty() ? "" : ", ") + "\"" + name + "\"";
    std::free(name);
  }
  std::string text = R"({"defaultAction": "SCMP_ACT_ERRNO", "architectures": ["SCMP_ARCH_X86_64"],
      "syscalls": [{"names": [)" +
                     names + R"(], "action": "SCMP_ACT_ALLOW"})";
  for (int i = 0; i < rules; ++i) {
    text += R"(, {"names": ["socket", "socketpair"], "action": "SCMP_ACT_ALLOW", "args": [
        {"index": 0, "value": )" +
            std::to_string(1000 + i) + R"(, "valueTwo": )" + std::to_string(50000 + i) +
            R"(, "op": "SCMP_CMP_EQ"}]})";
  }
  return text + "]}";
}

TEST(SeccompRanges, TooManyArgumentValuesToCompareKeepLibseccompsTree) {
  for (const int rules : {100, 1000}) {
    const Profile profile = profile_from(many_socket_rules(rules));
    const auto ranges = compile(profile, Layout::Ranges);
    const auto tree = compile(profile, Layout::BinaryTree);
    ASSERT_TRUE(ranges.ok() && tree.ok());
    if (rules == 100) {
      EXPECT_LT(ranges.value()->program.size(), tree.value()->program.size());
    } else {
      EXPECT_EQ(ranges.value()->program.size(), tree.value()->program.size());
    }
  }
}

// The kernel loads the ranged `default` program and enforces it: an
// allowed call runs, a refused one fails with the profile's errno, and
// socket()'s family is still checked.
TEST(SeccompRanges, TheKernelEnforcesTheRangedDefaultProfile) {
  auto profile = load_profile("default");
  ASSERT_TRUE(profile.ok());
  auto filter = compile(profile.value(), Layout::Ranges);
  ASSERT_TRUE(filter.ok());
  const std::vector<sock_filter>& program = filter.value()->program;
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    sock_fprog fprog{static_cast<unsigned short>(program.size()),
                     const_cast<sock_filter*>(program.data())};
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fprog) != 0) {
      ::_exit(10);
    }
    if (::getpid() <= 0) ::_exit(11);
    if (::syscall(SYS_unshare, 0) != -1 || errno != EPERM) ::_exit(12);
    if (::syscall(SYS_socket, 40 /* AF_VSOCK */, SOCK_STREAM, 0) != -1 || errno != EAFNOSUPPORT)
      ::_exit(13);
    const long unix_socket = ::syscall(SYS_socket, AF_UNIX, SOCK_STREAM, 0);
    if (unix_socket < 0) ::_exit(14);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10: not loaded, 11: getpid refused, 12: unshare allowed, "
                                       "13: AF_VSOCK not refused, 14: AF_UNIX refused";
}

}  // namespace
}  // namespace pulsebox::seccomp
