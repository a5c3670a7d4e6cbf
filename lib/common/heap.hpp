// Heap set-up for speed where page faults are dear (virtual machines): a cached `syssim run`
// spent a quarter of its time faulting in 4 KiB pages (docs/performance.md). Advice only:
// where the kernel or the C library refuses it, nothing changes but speed.
#pragma once

namespace syssim {

// The process's main heap: its first 96 MiB taken at once on transparent huge pages, big
// arrays from the heap, freed memory kept for reuse. Call once, first thing in main.
void prepare_heap();

}  // namespace syssim
