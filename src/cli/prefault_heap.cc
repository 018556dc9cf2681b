#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>

#include "cli/prefault.h"

namespace pulsebox::cli {

namespace {

// About what an in-process `pulsebox run` grows its heap to (its peak, with
// the CLI's options, the sandbox's plan and the audit records).
constexpr std::size_t kHeapBytes = 320 * 1024;
constexpr std::uintptr_t kPage = 4096;

}  // namespace

void prefault_heap() {
  // Threads (the trash remover) allocate from this heap too, not from an
  // arena of their own faulted in page by page.
  (void)::mallopt(M_ARENA_MAX, 1);
  // Every growth of the heap takes this much more, and a trim keeps it.
  (void)::mallopt(M_TOP_PAD, static_cast<int>(kHeapBytes));
  // So that the block below comes from the heap, not an mmap of its own.
  (void)::mallopt(M_MMAP_THRESHOLD, static_cast<int>(kHeapBytes));
  void* block = std::malloc(kHeapBytes / 2);
  if (block == nullptr) return;
  const std::uintptr_t from = reinterpret_cast<std::uintptr_t>(block) & ~(kPage - 1);
  std::free(block);
  const auto to = reinterpret_cast<std::uintptr_t>(::sbrk(0));
  if (to > from) (void)::madvise(reinterpret_cast<void*>(from), to - from, MADV_POPULATE_WRITE);
}

}  // namespace pulsebox::cli
