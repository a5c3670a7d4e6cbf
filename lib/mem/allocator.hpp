// PyTorch's CUDA caching allocator replayed over a rank's tensors (docs/memory.md "The caching
// allocator"): the memory it reserves from the GPU for a sequence of allocations and frees.
#pragma once
#include <cstddef>
#include <cstdint>
#include <set>
#include <utility>
#include <vector>

namespace syssim {

// One stream's pools, with the default settings of c10/cuda/CUDACachingAllocator.cpp: sizes
// rounded up to 512 B; requests of at most 1 MiB served from 2 MiB segments (the small pool),
// larger ones from 20 MiB segments up to 10 MiB and from segments of their own size rounded
// up to 2 MiB beyond (the large pool); the smallest cached block that fits is split when what
// remains is at least 512 B (small pool) or more than 1 MiB (large pool); a freed block merges
// with its free neighbours of the same segment; segments are never returned.
class CachingAllocator {
 public:
  using BlockId = std::size_t;
  BlockId allocate(int64_t bytes);
  void free(BlockId block);
  int64_t reserved_bytes() const { return reserved_; }
  int64_t allocated_bytes() const { return allocated_; }

 private:
  struct Block {
    int64_t size = 0;
    bool small = false;  // its segment's pool
    bool free = false;
    int64_t prev = -1, next = -1;  // neighbours in the segment
  };
  std::set<std::pair<int64_t, BlockId>>& pool(bool small) { return small ? small_free_ : large_free_; }
  void split(BlockId block, int64_t size);  // keeps `size` bytes of the block, frees the rest

  std::vector<Block> blocks_;
  std::set<std::pair<int64_t, BlockId>> small_free_, large_free_;  // free blocks by size
  int64_t reserved_ = 0, allocated_ = 0;
};

}  // namespace syssim
