// The step ops of syssim-shard (gradient buckets, their overlap with backward, the distributed
// optimizer's all-gathers, gradient-norm clipping) and --tp-comm-overlap, on a small
// hand-built trace: a norm, a column- and a row-parallel linear, forward and backward. The
// expected numbers are worked out by hand from its sizes.
#include <gtest/gtest.h>

#include <limits>

#include <algorithm>
#include <map>

#include "common/error.hpp"
#include "cost/cost.hpp"
#include "shard/shard.hpp"
#include "sim/sim.hpp"
#include "trace_builder.hpp"

namespace syssim {
namespace {

using testing::ref;

// Tensors: 0 x, 1 norm.weight [h], 2 y (norm output), 3 fc1.weight [f,h], 4 z [s,b,f],
// 5 fc2.weight [h,f], 6 out, 7 grad out, 8 grad z, 9 grad fc2.weight, 10 grad y,
// 11 grad fc1.weight, 12 grad x, 13 grad norm.weight.
// Ops: 0 norm, 1 fc1 (column), 2 fc2 (row), 3 fc2 dgrad, 4 fc2 wgrad, 5 fc1 dgrad, 6 fc1 wgrad,
// 7 norm backward. Backward finishes the gradients of fc2, fc1, norm in that order.
Graph small_graph(int64_t hidden = 1024, int64_t ffn = 4096) {
  Graph g;
  g.model = testing::dense_model("small", 1, hidden, 16, 16, ffn, 2048, 50257);
  testing::TraceBuilder t(*g.model, "decoder.layers.0.mlp");
  t.tensor({"s", "b", "h"}, "activation");
  t.tensor({"h"}, "param", "norm.weight");
  t.tensor({"s", "b", "h"}, "activation");
  t.tensor({"f", "h"}, "param", "fc1.weight");
  t.tensor({"s", "b", "f"}, "activation");
  t.tensor({"h", "f"}, "param", "fc2.weight");
  t.tensor({"s", "b", "h"}, "activation");
  t.tensor({"s", "b", "h"}, "activation");
  t.tensor({"s", "b", "f"}, "activation");
  t.tensor({"h", "f"}, "grad", "fc2.weight");
  t.tensor({"s", "b", "h"}, "activation");
  t.tensor({"f", "h"}, "grad", "fc1.weight");
  t.tensor({"s", "b", "h"}, "activation");
  t.tensor({"h"}, "grad", "norm.weight");
  const std::vector<std::string> sbh = {"s", "b", "h"}, sbf = {"s", "b", "f"};
  t.op("syssim::rms_norm", "math", "fwd", "none", {ref(0, sbh), ref(1, {"h"})}, {ref(2, sbh)}, "4*s*b*h", "2*s*b*h");
  t.op("syssim::linear", "gemm", "fwd", "column", {ref(2, sbh), ref(3, {"f", "h"})}, {ref(4, sbf)}, "2*s*b*h*f",
       "2*s*b*h");
  t.op("syssim::linear", "gemm", "fwd", "row", {ref(4, sbf), ref(5, {"h", "f"})}, {ref(6, sbh)}, "2*s*b*h*f",
       "2*s*b*h");
  t.op("syssim::linear_dgrad", "gemm", "bwd", "row", {ref(7, sbh), ref(5, {"h", "f"})}, {ref(8, sbf)}, "2*s*b*h*f",
       "2*s*b*h", 2);
  t.op("syssim::linear_wgrad", "gemm", "bwd", "row", {ref(7, sbh), ref(4, sbf)}, {ref(9, {"h", "f"})}, "2*s*b*h*f",
       "2*s*b*h", 2);
  t.op("syssim::linear_dgrad", "gemm", "bwd", "column", {ref(8, sbf), ref(3, {"f", "h"})}, {ref(10, sbh)}, "2*s*b*h*f",
       "2*s*b*h", 1);
  t.op("syssim::linear_wgrad", "gemm", "bwd", "column", {ref(8, sbf), ref(2, sbh)}, {ref(11, {"f", "h"})}, "2*s*b*h*f",
       "2*s*b*h", 1);
  t.op("syssim::rms_norm_backward", "math", "bwd", "none", {ref(10, sbh), ref(0, sbh), ref(1, {"h"})},
       {ref(12, sbh), ref(13, {"h"})}, "6*s*b*h", "2*s*b*h", 0);
  g.trace = t.trace;
  return g;
}

// Parameters of the default graph: fc1 and fc2 are 1024 x 4096 each, the norm 1024.
constexpr double kLinearParams = 1024.0 * 4096;
constexpr double kNormParams = 1024;
constexpr double kParams = 2 * kLinearParams + kNormParams;

ShardOptions layout(int64_t tp, bool sp, int64_t dp, int64_t global_batch = 0) {
  ShardOptions o;
  o.parallelism.tp = tp;
  o.parallelism.sp = sp;
  o.parallelism.dp = dp;
  o.training.global_batch = global_batch > 0 ? global_batch : dp;
  return o;
}

ShardOptions overlapped(ShardOptions o, std::optional<int64_t> bucket_size = std::nullopt) {
  o.training.overlap_grad_reduce = true;
  o.training.ddp_bucket_size = bucket_size;
  return o;
}

// dp 4 with the distributed optimizer, the gradients in buckets of 4,194,304 parameters: fc2's,
// fc1's and the norm's, one bucket each.
ShardOptions distributed_in_three_buckets() {
  ShardOptions o = overlapped(layout(1, false, 4), 4194304);
  o.training.distributed_optimizer = true;
  return o;
}

ShardSection shard_of(const ShardOptions& options, Graph g = small_graph()) {
  shard_graph(g, options);
  return *g.shard;
}

std::vector<const ShardOp*> ops_of(const ShardSection& s, const std::string& module_prefix) {
  std::vector<const ShardOp*> out;
  for (const auto& op : s.ops)
    if (op.module.starts_with(module_prefix)) out.push_back(&op);
  return out;
}

const ShardOp& op_named(const ShardSection& s, const std::string& name, const std::string& module = "") {
  auto it = std::find_if(s.ops.begin(), s.ops.end(),
                         [&](const ShardOp& op) { return op.name == name && (module.empty() || op.module == module); });
  if (it == s.ops.end()) throw std::runtime_error("no op " + name);
  return *it;
}

// The shard op instantiating traced op `trace_op` (its last chunk if it was split).
const ShardOp& instance_of(const ShardSection& s, int64_t trace_op) {
  auto it = std::find_if(s.ops.rbegin(), s.ops.rend(), [&](const ShardOp& op) { return op.trace_op == trace_op; });
  if (it == s.ops.rend()) throw std::runtime_error("no instance of trace op " + std::to_string(trace_op));
  return *it;
}

bool depends_on(const ShardOp& op, int64_t id) { return std::count(op.deps.begin(), op.deps.end(), id) > 0; }

std::string usage_error_of(const ShardOptions& options) {
  Graph g = small_graph();
  try {
    shard_graph(g, options);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "no UsageError";
}

TEST(DataParallel, BucketsFollowBackwardOrderAndCloseOnceFull) {
  // Backward order: fc2, fc1, norm. With 5e6 parameters per bucket, fc2 (4.19e6) leaves room,
  // fc1 fills it past 5e6 and closes it (Megatron closes a bucket once it holds bucket_size
  // or more); the norm is left for a second bucket.
  ShardSection s = shard_of(overlapped(layout(1, false, 2), 5000000));
  auto buckets = ops_of(s, "data_parallel_grads");
  ASSERT_EQ(buckets.size(), 2u);
  EXPECT_EQ(buckets[0]->module, "data_parallel_grads.bucket_0");
  EXPECT_EQ(buckets[0]->collective, Collective::all_reduce);
  EXPECT_EQ(buckets[0]->group, CommGroup::dp);
  EXPECT_EQ(buckets[0]->scope, OpScope::step);
  EXPECT_DOUBLE_EQ(buckets[0]->message_bytes, 2 * kLinearParams * 4);  // fp32 gradients
  EXPECT_DOUBLE_EQ(buckets[1]->message_bytes, kNormParams * 4);
  EXPECT_EQ(buckets[0]->reads, (std::vector<int64_t>{9, 11}));
  EXPECT_EQ(buckets[1]->reads, (std::vector<int64_t>{13}));
  EXPECT_DOUBLE_EQ(buckets[0]->message_bytes + buckets[1]->message_bytes, s.params_local * 4);
  // A bucket as large as one linear: each linear closes its own bucket.
  EXPECT_EQ(ops_of(shard_of(overlapped(layout(1, false, 2), 4194304)), "data_parallel_grads").size(), 3u);
}

TEST(DataParallel, DefaultBucketSizeIsMegatronsMaxOf40MAnd1MPerRank) {
  // hidden 4096, ffn 8192: each linear holds 33,554,432 parameters. At dp 2 the bucket is 40e6
  // parameters: fc2 + fc1 = 67.1e6 closes the first bucket, the norm goes to a second one. At
  // dp 128 it is 128e6: everything fits one bucket.
  auto buckets_at = [](int64_t dp) {
    return ops_of(shard_of(overlapped(layout(1, false, dp)), small_graph(4096, 8192)), "data_parallel_grads").size();
  };
  EXPECT_EQ(buckets_at(2), 2u);
  EXPECT_EQ(buckets_at(128), 1u);
}

TEST(DataParallel, WithoutOverlapOneBucketWaitsForTheEndOfBackward) {
  // Megatron sets the bucket size to infinity without --overlap-grad-reduce.
  ShardSection s = shard_of(layout(1, false, 2, 4));  // 2 micro-batches
  auto buckets = ops_of(s, "data_parallel_grads");
  ASSERT_EQ(buckets.size(), 1u);
  EXPECT_DOUBLE_EQ(buckets[0]->message_bytes, kParams * 4);
  EXPECT_TRUE(depends_on(*buckets[0], instance_of(s, 7).id));  // the norm backward, the last op
}

TEST(DataParallel, WithOverlapEachBucketWaitsOnlyForItsGradients) {
  ShardSection s = shard_of(overlapped(layout(1, false, 2, 4), 4194304));
  auto buckets = ops_of(s, "data_parallel_grads");
  ASSERT_EQ(buckets.size(), 3u);
  EXPECT_EQ(buckets[0]->deps, (std::vector<int64_t>{instance_of(s, 4).id}));  // fc2 wgrad
  EXPECT_EQ(buckets[1]->deps, (std::vector<int64_t>{instance_of(s, 6).id}));  // fc1 wgrad
  EXPECT_EQ(buckets[2]->deps, (std::vector<int64_t>{instance_of(s, 7).id}));  // norm backward
}

double dp_reduction_us(const Graph& g) {
  double us = 0;
  for (const ShardOp& op : g.shard->ops)
    if (op.module.starts_with("data_parallel_grads")) us += g.cost->ops[op.id].time_us;
  return us;
}

TEST(DataParallel, OverlapShortensTheStepByAtMostTheReductionTime) {
  HardwareConfig h100 = load_hardware_yaml(std::string(SYSSIM_SOURCE_DIR) + "/configs/hardware/h100-sxm-80gb.yaml");
  auto simulated = [&](const ShardOptions& options) {
    Graph g = small_graph();
    shard_graph(g, options);
    cost_graph(g, h100);
    simulate_graph(g);
    return g;
  };
  // Micro-batches of 8 sequences: fc1's backward GEMMs outlast fc2's bucket reduction.
  ShardOptions o = layout(1, false, 8, 128);
  o.training.micro_batch = 8;
  Graph serial = simulated(o);
  Graph overlap = simulated(overlapped(o, 4194304));
  double saved_ms = serial.sim->step_time_ms - overlap.sim->step_time_ms;
  EXPECT_GT(saved_ms, 0);
  EXPECT_LE(saved_ms, dp_reduction_us(serial) * 1e-3);
  EXPECT_LT(overlap.sim->collective_exposed_ms, serial.sim->collective_exposed_ms);
}

TEST(DataParallel, DistributedOptimizerGathersEachBucketAfterAdam) {
  ShardOptions o = distributed_in_three_buckets();
  ShardSection s = shard_of(o);
  auto scatters = ops_of(s, "data_parallel_grads");
  auto gathers = ops_of(s, "distributed_optimizer_params");
  ASSERT_EQ(scatters.size(), 3u);
  ASSERT_EQ(gathers.size(), 3u);
  const ShardOp& adam = op_named(s, "optimizer::adam");
  double gathered = 0;
  for (size_t i = 0; i < gathers.size(); ++i) {
    EXPECT_EQ(scatters[i]->collective, Collective::reduce_scatter);
    EXPECT_EQ(gathers[i]->collective, Collective::all_gather);
    EXPECT_EQ(gathers[i]->module, "distributed_optimizer_params.bucket_" + std::to_string(i));
    EXPECT_EQ(gathers[i]->scope, OpScope::step);
    // Synchronous all-gathers (start_param_sync without --overlap-param-gather): one after another.
    EXPECT_TRUE(depends_on(*gathers[i], i == 0 ? adam.id : gathers[i - 1]->id));
    EXPECT_TRUE(depends_on(s.ops.back(), gathers[i]->id));  // the next step's zeroing waits for them
    gathered += gathers[i]->message_bytes;
  }
  EXPECT_DOUBLE_EQ(gathers[0]->message_bytes, kLinearParams * 2);  // bf16 fc2 weights
  EXPECT_DOUBLE_EQ(gathered, kParams * 2);
  EXPECT_DOUBLE_EQ(adam.bytes, kParams / 4 * 30);  // a quarter of the parameters
}

TEST(DataParallel, OverlapParamGatherRunsTheGathersBeforeTheForwardThatReadsThem) {
  ShardOptions o = distributed_in_three_buckets();
  o.training.overlap_param_gather = true;
  ShardSection s = shard_of(o);
  auto gathers = ops_of(s, "distributed_optimizer_params");
  ASSERT_EQ(gathers.size(), 3u);
  // Issued first, in forward order: the norm's bucket (2), fc1's (1), fc2's (0).
  EXPECT_EQ(gathers[0]->module, "distributed_optimizer_params.bucket_2");
  EXPECT_EQ(gathers[2]->module, "distributed_optimizer_params.bucket_0");
  for (size_t i = 0; i < gathers.size(); ++i) {
    EXPECT_EQ(gathers[i]->id, static_cast<int64_t>(i));
    EXPECT_EQ(gathers[i]->scope, OpScope::step_start);
    EXPECT_EQ(gathers[i]->stream, Stream::dp);
  }
  EXPECT_EQ(gathers[0]->writes, (std::vector<int64_t>{1}));  // norm.weight
  // Each forward op waits for the gather of the weights it reads, and for no other.
  EXPECT_EQ(instance_of(s, 0).deps, (std::vector<int64_t>{gathers[0]->id}));
  EXPECT_EQ(instance_of(s, 1).deps, (std::vector<int64_t>{gathers[1]->id, instance_of(s, 0).id}));
  EXPECT_TRUE(depends_on(instance_of(s, 2), gathers[2]->id));
  EXPECT_FALSE(depends_on(instance_of(s, 2), gathers[1]->id));
}

TEST(DataParallel, GradNormReadsEveryLocalGradientOnceAndClippingRewritesThem) {
  ShardSection s = shard_of(layout(1, false, 2));
  const ShardOp& norm = op_named(s, "optimizer::grad_norm");
  const ShardOp& clip = op_named(s, "optimizer::clip_grad");
  EXPECT_DOUBLE_EQ(norm.bytes, kParams * 4 + 4);  // fp32 gradients read, one fp32 written
  EXPECT_DOUBLE_EQ(norm.flops, kParams * 2);
  EXPECT_DOUBLE_EQ(clip.bytes, kParams * 8 + 4);  // read and written, and the norm read
  EXPECT_DOUBLE_EQ(clip.flops, kParams);
  EXPECT_EQ(norm.scope, OpScope::step);
  EXPECT_EQ(norm.stream, Stream::compute);
  // After the DP reduction, before Adam; tp 1 without the distributed optimizer: no all-reduce.
  EXPECT_GT(norm.id, ops_of(s, "data_parallel_grads").back()->id);
  EXPECT_TRUE(depends_on(op_named(s, "optimizer::adam"), clip.id));
  EXPECT_TRUE(ops_of(s, "optimizer.clip_grad").size() == 2u);
}

TEST(DataParallel, GradNormIsSummedOverTpAndWithTheDistributedOptimizerOverDp) {
  ShardOptions o = layout(2, true, 2);
  o.training.distributed_optimizer = true;
  ShardSection s = shard_of(o);
  auto clip_ops = ops_of(s, "optimizer.clip_grad");
  ASSERT_EQ(clip_ops.size(), 4u);  // norm, all-reduce over tp, over dp, clip
  EXPECT_EQ(clip_ops[1]->group, CommGroup::tp);
  EXPECT_EQ(clip_ops[2]->group, CommGroup::dp);
  for (int i : {1, 2}) EXPECT_DOUBLE_EQ(clip_ops[i]->message_bytes, 4);
  // A rank holds half of the linears (tp 2) and the whole norm, and the optimizer a half of that.
  EXPECT_DOUBLE_EQ(clip_ops[0]->bytes, (kLinearParams + kNormParams) / 2 * 4 + 4);
  // The SP norm gradient is all-reduced over TP after its DP bucket and before the norm.
  const ShardOp& norm_grads = op_named(s, "collective::all_reduce", "sequence_parallel_norm_grads");
  EXPECT_TRUE(depends_on(norm_grads, ops_of(s, "data_parallel_grads")[0]->id));
  EXPECT_TRUE(depends_on(*clip_ops[0], norm_grads.id));
}

TEST(DataParallel, TheGradientBufferIsZeroedOncePerStepAfterTheOptimizer) {
  ShardSection s = shard_of(layout(1, false, 2));
  const ShardOp& zero = s.ops.back();
  EXPECT_EQ(zero.name, "ddp::zero_grad_buffer");
  EXPECT_EQ(zero.scope, OpScope::step);
  EXPECT_DOUBLE_EQ(zero.bytes, kParams * 4);  // the whole fp32 buffer written
  EXPECT_TRUE(depends_on(zero, op_named(s, "optimizer::adam").id));
}

TEST(DataParallel, Bf16MainGradientsHalveTheReductionAndAreCopiedToFp32ForTheOptimizer) {
  ShardOptions o = distributed_in_three_buckets();
  o.training.grad_reduce_in_bf16 = true;
  ShardSection s = shard_of(o);
  auto scatters = ops_of(s, "data_parallel_grads");
  ASSERT_EQ(scatters.size(), 3u);
  EXPECT_DOUBLE_EQ(scatters[0]->message_bytes, kLinearParams * 2);  // fc2's bf16 gradients
  double scattered = 0;
  for (const ShardOp* c : scatters) scattered += c->message_bytes;
  EXPECT_DOUBLE_EQ(scattered, kParams * 2);
  // The rank's quarter is read in bf16 and written in fp32 before the norm and Adam read it;
  // those two, and Adam's 30 bytes per parameter, are as with fp32 gradients.
  const ShardOp& copy = op_named(s, "optimizer::copy_grads_to_fp32");
  EXPECT_DOUBLE_EQ(copy.bytes, kParams / 4 * (2 + 4));
  EXPECT_EQ(copy.scope, OpScope::step);
  EXPECT_GT(copy.id, scatters.back()->id);
  EXPECT_TRUE(depends_on(op_named(s, "optimizer::grad_norm"), copy.id));
  EXPECT_DOUBLE_EQ(op_named(s, "optimizer::adam").bytes, kParams / 4 * 30);
  EXPECT_DOUBLE_EQ(s.ops.back().bytes, kParams * 2);  // the bf16 buffer zeroed
  // With fp32 main gradients there is nothing to copy.
  o.training.grad_reduce_in_bf16 = false;
  ShardSection fp32 = shard_of(o);
  EXPECT_TRUE(std::none_of(fp32.ops.begin(), fp32.ops.end(),
                           [](const ShardOp& op) { return op.name == "optimizer::copy_grads_to_fp32"; }));
}

TEST(DataParallel, AdamMovesTheBytesOfItsState) {
  // Per parameter of the rank's quarter: the fp32 gradient read (4), the state read and written,
  // the bf16 weight written (2). fp32 state 4 + 2 x 12 + 2 = 30; master weights as remainders
  // also read the bf16 weight: 4 + 2 x 10 + 2 + 2 = 28; bf16 moments updating the bf16 weights
  // in place: 4 + 2 x 4 + 2 + 2 = 16.
  ShardOptions o = distributed_in_three_buckets();
  EXPECT_DOUBLE_EQ(op_named(shard_of(o), "optimizer::adam").bytes, kParams / 4 * 30);
  o.training.store_param_remainders = true;
  EXPECT_DOUBLE_EQ(op_named(shard_of(o), "optimizer::adam").bytes, kParams / 4 * 28);
  o.training.store_param_remainders = false;
  o.training.optimizer_state_dtype = OptimizerStateDtype::bf16;
  EXPECT_DOUBLE_EQ(op_named(shard_of(o), "optimizer::adam").bytes, kParams / 4 * 16);
}

TEST(DataParallel, ClipGradZeroDisablesTheNormAndClipping) {
  ShardOptions o = layout(1, false, 2);
  o.training.clip_grad = 0;
  EXPECT_TRUE(ops_of(shard_of(o), "optimizer.clip_grad").empty());
}

TEST(DataParallel, SettingsMegatronRefusesAreUsageErrors) {
  ShardOptions gather = overlapped(layout(1, false, 2));
  gather.training.overlap_param_gather = true;
  EXPECT_EQ(usage_error_of(gather), "overlap_param_gather needs --distributed-optimizer (as in Megatron-LM)");
  gather.training.distributed_optimizer = true;
  gather.training.overlap_grad_reduce = false;
  EXPECT_EQ(usage_error_of(gather), "overlap_param_gather needs --overlap-grad-reduce (as in Megatron-LM)");
  ShardOptions bucket = layout(1, false, 2);
  bucket.training.ddp_bucket_size = 1000;
  EXPECT_EQ(usage_error_of(bucket),
            "ddp_bucket_size=1000 needs --overlap-grad-reduce (without it Megatron-LM reduces all gradients in one "
            "bucket)");
  ShardOptions clip = layout(1, false, 2);
  clip.training.clip_grad = -1;
  EXPECT_EQ(usage_error_of(clip), "clip_grad=-1 must be 0 or more and finite (0 disables clipping)");
  clip.training.clip_grad = std::numeric_limits<double>::quiet_NaN();  // --clip-grad nan
  EXPECT_EQ(usage_error_of(clip), "clip_grad=nan must be 0 or more and finite (0 disables clipping)");
  clip.training.clip_grad = std::numeric_limits<double>::infinity();
  EXPECT_EQ(usage_error_of(clip), "clip_grad=inf must be 0 or more and finite (0 disables clipping)");
  ShardOptions fp16 = layout(1, false, 2);
  fp16.training.dtype = "fp16";
  fp16.training.grad_reduce_in_bf16 = true;
  EXPECT_EQ(usage_error_of(fp16), "grad_reduce_in_bf16 needs bf16 parameters (--dtype bf16, fp8 or fp4), not fp16");
  ShardOptions remainders = layout(1, false, 2);
  remainders.training.store_param_remainders = true;
  remainders.training.dtype = "fp16";
  EXPECT_EQ(usage_error_of(remainders), "store_param_remainders needs bf16 weights, not fp16");
  remainders.training.dtype = "bf16";
  remainders.training.optimizer_state_dtype = OptimizerStateDtype::bf16;
  EXPECT_EQ(usage_error_of(remainders),
            "store_param_remainders keeps fp32 master weights; optimizer_state_dtype=bf16 keeps none");
  ShardOptions fragmented = layout(1, false, 2);
  fragmented.training.allocator_fragmentation = 1.5;
  EXPECT_EQ(usage_error_of(fragmented), "allocator_fragmentation=1.5 must be a share from 0 to 1");
  ShardOptions tp_overlap = layout(2, false, 1);
  tp_overlap.training.tp_comm_overlap = true;
  EXPECT_EQ(usage_error_of(tp_overlap),
            "tp_comm_overlap needs --sp with tp > 1 (Megatron-LM overlaps TP communication only under sequence "
            "parallelism)");
}

// Sums of the TP collectives' messages and of the GEMM FLOPs, per phase and kind.
std::map<std::string, double> totals(const ShardSection& s) {
  std::map<std::string, double> sums;
  for (const ShardOp& op : s.ops) {
    if (op.kind == OpKind::collective && op.group == CommGroup::tp && op.scope == OpScope::microbatch)
      sums[std::string(to_string(op.phase)) + ":" + to_string(op.collective)] += op.message_bytes;
    if (op.kind == OpKind::gemm) sums[std::string(to_string(op.phase)) + ":gemm"] += op.flops;
  }
  return sums;
}

std::vector<const ShardOp*> instances(const ShardSection& s, int64_t trace_op) {
  std::vector<const ShardOp*> out;
  for (const ShardOp& op : s.ops)
    if (op.trace_op == trace_op) out.push_back(&op);
  return out;
}

std::vector<const ShardOp*> collectives(const ShardSection& s, const std::string& phase, const std::string& kind) {
  std::vector<const ShardOp*> out;
  for (const ShardOp& op : s.ops)
    if (to_string(op.phase) == phase && to_string(op.collective) == kind && op.scope == OpScope::microbatch) out.push_back(&op);
  return out;
}

ShardSection tp_overlapped(int64_t tp) {
  ShardOptions o = layout(tp, true, 1);
  o.training.tp_comm_overlap = true;
  return shard_of(o);
}

TEST(TpCommOverlap, ChunksCarryTheOriginalWorkAndTraffic) {
  for (int64_t tp : {2, 4}) {
    ShardSection plain = shard_of(layout(tp, true, 1));
    ShardSection chunked = tp_overlapped(tp);
    std::map<std::string, double> before = totals(plain), after = totals(chunked);
    for (const char* key : {"fwd:gemm", "bwd:gemm", "fwd:reduce_scatter", "bwd:reduce_scatter"})
      EXPECT_DOUBLE_EQ(after[key], before[key]) << key;
    // The forward all-gather and fc2's backward one become tp - 1 ring steps of 1/tp of the
    // buffer each: the (tp - 1)/tp of it a ring all-gather moves per rank. fc1's backward
    // all-gather (bulk overlap) stays.
    auto backward_gathers = collectives(plain, "bwd", "all_gather");
    ASSERT_EQ(backward_gathers.size(), 2u);  // fc2's output gradient, then fc1's input
    double share = (tp - 1) / static_cast<double>(tp);
    EXPECT_DOUBLE_EQ(after["fwd:send_recv"], share * before["fwd:all_gather"]);
    EXPECT_DOUBLE_EQ(after["bwd:send_recv"], share * backward_gathers[0]->message_bytes);
    EXPECT_EQ(after.count("fwd:all_gather"), 0u);
    EXPECT_DOUBLE_EQ(after["bwd:all_gather"], backward_gathers[1]->message_bytes);
    // fc1 and fc2's dgrad in tp chunks, fc2 in 4; the others whole.
    EXPECT_EQ(instances(chunked, 1).size(), static_cast<size_t>(tp));
    EXPECT_EQ(instances(chunked, 2).size(), 4u);
    EXPECT_EQ(instances(chunked, 3).size(), static_cast<size_t>(tp));
    for (int64_t whole : {4, 5, 6}) EXPECT_EQ(instances(chunked, whole).size(), 1u);
  }
}

TEST(TpCommOverlap, RingExchangeFeedsGemmChunkKWithStepK) {
  ShardSection s = tp_overlapped(4);
  auto steps = collectives(s, "fwd", "send_recv");
  auto fc1 = instances(s, 1);
  ASSERT_EQ(steps.size(), 3u);
  ASSERT_EQ(fc1.size(), 4u);
  // Chunk 0 works on the rank's own piece, the norm's output: it waits for no exchange.
  EXPECT_EQ(fc1[0]->deps, (std::vector<int64_t>{instance_of(s, 0).id}));
  for (size_t k = 1; k < 4; ++k) {
    EXPECT_EQ(fc1[k]->deps, (std::vector<int64_t>{steps[k - 1]->id})) << k;
    EXPECT_DOUBLE_EQ(fc1[k]->flops, 2.0 * 2048 * 1024 * 1024 / 4);  // a quarter of fc1 at tp 4
  }
  // Each step passes on the piece the step before brought.
  EXPECT_EQ(steps[1]->deps, (std::vector<int64_t>{steps[0]->id}));
  EXPECT_EQ(steps[0]->stream, Stream::tp);
  EXPECT_EQ(steps[0]->group_size, 4);
}

TEST(TpCommOverlap, PipelineLaunchesEachReduceScatterChunkAfterItsGemmChunk) {
  ShardSection s = tp_overlapped(2);
  auto scatters = collectives(s, "fwd", "reduce_scatter");
  auto fc2 = instances(s, 2);
  ASSERT_EQ(scatters.size(), 4u);
  ASSERT_EQ(fc2.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(scatters[i]->deps, (std::vector<int64_t>{fc2[i]->id}));
    EXPECT_DOUBLE_EQ(scatters[i]->message_bytes, 2048.0 * 1024 * 2 / 4);
  }
}

}  // namespace
}  // namespace syssim
