#include "linux/clone.h"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <mutex>
#include <optional>
#include <utility>

namespace pulsebox::linux_api {

// long pulsebox_clone_on_stack(long number, long a0, long a1, long a2, long a3,
//                              long a4, ChildEntry entry, void* argument)
// Makes the system call; in the child (result 0, now on its new stack) calls
// entry(argument) and exits with its result. entry and argument travel in
// r12/r13, which the system call preserves.
extern "C" long pulsebox_clone_on_stack(long number, long a0, long a1, long a2, long a3, long a4,
                                        ChildEntry entry, void* argument) noexcept;

#if defined(__x86_64__)
asm(R"(
  .text
  .globl pulsebox_clone_on_stack
  .hidden pulsebox_clone_on_stack
  .type pulsebox_clone_on_stack, @function
pulsebox_clone_on_stack:
  .cfi_startproc
  pushq %r12
  .cfi_adjust_cfa_offset 8
  pushq %r13
  .cfi_adjust_cfa_offset 8
  movq 24(%rsp), %r12
  movq 32(%rsp), %r13
  movq %rdi, %rax
  movq %rsi, %rdi
  movq %rdx, %rsi
  movq %rcx, %rdx
  movq %r8, %r10
  movq %r9, %r8
  syscall
  testq %rax, %rax
  jz 1f
  popq %r13
  .cfi_adjust_cfa_offset -8
  popq %r12
  .cfi_adjust_cfa_offset -8
  ret
1:
  .cfi_undefined rip
  xorl %ebp, %ebp
  andq $-16, %rsp
  movq %r13, %rdi
  call *%r12
  movl %eax, %edi
  movl $60, %eax
  syscall
  hlt
  .cfi_endproc
  .size pulsebox_clone_on_stack, .-pulsebox_clone_on_stack
)");
static_assert(SYS_exit == 60, "the trampoline above exits with syscall 60");
#else
#error "pulsebox_clone_on_stack: write this architecture's trampoline"
#endif

namespace {

// Stacks of kPooled children that have ended, each still mapped, populated
// and guarded. A few: the server has one sandbox started ahead and one
// running per client.
class StackPool {
 public:
  struct Stack {
    void* mapping;
    std::size_t size;  // without the guard page
  };

  std::optional<Stack> take(std::size_t size) {
    const std::lock_guard hold(mutex_);
    for (std::size_t i = 0; i < count_; ++i) {
      if (stacks_[i].size != size) continue;
      const Stack found = stacks_[i];
      stacks_[i] = stacks_[--count_];
      return found;
    }
    return std::nullopt;
  }
  // False when the pool is full: the caller unmaps the stack.
  bool give(Stack stack) {
    const std::lock_guard hold(mutex_);
    if (count_ == kMaxPooledStacks) return false;
    stacks_[count_++] = stack;
    return true;
  }

 private:
  std::mutex mutex_;
  std::array<Stack, kMaxPooledStacks> stacks_{};
  std::size_t count_ = 0;
};

// Never destroyed: a ChildStack may be destroyed during exit, after static
// objects are.
StackPool& stack_pool() {
  static auto* pool = new StackPool;
  return *pool;
}

std::size_t page_size() {
  static const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return page;
}

}  // namespace

core::Result<ChildStack> ChildStack::allocate(std::size_t size, StackReuse reuse) {
  const std::size_t page = page_size();
  size = (size + page - 1) / page * page;
  ChildStack stack;
  stack.reuse_ = reuse;
  stack.size_ = size;
  if (reuse == StackReuse::kPooled) {
    if (const auto kept = stack_pool().take(size)) {
      stack.mapping_ = kept->mapping;
      stack.base_ = static_cast<char*>(kept->mapping) + page;
      return stack;
    }
  }
  // Populated here, by this process: a child's own page fault on it would
  // allocate kernel objects (the anon_vma, page tables) charged to the
  // child's memory cgroup, the sandbox's, and at its limit the fault is
  // retried forever (the OOM killer never chooses a vfork child: its
  // memory is this process's).
  void* mapping = ::mmap(nullptr, size + page, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK | MAP_POPULATE, -1, 0);
  if (mapping == MAP_FAILED) return core::Error::from_errno("clone", "mmap for a child's stack");
  // The lowest page faults instead of letting an overflow run into other memory.
  if (::mprotect(mapping, page, PROT_NONE) != 0) {
    auto error = core::Error::from_errno("clone", "mprotect for a stack guard");
    ::munmap(mapping, size + page);
    return error;
  }
  stack.mapping_ = mapping;
  stack.base_ = static_cast<char*>(mapping) + page;
  return stack;
}

ChildStack::ChildStack(ChildStack&& other) noexcept
    : mapping_(std::exchange(other.mapping_, nullptr)),
      base_(std::exchange(other.base_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      reuse_(other.reuse_) {}

ChildStack& ChildStack::operator=(ChildStack&& other) noexcept {
  if (this != &other) {
    this->~ChildStack();
    mapping_ = std::exchange(other.mapping_, nullptr);
    base_ = std::exchange(other.base_, nullptr);
    size_ = std::exchange(other.size_, 0);
    reuse_ = other.reuse_;
  }
  return *this;
}

ChildStack::~ChildStack() {
  if (mapping_ == nullptr) return;
  if (reuse_ != StackReuse::kPooled || !stack_pool().give({mapping_, size_}))
    ::munmap(mapping_, size_ + page_size());
  mapping_ = nullptr;
}

long clone3_on_stack(clone_args* args, ChildEntry entry, void* argument) noexcept {
  return pulsebox_clone_on_stack(SYS_clone3, reinterpret_cast<long>(args),
                                 static_cast<long>(sizeof(clone_args)), 0, 0, 0, entry, argument);
}

long clone_on_stack(unsigned long flags, char* stack_top, int* pidfd, ChildEntry entry,
                    void* argument) noexcept {
  // x86_64's clone: flags, stack, parent_tid (the pidfd), child_tid, tls.
  return pulsebox_clone_on_stack(SYS_clone, static_cast<long>(flags),
                                 reinterpret_cast<long>(stack_top), reinterpret_cast<long>(pidfd),
                                 0, 0, entry, argument);
}

}  // namespace pulsebox::linux_api
