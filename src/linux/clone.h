// Child processes that share the caller's memory (CLONE_VM), each on a stack
// of its own: no page tables are copied and no copy-on-write fault follows on
// either side (what a fork of the supervisor cost: docs/benchmarks.md).
//
// The child runs entry(argument) and exits with its result. It shares the
// caller's memory, errno included: it may write only its own stack and make
// system calls only through raw_syscall() (linux/syscalls.h).
#pragma once

#include <linux/sched.h>

#include <cstddef>

#include "core/result.h"

// Marks the functions such a child runs: AddressSanitizer knows only the
// stacks of the threads it saw start, and at each call of a noreturn
// function on another stack it warns on stderr (the child's, the
// supervisor's until the child closes it). The child code is a flat list of
// raw system calls on its own stack: nothing there for ASan to check.
#define PULSEBOX_CHILD_CODE __attribute__((no_sanitize("address")))

namespace pulsebox::linux_api {

using ChildEntry = int (*)(void* argument);

// What becomes of a ChildStack when it is destroyed.
enum class StackReuse {
  kUnmap,
  // Kept (a few per process) for the next allocate(.., kPooled) of its size:
  // an mmap and a guard's mprotect fewer, and no munmap, whose TLB flush
  // interrupts every CPU running this process's threads. Only for a child
  // that has certainly ended when its owner destroys the stack: the init of
  // a new pid namespace, once reaped (every process of the namespace has
  // exited by then), and that namespace's processes.
  kPooled,
};
// How many ended kPooled stacks a process keeps; the rest are unmapped.
inline constexpr std::size_t kMaxPooledStacks = 8;

// An mmap-ed stack with a guard page below it, populated (its pages and
// page tables made by the caller, not by the child's faults). Move-only;
// unmapped (or pooled) on destruction, so it must outlive the child that
// runs on it.
class ChildStack {
 public:
  static core::Result<ChildStack> allocate(std::size_t size, StackReuse reuse = StackReuse::kUnmap);
  ChildStack() = default;
  ChildStack(ChildStack&& other) noexcept;
  ChildStack& operator=(ChildStack&& other) noexcept;
  ChildStack(const ChildStack&) = delete;
  ChildStack& operator=(const ChildStack&) = delete;
  ~ChildStack();

  void* base() const { return base_; }  // the lowest usable address
  std::size_t size() const { return size_; }
  char* top() const { return static_cast<char*>(base_) + size_; }

 private:
  void* mapping_ = nullptr;  // guard page + stack
  void* base_ = nullptr;
  std::size_t size_ = 0;
  StackReuse reuse_ = StackReuse::kUnmap;
};

// clone3(args) where args->stack and args->stack_size are the child's stack.
// Returns the child's pid, or -errno.
long clone3_on_stack(clone_args* args, ChildEntry entry, void* argument) noexcept;

// clone(flags) with the child on `stack_top`; with CLONE_PIDFD the pidfd is
// stored in *pidfd. Returns the child's pid, or -errno.
long clone_on_stack(unsigned long flags, char* stack_top, int* pidfd, ChildEntry entry,
                    void* argument) noexcept;

}  // namespace pulsebox::linux_api
