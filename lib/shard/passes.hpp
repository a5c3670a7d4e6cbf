// The passes of syssim-shard (internal to lib/shard): each builds or rewrites the op list
// of the shard section through an OpEmitter/OpRewriter.
#pragma once
#include "shard/emitter.hpp"
#include "shard/shard.hpp"

namespace syssim {

// What every pass knows: the inputs and the rank's axis values.
struct ShardContext {
  const ModelConfig& model;
  const TraceSection& trace;
  const ShardOptions& options;
  int64_t seq_length;
  AxisValues full_axes;      // g, f, v split by tp; s is the rank's sequence (s / cp)
  AxisValues sequence_axes;  // full_axes with s / tp under sequence parallelism
  int64_t tp() const { return options.parallelism.tp; }
  bool sequence_parallel() const { return options.parallelism.sp && tp() > 1; }
};

// Instantiates every traced op for one rank and inserts the tensor-parallel collectives.
void instantiate_trace(const ShardContext& context, ShardSection& shard);

// Once per step: TP all-reduce of SP-replicated weight gradients, the DP gradient
// reduction, Adam, and the distributed optimizer's parameter all-gather.
void add_step_ops(const ShardContext& context, ShardSection& shard);

// Bytes of one element of a graph dtype.
double dtype_size(const std::string& dtype);
// Whether some dimension uses an axis that tensor parallelism splits (g, f, v).
bool has_tensor_parallel_axis(const Dims& dims);
bool has_axis(const Dims& dims, const std::string& axis);

// A collective op of `group` (tp, cp or dp) moving `message_bytes`, not yet emitted.
ShardOp make_collective(const ShardContext& context, const std::string& collective, const std::string& group,
                        double message_bytes, const std::string& phase, const std::string& scope);

}  // namespace syssim
