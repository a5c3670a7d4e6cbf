// The once-per-step ops of data parallelism and the optimizer, as Megatron-LM issues them:
// the gradient reduction in buckets (DistributedDataParallel), the TP all-reduce of
// sequence-parallel norm gradients, gradient-norm clipping, Adam, and the distributed
// optimizer's parameter all-gather (docs/syssim-shard.md, "Communication overlap").
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>

#include "common/error.hpp"
#include "common/units.hpp"
#include "shard/passes.hpp"

namespace syssim {
namespace {

// Adam's memory traffic per parameter: read the fp32 gradient (4), read and write its state
// (master weights and moments), and write the 16-bit weight (2); remainders and 16-bit state
// also read the 16-bit weight they complete or are (2): 30 bytes with fp32 state.
double adam_bytes_per_param(const TrainingConfig& t) {
  const bool reads_weight = t.store_param_remainders || t.optimizer_state_dtype != OptimizerStateDtype::fp32;
  return kFp32Bytes + 2 * t.optimizer_state_bytes() + 2 + (reads_weight ? 2 : 0);
}
// Adam's arithmetic per parameter: moment updates (7), bias correction, sqrt, division and
// weight decay (5).
constexpr double kAdamFlopsPerParam = 12;
// Megatron-LM DistributedDataParallel's default bucket: max(40000000, 1000000 * dp) parameters.
constexpr int64_t kMinBucketParams = 40000000;
constexpr int64_t kBucketParamsPerDataParallelRank = 1000000;
// Squared L2 norm: a multiply and an add per gradient; clipping: one multiply.
constexpr double kNormFlopsPerParam = 2;
constexpr double kClipFlopsPerParam = 1;

// A weight gradient of this rank and the op that writes it last in a micro-batch's backward.
struct LocalGrad {
  int64_t buffer = 0;
  int64_t weight = 0;  // buffer of its weight
  double params = 0;
  bool tp_replicated = false;  // a weight every TP rank holds whole (norms)
  bool expert = false;         // an expert's: reduced and sharded over the expert-data-parallel group
  int64_t producer = std::numeric_limits<int64_t>::max();  // none: never written
};

// Gradients reduced by one collective, and their weights.
struct Bucket {
  std::vector<int64_t> grads;
  std::vector<int64_t> weights;
  double params = 0;
};

// Megatron-LM's argument checks (arguments.py) and DDP bucketing rules.
void check_step_options(const TrainingConfig& t) {
  if (t.overlap_param_gather && !t.distributed_optimizer)
    throw UsageError("overlap_param_gather needs --distributed-optimizer (as in Megatron-LM)");
  if (t.overlap_param_gather && !t.overlap_grad_reduce)
    throw UsageError("overlap_param_gather needs --overlap-grad-reduce (as in Megatron-LM)");
  if (t.ddp_bucket_size && *t.ddp_bucket_size < 1)
    throw UsageError("ddp_bucket_size=" + std::to_string(*t.ddp_bucket_size) + " must be at least 1");
  if (t.ddp_bucket_size && !t.overlap_grad_reduce)
    throw UsageError("ddp_bucket_size=" + std::to_string(*t.ddp_bucket_size) +
                     " needs --overlap-grad-reduce (without it Megatron-LM reduces all gradients in one bucket)");
  if (t.grad_reduce_in_bf16 && t.dtype == "fp16")
    throw UsageError("grad_reduce_in_bf16 needs bf16 parameters (--dtype bf16, fp8 or fp4), not fp16");
  // The remainders complete bf16 weights to fp32 (Megatron-LM's check: bf16 parameters).
  if (t.store_param_remainders && (t.dtype == "fp16" || t.fp8_param_gather))
    throw UsageError("store_param_remainders needs bf16 weights, not " +
                     std::string(t.fp8_param_gather ? "fp8 parameters (--fp8-param-gather)" : "fp16"));
  if (t.store_param_remainders && t.optimizer_state_dtype != OptimizerStateDtype::fp32)
    throw UsageError("store_param_remainders keeps fp32 master weights; optimizer_state_dtype=" +
                     std::string(to_string(t.optimizer_state_dtype)) + " keeps none");
  if (!(t.allocator_fragmentation >= 0 && t.allocator_fragmentation <= 1)) {
    std::ostringstream text;
    text << t.allocator_fragmentation;
    throw UsageError("allocator_fragmentation=" + text.str() + " must be a share from 0 to 1");
  }
  if (!(t.clip_grad >= 0 && std::isfinite(t.clip_grad))) {
    std::ostringstream text;  // "nan" and "inf" as they were given (JSON would write null)
    text << t.clip_grad;
    throw UsageError("clip_grad=" + text.str() + " must be 0 or more and finite (0 disables clipping)");
  }
}

// The rank's gradients in the order backward finishes them (by last writer; gradients one op
// writes together in reverse tensor order, as Megatron-LM walks parameters in reverse).
std::vector<LocalGrad> grads_in_backward_order(const ShardContext& context, const std::vector<ShardOp>& ops) {
  std::vector<int64_t> last_writer(context.trace.tensors.size(), -1);  // traced buffers only: the grads
  for (const ShardOp& op : ops)
    if (op.scope == OpScope::microbatch)
      for (int64_t b : op.writes)
        if (b < static_cast<int64_t>(last_writer.size())) last_writer[b] = op.id;
  std::map<uintptr_t, int64_t> weight_named;  // by the name's identity
  for (const auto& t : context.trace.tensors)
    if (t.role == TensorRole::param) weight_named[t.param.identity()] = t.id;
  std::vector<LocalGrad> grads;
  for (const auto& t : context.trace.tensors) {
    if (t.role != TensorRole::grad) continue;
    std::string where = "/trace/tensors/" + std::to_string(t.id);
    auto weight = weight_named.find(t.param.identity());
    if (weight == weight_named.end()) throw DataError(where + "/param: no weight named '" + t.param + "'");
    const bool expert = context.is_expert_tensor(t.id);
    LocalGrad grad{t.id, weight->second, numel_at(t.dims, context.tensor_axes(t.id), where),
                   !expert && !has_tensor_parallel_axis(t.dims), expert};
    if (last_writer[t.id] >= 0) grad.producer = last_writer[t.id];
    grads.push_back(grad);
  }
  std::sort(grads.begin(), grads.end(), [](const LocalGrad& a, const LocalGrad& b) {
    return std::tie(a.producer, b.buffer) < std::tie(b.producer, a.buffer);
  });
  return grads;
}

// Megatron-LM's _ParamAndGradBuffer: walking the parameters in backward order, a bucket is
// closed as soon as it holds bucket_size parameters or more; no bucket size: one bucket. The
// experts' parameters are in buffers of their own (expert_parallel_buffers), reduced over the
// expert-data-parallel group: `expert` picks those.
std::vector<Bucket> make_buckets(const std::vector<LocalGrad>& grads, std::optional<int64_t> bucket_size, bool expert) {
  std::vector<Bucket> buckets(1);
  for (const LocalGrad& grad : grads) {
    if (grad.expert != expert) continue;
    if (bucket_size && buckets.back().params >= static_cast<double>(*bucket_size)) buckets.emplace_back();
    buckets.back().grads.push_back(grad.buffer);
    buckets.back().weights.push_back(grad.weight);
    buckets.back().params += grad.params;
  }
  return buckets;
}

// Megatron-LM sets the bucket size to infinity (one bucket) without --overlap-grad-reduce. Its
// default counts the DP ranks without CP (get_data_parallel_world_size(), whose
// with_context_parallel is false), although the reduction spans dp x cp ranks.
std::optional<int64_t> bucket_size(const ShardContext& context) {
  const TrainingConfig& t = context.options.training;
  if (!t.overlap_grad_reduce) return std::nullopt;
  if (t.ddp_bucket_size) return t.ddp_bucket_size;
  return std::max(kMinBucketParams, kBucketParamsPerDataParallelRank * context.options.parallelism.dp);
}

ShardOp step_op(const std::string& name, OpKind kind, const std::string& module) {
  ShardOp op;
  op.name = name;
  op.kind = kind;
  op.phase = OpPhase::optimizer;
  op.pass = OpPass::step;
  op.module = module;
  op.scope = OpScope::step;
  op.stream = Stream::compute;
  op.dtype = "fp32";
  return op;
}

ShardOp step_collective(const ShardContext& context, Collective collective, CommGroup group, double message_bytes, const std::string& module, OpScope scope = OpScope::step) {
  ShardOp c = make_collective(context, collective, group, message_bytes, OpPhase::optimizer, scope);
  c.pass = OpPass::step;
  c.module = module;
  return c;
}

std::string bucket_module(const std::string& what, size_t bucket) { return what + ".bucket_" + std::to_string(bucket); }

// The gradient buckets of one data-parallel group: the dense parameters' over dp x cp ranks
// ("dp"), the experts' over the expert-data-parallel ranks ("edp").
struct BucketGroup {
  CommGroup group;
  int64_t ranks = 1;
  std::string prefix;  // of the buckets' module names
  std::vector<Bucket> buckets;
};

// The distributed optimizer's all-gather of one bucket's updated 16-bit weights.
ShardOp param_gather(const ShardContext& context, const BucketGroup& group, size_t index, OpScope scope) {
  const Bucket& bucket = group.buckets[index];
  ShardOp c = step_collective(context, Collective::all_gather, group.group,
                              bucket.params * dtype_size(context.options.training.dtype),
                              bucket_module(group.prefix + "distributed_optimizer_params", index), scope);
  c.writes = bucket.weights;
  return c;
}

// The last microbatch op of each stream: streams run in order, so when these have finished
// in the last micro-batch, its backward is over.
std::vector<int64_t> end_of_backward(const std::vector<ShardOp>& ops) {
  std::map<Stream, int64_t> last;
  for (const ShardOp& op : ops)
    if (op.scope == OpScope::microbatch) last[op.stream] = op.id;
  std::vector<int64_t> ids;
  for (const auto& [stream, id] : last) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  return ids;
}

// Megatron-LM's clip_grad_norm_fp32: the squared norm of the local fp32 gradients, summed over
// the ranks holding other parts of them (TP, and DP with the distributed optimizer, whose
// ranks hold a shard each), then every gradient scaled by clip_grad / norm.
void add_grad_norm_and_clip(const ShardContext& context, OpRewriter& rewriter, const std::vector<int64_t>& grads,
                            double norm_params, bool distributed) {
  int64_t norm = rewriter.emitter().add_buffer(kFp32Bytes, TensorRole::activation);
  ShardOp squared_norm = step_op("optimizer::grad_norm", OpKind::math, "optimizer.clip_grad");
  squared_norm.flops = norm_params * kNormFlopsPerParam;
  squared_norm.bytes = norm_params * kFp32Bytes + kFp32Bytes;
  squared_norm.reads = grads;
  squared_norm.writes = {norm};
  rewriter.add(squared_norm);
  // The experts' gradients are split over ep x etp ranks too (Megatron-Core's expert model-
  // parallel group), and sharded over the expert-data-parallel ranks.
  const ParallelismConfig& p = context.options.parallelism;
  std::vector<CommGroup> groups;
  if (context.tp() > 1) groups.push_back(CommGroup::tp);
  if (distributed) groups.push_back(CommGroup::dp);
  if (context.model.is_moe() && p.ep > 1) groups.push_back(CommGroup::ep);
  if (context.model.is_moe() && distributed && p.expert_dp() > 1) groups.push_back(CommGroup::edp);
  for (CommGroup group : groups) {
    ShardOp c = step_collective(context, Collective::all_reduce, group, kFp32Bytes, "optimizer.clip_grad");
    c.reads = c.writes = {norm};
    rewriter.add(c);
  }
  ShardOp clip = step_op("optimizer::clip_grad", OpKind::math, "optimizer.clip_grad");
  clip.flops = norm_params * kClipFlopsPerParam;
  clip.bytes = norm_params * 2 * kFp32Bytes + kFp32Bytes;
  clip.reads = grads;
  clip.reads.push_back(norm);
  clip.writes = grads;
  rewriter.add(clip);
}

// The step ops of one rank, in the order Megatron-LM issues them; run() lists the steps.
class StepOps {
 public:
  StepOps(const ShardContext& context, ShardSection& shard)
      : context_(context),
        t_(context.options.training),
        data_parallel_(context.options.parallelism.dp_shard_group()),
        expert_data_parallel_(context.options.parallelism.expert_dp()),
        shard_(shard),
        rewriter_(shard) {}

  void run() {
    make_bucket_groups();
    gather_params_during_next_forward();
    rewriter_.keep_all();
    sum_local_grads();
    reduce_buckets();
    reduce_sequence_parallel_norm_grads();
    set_optimizer_shard();
    copy_grads_to_fp32();
    if (t_.clip_grad > 0)
      add_grad_norm_and_clip(context_, rewriter_, grads_, shard_params_, t_.distributed_optimizer && data_parallel_ > 1);
    step_optimizer();
    gather_params_after_step();
    zero_grad_buffer();
  }

 private:
  void make_bucket_groups() {
    local_grads_ = grads_in_backward_order(context_, rewriter_.old_ops());
    shard_.training.ddp_bucket_size = bucket_size(context_);  // as simulated: none for one bucket
    bucket_groups_ = {{CommGroup::dp, data_parallel_, "", make_buckets(local_grads_, shard_.training.ddp_bucket_size, false)}};
    if (context_.model.is_moe())
      bucket_groups_.push_back({CommGroup::edp, expert_data_parallel_, "expert_",
                                make_buckets(local_grads_, shard_.training.ddp_bucket_size, true)});
  }

  // The distributed optimizer gathers the updated weights after the step; weights sharded by
  // layer (optim_grads_params) are gathered in each micro-batch instead (sharded_data_parallel.cpp).
  bool gathers_after_step() const { return t_.distributed_optimizer && !t_.shards_weights(); }

  // --overlap-param-gather: the next step's forward waits for each bucket's weights; they are
  // gathered in forward order, the reverse of the buckets.
  void gather_params_during_next_forward() {
    if (!gathers_after_step() || !t_.overlap_param_gather) return;
    for (const BucketGroup& group : bucket_groups_)
      if (group.ranks > 1)
        for (size_t i = group.buckets.size(); i-- > 0;) rewriter_.add(param_gather(context_, group, i, OpScope::step_start));
  }

  void sum_local_grads() {
    for (const LocalGrad& grad : local_grads_) {
      grads_.push_back(grad.buffer);
      (grad.expert ? expert_params_ : dense_params_) += grad.params;
      if (grad.tp_replicated) {
        replicated_grads_.push_back(grad.buffer);
        replicated_grad_bytes_ += grad.params * t_.main_grad_bytes();
      }
    }
  }

  // Each bucket is reduced once its gradients are final: with --overlap-grad-reduce as soon as
  // backward has written them (the deps its reads give), otherwise after the whole backward,
  // the dense buckets' then the experts', one after another (Megatron-LM's finish_grad_sync:
  // synchronous collectives). Gradients sharded by layer (optim_grads, optim_grads_params)
  // were reduce-scattered in each micro-batch already.
  void reduce_buckets() {
    std::vector<int64_t> wait_for = t_.overlap_grad_reduce ? std::vector<int64_t>{} : end_of_backward(shard_.ops);
    const Collective reduction = t_.distributed_optimizer ? Collective::reduce_scatter : Collective::all_reduce;
    for (const BucketGroup& group : bucket_groups_) {
      if (group.ranks == 1 || t_.shards_gradients()) continue;
      for (size_t i = 0; i < group.buckets.size(); ++i) {
        if (group.buckets[i].grads.empty()) continue;
        ShardOp c = step_collective(context_, reduction, group.group, group.buckets[i].params * t_.main_grad_bytes(),
                                    bucket_module(group.prefix + "data_parallel_grads", i));
        c.reads = c.writes = group.buckets[i].grads;
        const int64_t id = rewriter_.add(c, wait_for);
        if (!t_.overlap_grad_reduce) wait_for = {id};
      }
    }
  }

  // Megatron-LM's finalize_model_grads: after the DP reduction, the TP all-reduce of the
  // gradients of the SP-replicated weights.
  void reduce_sequence_parallel_norm_grads() {
    if (!context_.sequence_parallel() || replicated_grads_.empty()) return;
    ShardOp c = step_collective(context_, Collective::all_reduce, CommGroup::tp, replicated_grad_bytes_,
                                "sequence_parallel_norm_grads");
    c.reads = c.writes = replicated_grads_;
    rewriter_.add(c);
  }

  // The distributed optimizer's shard of each kind of parameter; without it, all of them.
  void set_optimizer_shard() {
    shard_params_ = shard_.params_local;
    if (t_.distributed_optimizer)
      shard_params_ = context_.model.is_moe() ? dense_params_ / data_parallel_ + expert_params_ / expert_data_parallel_
                                              : shard_.params_local / data_parallel_;
  }

  // The optimizer works on fp32 gradients: bf16 main gradients are first copied to fp32 ones
  // of the rank's shard (Megatron-LM's _copy_model_grads_to_main_grads, main_grad.float()).
  // The copy is priced here; syssim-mem counts its memory, held from the copy to Adam
  // (docs/memory.md, "Model states").
  void copy_grads_to_fp32() {
    if (!t_.grad_reduce_in_bf16) return;
    ShardOp copy = step_op("optimizer::copy_grads_to_fp32", OpKind::memory, "optimizer");
    copy.bytes = shard_params_ * (t_.main_grad_bytes() + kFp32Bytes);
    copy.reads = copy.writes = grads_;
    rewriter_.add(copy);
  }

  void step_optimizer() {
    ShardOp adam = step_op("optimizer::adam", OpKind::optimizer, "optimizer");
    adam.flops = shard_params_ * kAdamFlopsPerParam;
    adam.bytes = shard_params_ * adam_bytes_per_param(t_);
    adam.reads = grads_;
    optimizer_step_ = {rewriter_.add(adam)};
  }

  // Without --overlap-param-gather the gathers follow Adam, in bucket order, the dense buckets'
  // then the experts', one after another (Megatron-LM's start_param_sync(force_sync=True)).
  void gather_params_after_step() {
    if (!gathers_after_step() || t_.overlap_param_gather) return;
    for (const BucketGroup& group : bucket_groups_)
      if (group.ranks > 1)
        for (size_t i = 0; i < group.buckets.size(); ++i)
          if (!group.buckets[i].grads.empty())
            optimizer_step_.push_back(
                rewriter_.add(param_gather(context_, group, i, OpScope::step), {optimizer_step_.back()}));
  }

  // Megatron-LM zeroes the main gradient buffer at the start of each step (zero_grad_buffer):
  // in a run of steps, once this step's optimizer step and synchronous gathers are done.
  void zero_grad_buffer() {
    ShardOp zero = step_op("ddp::zero_grad_buffer", OpKind::memory, "grad_buffer");
    zero.bytes = (t_.shards_gradients() ? shard_params_ : shard_.params_local) * t_.main_grad_bytes();
    zero.writes = grads_;
    rewriter_.add(zero, optimizer_step_);
  }

  const ShardContext& context_;
  const TrainingConfig& t_;
  const int64_t data_parallel_;         // dp x cp, or under hybrid sharding one replica's ranks
  const int64_t expert_data_parallel_;
  ShardSection& shard_;
  OpRewriter rewriter_;
  std::vector<LocalGrad> local_grads_;
  std::vector<BucketGroup> bucket_groups_;
  std::vector<int64_t> grads_, replicated_grads_;
  double replicated_grad_bytes_ = 0, dense_params_ = 0, expert_params_ = 0;
  double shard_params_ = 0;
  std::vector<int64_t> optimizer_step_;  // Adam and the gathers after it
};

}  // namespace

void add_step_ops(const ShardContext& context, ShardSection& shard) {
  check_step_options(context.options.training);
  StepOps(context, shard).run();
}

}  // namespace syssim
