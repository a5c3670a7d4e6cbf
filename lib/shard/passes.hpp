// The passes of syssim-shard (internal to lib/shard): each builds or rewrites the op list
// of the shard section through an OpEmitter/OpRewriter.
#pragma once
#include "shard/emitter.hpp"
#include "shard/shard.hpp"

namespace syssim {

// The routed tokens of a rank under the parallelism and the routing settings
// (docs/parallelism.md "Expert parallelism"), relative to top-k routing of the rank's tokens
// with every expert equally loaded.
struct ExpertLoad {
  double sent = 1;             // tokens a rank permutes and sends (padded to capacity: the factor)
  double received = 1;         // tokens the busiest expert-parallel rank receives
  double busiest_expert = 1;   // the busiest expert's tokens over the mean (after dropping)
  double other_experts = 1;    // the others' tokens over the mean
};

// What every pass knows: the inputs and the rank's axis values.
struct ShardContext {
  const ModelConfig& model;
  const TraceSection& trace;
  const ShardOptions& options;
  int64_t seq_length;
  AxisValues full_axes;      // g, f, v split by tp; s is the rank's sequence (s / cp)
  AxisValues sequence_axes;  // full_axes with s / tp under sequence parallelism
  // Mixture of experts: the ops of the experts run on the rank's e/ep experts, m/etp of each
  // expert's FFN and the tokens dispatched to them (k scaled by etp and the load); the routed
  // tokens of the other ops are the rank's own (k scaled by the padding).
  AxisValues expert_axes;
  ExpertLoad expert_load;
  // The flex dispatcher's GPUs per token: to how many of the ep ranks a token goes (its rows
  // on the experts' side, each rank receiving as many as it sends).
  double flex_destinations = 1;
  std::vector<char> expert_tensors;  // by traced tensor: an expert's weight or gradient
  int64_t tp() const { return options.parallelism.tp; }
  // The axis values of a traced weight or gradient on this rank.
  const AxisValues& tensor_axes(int64_t tensor) const {
    return static_cast<size_t>(tensor) < expert_tensors.size() && expert_tensors[tensor] ? expert_axes : full_axes;
  }
  bool is_expert_tensor(int64_t tensor) const {
    return static_cast<size_t>(tensor) < expert_tensors.size() && expert_tensors[tensor];
  }
  bool sequence_parallel() const { return options.parallelism.sp && tp() > 1; }
};

// Pipeline parallelism (docs/parallelism.md), before any op exists: the decoder layers of
// each virtual stage and the schedule's name (shard.pp_layout, pipeline_schedule; the slot
// lists follow from the global batch, set_global_batch). UsageError or DataError for
// combinations Megatron-LM refuses.
void plan_pipeline(const ModelConfig& model, const ShardOptions& options, ShardSection& shard);
// The decoder layers of each virtual stage (chunk * pp + rank), as plan_pipeline sets them.
std::vector<int64_t> pipeline_layout(const ModelConfig& model, const ShardOptions& options);
// Sets the stage and chunk of every microbatch op from shard.pp_layout: a decoder layer's
// virtual stage, the first for the embedding, the last for final norm, output layer and loss.
void assign_pipeline_stages(ShardSection& shard);
// The last pass: stages every op again (ops later passes inserted included), receives what
// an op needs from a neighbouring virtual stage by a "pp" send_recv, runs the tied
// embeddings' gradient sum on both ranks holding them, splits each once-per-step op into the
// share of every pipeline rank (all-reducing the gradient norm over the pipeline and the
// tied embeddings' gradients between their ranks), and counts each rank's parameters.
void apply_pipeline_parallel(const ShardContext& context, ShardSection& shard);

// Instantiates every traced op for one rank and inserts the tensor-parallel collectives.
void instantiate_trace(const ShardContext& context, ShardSection& shard);

// Mixture of experts: whether a traced op runs on the experts' side (tp_role expert_*),
// and the expert-parallel checks and the rank's view of the experts (axes, load).
bool is_expert_role(TpRole tp_role);
// Whether the token dispatcher's permutations (tp_role expert_dispatch) run on the experts'
// side: under the allgather and flex dispatchers; the alltoall dispatcher's on the tokens'.
bool permutes_on_expert_side(const TrainingConfig& training);
void check_expert_parallel(const ModelConfig& model, const ShardOptions& options);
void set_expert_axes(ShardContext& context);
// Exchanges what crosses between the rank's tokens and its experts' tokens: the token
// dispatcher's all-to-all over the ep group (or all-gather / reduce-scatter over tp*ep for the
// allgather dispatcher), the expert-TP all-gather / reduce-scatter, the sort by local expert.
void apply_expert_parallel(const ShardContext& context, ShardSection& shard);
// The host's waits of a dropless token dispatcher (Megatron-Core's alltoall dispatcher
// without padding to capacity, and the allgather dispatcher): the split sizes of the
// exchange and the experts' GEMMs are token counts the host copies from the device after the
// router, so before the dispatch's first exchange (without expert parallelism, before the
// experts' first op) it waits for the last op issued before the permutation
// (token_dispatcher.py, cuda_sync_point). Runs last, on the final op ids.
void mark_host_syncs(const ShardContext& context, ShardSection& shard);
// Whether the token dispatcher copies the tokens per expert to the host (dropless routing, or
// the allgather dispatcher): what mark_host_syncs marks.
bool dispatcher_syncs_host(const TrainingConfig& training);
// CUDA graphs (shard/cuda_graph.cpp): UsageError for the scopes Megatron refuses with this
// model and layout; then marks the microbatch ops each scope captures (ShardOp::cuda_graph).
void check_cuda_graphs(const ModelConfig& model, const ShardOptions& options);
void mark_cuda_graphs(const ShardContext& context, ShardSection& shard);
// --moe-shared-expert-overlap: the shared experts' ops run on the compute stream while the
// token dispatcher's all-to-alls are in flight (shard/shared_expert_overlap.cpp).
void overlap_shared_experts(const ShardContext& context, ShardSection& shard);
// A grouped GEMM of the experts on the busiest rank: its busiest expert's tokens in the kernel
// shape's `busiest`, the other experts' in its token dimension (m, or k of a weight gradient).
void share_expert_tokens(const ShardContext& context, ShardOp& op);

// With cp > 1, replaces each flash-attention op by Transformer Engine's K/V exchange between
// the context-parallel ranks (ring of send_recv steps, or all-gather) and its attention steps.
void apply_context_parallel(const ShardContext& context, ShardSection& shard);

// Activation recomputation (--recompute selective|full): re-emits the forward ops of each
// recomputed region before the backward ops that need them, which read the recomputed buffers.
void apply_recompute(const ShardContext& context, ShardSection& shard);
// The recompute settings: combinations Megatron-LM refuses (UsageError) and a layer count
// the model does not have (DataError).
void check_recompute(const ModelConfig& model, const ShardOptions& options);

// Activation offloading (--cpu-offloading-num-layers N, shard/offload.cpp): the tensors the
// first N decoder layers save for backward are copied to host memory during the forward pass
// and back during the backward pass, on their own streams (d2h, h2d); the backward ops read
// the copies. Megatron-Core's refusals (UsageError) in check_activation_offloading.
void apply_activation_offloading(const ShardContext& context, ShardSection& shard);
void check_activation_offloading(const ModelConfig& model, const ShardOptions& options);

// Sharded data parallelism beyond the distributed optimizer (optim_grads, optim_grads_params,
// shard/sharded_data_parallel.cpp): per decoder layer and micro-batch, the reduce-scatter of
// its gradients after its backward and the all-gathers of its weights before its forward and
// its backward, one layer ahead. Runs last before apply_pipeline_parallel, on every
// microbatch op the other passes made.
void apply_sharded_data_parallel(const ShardContext& context, ShardSection& shard);
// Combinations not simulated yet (UsageError).
void check_sharded_data_parallel(const ModelConfig& model, const ShardOptions& options, ScheduleKind pipeline_schedule);

// Once per step: the DP gradient reduction in buckets (overlapped with backward under
// --overlap-grad-reduce), TP all-reduce of SP-replicated weight gradients, gradient-norm
// clipping, Adam, the distributed optimizer's parameter all-gather (after Adam, or before
// the next forward under --overlap-param-gather), and the zeroing of the gradient buffer.
void add_step_ops(const ShardContext& context, ShardSection& shard);

// Low precision (--dtype fp8|fp4, docs/syssim-shard.md "Low precision"): the linears of the
// transformer layers run their GEMMs in fp8 (fp4) on operands Transformer Engine quantizes
// first (input, weight, incoming gradient), with the recipe's amax and scale-update ops; the
// weights are quantized once per step. Every other op stays in 16 bits.
void apply_low_precision(const ShardContext& context, ShardSection& shard);
// The dtype and recipe settings: values and combinations Megatron-LM refuses (UsageError).
void check_low_precision(const ShardOptions& options);
// The 16-bit dtype of everything but the low-precision GEMMs: bf16 under fp8/fp4 training.
std::string high_precision_dtype(const TrainingConfig& training);

// --tp-comm-overlap (Transformer Engine's userbuffers, in the transformer layers): an
// all-gather feeding a GEMM becomes a ring of send_recv steps feeding tp GEMM chunks; a
// forward GEMM whose output is reduce-scattered runs in 4 chunks, each reduce-scattered.
void apply_tp_comm_overlap(const ShardContext& context, ShardSection& shard);

// The kernel shape (ShardOp::shape) of a traced op whose FLOPs at `axes` are `flops`.
KernelShape kernel_shape(const TraceOp& op, const AxisValues& axes, double flops, const std::string& where);
// Scales an op's work to `share` of its tokens (a chunk of a GEMM split along the sequence).
void split_tokens(ShardOp& op, double share);

// Bytes of one element of a graph dtype.
double dtype_size(const std::string& dtype);
// The axes that tensor parallelism splits: query groups (and so heads), ffn (the shared
// experts' too) and vocabulary; whether some dimension uses one.
constexpr uint32_t kTensorParallelAxes = letter_axis('g') | letter_axis('f') | letter_axis('u') | letter_axis('v');
bool has_tensor_parallel_axis(const Dims& dims);
bool has_axis(const Dims& dims, std::string_view axis);

// Puts an op inserted for `anchor` in the anchor's layer, module, pass, pipeline place and
// recomputation.
void place_with(const ShardOp& anchor, ShardOp& op);
// A compute-stream op inserted for `anchor`: in its phase, scope and place (place_with).
ShardOp compute_op_for(const ShardOp& anchor, Symbol name, OpKind kind, Symbol dtype);

// A collective op of `group` moving `message_bytes`, not yet emitted; on the group's stream.
ShardOp make_collective(const ShardContext& context, Collective collective, CommGroup group, double message_bytes,
                        OpPhase phase, OpScope scope);

}  // namespace syssim
