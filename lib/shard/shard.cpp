#include "shard/shard.hpp"

#include "shard/passes.hpp"
#include "shard/schedule.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "common/dtype.hpp"
#include "common/error.hpp"

namespace syssim {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

void require_divides(int64_t divisor, const std::string& divisor_name, int64_t value, const std::string& value_name,
                     const std::string& needed_by = "") {
  if (value % divisor != 0)
    throw DataError(divisor_name + "=" + str(divisor) + " does not divide " + value_name + "=" + str(value) +
                    (needed_by.empty() ? "" : " (" + needed_by + ")"));
}

void check_layout(const ModelConfig& model, const ShardOptions& options, int64_t seq) {
  const auto& p = options.parallelism;
  const auto& t = options.training;
  for (auto [value, name] : {std::pair{p.tp, "tp"}, {p.dp, "dp"}, {p.cp, "cp"}, {p.pp, "pp"},
                             {t.micro_batch, "micro_batch"}, {seq, "seq_length"}})
    if (value < 1) throw UsageError(std::string(name) + "=" + str(value) + " must be at least 1");
  for (auto [value, name] : {std::pair{p.tp, "tp"}, {p.dp, "dp"}, {p.cp, "cp"}, {p.pp, "pp"}})
    if (value > kMaxGpus) throw UsageError(std::string(name) + "=" + str(value) + " exceeds the " + str(kMaxGpus) + " GPUs a job can have");
  if (std::string excess = p.world_size_excess(); !excess.empty()) throw UsageError(excess);
  if (options.gpus && *options.gpus > kMaxGpus)
    throw UsageError("gpus=" + str(*options.gpus) + " exceeds the " + str(kMaxGpus) + " GPUs a job can have");
  check_recompute(model, options);
  check_activation_offloading(model, options);
  check_low_precision(options);
  check_expert_parallel(model, options);
  check_cuda_graphs(model, options);
  if (options.gpus && *options.gpus != p.world_size()) {
    const int64_t model_parallel = p.tp * p.cp * p.pp;  // no dp fills the GPUs: say why
    if (*options.gpus % model_parallel != 0)
      throw DataError("gpus=" + str(*options.gpus) + " is not a multiple of tp*cp*pp=" + str(model_parallel));
    throw DataError("tp*cp*pp*dp=" + str(p.world_size()) + " does not match gpus=" + str(*options.gpus));
  }
  rank_order(p);  // refuses an order that names an unknown dimension or leaves one out
  require_divides(p.tp, "tp", model.num_attention_heads, "num_attention_heads");
  if (!tp_splits_query_groups(model, p.tp))
    throw DataError("num_query_groups=" + str(model.num_query_groups) + " is neither a multiple nor a divisor of tp=" +
                    str(p.tp) + " (Megatron-Core needs one or the other)");
  require_divides(p.tp, "tp", model.ffn_hidden_size, "ffn_hidden_size");
  if (model.moe_shared_expert_intermediate_size > 0)
    require_divides(p.tp, "tp", model.moe_shared_expert_intermediate_size, "moe_shared_expert_intermediate_size");
  // Context parallelism: each rank holds 2 of the 2*cp sequence chunks (Megatron-LM's
  // load-balanced causal split needs seq_length % (2*cp) == 0).
  require_divides(p.cp, "cp", seq, "seq_length");
  if (p.cp > 1) require_divides(2 * p.cp, "2*cp", seq, "seq_length", "the load-balanced causal split");
  if (p.sp && p.tp > 1)
    require_divides(p.tp * p.cp, p.cp > 1 ? "tp*cp" : "tp", seq, "seq_length", "sequence parallelism");
  if (!model.rope && seq > model.max_position_embeddings)
    throw DataError(model.name + ": seq_length=" + str(seq) + " exceeds its max_position_embeddings=" +
                    str(model.max_position_embeddings) + " (learned positions)");
  if (p.cp > 1 && (window_slides_at(model, seq) || model.softmax_type != "vanilla"))
    throw UsageError("cp=" + str(p.cp) + " with sliding-window attention or attention sinks is not simulated");
  if (p.cp > 1 && model.multi_latent_attention)
    throw UsageError("cp=" + str(p.cp) + " with multi-head latent attention is not simulated");
  if (p.cp > 1 && p.tp > model.num_query_groups)
    throw UsageError("cp=" + str(p.cp) + " with tp=" + str(p.tp) + " above the " + str(model.num_query_groups) +
                     " query groups (a KV head shared by tp ranks) is not simulated");
}

// The unfused attention's softmax is traced as the kernels Megatron runs at the traced sequence
// length (runs_fused_softmax_kernel); a job at a length that runs the others needs its own trace.
void check_softmax_kernels(const ModelConfig& model, const TraceSection& trace, int64_t seq) {
  if (model.attention_backend != "unfused") return;
  const bool traced_fused = std::any_of(trace.ops.begin(), trace.ops.end(),
                                        [](const TraceOp& op) { return op.name.named_op() == NamedOp::scale_mask_softmax; });
  if (traced_fused == runs_fused_softmax_kernel(model, seq)) return;
  throw DataError("seq_length=" + str(seq) + " runs the unfused attention's softmax " +
                  (traced_fused ? "in PyTorch but the trace holds the fused kernel"
                                : "as Megatron's fused kernel but the trace holds PyTorch's") +
                  ": trace the model at this length (syssim-trace --seq-length " + str(seq) + ")");
}

// A sliding window that holds the whole sequence is full causal attention (traced_at), which the
// window's FLOP count (window keys per query) would overstate; a job at a length on the other
// side of the window needs its own trace.
void check_window(const ModelConfig& model, const TraceSection& trace, int64_t seq) {
  if (model.window_size == 0) return;  // a window op in such a trace lacks its axis: refused where priced
  const bool traced_window = std::any_of(trace.ops.begin(), trace.ops.end(), [](const TraceOp& op) {
    return op.name.named_op() == NamedOp::flash_attn_window;
  });
  if (traced_window == window_slides_at(model, seq)) return;
  throw DataError("seq_length=" + str(seq) + (traced_window ? " is not longer than" : " is longer than") +
                  " the sliding window of " + str(model.window_size + 1) + " keys, but the trace " +
                  (traced_window ? "slides" : "has full attention") + ": trace the model at this length (syssim-trace " +
                  "--seq-length " + str(seq) + ")");
}

AxisValues rank_axes(const ModelConfig& model, const TraceSection& trace, const ShardOptions& options, int64_t seq) {
  int64_t tp = options.parallelism.tp;
  AxisValues axes = trace.axes;
  axes["b"] = static_cast<double>(options.training.micro_batch);
  axes["s"] = static_cast<double>(seq / options.parallelism.cp);
  // With more ranks than query groups a rank projects its 1/tp share of the query groups'
  // K and V (Megatron-Core splits linear_qkv's weight evenly): a fraction of a group.
  axes["g"] = static_cast<double>(model.num_query_groups) / static_cast<double>(tp);
  axes["f"] = static_cast<double>(model.ffn_hidden_size / tp);
  if (axes.count("u")) axes["u"] = static_cast<double>(model.moe_shared_expert_intermediate_size / tp);
  axes["v"] = static_cast<double>(padded_vocab_size(model, tp) / tp);
  // A window of x keys (the query's own among them): query i sees min(i + 1, x), so over s
  // queries a query sees x - x(x - 1)/(2s) on average, what the window's ops are priced with.
  if (auto window = axes.find("x"); window != axes.end())
    window->second -= window->second * (window->second - 1) / (2 * axes.at("s"));
  return axes;
}

// The parameters a token uses: all but the experts it is not routed to (moe_router_topk of the
// num_moe_experts experts of an MoE layer).
double active_parameters(const ModelConfig& model, const TraceSection& trace) {
  double total = traced_parameters(trace, trace.axes);
  if (!model.is_moe()) return total;
  const double unused = 1 - static_cast<double>(model.moe_router_topk) / static_cast<double>(model.num_moe_experts);
  return total - expert_parameters(trace) * unused;
}

void count_parameters(const ShardContext& context, ShardSection& shard) {
  shard.params_total = traced_parameters(context.trace, context.trace.axes);
  shard.params_active = active_parameters(context.model, context.trace);
  shard.params_local = 0;
  for (const TraceTensor& t : context.trace.tensors)
    if (t.role == TensorRole::param)
      shard.params_local += numel_at(t.dims, context.tensor_axes(t.id), "/trace/tensors/" + std::to_string(t.id));
}

}  // namespace

double expert_parameters(const TraceSection& trace) {
  std::vector<char> expert_weight(trace.tensors.size(), 0);
  for (const TraceOp& op : trace.ops)
    if (is_expert_role(op.tp_role))
      for (const TensorRef& r : op.inputs)
        if (trace.tensors[r.tensor].role == TensorRole::param) expert_weight[r.tensor] = 1;
  double experts = 0;
  for (const TraceTensor& t : trace.tensors)
    if (expert_weight[t.id]) experts += numel_at(t.dims, trace.axes, "/trace/tensors/" + std::to_string(t.id));
  return experts;
}

std::vector<int64_t> uneven_pipeline_layout(int64_t layers, int64_t stages) {
  if (stages > layers) return {};
  const int64_t most = (layers + stages - 1) / stages;
  std::vector<int64_t> layout(stages, most);
  layout.back() = layers - most * (stages - 1);
  if (layout.back() < 1) {
    layout.assign(stages, layers / stages);
    for (int64_t v = 1; v <= layers % stages; ++v) ++layout[v];
  }
  return layout;
}

int64_t padded_vocab_size(const ModelConfig& model, int64_t tp) {
  int64_t multiple = model.make_vocab_size_divisible_by * tp;
  return (model.vocab_size + multiple - 1) / multiple * multiple;
}

double megatron_model_flops(const ModelConfig& m, int64_t global_batch, int64_t seq, int64_t tp) {
  // Megatron-LM training.py num_floating_point_operations: 12 = 3 passes (fwd, dgrad, wgrad)
  // x 2 GEMMs per block x 2 FLOPs per multiply-add; attention scores counted without the
  // causal mask; the logit GEMM over the padded vocabulary.
  double h = static_cast<double>(m.hidden_size);
  double gated = m.swiglu ? 1.5 : 1.0;
  const double vocab = static_cast<double>(padded_vocab_size(m, tp));
  if (!m.is_moe() && !m.multi_latent_attention && m.mtp_num_layers == 0) {
    double query_projection_ratio = static_cast<double>(m.kv_channels * m.num_attention_heads) / h;
    double attention = (1.0 + static_cast<double>(m.num_query_groups) / m.num_attention_heads +
                        static_cast<double>(seq) / h) * query_projection_ratio;
    double mlp = static_cast<double>(m.ffn_hidden_size) / h * gated;
    double logit = vocab / (2.0 * m.num_layers * h);
    return 12.0 * global_batch * seq * m.num_layers * h * h * (attention + mlp + logit);
  }
  // The same count per token, term by term, with Megatron-LM's terms for dense and MoE layers,
  // multi-head latent attention and MTP layers (which take the last layer's kind), 6 = 3 passes
  // x 2 FLOPs per multiply-add; attention scores again counted in full.
  const double s = static_cast<double>(seq), a = static_cast<double>(m.num_attention_heads);
  double attention = 0;
  if (m.multi_latent_attention) {
    const double q = static_cast<double>(m.q_lora_rank), c = static_cast<double>(m.kv_lora_rank);
    const double n = static_cast<double>(m.qk_head_dim), t = static_cast<double>(m.qk_pos_emb_head_dim);
    const double w = static_cast<double>(m.v_head_dim);
    const double q_term = m.q_lora_rank > 0 ? q * (h + a * (n + t) + 1) : h * a * (n + t);
    attention = 6 * (q_term + c * (h + a * (n + w) + 1) + h * t + a * w * h) + 6 * a * (n + t + w) * s;
  } else {
    const double d = static_cast<double>(m.kv_channels), g = static_cast<double>(m.num_query_groups);
    attention = 12 * h * d * (a + g) + 12 * a * d * s;
  }
  const double dense_mlp = 12 * h * static_cast<double>(m.ffn_hidden_size) * gated;
  const double moe_mlp = 12 * h * gated *
                         (static_cast<double>(m.moe_ffn_hidden_size * m.moe_router_topk) +
                          static_cast<double>(m.moe_shared_expert_intermediate_size));
  double mlp = 0;
  for (int64_t layer = 0; layer < m.num_layers; ++layer) mlp += m.is_moe_layer(layer) ? moe_mlp : dense_mlp;
  const double mtp = static_cast<double>(m.mtp_num_layers);
  mlp += mtp * (m.is_moe_layer(m.num_layers - 1) ? moe_mlp : dense_mlp);
  const double mtp_projection = mtp * 6 * (3 * h + 2 * h * h);
  const double logits = 6 * h * vocab * (1 + mtp);
  const double per_token = (static_cast<double>(m.num_layers) + mtp) * attention + mlp + mtp_projection + logits;
  return static_cast<double>(global_batch) * s * per_token;
}

double megatron_attention_score_flops(const ModelConfig& m, int64_t global_batch, int64_t seq) {
  const double s = static_cast<double>(seq), a = static_cast<double>(m.num_attention_heads);
  // Per token and layer, 3 passes x 2 FLOPs per multiply-add x (scores + context): 12 a d s,
  // or with MLA 6 a (qk_nope + qk_rope + v) s, the terms of megatron_model_flops.
  const double per_token_layer =
      m.multi_latent_attention
          ? 6 * a * static_cast<double>(m.qk_head_dim + m.qk_pos_emb_head_dim + m.v_head_dim) * s
          : 12 * a * static_cast<double>(m.kv_channels) * s;
  return static_cast<double>(global_batch) * s * static_cast<double>(m.num_layers + m.mtp_num_layers) * per_token_layer;
}

double dtype_size(const std::string& dtype) {
  if (const std::optional<double> bytes = element_bytes(dtype)) return *bytes;
  throw DataError("graph: unknown dtype '" + dtype + "'");
}

bool has_tensor_parallel_axis(const Dims& dims) { return (letter_axes(dims) & kTensorParallelAxes) != 0; }

bool has_axis(const Dims& dims, std::string_view axis) {
  return std::any_of(dims.begin(), dims.end(), [&](const Poly& d) { return d.contains_axis(axis); });
}

void place_with(const ShardOp& anchor, ShardOp& op) {
  op.layer = anchor.layer;
  op.module = anchor.module;
  op.pass = anchor.pass;
  op.stage = anchor.stage;
  op.chunk = anchor.chunk;
  op.recompute = anchor.recompute;
}

ShardOp compute_op_for(const ShardOp& anchor, Symbol name, OpKind kind, Symbol dtype) {
  ShardOp op;
  op.name = name;
  op.kind = kind;
  op.phase = anchor.phase;
  op.scope = anchor.scope;
  place_with(anchor, op);
  op.stream = Stream::compute;
  op.dtype = dtype;
  return op;
}

// The ranks of a group in one job; the pp and embedding groups' are set where they are made.
int64_t group_size(const ShardContext& context, CommGroup group) {
  const auto& p = context.options.parallelism;
  switch (group) {
    case CommGroup::tp: return p.tp;
    case CommGroup::cp: return p.cp;
    case CommGroup::ep: return p.ep;
    case CommGroup::etp: return p.expert_tp();
    case CommGroup::edp: return p.expert_dp();
    case CommGroup::dpr: return p.dp_replicate;
    case CommGroup::dp: return p.dp_shard_group();
    case CommGroup::pp:
    case CommGroup::embedding: break;
  }
  return 1;
}

ShardOp make_collective(const ShardContext& context, Collective collective, CommGroup group, double message_bytes,
                        OpPhase phase, OpScope scope) {
  ShardOp c;
  c.name = std::string("collective::") + to_string(collective);
  c.kind = OpKind::collective;
  c.phase = phase;
  c.pass = scope == OpScope::step ? OpPass::step : phase == OpPhase::fwd ? OpPass::forward : OpPass::backward;
  c.scope = scope;
  c.stream = stream_of(group);
  c.dtype = high_precision_dtype(context.options.training);
  c.collective = collective;
  c.group = group;
  c.group_size = group_size(context, group);
  c.message_bytes = message_bytes;
  c.bytes = message_bytes;
  return c;
}

ShardSection shard_trace(const ModelConfig& model, const TraceSection& trace, const ShardOptions& given,
                         ShardReuse* reuse) {
  ShardOptions options = given;
  normalize_sharding(options.training);
  // As Megatron-LM (arguments.py): sequence parallelism is turned off without tensor parallelism.
  if (options.parallelism.tp == 1) options.parallelism.sp = false;
  // As Megatron-Core (TransformerConfig): a negative capacity factor is dropless routing.
  if (options.training.moe_expert_capacity_factor < 0.0) options.training.moe_expert_capacity_factor.reset();
  int64_t seq = options.training.seq_length.value_or(model.seq_length);
  check_layout(model, options, seq);
  check_softmax_kernels(model, trace, seq);
  check_window(model, trace, seq);

  ShardContext context{model, trace, options, seq, rank_axes(model, trace, options, seq), {}, {}, {}, 1, {}};
  context.sequence_axes = context.full_axes;
  if (context.sequence_parallel())
    context.sequence_axes["s"] = static_cast<double>(seq / (options.parallelism.cp * context.tp()));
  set_expert_axes(context);

  ShardSection shard;
  shard.parallelism = options.parallelism;
  shard.training = options.training;
  shard.training.seq_length = seq;
  shard.training.fp8_recipe = low_precision_recipe(options.training);  // as simulated: the default resolved
  shard.seq_length = seq;
  shard.axes = context.full_axes;
  plan_pipeline(model, options, shard);
  check_sharded_data_parallel(model, options, shard.pipeline_schedule);
  set_global_batch(model, options.training.global_batch, shard);
  count_parameters(context, shard);
  if (reuse && &reuse->trace() == &trace)
    reuse->instantiate(context, shard);
  else
    instantiate_trace(context, shard);
  assign_pipeline_stages(shard);
  apply_expert_parallel(context, shard);
  overlap_shared_experts(context, shard);
  apply_context_parallel(context, shard);
  apply_recompute(context, shard);
  add_step_ops(context, shard);
  apply_low_precision(context, shard);
  apply_tp_comm_overlap(context, shard);
  apply_activation_offloading(context, shard);
  apply_sharded_data_parallel(context, shard);
  apply_pipeline_parallel(context, shard);
  mark_host_syncs(context, shard);
  mark_cuda_graphs(context, shard);
  return shard;
}

void set_global_batch(const ModelConfig& model, int64_t global_batch, ShardSection& shard) {
  const ParallelismConfig& p = shard.parallelism;
  if (global_batch < 1) throw UsageError("global_batch=" + str(global_batch) + " must be at least 1");
  require_divides(shard.training.micro_batch * p.dp, "micro_batch*dp", global_batch, "global_batch");
  const int64_t microbatches = global_batch / (shard.training.micro_batch * p.dp);
  if (microbatches > kMaxChunkPasses / p.vpp.value_or(1))
    throw UsageError("global_batch=" + str(global_batch) + " makes " + str(microbatches) +
                     " micro-batches per step; syssim takes at most " + str(kMaxChunkPasses / p.vpp.value_or(1)) +
                     " (2^20 / vpp)");
  shard.schedule = make_schedule(shard.pipeline_schedule, p.pp, p.vpp.value_or(1), microbatches,
                                 shard.training.overlap_moe_expert_parallel_comm);
  shard.num_microbatches = microbatches;
  shard.training.global_batch = global_batch;
  shard.model_flops_per_step = megatron_model_flops(model, global_batch, shard.seq_length, p.tp);
  shard.model_attention_flops_per_step = megatron_attention_score_flops(model, global_batch, shard.seq_length);
}

void shard_graph(Graph& graph, const ShardOptions& options) {
  graph.shard = shard_trace(need_section(graph.model, "model", "syssim-trace"),
                            need_section(graph.trace, "trace", "syssim-trace"), options);
  // The sections computed from a shard section describe another job now (docs/graph-format.md).
  graph.cost.reset();
  graph.sim.reset();
  graph.mem.reset();
}

}  // namespace syssim
