// Raw wrappers for the system calls glibc 2.36 does not wrap. Each is a
// single syscall: safe between clone() and execve(). (The mount API and
// close_range have glibc wrappers.)
#pragma once

#include <linux/sched.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace pulsebox::linux_api {

inline long sys_clone3(clone_args* args) {
  return ::syscall(SYS_clone3, args, sizeof(clone_args));
}

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

// A system call without libc: no errno is written. For code that runs on
// memory shared with its parent (CLONE_VM), where errno is the parent's.
inline long raw_syscall3(long number, long a, long b, long c) {
#if defined(__x86_64__)
  long result;
  asm volatile("syscall"
               : "=a"(result)
               : "a"(number), "D"(a), "S"(b), "d"(c)
               : "rcx", "r11", "memory");
  return result;
#else
#error "raw_syscall3: add this architecture's system call instruction"
#endif
}

// Credentials for the calling thread only. glibc's setresuid() & co. first
// signal every other thread they know of (POSIX's process-wide semantics);
// in a child cloned from a multi-threaded process those threads do not
// exist, and glibc can wait for them forever (seen with concurrent runs).
inline int sys_setresuid(uid_t id) {
  return static_cast<int>(::syscall(SYS_setresuid, id, id, id));
}
inline int sys_setresgid(gid_t id) {
  return static_cast<int>(::syscall(SYS_setresgid, id, id, id));
}
inline int sys_clear_groups() {
  return static_cast<int>(::syscall(SYS_setgroups, 0, nullptr));
}

inline int sys_pivot_root(const char* new_root, const char* put_old) {
  return static_cast<int>(::syscall(SYS_pivot_root, new_root, put_old));
}

}  // namespace pulsebox::linux_api
