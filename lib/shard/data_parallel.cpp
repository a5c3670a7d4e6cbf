#include "shard/passes.hpp"

namespace syssim {
namespace {

// Adam on fp32 master weights: read the grad (4), read and write master weight, m and v
// (3 x 8), write the 16-bit model weight (2) = 30 bytes per parameter.
constexpr double kAdamBytesPerParam = 30;
// Adam's arithmetic per parameter: moment updates (7), bias correction, sqrt, division and
// weight decay (5).
constexpr double kAdamFlopsPerParam = 12;
constexpr double kFp32Bytes = 4;

ShardOp step_collective(const ShardContext& context, const std::string& collective, const std::string& group,
                        double message_bytes, const std::string& module) {
  ShardOp c = make_collective(context, collective, group, message_bytes, "optimizer", "step");
  c.module = module;
  return c;
}

}  // namespace

void add_step_ops(const ShardContext& context, ShardSection& shard) {
  OpRewriter rewriter(shard);
  for (const ShardOp& op : rewriter.old_ops()) rewriter.keep(op.id);

  std::vector<int64_t> grads, replicated_grads;
  double replicated_grad_bytes = 0;
  for (const auto& t : context.trace.tensors) {
    if (t.role != "grad") continue;
    grads.push_back(t.id);
    if (!has_tensor_parallel_axis(t.dims)) {
      replicated_grads.push_back(t.id);
      replicated_grad_bytes += numel(t.dims).evaluate(context.full_axes, "/trace/tensors/" + std::to_string(t.id)) *
                               kFp32Bytes;
    }
  }
  const auto& p = context.options.parallelism;
  bool distributed = context.options.training.distributed_optimizer && p.dp > 1;
  if (context.sequence_parallel() && !replicated_grads.empty()) {
    ShardOp c = step_collective(context, "all_reduce", "tp", replicated_grad_bytes, "sequence_parallel_norm_grads");
    c.reads = c.writes = replicated_grads;
    rewriter.add(c);
  }
  if (p.dp > 1) {
    ShardOp c = step_collective(context, distributed ? "reduce_scatter" : "all_reduce", "dp",
                                shard.params_local * kFp32Bytes, "data_parallel_grads");
    c.reads = c.writes = grads;
    rewriter.add(c);
  }
  double shard_params = distributed ? shard.params_local / p.dp : shard.params_local;
  ShardOp adam;
  adam.name = "optimizer::adam";
  adam.kind = "optimizer";
  adam.phase = "optimizer";
  adam.pass = "step";
  adam.module = "optimizer";
  adam.scope = "step";
  adam.stream = "compute";
  adam.dtype = "fp32";
  adam.flops = shard_params * kAdamFlopsPerParam;
  adam.bytes = shard_params * kAdamBytesPerParam;
  adam.reads = grads;
  int64_t adam_id = rewriter.add(adam);
  if (distributed)
    rewriter.add(step_collective(context, "all_gather", "dp", shard.params_local * dtype_size(context.options.training.dtype),
                                 "distributed_optimizer_params"),
                 {adam_id});
}

}  // namespace syssim
