// Raw wrappers for the system calls glibc 2.36 does not wrap. Each is a
// single syscall: safe between clone() and execve(). (The mount API and
// close_range have glibc wrappers.)
#pragma once

#include <linux/sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <type_traits>

namespace pulsebox::linux_api {

// clone() without a new stack has fork semantics (the child returns 0). The
// argument order is x86_64's: flags, stack, parent_tid, child_tid, tls.
inline long sys_clone_fork(unsigned long flags, int* pidfd_out) {
  return ::syscall(SYS_clone, flags, nullptr, pidfd_out, nullptr, nullptr);
}

// glibc 2.36's <sys/pidfd.h> lacks extern "C", so these are called directly.
inline int sys_pidfd_open(pid_t pid) {
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
}
inline int sys_pidfd_send_signal(int pidfd, int signal) {
  return static_cast<int>(::syscall(SYS_pidfd_send_signal, pidfd, signal, nullptr, 0));
}

// A system call without libc: returns the kernel's result (>= 0, or
// -errno) and writes nothing else. The sandbox's init and command processes
// share the supervisor's memory (CLONE_VM), where errno is a supervisor
// thread's: every call they make goes through here.
inline long raw_syscall(long number, long a = 0, long b = 0, long c = 0, long d = 0, long e = 0,
                        long f = 0) noexcept {
#if defined(__x86_64__)
  long result;
  register long r10 asm("r10") = d;
  register long r8 asm("r8") = e;
  register long r9 asm("r9") = f;
  asm volatile("syscall"
               : "=a"(result)
               : "a"(number), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
               : "rcx", "r11", "memory");
  return result;
#else
#error "raw_syscall: add this architecture's system call instruction"
#endif
}

// 0, or the errno of a raw_syscall() result.
inline int raw_error(long result) noexcept {
  return result < 0 ? static_cast<int>(-result) : 0;
}

template <typename T>
inline long raw_arg(T value) noexcept {
  if constexpr (std::is_null_pointer_v<T>) {
    return 0;
  } else if constexpr (std::is_pointer_v<T>) {
    return reinterpret_cast<long>(value);
  } else {
    return static_cast<long>(value);
  }
}

// raw_syscall() with pointer and integer arguments as they come.
template <typename... Args>
inline long raw(long number, Args... args) noexcept {
  return raw_syscall(number, raw_arg(args)...);
}

// The size of the kernel's sigset_t (rt_sigprocmask and co. take it; glibc's
// sigset_t is 128 bytes).
inline constexpr long kKernelSigsetBytes = 8;

// Credentials for the calling thread only: 0 or the errno. (glibc's
// setresuid() & co. first signal every other thread they know of, POSIX's
// process-wide semantics; in a child cloned from a multi-threaded process
// those threads do not exist, and glibc can wait for them forever.)
inline int sys_setresuid(uid_t id) noexcept {
  return raw_error(raw(SYS_setresuid, id, id, id));
}
inline int sys_setresgid(gid_t id) noexcept {
  return raw_error(raw(SYS_setresgid, id, id, id));
}
inline int sys_clear_groups() noexcept {
  return raw_error(raw(SYS_setgroups, 0, nullptr));
}

}  // namespace pulsebox::linux_api
