#include "shard/shard.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "common/error.hpp"

namespace syssim {
namespace {

// Axes that tensor parallelism splits: query groups (and so heads), ffn, vocabulary.
const std::vector<std::string> kTensorParallelAxes = {"g", "f", "v"};
// Roles of the ops that Megatron-LM wraps with tensor-parallel communication.
const std::set<std::string> kParallelLinearRoles = {"column", "row", "vocab_embedding", "vocab_output"};
// Megatron-LM's vocab-parallel cross entropy all-reduces max, predicted logit and sum of exp.
constexpr int kCrossEntropyAllReduces = 3;
// Adam on fp32 master weights: read grad (4), read+write master weight, m and v (3 x 8),
// write the 16-bit model weight (2) = 30 bytes per parameter.
constexpr double kAdamBytesPerParam = 30;
// Adam's arithmetic per parameter: moment updates (7), bias correction, sqrt, division and
// weight decay (5).
constexpr double kAdamFlopsPerParam = 12;
constexpr double kFp32Bytes = 4;

double dtype_size(const std::string& dtype) {
  if (dtype == "bf16" || dtype == "fp16") return 2;
  if (dtype == "fp32") return 4;
  if (dtype == "i64") return 8;
  if (dtype == "bool" || dtype == "fp8") return 1;
  throw DataError("graph: unknown dtype '" + dtype + "'");
}

bool has_tensor_parallel_axis(const Dims& dims) {
  for (const auto& d : dims)
    for (const auto& axis : kTensorParallelAxes)
      if (d.contains_axis(axis)) return true;
  return false;
}

bool has_axis(const Dims& dims, const std::string& axis) {
  return std::any_of(dims.begin(), dims.end(), [&](const Poly& d) { return d.contains_axis(axis); });
}

std::string str(int64_t v) { return std::to_string(v); }

void require_divides(int64_t divisor, const std::string& divisor_name, int64_t value, const std::string& value_name) {
  if (value % divisor != 0)
    throw DataError(divisor_name + "=" + str(divisor) + " does not divide " + value_name + "=" + str(value));
}

void check_layout(const ModelConfig& model, const ShardOptions& options, int64_t seq) {
  const auto& p = options.parallelism;
  const auto& t = options.training;
  for (auto [value, name] : {std::pair{p.tp, "tp"}, {p.dp, "dp"}, {p.cp, "cp"}, {p.pp, "pp"},
                             {t.micro_batch, "micro_batch"}, {t.global_batch, "global_batch"}, {seq, "seq_length"}})
    if (value < 1) throw UsageError(std::string(name) + "=" + str(value) + " must be at least 1");
  if (p.pp > 1) throw UsageError("pp=" + str(p.pp) + ": pipeline parallelism is not simulated yet (use pp=1)");
  if (p.vpp) throw UsageError("vpp=" + str(*p.vpp) + ": virtual pipeline stages need pipeline parallelism, which is not simulated yet");
  if (p.cp > 1) throw UsageError("cp=" + str(p.cp) + ": context parallelism is not simulated yet (use cp=1)");
  if (t.recompute != "none")
    throw UsageError("recompute=" + t.recompute + ": activation recomputation is not simulated yet (use none)");
  if (t.dtype == "fp8")
    throw UsageError("dtype=fp8: fp8 recipes (casts, scaling, amax) are not simulated yet (use bf16 or fp16)");
  if (t.dtype != "bf16" && t.dtype != "fp16")
    throw UsageError("dtype=" + t.dtype + ": expected bf16, fp16 or fp8");
  if (options.gpus && *options.gpus != p.world_size())
    throw DataError("tp*cp*pp*dp=" + str(p.world_size()) + " does not match gpus=" + str(*options.gpus));
  require_divides(p.tp, "tp", model.num_attention_heads, "num_attention_heads");
  require_divides(p.tp, "tp", model.num_query_groups, "num_query_groups");
  require_divides(p.tp, "tp", model.ffn_hidden_size, "ffn_hidden_size");
  if (p.sp && p.tp > 1) require_divides(p.tp, "tp", seq, "seq_length (sequence parallelism)");
  if (!model.rope && seq > model.max_position_embeddings)
    throw DataError("seq_length=" + str(seq) + " exceeds max_position_embeddings=" + str(model.max_position_embeddings));
  require_divides(t.micro_batch * p.dp, "micro_batch*dp", t.global_batch, "global_batch");
}

class Sharder {
 public:
  Sharder(const ModelConfig& model, const TraceSection& trace, const ShardOptions& options, int64_t seq)
      : model_(model), trace_(trace), options_(options), tp_(options.parallelism.tp) {
    full_axes_ = trace.axes;
    full_axes_["b"] = static_cast<double>(options.training.micro_batch);
    full_axes_["s"] = static_cast<double>(seq);
    full_axes_["g"] = static_cast<double>(model.num_query_groups / tp_);
    full_axes_["f"] = static_cast<double>(model.ffn_hidden_size / tp_);
    full_axes_["v"] = static_cast<double>(padded_vocab_size(model, tp_) / tp_);
    sequence_axes_ = full_axes_;
    if (sequence_parallel()) sequence_axes_["s"] = static_cast<double>(seq / tp_);
    for (const auto& t : trace.tensors)
      shard_.buffers.push_back(ShardBuffer{t.id, -1, t.role, t.param, std::nullopt});
    last_writer_.assign(trace.tensors.size(), -1);
    collect_backward_gathers();
  }

  ShardSection run(int64_t seq) {
    const auto& p = options_.parallelism;
    shard_.parallelism = p;
    shard_.training = options_.training;
    shard_.seq_length = seq;
    shard_.num_microbatches = options_.training.global_batch / (options_.training.micro_batch * p.dp);
    shard_.axes = full_axes_;
    shard_.model_flops_per_step = megatron_model_flops(model_, options_.training.global_batch, seq, tp_);
    for (const auto& op : trace_.ops) instantiate(op);
    count_parameters();
    add_step_ops();
    for (auto& b : shard_.buffers)
      if (b.bytes < 0) b.bytes = 0;  // a buffer no op references takes no memory
    return shard_;
  }

 private:
  bool sequence_parallel() const { return options_.parallelism.sp && tp_ > 1; }

  // Ops outside the parallel linears that work on hidden-sized activations (norms,
  // residual adds, embeddings' sums) hold s/tp of the sequence under SP.
  const AxisValues& axes_of(const TraceOp& op) const {
    if (op.tp_role != "none") return full_axes_;
    bool hidden = false;
    for (const auto* refs : {&op.inputs, &op.outputs})
      for (const auto& r : *refs) {
        if (has_tensor_parallel_axis(r.dims)) return full_axes_;
        hidden = hidden || has_axis(r.dims, "h");
      }
    return hidden ? sequence_axes_ : full_axes_;
  }

  // A full-sequence activation that every TP rank holds whole: Megatron gathers it under
  // SP before a parallel linear reads it, and reduces it when a parallel linear writes it.
  bool replicated_activation(const TensorRef& ref) const {
    return trace_.tensors[ref.tensor].role == "activation" && has_axis(ref.dims, "s") &&
           !has_tensor_parallel_axis(ref.dims);
  }

  double operand_bytes(const TensorRef& ref, const AxisValues& axes, const std::string& where) const {
    return numel(ref.dims).evaluate(axes, where) * dtype_size(ref.dtype);
  }

  // The backward of a parallel linear gathers, once, every replicated activation that
  // any of its backward ops reads (Megatron launches these all-gathers first).
  void collect_backward_gathers() {
    for (const auto& op : trace_.ops)
      if (op.phase == "bwd" && op.fwd_op && kParallelLinearRoles.count(op.tp_role))
        for (const auto& r : op.inputs)
          if (replicated_activation(r)) backward_gather_sources_[*op.fwd_op].insert(r.tensor);
  }

  int64_t add_buffer(double bytes, const std::string& role) {
    int64_t id = static_cast<int64_t>(shard_.buffers.size());
    shard_.buffers.push_back(ShardBuffer{id, bytes, role, "", std::nullopt});
    last_writer_.push_back(-1);
    return id;
  }

  // Appends an op: its dependencies are the last writers of what it reads plus `extra`.
  int64_t emit(ShardOp op, const std::vector<int64_t>& extra = {}) {
    op.id = static_cast<int64_t>(shard_.ops.size());
    std::set<int64_t> deps(extra.begin(), extra.end());
    for (int64_t b : op.reads)
      if (last_writer_[b] >= 0) deps.insert(last_writer_[b]);
    op.deps.assign(deps.begin(), deps.end());
    for (int64_t b : op.writes) {
      if (!shard_.buffers[b].producer && shard_.buffers[b].role != "param" && shard_.buffers[b].role != "grad")
        shard_.buffers[b].producer = op.id;
      last_writer_[b] = op.id;
    }
    shard_.ops.push_back(op);
    return op.id;
  }

  ShardOp collective(const std::string& kind, const std::string& group, double message_bytes, const TraceOp* origin,
                     const std::string& scope, const std::string& phase) {
    ShardOp c;
    c.name = "collective::" + kind;
    c.kind = "collective";
    c.phase = phase;
    c.scope = scope;
    c.stream = group;
    c.dtype = "";
    c.collective = kind;
    c.group = group;
    c.group_size = group == "tp" ? tp_ : options_.parallelism.dp;
    c.message_bytes = message_bytes;
    c.bytes = message_bytes;
    if (origin) {
      c.layer = origin->layer;
      c.module = origin->module;
      c.dtype = options_.training.dtype;
    }
    return c;
  }

  // All-gathers the s/tp pieces of `buffer` into a new full-sequence buffer.
  int64_t gather(int64_t buffer, const TraceOp& origin, const std::vector<int64_t>& launch_after) {
    double full = shard_.buffers[buffer].bytes * tp_;
    int64_t gathered = add_buffer(full, "comm");
    ShardOp c = collective("all_gather", "tp", full, &origin, "microbatch", origin.phase);
    c.reads = {buffer};
    c.writes = {gathered};
    emit(c, launch_after);
    return gathered;
  }

  // Reduces a partial-sum output over TP: reduce-scatter to s/tp under SP, else all-reduce in place.
  void reduce(int64_t buffer, const TraceOp& origin) {
    double full = shard_.buffers[buffer].bytes;
    ShardOp c = collective(sequence_parallel() ? "reduce_scatter" : "all_reduce", "tp", full, &origin, "microbatch",
                           origin.phase);
    c.reads = {buffer};
    if (sequence_parallel()) {
      int64_t scattered = add_buffer(full / tp_, "comm");
      c.writes = {scattered};
      renamed_[buffer] = scattered;
    } else {
      c.writes = {buffer};
    }
    emit(c);
  }

  int64_t current_name(int64_t buffer) const {
    auto it = renamed_.find(buffer);
    return it == renamed_.end() ? buffer : it->second;
  }

  std::vector<int64_t> writers_of(const std::vector<int64_t>& buffers) const {
    std::vector<int64_t> writers;
    for (int64_t b : buffers)
      if (last_writer_[b] >= 0) writers.push_back(last_writer_[b]);
    return writers;
  }

  void instantiate(const TraceOp& op) {
    const std::string where = "/trace/ops/" + str(op.id);
    const AxisValues& axes = axes_of(op);
    for (const auto* refs : {&op.inputs, &op.outputs})
      for (const auto& r : *refs)
        if (shard_.buffers[r.tensor].bytes < 0) shard_.buffers[r.tensor].bytes = operand_bytes(r, axes, where);

    ShardOp s;
    s.trace_op = op.id;
    s.name = op.name;
    s.kind = op.kind;
    s.phase = op.phase;
    s.layer = op.layer;
    s.module = op.module;
    s.scope = "microbatch";
    s.stream = "compute";
    s.dtype = options_.training.dtype;
    s.flops = op.flops.evaluate(axes, where + "/flops");
    s.bytes = op.bytes.evaluate(axes, where + "/bytes");
    for (const auto& r : op.inputs) s.reads.push_back(current_name(r.tensor));
    for (const auto& r : op.outputs) s.writes.push_back(r.tensor);

    bool parallel_linear = tp_ > 1 && kParallelLinearRoles.count(op.tp_role) > 0;
    std::vector<int64_t> extra_deps;
    if (parallel_linear && sequence_parallel()) {
      if (op.phase == "fwd") {
        for (size_t i = 0; i < op.inputs.size(); ++i)
          if (replicated_activation(op.inputs[i])) s.reads[i] = gather(s.reads[i], op, {});
      } else if (op.fwd_op) {
        auto& gathered = backward_gathered_[*op.fwd_op];
        if (gathered.empty())
          for (int64_t source : backward_gather_sources_[*op.fwd_op])
            gathered[source] = gather(source, op, writers_of(s.reads));
        for (auto& b : s.reads)
          if (gathered.count(b)) b = gathered[b];
      }
    }
    if (tp_ > 1 && op.tp_role == "vocab_loss" && op.phase == "fwd") {
      double tokens = full_axes_.at("s") * full_axes_.at("b");
      std::vector<int64_t> previous = writers_of(s.reads);
      for (int i = 0; i < kCrossEntropyAllReduces; ++i) {
        ShardOp c = collective("all_reduce", "tp", tokens * kFp32Bytes, &op, "microbatch", "fwd");
        previous = {emit(c, previous)};
      }
      extra_deps = previous;
    }
    emit(s, extra_deps);
    if (parallel_linear)
      for (const auto& r : op.outputs)
        if (replicated_activation(r)) reduce(r.tensor, op);
  }

  void count_parameters() {
    for (const auto& t : trace_.tensors) {
      if (t.role != "param") continue;
      std::string where = "/trace/tensors/" + str(t.id);
      shard_.params_total += numel(t.dims).evaluate(trace_.axes, where);
      shard_.params_local += numel(t.dims).evaluate(full_axes_, where);
    }
  }

  // Once per step, after the last micro-batch: TP all-reduce of the SP-replicated (norm)
  // weight gradients, the DP gradient reduction, Adam, and the distributed optimizer's
  // parameter all-gather.
  void add_step_ops() {
    std::vector<int64_t> grads;
    double replicated_grad_bytes = 0;
    std::vector<int64_t> replicated_grads;
    for (const auto& t : trace_.tensors) {
      if (t.role != "grad") continue;
      grads.push_back(t.id);
      if (!has_tensor_parallel_axis(t.dims)) {
        replicated_grads.push_back(t.id);
        replicated_grad_bytes += numel(t.dims).evaluate(full_axes_, "/trace/tensors/" + str(t.id)) * kFp32Bytes;
      }
    }
    const auto& p = options_.parallelism;
    bool distributed = options_.training.distributed_optimizer && p.dp > 1;
    if (sequence_parallel() && !replicated_grads.empty()) {
      ShardOp c = collective("all_reduce", "tp", replicated_grad_bytes, nullptr, "step", "optimizer");
      c.module = "sequence_parallel_norm_grads";
      c.reads = c.writes = replicated_grads;
      emit(c);
    }
    if (p.dp > 1) {
      ShardOp c = collective(distributed ? "reduce_scatter" : "all_reduce", "dp", shard_.params_local * kFp32Bytes,
                             nullptr, "step", "optimizer");
      c.module = "data_parallel_grads";
      c.reads = c.writes = grads;
      emit(c);
    }
    double shard_params = distributed ? shard_.params_local / p.dp : shard_.params_local;
    ShardOp adam;
    adam.name = "optimizer::adam";
    adam.kind = "optimizer";
    adam.phase = "optimizer";
    adam.module = "optimizer";
    adam.scope = "step";
    adam.stream = "compute";
    adam.dtype = "fp32";
    adam.flops = shard_params * kAdamFlopsPerParam;
    adam.bytes = shard_params * kAdamBytesPerParam;
    adam.reads = grads;
    int64_t adam_id = emit(adam);
    if (distributed) {
      ShardOp c = collective("all_gather", "dp", shard_.params_local * dtype_size(options_.training.dtype), nullptr,
                             "step", "optimizer");
      c.module = "distributed_optimizer_params";
      emit(c, {adam_id});
    }
  }

  const ModelConfig& model_;
  const TraceSection& trace_;
  const ShardOptions& options_;
  int64_t tp_;
  AxisValues full_axes_;
  AxisValues sequence_axes_;
  ShardSection shard_;
  std::vector<int64_t> last_writer_;           // per buffer: the last op that wrote it
  std::map<int64_t, int64_t> renamed_;         // partial-sum buffer -> its reduce-scattered piece
  std::map<int64_t, std::set<int64_t>> backward_gather_sources_;       // fwd op -> buffers
  std::map<int64_t, std::map<int64_t, int64_t>> backward_gathered_;    // fwd op -> buffer -> gathered
};

}  // namespace

int64_t padded_vocab_size(const ModelConfig& model, int64_t tp) {
  int64_t multiple = model.make_vocab_size_divisible_by * tp;
  return (model.vocab_size + multiple - 1) / multiple * multiple;
}

double megatron_model_flops(const ModelConfig& m, int64_t global_batch, int64_t seq, int64_t tp) {
  // Megatron-LM training.py num_floating_point_operations: 12 = 3 passes (fwd, dgrad, wgrad)
  // x 2 GEMMs per block x 2 FLOPs per multiply-add; attention scores counted without the
  // causal mask; the logit GEMM over the padded vocabulary.
  double h = static_cast<double>(m.hidden_size);
  double query_projection_ratio = static_cast<double>(m.kv_channels * m.num_attention_heads) / h;
  double gated = m.swiglu ? 1.5 : 1.0;
  double attention = (1.0 + static_cast<double>(m.num_query_groups) / m.num_attention_heads +
                      static_cast<double>(seq) / h) * query_projection_ratio;
  double mlp = static_cast<double>(m.ffn_hidden_size) / h * gated;
  double logit = static_cast<double>(padded_vocab_size(m, tp)) / (2.0 * m.num_layers * h);
  return 12.0 * global_batch * seq * m.num_layers * h * h * (attention + mlp + logit);
}

void shard_graph(Graph& graph, const ShardOptions& options) {
  const ModelConfig& model = need_section(graph.model, "model", "syssim-trace");
  const TraceSection& trace = need_section(graph.trace, "trace", "syssim-trace");
  int64_t seq = options.training.seq_length.value_or(model.seq_length);
  check_layout(model, options, seq);
  graph.shard = Sharder(model, trace, options, seq).run(seq);
  graph.shard->training.seq_length = seq;
}

}  // namespace syssim
