#include <algorithm>
#include <set>

#include "common/error.hpp"
#include "common/units.hpp"
#include "shard/passes.hpp"
#include "shard/shard.hpp"

namespace syssim {
namespace {

// Roles of the ops that Megatron-LM wraps with tensor-parallel communication.
const std::set<TpRole> kParallelLinearRoles = {TpRole::column, TpRole::row, TpRole::vocab_embedding, TpRole::vocab_output};
// Megatron-LM's vocab-parallel cross entropy all-reduces max, predicted logit and sum of exp.
constexpr int kCrossEntropyAllReduces = 3;

std::string str(int64_t v) { return std::to_string(v); }

class Instantiator {
 public:
  Instantiator(const ShardContext& context, ShardSection& shard)
      : context_(context), trace_(context.trace), shard_(shard), emitter_(shard) {
    collect_backward_gathers();
  }

  void run() {
    for (const auto& op : trace_.ops) instantiate(op);
  }

 private:
  // Ops outside the parallel linears that work on hidden-sized activations (norms,
  // residual adds, embeddings' sums), or on the widths made from them token by token (MLA's
  // latents, the router's scores), hold s/tp of the sequence under SP. The experts' ops run
  // on the rank's experts and the tokens dispatched to them.
  const AxisValues& axes_of(const TraceOp& op) const {
    if (is_expert_role(op.tp_role)) return context_.expert_axes;
    if (op.tp_role == TpRole::expert_dispatch)
      return permutes_on_expert_side(context_.options.training) ? context_.expert_axes : context_.sequence_axes;
    if (op.tp_role != TpRole::none) return context_.full_axes;
    constexpr uint32_t kHiddenWidths = letter_axis('h') | letter_axis('q') | letter_axis('c') | letter_axis('e');
    bool hidden = false;
    for (const auto* refs : {&op.inputs, &op.outputs})
      for (const auto& r : *refs) {
        const uint32_t axes = letter_axes(r.dims);
        if (axes & kTensorParallelAxes) return context_.full_axes;
        hidden = hidden || (axes & kHiddenWidths) != 0;
      }
    return hidden ? context_.sequence_axes : context_.full_axes;
  }

  // A GEMM of fp32 operands runs in fp32 whatever the training's precision (the fp32
  // router's backward: moe_router_dtype).
  static bool fp32_gemm(const TraceOp& op) {
    static const Symbol kFp32("fp32");
    return op.kind == OpKind::gemm && std::all_of(op.inputs.begin(), op.inputs.end(), [](const TensorRef& r) { return r.dtype == kFp32; });
  }

  // A full-sequence activation that every TP rank holds whole: Megatron gathers it under
  // SP before a parallel linear reads it, and reduces it when a parallel linear writes it.
  bool replicated_activation(const TensorRef& ref) const {
    if (trace_.tensors[ref.tensor].role != TensorRole::activation) return false;
    const uint32_t axes = letter_axes(ref.dims);
    return (axes & letter_axis('s')) && !(axes & kTensorParallelAxes);
  }

  double operand_bytes(const TensorRef& ref, const AxisValues& axes, const std::string& where) const {
    return numel_at(ref.dims, axes, where) * dtype_size(ref.dtype);
  }

  // The backward of a parallel linear gathers, once, every replicated activation that
  // any of its backward ops reads (Megatron launches these all-gathers first).
  void collect_backward_gathers() {
    for (const auto& op : trace_.ops)
      if (op.phase == OpPhase::bwd && op.fwd_op && kParallelLinearRoles.count(op.tp_role))
        for (const auto& r : op.inputs)
          if (replicated_activation(r)) backward_gather_sources_[*op.fwd_op].insert(r.tensor);
  }

  ShardOp collective(Collective kind, double message_bytes, const TraceOp& origin, OpPass pass) {
    ShardOp c = make_collective(context_, kind, CommGroup::tp, message_bytes, origin.phase, OpScope::microbatch);
    c.layer = origin.layer;
    c.module = origin.module;
    c.pass = pass;
    return c;
  }

  // All-gathers the s/tp pieces of `buffer` into a new full-sequence buffer.
  int64_t gather(int64_t buffer, const TraceOp& origin, const std::vector<int64_t>& launch_after) {
    double full = shard_.buffers[buffer].bytes * context_.tp();
    int64_t gathered = emitter_.add_buffer(full, TensorRole::comm);
    ShardOp c = collective(Collective::all_gather, full, origin, origin.phase == OpPhase::fwd ? OpPass::forward : OpPass::backward);
    c.reads = {buffer};
    c.writes = {gathered};
    emitter_.emit(c, launch_after);
    return gathered;
  }

  // Reduces a partial-sum output over TP: reduce-scatter to s/tp under SP, else all-reduce in place.
  void reduce(int64_t buffer, const TraceOp& origin, OpPass pass) {
    double full = shard_.buffers[buffer].bytes;
    bool scatter = context_.sequence_parallel();
    ShardOp c = collective(scatter ? Collective::reduce_scatter : Collective::all_reduce, full, origin, pass);
    c.reads = {buffer};
    if (scatter) {
      int64_t scattered = emitter_.add_buffer(full / context_.tp(), TensorRole::comm);
      c.writes = {scattered};
      renamed_[buffer] = scattered;
    } else {
      c.writes = {buffer};
    }
    emitter_.emit(c);
  }

  // More tp ranks than query groups: Megatron-Core all-gathers linear_qkv's output over tp along
  // its last dim and each rank slices out its group's heads, one KV head held by tp/g ranks; the
  // backward reduce-scatters the gradient (megatron/core/transformer/attention.py,
  // get_query_key_value_tensors: all_gather_last_dim_from_tensor_parallel_region).
  bool shares_kv_heads() const { return context_.tp() > context_.model.num_query_groups; }

  // A column-parallel projection whose outputs hold the rank's query groups (q, k, v).
  static bool splits_query_groups(const TraceOp& op) {
    return op.tp_role == TpRole::column && std::any_of(op.outputs.begin(), op.outputs.end(), [](const TensorRef& r) {
             return (letter_axes(r.dims) & letter_axis('g')) != 0;
           });
  }

  // One collective over the `split` buffers (each the rank's 1/tp share of the whole) that
  // later ops read in its place: an all-gather to the whole or a reduce-scatter from it.
  void exchange_query_groups(Collective kind, const std::vector<int64_t>& split, const TraceOp& origin, OpPass pass) {
    ShardOp c = collective(kind, 0, origin, pass);
    for (int64_t buffer : split) {
      const double share = shard_.buffers[buffer].bytes;
      c.message_bytes += share * context_.tp();
      c.reads.push_back(current_name(buffer));
      const int64_t result = emitter_.add_buffer(kind == Collective::all_gather ? share * context_.tp() : share, TensorRole::comm);
      c.writes.push_back(result);
      renamed_[buffer] = result;
    }
    c.bytes = c.message_bytes;
    emitter_.emit(c);
  }

  // After the projection's forward: the whole q, k and v, of which the rank takes its heads.
  void gather_query_groups(const TraceOp& op, OpPass pass) {
    if (!splits_query_groups(op)) return;
    std::vector<int64_t> outputs;
    for (const auto& r : op.outputs) outputs.push_back(r.tensor);
    exchange_query_groups(Collective::all_gather, outputs, op, pass);
  }

  // Before the projection's first backward op: the gradients of the whole q, k and v scattered
  // back to the rank's share, which that op (`s`) and the projection's others read.
  void scatter_query_group_grads(const TraceOp& op, ShardOp& s) {
    if (!splits_query_groups(trace_.ops[*op.fwd_op]) || !scattered_query_grads_.insert(*op.fwd_op).second) return;
    std::vector<int64_t> grads;
    for (const auto& r : op.inputs)
      if (trace_.tensors[r.tensor].role == TensorRole::activation && (letter_axes(r.dims) & letter_axis('g')))
        grads.push_back(r.tensor);
    exchange_query_groups(Collective::reduce_scatter, grads, op, s.pass);
    for (size_t i = 0; i < op.inputs.size(); ++i) s.reads[i] = current_name(op.inputs[i].tensor);
  }

  int64_t current_name(int64_t buffer) const {
    auto it = renamed_.find(buffer);
    return it == renamed_.end() ? buffer : it->second;
  }

  // Forward ops, backward ops, and backward ops that only produce weight gradients (the
  // "W" pass that zero-bubble schedules defer).
  OpPass pass_of(const TraceOp& op) const {
    if (op.phase == OpPhase::fwd) return OpPass::forward;
    for (const auto& r : op.outputs)
      if (trace_.tensors[r.tensor].role != TensorRole::grad) return OpPass::backward;
    return op.outputs.empty() ? OpPass::backward : OpPass::weight;
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
    s.pass = pass_of(op);
    s.layer = op.layer;
    s.module = op.module;
    s.scope = OpScope::microbatch;
    s.stream = Stream::compute;
    s.dtype = fp32_gemm(op) ? "fp32" : context_.options.training.dtype;
    s.flops = op.flops.evaluate(axes, where + "/flops");
    s.bytes = op.bytes.evaluate(axes, where + "/bytes");
    s.shape = kernel_shape(op, axes, s.flops, where);
    share_expert_tokens(context_, s);
    for (const auto& r : op.inputs) s.reads.push_back(current_name(r.tensor));
    for (const auto& r : op.outputs) s.writes.push_back(r.tensor);

    // A backward op outside the linear's autograd node (the sum of a gradient's parts, which
    // takes the role of the node the engine ran last) is no part of the linear.
    bool parallel_linear = context_.tp() > 1 && kParallelLinearRoles.count(op.tp_role) > 0 &&
                           (op.phase == OpPhase::fwd || op.fwd_op.has_value());
    std::vector<int64_t> extra_deps;
    if (parallel_linear && shares_kv_heads() && op.phase == OpPhase::bwd) scatter_query_group_grads(op, s);
    if (parallel_linear && context_.sequence_parallel()) {
      if (op.phase == OpPhase::fwd) {
        for (size_t i = 0; i < op.inputs.size(); ++i)
          if (replicated_activation(op.inputs[i])) s.reads[i] = gather(s.reads[i], op, {});
      } else if (op.fwd_op) {
        auto& gathered = backward_gathered_[*op.fwd_op];
        if (gathered.empty())
          for (int64_t source : backward_gather_sources_[*op.fwd_op])
            gathered[source] = gather(source, op, emitter_.writers_of(s.reads));
        for (auto& b : s.reads)
          if (gathered.count(b)) b = gathered[b];
      }
    }
    if (context_.tp() > 1 && op.tp_role == TpRole::vocab_loss && op.phase == OpPhase::fwd) {
      double tokens = context_.full_axes.at("s") * context_.full_axes.at("b");
      std::vector<int64_t> previous = emitter_.writers_of(s.reads);
      for (int i = 0; i < kCrossEntropyAllReduces; ++i)
        previous = {emitter_.emit(collective(Collective::all_reduce, tokens * kFp32Bytes, op, OpPass::forward), previous)};
      extra_deps = previous;
    }
    const OpPass pass = s.pass;
    emitter_.emit(s, extra_deps);
    if (parallel_linear && shares_kv_heads() && op.phase == OpPhase::fwd) gather_query_groups(op, pass);
    if (parallel_linear)
      for (const auto& r : op.outputs)
        if (replicated_activation(r)) reduce(r.tensor, op, pass);
  }

  const ShardContext& context_;
  const TraceSection& trace_;
  ShardSection& shard_;
  OpEmitter emitter_;
  // buffer -> what later ops read in its place: a partial sum's reduce-scattered piece, a
  // projection's gathered heads, their gradients' scattered share
  std::map<int64_t, int64_t> renamed_;
  std::map<int64_t, std::set<int64_t>> backward_gather_sources_;     // fwd op -> buffers
  std::map<int64_t, std::map<int64_t, int64_t>> backward_gathered_;  // fwd op -> buffer -> gathered
  std::set<int64_t> scattered_query_grads_;  // fwd ops whose q/k/v gradients are reduce-scattered
};

}  // namespace

void instantiate_trace(const ShardContext& context, ShardSection& shard) {
  // Instantiation adds some ops (tensor-parallel collectives): one allocation for most.
  shard.ops.reserve(context.trace.ops.size() + context.trace.ops.size() / 4);
  shard.buffers.reserve(context.trace.tensors.size());
  for (const auto& t : context.trace.tensors) shard.buffers.push_back(ShardBuffer{t.id, -1, t.role, t.param, std::nullopt});
  Instantiator(context, shard).run();
  for (auto& b : shard.buffers)
    if (b.bytes < 0) b.bytes = 0;  // a buffer no op references takes no memory
}

void ShardReuse::instantiate(const ShardContext& context, ShardSection& shard) {
  Key key{context.full_axes,
          context.sequence_axes,
          context.expert_axes,
          context.tp(),
          context.sequence_parallel(),
          context.options.training.dtype,
          context.options.training.moe_token_dispatcher_type,
          context.expert_load.busiest_expert,
          context.expert_load.other_experts};
  std::shared_ptr<const Instantiated> kept;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = kept_.find(key);
    if (it != kept_.end()) kept = it->second;
  }
  if (!kept) {
    ShardSection made;
    instantiate_trace(context, made);
    kept = std::make_shared<const Instantiated>(std::move(made.ops), std::move(made.buffers));
    std::lock_guard<std::mutex> lock(mutex_);
    if (kept_.size() < kMaxInstantiations) kept_.emplace(std::move(key), kept);
  }
  shard.ops = kept->first;
  shard.buffers = kept->second;
}

}  // namespace syssim
