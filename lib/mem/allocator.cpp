#include "mem/allocator.hpp"

#include <algorithm>

namespace syssim {
namespace {

// c10/cuda/CUDACachingAllocator.cpp (PyTorch 2.x): kMinBlockSize, kSmallSize, kSmallBuffer,
// kLargeBuffer, kMinLargeAlloc, kRoundLarge.
constexpr int64_t kMinBlockSize = 512;
constexpr int64_t kSmallSize = 1 << 20;
constexpr int64_t kSmallBuffer = 2 << 20;
constexpr int64_t kLargeBuffer = 20 << 20;
constexpr int64_t kMinLargeAlloc = 10 << 20;
constexpr int64_t kRoundLarge = 2 << 20;

int64_t round_up(int64_t bytes, int64_t unit) { return (bytes + unit - 1) / unit * unit; }

// The segment cudaMalloc'd for a request no cached block serves.
int64_t segment_bytes(int64_t size) {
  if (size <= kSmallSize) return kSmallBuffer;
  if (size < kMinLargeAlloc) return kLargeBuffer;
  return round_up(size, kRoundLarge);
}

}  // namespace

void CachingAllocator::split(BlockId id, int64_t size) {
  const int64_t remaining = blocks_[id].size - size;
  const bool small = blocks_[id].small;
  if (remaining < (small ? kMinBlockSize : kSmallSize + 1)) return;
  Block rest;
  rest.size = remaining;
  rest.small = small;
  rest.free = true;
  rest.prev = static_cast<int64_t>(id);
  rest.next = blocks_[id].next;
  const BlockId rest_id = blocks_.size();
  blocks_.push_back(rest);
  if (rest.next >= 0) blocks_[static_cast<size_t>(rest.next)].prev = static_cast<int64_t>(rest_id);
  blocks_[id].next = static_cast<int64_t>(rest_id);
  blocks_[id].size = size;
  pool(small).emplace(remaining, rest_id);
}

CachingAllocator::BlockId CachingAllocator::allocate(int64_t bytes) {
  const int64_t size = round_up(std::max<int64_t>(bytes, 1), kMinBlockSize);
  const bool small = size <= kSmallSize;
  auto& free_blocks = pool(small);
  BlockId id;
  if (auto it = free_blocks.lower_bound({size, 0}); it != free_blocks.end()) {
    id = it->second;
    free_blocks.erase(it);
  } else {
    Block segment;
    segment.size = segment_bytes(size);
    segment.small = small;
    reserved_ += segment.size;
    id = blocks_.size();
    blocks_.push_back(segment);
  }
  blocks_[id].free = false;
  split(id, size);
  allocated_ += blocks_[id].size;
  return id;
}

void CachingAllocator::free(BlockId id) {
  Block& block = blocks_[id];
  allocated_ -= block.size;
  auto& free_blocks = pool(block.small);
  // Merge with a free neighbour: the earlier block absorbs the later.
  auto absorb = [&](BlockId into, BlockId from) {
    Block& later = blocks_[from];
    blocks_[into].size += later.size;
    blocks_[into].next = later.next;
    if (later.next >= 0) blocks_[static_cast<size_t>(later.next)].prev = static_cast<int64_t>(into);
  };
  if (block.next >= 0 && blocks_[static_cast<size_t>(block.next)].free) {
    const auto next = static_cast<BlockId>(block.next);
    free_blocks.erase({blocks_[next].size, next});
    absorb(id, next);
  }
  if (block.prev >= 0 && blocks_[static_cast<size_t>(block.prev)].free) {
    const auto prev = static_cast<BlockId>(block.prev);
    free_blocks.erase({blocks_[prev].size, prev});
    absorb(prev, id);
    id = prev;
  }
  blocks_[id].free = true;
  free_blocks.emplace(blocks_[id].size, id);
}

}  // namespace syssim
