// Memory accounting (docs/syssim-mem.md): the peak memory of one GPU in a training step.
#pragma once
#include <optional>
#include <vector>

#include "common/graph.hpp"

namespace syssim {

struct MemOptions {
  // Replay PyTorch's caching allocator over every op instance of the heaviest rank
  // (lib/mem/allocator.hpp) for the memory it reserves: asked for, as it walks every instance.
  bool replay_allocator = false;
};

// Sets g.mem from g.shard: Megatron mixed-precision model states plus the peak of the
// buffers live while one micro-batch and the step ops run. The GPU capacity, and with it
// the OOM check, and the memory outside the allocator (lib/mem/reserve.hpp) come from g.cost's
// hardware when that section is present.
void account_memory(Graph& g, const MemOptions& options = {});

// Per decoder layer (op.layer < layers) of a one-rank section with one micro-batch (pp 1):
// the bytes of the buffers its micro-batch keeps from the forward slot into the backward
// slot, each counted for the layer of the backward op that uses it last (a layer's saved
// activations and its input). Pipeline ranks run the same layers, so at a rank's first
// backward slot each layer of each earlier forward slot holds at least these bytes: what
// the layout search bounds memory with (docs/syssim-sweep.md, "Search").
std::vector<double> layer_bytes_kept_for_backward(const ShardSection& shard, size_t layers);

// The gradients and optimizer states of `params` parameters held by one GPU, `expert_params`
// of them the experts': the main gradients, and Adam's master weights and two moments
// (TrainingConfig::optimizer_state_bytes), which the distributed optimizer shards over the
// data-parallel group (dp x cp ranks; the experts' over the expert-data-parallel group); optim_grads shards the gradients too, and
// optim_grads_params the weights (`weight_share`: the share of its weights a GPU keeps between
// the layers' all-gathers).
struct TrainingStateBytes {
  double grad_bytes = 0;
  double optimizer_state_bytes = 0;
  double weight_share = 1;
  // FSDP2's fp32 shards of the weights, the master weights themselves (which Adam's state then
  // leaves out), held in place of the 16-bit weights' share; none otherwise.
  std::optional<double> fp32_weight_shard_bytes;
  // bf16 main gradients: the fp32 copy of the rank's optimizer shard that the optimizer step
  // reads (Megatron-LM's _copy_model_grads_to_main_grads, main_grad.float()), from the copy to
  // Adam; 0 with fp32 main gradients, which the optimizer reads in place.
  double fp32_grad_copy_bytes = 0;
};
TrainingStateBytes training_state_bytes(double params, const ParallelismConfig& parallelism,
                                        const TrainingConfig& training, double expert_params = 0);

}  // namespace syssim
