// Device memory outside PyTorch's caching allocator (docs/memory.md "Memory outside the
// allocator"): the CUDA context and NCCL's connection buffers of one pipeline rank.
#pragma once
#include <cstdint>
#include <vector>

#include "config/config.hpp"
#include "shard/section.hpp"

namespace syssim {

struct MemoryReserve {
  double cuda_context_bytes = 0;
  double nccl_buffer_bytes = 0;
  double total() const { return cuda_context_bytes + nccl_buffer_bytes; }
};

// The reserve of each pipeline rank: the hardware's CUDA context, and the buffers NCCL
// allocates for each communicator the rank's collectives use, from the hardware's channel
// counts (none given: no NCCL buffers counted).
std::vector<MemoryReserve> memory_reserves(const ShardSection& shard, const HardwareConfig& hw);

}  // namespace syssim
