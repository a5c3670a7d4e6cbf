// The "shard" section (docs/graph-format.md), owned by syssim-shard: the graph of one
// rank instantiated with parallelism and training settings, collectives included.
#pragma once
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/expr.hpp"
#include "common/id_list.hpp"
#include "common/kernel_shape.hpp"
#include "common/op_kinds.hpp"
#include "common/symbol.hpp"
#include "config/config.hpp"
#include "shard/schedule.hpp"

namespace syssim {

// A buffer of one rank: its size in bytes for one micro-batch.
struct ShardBuffer {
  int64_t id = 0;
  double bytes = 0;
  TensorRole role = TensorRole::activation;
  Symbol param;
  std::optional<int64_t> producer;  // op that writes it first (none for params and inputs)
};

// The weights a rank keeps for the whole step: its parameters and the low-precision copies
// Transformer Engine caches of them (docs/memory.md "Low precision").
inline bool is_weight(const ShardBuffer& buffer) { return buffer.role == TensorRole::param || buffer.role == TensorRole::quantized_weight; }

// A buffer that lives per micro-batch (or per step): not a weight or gradient, which are model
// states, live all step long and counted per rank (syssim-mem, the report's memory track).
inline bool is_transient(const ShardBuffer& buffer) { return !is_weight(buffer) && buffer.role != TensorRole::grad; }

// The most passes of a micro-batch through a model chunk one pipeline rank runs in a step (vpp x
// num_microbatches): a job or section beyond them, or beyond kMaxGpus, is refused before anything
// is sized by them (docs/graph-format.md).
inline constexpr int64_t kMaxChunkPasses = int64_t{1} << 20;

struct ShardSection;

// By buffer id: whether pipeline rank `rank` saves the buffer for its backward pass, that is a
// forward op of the rank writes it and a backward op of the rank reads it.
std::vector<char> buffers_saved_for_backward(const ShardSection& shard, int64_t rank);



struct ShardOp {
  int64_t id = 0;
  std::optional<int64_t> trace_op;  // the traced op this instantiates; none for inserted ops
  Symbol name;
  OpKind kind = OpKind::math;
  OpPhase phase = OpPhase::fwd;
  std::optional<int64_t> layer;
  Symbol module;
  OpScope scope = OpScope::microbatch;
  OpPass pass = OpPass::forward;
  int64_t stage = 0;   // pipeline rank that runs it
  int64_t chunk = 0;   // virtual pipeline chunk of that rank
  bool recompute = false;  // a forward op run again in the backward pass
  // Whether the op runs a backward kernel: a backward op, not a forward op recomputed there.
  bool runs_backward_kernel() const { return phase == OpPhase::bwd && !recompute; }
  Stream stream = Stream::compute;
  Symbol dtype;   // compute dtype: bf16 | fp16 | fp32 | ...
  IdList deps;  // ops of the same scope (or, for step ops, of any scope) that must finish first
  // An earlier op of the same stage and slot that the host waits for before it issues this one
  // (a device-to-host copy it needs, as the dropless token dispatcher's token counts).
  std::optional<int64_t> host_waits_for;
  // The CUDA graph that captures the op (training.cuda_graph_scope): the host replays the
  // graph of each scope and layer once instead of issuing its ops.
  std::optional<CudaGraphScope> cuda_graph;
  double flops = 0;
  double bytes = 0;  // bytes read plus written in device memory
  KernelShape shape;  // on one rank; empty for collectives and ops inserted without one
  IdList reads;
  IdList writes;
  // Collectives only.
  Collective collective = Collective::all_reduce;
  CommGroup group = CommGroup::tp;
  int64_t group_size = 1;
  double message_bytes = 0;  // the full (unsharded) buffer the collective operates on
};

// What a person reads for an op: its module and what the op does there
// ("decoder.layers.19.mlp.linear_fc1 linear_wgrad"; a collective's kind and group,
// "optimizer.data_parallel_grads.bucket_0 all_reduce dp"; " (recompute)" after a recomputed
// forward op). With `any_layer`, numbered module parts read '*', so that the same op of every
// layer has one label ("decoder.layers.*.mlp.linear_fc1 linear_wgrad").
std::string op_label(const ShardOp& op, bool any_layer = false);

// Whether an op outside the decoder layers (no `layer`) is the embedding's, in module
// `embedding` or under it, which runs before the layers; the others (final norm, output layer,
// loss) run after them.
inline bool before_layers(const ShardOp& op) { return op.module.module_path().embedding; }

struct ShardSection {
  ParallelismConfig parallelism;
  TrainingConfig training;
  int64_t seq_length = 0;
  int64_t num_microbatches = 1;
  AxisValues axes;  // values on one rank (g, f, v split by tp; s is the full sequence)
  double params_total = 0;
  double params_active = 0;  // used per token: params_total but the experts a token is not routed to
  double params_local = 0;
  double model_flops_per_step = 0;  // Megatron-LM's count, all GPUs
  // Its attention score and context part (the full s x s matrix); none in a section older than
  // format 1.7.
  std::optional<double> model_attention_flops_per_step;
  std::vector<ShardBuffer> buffers;
  std::vector<ShardOp> ops;
  // Pipeline parallelism (docs/parallelism.md).
  ScheduleKind pipeline_schedule = ScheduleKind::one_f_one_b;
  std::vector<int64_t> pp_layout;            // decoder layers per virtual stage (chunk * pp + rank)
  std::vector<double> stage_params_local;    // parameters each pipeline rank holds
  std::vector<double> stage_expert_params_local;  // of them, the experts' (sharded over expert-DP); empty: none
  PipelineSchedule schedule;                 // each pipeline rank's slots, in order
};

// What pipeline rank `stage` runs, compactly: its step_start ops, then its schedule slots,
// each as the op list of its kind (chunk and pass: every slot of a kind runs the same ops
// for its micro-batch), then its step ops: in this order, the rank's issue order
// (docs/graph-format.md). Each list is in op id order. Throws DataError
// when the schedule does not run every microbatch op of the rank exactly once per
// micro-batch.
struct RankProgram {
  struct Slot {
    int64_t microbatch = 0;
    size_t kind = 0;  // index into kind_ops
  };
  std::vector<int64_t> step_start_ops;
  std::vector<std::vector<int64_t>> kind_ops;
  std::vector<bool> backward_kind;  // by kind: a backward or weight pass
  std::vector<Slot> slots;  // in the order of the rank's schedule
  std::vector<int64_t> step_ops;
};
RankProgram rank_program(const ShardSection& shard, int64_t stage);
// Every rank's (parallelism.pp of them), by rank, in one pass over the ops.
std::vector<RankProgram> rank_programs(const ShardSection& shard);

// Whether a pipeline receive (a micro-batch op of the pp stream) starts only once its rank's
// compute stream has finished the slots before it (docs/syssim-sim.md, "Pipeline receives"):
// Megatron's non-interleaved 1F1B posts it after the step before, and gpipe and zb-h1 are
// taken alike; the interleaved schedule posts it ahead (overlap_p2p_comm), and the combined
// one runs its pair of slots as one.
bool receives_after_previous_slot(const ShardSection& shard);

nlohmann::json to_json(const ShardSection& shard);
ShardSection shard_from_json(const nlohmann::json& j, const std::string& path);

}  // namespace syssim
