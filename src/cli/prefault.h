// Making this process's memory at once instead of page by page.
//
// A page fault costs this kind of VM far more than populating the same page
// inside one madvise(2) (docs/benchmarks.md, "Where the time goes"), and a
// `pulsebox run` touched ~200 pages of its own image and heap one fault at a
// time. Both helpers are best effort: without MADV_POPULATE_* (Linux < 5.14)
// the pages fault in as before.
//
// Not for `pulsebox serve`: it lives long enough to fault its pages once,
// and its resident size is a target of its own.
#pragma once

extern "C" {

// Called by the static CLI's entry point (cli/fast_client.cc) before the C
// library starts, with the initial stack: populates the program's writable
// segment (before its relocations write it), and its text when one text
// page fault turns out slow (what it cost is left in
// pulsebox_text_fault_ns). Raw system calls only, like the fast client.
void pulsebox_prefault_image(long* initial_stack);
// The one text fault pulsebox_prefault_image timed, in ns; -1 when it did
// not (`serve`, builds without the pre-libc entry). PULSEBOX_TRACE says
// whether the text was populated for it.
[[gnu::visibility("hidden")]] extern long pulsebox_text_fault_ns;
// Set by pulsebox_prefault_image when it populated (every command but
// `serve`): main() then populates a heap too. 0 in builds without the
// pre-libc entry (sanitizers).
[[gnu::visibility("hidden")]] extern int pulsebox_image_prefaulted;
}

namespace pulsebox::cli {

// The probe's time from which the text is populated. A run of the static
// CLI takes 33 text faults (one per 64 KiB window, all over the text). On
// this kind of VM, MADV_POPULATE_READ of the whole text (1,118 pages) costs
// 0.37 ms when a fault costs 1.7-2.6 us, so those 33 faults are cheaper; on
// slow hours a fault cost 11-17 us and the populate far less than 33 of
// them (0.17 ms for the 1,456 pages the text had then). The probe's fault
// also makes a page table: 5-8 us when an average fault was 1.7-2.6, about
// 3 x. So this threshold stands for an average fault of ~5 us, between the
// two; the probe was not measured on a slow hour (docs/benchmarks.md).
constexpr long kSlowTextFaultNs = 15000;

// Whether a probe of `fault_ns` populates the text: the entry point decides
// with it and main()'s trace says what it decided. Inlined: the entry point
// runs before the C library and calls nothing.
[[gnu::always_inline]] constexpr bool text_fault_is_slow(long fault_ns) {
  return fault_ns >= kSlowTextFaultNs;
}

// Grows the heap once by what a command uses and populates it, and keeps
// that much on every later growth and trim. Call first in main().
void prefault_heap();

}  // namespace pulsebox::cli
