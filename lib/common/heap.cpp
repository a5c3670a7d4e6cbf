#include "common/heap.hpp"

#include <malloc.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>

namespace syssim {

void prepare_heap() {
  constexpr int kLargestMmapThreshold = 32 << 20;  // glibc's, on 64-bit machines
  constexpr size_t kHeapReserve = size_t{96} << 20;
  constexpr size_t kBlock = size_t{24} << 20;  // below the threshold, with malloc's overhead
  constexpr uintptr_t kHugePage = uintptr_t{2} << 20;
  mallopt(M_MMAP_THRESHOLD, kLargestMmapThreshold);
  mallopt(M_TRIM_THRESHOLD, static_cast<int>(2 * kHeapReserve));
  void* blocks[kHeapReserve / kBlock];
  for (void*& block : blocks) block = std::malloc(kBlock);  // contiguous at the top of the heap, not touched
  const auto first = reinterpret_cast<uintptr_t>(blocks[0]);
  const auto last = reinterpret_cast<uintptr_t>(blocks[kHeapReserve / kBlock - 1]) + kBlock;
  const uintptr_t begin = (first + kHugePage - 1) & ~(kHugePage - 1), end = last & ~(kHugePage - 1);
  if (first != 0 && last > first && end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
  for (void* block : blocks) std::free(block);
}

}  // namespace syssim
