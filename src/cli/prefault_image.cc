// See prefault.h: this runs before the C library is set up (built like
// fast_client.cc: raw system calls, no library call, no relocated pointer).
#include <elf.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>

#include <cstdint>

#include "cli/prefault.h"
#include "linux/syscalls.h"

// The program's own ELF header: hidden, so reached PC-relative before any
// relocation. A static PIE's first segment starts at address 0, so the
// header's address is the load base.
extern const Elf64_Ehdr __ehdr_start [[gnu::visibility("hidden")]];

namespace {

bool is_serve(long* initial_stack) {
  const long argc = initial_stack[0];
  if (argc < 2) return false;
  const char* word = reinterpret_cast<char**>(initial_stack + 1)[1];
  const char serve[] = "serve";
  std::size_t i = 0;
  for (; serve[i] != '\0' && word[i] == serve[i]; ++i) {
  }
  return serve[i] == '\0' && word[i] == '\0';
}

constexpr std::uintptr_t kPage = 4096;
// The kernel's fault-around maps the page cache's pages of an aligned
// 64 KiB window at each fault on a file mapping.
constexpr std::uintptr_t kFaultAroundWindow = 64 * 1024;
using pulsebox::cli::kSlowTextFaultNs;

long now_ns() {
  timespec at{};
  pulsebox::linux_api::raw(SYS_clock_gettime, CLOCK_MONOTONIC, &at);
  return at.tv_sec * 1000000000L + at.tv_nsec;
}

// What one page fault on the text costs now: a load from a page in a
// window this code is not in, so not mapped yet. (A page not in the page
// cache reads the disk: slow too, and populating is then right as well.)
long text_fault_ns(std::uintptr_t start, std::uintptr_t end) {
  const auto window_of = [](std::uintptr_t address) { return address & ~(kFaultAroundWindow - 1); };
  const std::uintptr_t here = window_of(reinterpret_cast<std::uintptr_t>(&text_fault_ns));
  std::uintptr_t probe = (start + (end - start) / 2) & ~(kPage - 1);
  if (window_of(probe) == here) probe = window_of(probe) + 2 * kFaultAroundWindow;
  if (probe >= end) return kSlowTextFaultNs;  // a tiny text: populate it
  const long before = now_ns();
  (void)*reinterpret_cast<const volatile char*>(probe);
  return now_ns() - before;
}

}  // namespace

int pulsebox_image_prefaulted = 0;  // hidden: no GOT entry to relocate
long pulsebox_text_fault_ns = -1;

extern "C" void pulsebox_prefault_image(long* initial_stack) {
  if (is_serve(initial_stack)) return;
  pulsebox_image_prefaulted = 1;
  const auto base = reinterpret_cast<std::uintptr_t>(&__ehdr_start);
  const auto* segments = reinterpret_cast<const Elf64_Phdr*>(base + __ehdr_start.e_phoff);
  for (unsigned i = 0; i < __ehdr_start.e_phnum; ++i) {
    const Elf64_Phdr& segment = segments[i];
    if (segment.p_type != PT_LOAD) continue;
    const std::uintptr_t start = (base + segment.p_vaddr) & ~(kPage - 1);
    const std::uintptr_t end =
        (base + segment.p_vaddr + segment.p_memsz + kPage - 1) & ~(kPage - 1);
    // The read-only data faults in a few pages only: not worth all of it.
    long advice = -1;
    if ((segment.p_flags & PF_W) != 0) {
      advice = MADV_POPULATE_WRITE;
    } else if ((segment.p_flags & PF_X) != 0) {
      pulsebox_text_fault_ns = text_fault_ns(start, end);
      if (pulsebox::cli::text_fault_is_slow(pulsebox_text_fault_ns)) advice = MADV_POPULATE_READ;
    }
    if (advice < 0) continue;
    pulsebox::linux_api::raw(SYS_madvise, start, end - start, advice);
  }
  // The stack below this frame, as deep as a run goes (buffers on the
  // stack, realpath): exec maps 128 KiB below the arguments, so these
  // pages are part of the stack's mapping already.
  constexpr std::uintptr_t kStackBytes = 96 * 1024;
  const auto below = reinterpret_cast<std::uintptr_t>(initial_stack) & ~(kPage - 1);
  pulsebox::linux_api::raw(SYS_madvise, below - kStackBytes, kStackBytes, MADV_POPULATE_WRITE);
}
