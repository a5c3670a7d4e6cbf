// Memory accounting (docs/syssim-mem.md): the peak memory of one GPU in a training step.
#pragma once
#include "common/graph.hpp"

namespace syssim {

// Sets g.mem from g.shard: Megatron mixed-precision model states plus the peak of the
// buffers live while one micro-batch and the step ops run. The GPU capacity, and with it
// the OOM check, comes from g.cost's hardware when that section is present.
void account_memory(Graph& g);

}  // namespace syssim
