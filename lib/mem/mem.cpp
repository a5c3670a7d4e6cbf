#include "mem/mem.hpp"

#include <vector>

namespace syssim {
namespace {

constexpr double kBytesPerGB = 1e9;
// Megatron mixed precision, bytes per parameter: 16-bit weights, fp32 main gradients,
// fp32 master weights plus Adam's two moments.
constexpr double kWeightBytes = 2;
constexpr double kMainGradBytes = 4;
constexpr double kOptimizerStateBytes = 12;

struct TransientPeak {
  double activation_bytes = 0;
  double temporary_bytes = 0;
  std::string module;
};

// How one buffer is used by the op sequence.
struct BufferUse {
  bool used = false;
  bool written = false;
  bool written_in_forward = false;
  bool read_in_backward = false;
  size_t last_use = 0;  // position of the last op that reads or writes it
};

// Parameters and gradients are model states, counted per parameter instead.
bool is_transient(const ShardBuffer& buffer) { return buffer.role != "param" && buffer.role != "grad"; }

// One micro-batch's ops (forward then backward) followed by the step ops, each in id order.
std::vector<const ShardOp*> op_sequence(const ShardSection& shard) {
  std::vector<const ShardOp*> sequence;
  for (const char* scope : {"microbatch", "step"})
    for (const ShardOp& op : shard.ops)
      if (op.scope == scope) sequence.push_back(&op);
  return sequence;
}

// A transient buffer is live from its first write (inputs that no op writes: from the start)
// until the last op that uses it has finished. The peak is the largest sum of live bytes
// while an op runs, with its inputs and outputs both allocated.
TransientPeak transient_peak(const ShardSection& shard) {
  std::vector<const ShardOp*> sequence = op_sequence(shard);
  std::vector<BufferUse> uses(shard.buffers.size());
  for (size_t position = 0; position < sequence.size(); ++position) {
    const ShardOp& op = *sequence[position];
    for (int64_t b : op.reads) {
      uses[b].used = true, uses[b].last_use = position;
      if (op.phase == "bwd") uses[b].read_in_backward = true;
    }
    for (int64_t b : op.writes) {
      uses[b].used = true, uses[b].written = true, uses[b].last_use = position;
      if (op.phase == "fwd") uses[b].written_in_forward = true;
    }
  }

  // Live bytes split as at the peak: activations saved for backward, and the rest.
  std::vector<bool> live(shard.buffers.size(), false);
  TransientPeak now;
  auto bytes_of_kind = [&](size_t b) -> double& {
    bool saved_for_backward = uses[b].written_in_forward && uses[b].read_in_backward;
    return saved_for_backward ? now.activation_bytes : now.temporary_bytes;
  };
  auto allocate = [&](size_t b) {
    if (live[b] || !is_transient(shard.buffers[b])) return;
    live[b] = true;
    bytes_of_kind(b) += shard.buffers[b].bytes;
  };
  for (size_t b = 0; b < uses.size(); ++b)
    if (uses[b].used && !uses[b].written) allocate(b);

  TransientPeak peak;
  double peak_bytes = -1;
  for (size_t position = 0; position < sequence.size(); ++position) {
    const ShardOp& op = *sequence[position];
    for (int64_t b : op.writes) allocate(b);
    if (now.activation_bytes + now.temporary_bytes > peak_bytes) {
      peak_bytes = now.activation_bytes + now.temporary_bytes;
      peak = TransientPeak{now.activation_bytes, now.temporary_bytes, op.module};
    }
    for (const std::vector<int64_t>* buffers : {&op.reads, &op.writes})
      for (int64_t b : *buffers)
        if (live[b] && uses[b].last_use == position) {
          live[b] = false;
          bytes_of_kind(b) -= shard.buffers[b].bytes;
        }
  }
  return peak;
}

}  // namespace

void account_memory(Graph& g) {
  const ShardSection& shard = need_section(g.shard, "shard", "syssim-shard");
  MemSection mem;
  mem.param_bytes = shard.params_local * kWeightBytes;
  mem.grad_bytes = shard.params_local * kMainGradBytes;
  // The distributed optimizer shards master weights and moments over the data-parallel ranks.
  double optimizer_shards = shard.training.distributed_optimizer ? static_cast<double>(shard.parallelism.dp) : 1.0;
  mem.optimizer_state_bytes = shard.params_local * kOptimizerStateBytes / optimizer_shards;

  TransientPeak peak = transient_peak(shard);
  mem.activation_bytes = peak.activation_bytes;
  mem.temporary_bytes = peak.temporary_bytes;
  mem.peak_module = peak.module;
  mem.peak_memory_gb =
      (mem.param_bytes + mem.grad_bytes + mem.optimizer_state_bytes + mem.activation_bytes + mem.temporary_bytes) /
      kBytesPerGB;
  mem.pp_stage_memory_gb = {mem.peak_memory_gb};

  if (g.cost && g.cost->hardware.gpu_memory_GB) {
    double capacity_gb = *g.cost->hardware.gpu_memory_GB;
    mem.gpu_memory_gb = capacity_gb;
    if (mem.peak_memory_gb > capacity_gb)
      mem.oom = OomInfo{capacity_gb, mem.peak_memory_gb, mem.peak_memory_gb - capacity_gb};
  }
  g.mem = std::move(mem);
}

}  // namespace syssim
