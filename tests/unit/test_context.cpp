// Context parallelism (lib/shard/context.cpp) on a hand-built one-layer attention trace with
// Llama-3-8B's shapes (32 heads in 8 query groups of head dim 128, sequence 8192), checked
// against numbers worked out by hand.
#include <gtest/gtest.h>

#include <algorithm>

#include "common/error.hpp"
#include "shard/shard.hpp"
#include "trace_builder.hpp"

namespace syssim {
namespace {

constexpr double kSeq = 8192, kHeads = 32, kGroups = 8, kHeadDim = 128, kHidden = 4096, kBf16 = 2;

ModelConfig llama3_8b_layer() { return testing::dense_model("llama3-8b-layer", 1, 4096, 32, 8, 14336, 8192, 128256); }

using testing::ref;

// Tensors: 0 x, 1-3 the Q/K/V weights, 4 q, 5 k, 6 v, 7 attention output, 8 output gradient,
// 9 dq, 10 dk, 11 dv, 12-14 the weights' gradients. Ops: 0 QKV projection, 1 flash attention,
// 2 its backward, 3 the weight gradients. FLOPs and bytes as the tracer writes them.
Graph attention_graph() {
  Graph g;
  g.model = llama3_8b_layer();
  testing::TraceBuilder t(*g.model, "decoder.layers.0.self_attention");
  const std::vector<std::string> hidden = {"s", "b", "h"}, query = {"s", "b", "g*r", "d"}, key = {"s", "b", "g", "d"};
  t.tensor(hidden, "activation");
  t.tensor({"g*r*d", "h"}, "param", "wq");
  t.tensor({"g*d", "h"}, "param", "wk");
  t.tensor({"g*d", "h"}, "param", "wv");
  for (const auto* dims : {&query, &key, &key, &query, &query, &query, &key, &key}) t.tensor(*dims, "activation");
  t.tensor({"g*r*d", "h"}, "grad", "wq");
  t.tensor({"g*d", "h"}, "grad", "wk");
  t.tensor({"g*d", "h"}, "grad", "wv");
  t.op("syssim::qkv_linear", "gemm", "fwd", "column",
       {ref(0, hidden), ref(1, {"g*r*d", "h"}), ref(2, {"g*d", "h"}), ref(3, {"g*d", "h"})},
       {ref(4, query), ref(5, key), ref(6, key)}, "2*b*d*g*h*r*s + 4*b*d*g*h*s", "2*b*h*s");
  t.op("syssim::flash_attn", "attention", "fwd", "none", {ref(4, query), ref(5, key), ref(6, key)}, {ref(7, query)},
       "2*b*d*g*r*s^2", "4*b*d*g*r*s + 4*b*d*g*s");
  t.op("syssim::flash_attn_backward", "attention", "bwd", "none",
       {ref(8, query), ref(4, query), ref(5, key), ref(6, key), ref(7, query)},
       {ref(9, query), ref(10, key), ref(11, key)}, "5*b*d*g*r*s^2", "8*b*d*g*r*s + 8*b*d*g*s", 1);
  t.op("syssim::qkv_linear_wgrad", "gemm", "bwd", "column", {ref(9, query), ref(10, key), ref(11, key), ref(0, hidden)},
       {ref(12, {"g*r*d", "h"}), ref(13, {"g*d", "h"}), ref(14, {"g*d", "h"})}, "2*b*d*g*h*r*s + 4*b*d*g*h*s",
       "2*b*h*s", 0);
  g.trace = t.trace;
  return g;
}

ShardOptions context_parallel(int64_t cp, const std::string& comm_type = "p2p") {
  ShardOptions o;
  o.parallelism.cp = cp;
  o.cp_comm_type = comm_type;
  return o;
}

ShardSection shard_with(const ShardOptions& options) {
  Graph g = attention_graph();
  shard_graph(g, options);
  return *g.shard;
}

std::vector<const ShardOp*> ops_named(const ShardSection& s, const std::string& name, const std::string& phase = "") {
  std::vector<const ShardOp*> out;
  for (const auto& op : s.ops)
    if ((op.name == name || (op.kind == OpKind::collective && to_string(op.collective) == name)) && (phase.empty() || to_string(op.phase) == phase)) out.push_back(&op);
  return out;
}

double total_flops(const std::vector<const ShardOp*>& ops) {
  double sum = 0;
  for (const ShardOp* op : ops) sum += op->flops;
  return sum;
}

bool depends_on(const ShardOp& op, int64_t id) {
  return std::find(op.deps.begin(), op.deps.end(), id) != op.deps.end();
}

// Causal attention of the whole sequence on one GPU: 2 FLOPs x s^2/2 query-key pairs x 2 GEMMs
// x heads x head dim = 2*s^2*a*d forward; the backward's five GEMMs make it 5*s^2*a*d.
const double kCausalForward = 2 * kSeq * kSeq * kHeads * kHeadDim;
const double kCausalBackward = 5 * kSeq * kSeq * kHeads * kHeadDim;
// K and V of one rank's s/cp tokens: 2 tensors x s/cp x 8 groups x 128 x 2 bytes.
double key_value_block_bytes(int64_t cp) { return 2 * kSeq / cp * kGroups * kHeadDim * kBf16; }

TEST(ContextParallel, EachRankDoesTheCausalAttentionOverCpInCpEqualSteps) {
  for (int64_t cp : {2, 4}) {
    ShardSection s = shard_with(context_parallel(cp));
    auto forward = ops_named(s, "syssim::flash_attn");
    auto backward = ops_named(s, "syssim::flash_attn_backward");
    ASSERT_EQ(forward.size(), static_cast<size_t>(cp));
    ASSERT_EQ(backward.size(), static_cast<size_t>(cp));
    EXPECT_DOUBLE_EQ(total_flops(forward), kCausalForward / cp);
    EXPECT_DOUBLE_EQ(total_flops(backward), kCausalBackward / cp);
    // Every step is one diagonal block's work: causal attention of s/cp queries over s/cp keys.
    for (const ShardOp* step : forward)
      EXPECT_DOUBLE_EQ(step->flops, 2 * (kSeq / cp) * (kSeq / cp) * kHeads * kHeadDim);
  }
}

TEST(ContextParallel, OtherOpsWorkOnTheRanksSequenceAndModelFlopsStayTheJobs) {
  ShardSection one = shard_with(context_parallel(1)), four = shard_with(context_parallel(4));
  EXPECT_DOUBLE_EQ(four.axes.at("s"), kSeq / 4);
  EXPECT_EQ(four.seq_length, 8192);
  // QKV projection: 2 * tokens * h * (a*d + 2*g*d), a quarter of the tokens per rank.
  EXPECT_DOUBLE_EQ(four.ops.front().flops, 2 * kSeq / 4 * kHidden * (kHeads * kHeadDim + 2 * kGroups * kHeadDim));
  EXPECT_DOUBLE_EQ(four.model_flops_per_step, one.model_flops_per_step);
}

TEST(ContextParallel, RingForwardSendsCpMinusOneKeyValueBlocksOverlappedWithCompute) {
  const int64_t cp = 4;
  ShardSection s = shard_with(context_parallel(cp));
  auto exchanges = ops_named(s, "send_recv", "fwd");
  auto steps = ops_named(s, "syssim::flash_attn");
  ASSERT_EQ(exchanges.size(), 3u);
  for (const ShardOp* e : exchanges) {
    EXPECT_EQ(e->kind, OpKind::collective);
    EXPECT_EQ(e->group, CommGroup::cp);
    EXPECT_EQ(e->stream, Stream::cp);
    EXPECT_EQ(e->group_size, cp);
    EXPECT_DOUBLE_EQ(e->message_bytes, key_value_block_bytes(cp));  // 2 * 2048 * 8 * 128 * 2 = 8 MiB
  }
  EXPECT_DOUBLE_EQ(key_value_block_bytes(cp), 8388608);
  // Step 0 uses the rank's own block and runs beside exchange 0; step i+1 waits for exchange
  // i, which waits for exchange i-1.
  EXPECT_FALSE(depends_on(*steps[0], exchanges[0]->id));
  for (size_t i = 0; i + 1 < steps.size(); ++i) {
    EXPECT_TRUE(depends_on(*steps[i + 1], exchanges[i]->id)) << i;
    if (i > 0) {
      EXPECT_TRUE(depends_on(*exchanges[i], exchanges[i - 1]->id)) << i;
    }
  }
  // The exchange starts when the attention may start: after the QKV projection.
  EXPECT_TRUE(depends_on(*exchanges[0], s.ops.front().id));
  // Ops after the attention read the output of the last step.
  EXPECT_EQ(steps.back()->writes, steps.front()->writes);
}

TEST(ContextParallel, RingBackwardAlsoPassesTheKeyValueGradients) {
  const int64_t cp = 4;
  const double block = key_value_block_bytes(cp);
  ShardSection s = shard_with(context_parallel(cp));
  auto exchanges = ops_named(s, "send_recv", "bwd");
  // K/V first, then K/V with the dK/dV summed so far, and dK/dV alone last: 2*(cp-1) blocks.
  ASSERT_EQ(exchanges.size(), 4u);
  std::vector<double> bytes;
  for (const ShardOp* e : exchanges) bytes.push_back(e->message_bytes);
  EXPECT_EQ(bytes, (std::vector<double>{block, 2 * block, 2 * block, block}));
  // After each step but the first, the rank adds its dK/dV to the sums it received: one
  // addition per element of the two [s/cp, b, g, d] blocks.
  auto adds = ops_named(s, "context_parallel::dkv_add");
  ASSERT_EQ(adds.size(), 3u);
  EXPECT_DOUBLE_EQ(adds[0]->flops, block / kBf16);
  // The last addition writes the traced dK and dV, which the QKV backward reads.
  const std::vector<int64_t> key_value_grads = {10, 11};
  EXPECT_EQ(adds.back()->writes, key_value_grads);
}

TEST(ContextParallel, AllGatherGathersKeyValuesAndReduceScattersTheirGradients) {
  const int64_t cp = 4;
  ShardSection s = shard_with(context_parallel(cp, "all_gather"));
  EXPECT_TRUE(ops_named(s, "send_recv").empty());
  auto gathers = ops_named(s, "all_gather");
  auto scatters = ops_named(s, "reduce_scatter");
  ASSERT_EQ(gathers.size(), 2u);  // forward, and again in backward
  ASSERT_EQ(scatters.size(), 1u);
  for (const ShardOp* c : {gathers[0], gathers[1], scatters[0]}) {
    EXPECT_EQ(c->group, CommGroup::cp);
    EXPECT_DOUBLE_EQ(c->message_bytes, 2 * kSeq * kGroups * kHeadDim * kBf16);  // the whole sequence's K and V
  }
  auto forward = ops_named(s, "syssim::flash_attn");
  ASSERT_EQ(forward.size(), 1u);
  EXPECT_DOUBLE_EQ(forward[0]->flops, kCausalForward / cp);
  EXPECT_TRUE(depends_on(*forward[0], gathers[0]->id));
  EXPECT_DOUBLE_EQ(total_flops(ops_named(s, "syssim::flash_attn_backward")), kCausalBackward / cp);
}

TEST(ContextParallel, GradientsAreReducedOverDataAndContextParallelRanks) {
  ShardOptions o = context_parallel(4);
  o.parallelism.dp = 2;
  o.training.global_batch = 2;
  o.training.distributed_optimizer = true;
  ShardSection s = shard_with(o);
  auto reductions = ops_named(s, "reduce_scatter");
  ASSERT_EQ(reductions.size(), 1u);
  EXPECT_EQ(reductions[0]->group, CommGroup::dp);
  EXPECT_EQ(reductions[0]->group_size, 8);
  const double params = kHidden * (kHeads + 2 * kGroups) * kHeadDim;
  EXPECT_DOUBLE_EQ(reductions[0]->message_bytes, params * 4);  // fp32 gradients, whole buffer
  // Adam updates 1/8 of the parameters: 30 bytes each.
  EXPECT_DOUBLE_EQ(ops_named(s, "optimizer::adam")[0]->bytes, params / 8 * 30);

  // cp alone makes a gradient all-reduce over the cp ranks.
  ShardSection cp_only = shard_with(context_parallel(2));
  auto all_reduces = ops_named(cp_only, "all_reduce");
  ASSERT_EQ(all_reduces.size(), 1u);
  EXPECT_EQ(all_reduces[0]->group_size, 2);
}

TEST(ContextParallel, RefusedLayoutsNameTheValues) {
  Graph g = attention_graph();
  try {
    shard_graph(g, context_parallel(3));
    FAIL();
  } catch (const DataError& e) {
    EXPECT_STREQ(e.what(), "cp=3 does not divide seq_length=8192");
  }
  ShardOptions odd_chunks = context_parallel(4);
  odd_chunks.training.seq_length = 8196;  // 4 divides it, 8 does not
  try {
    shard_graph(g, odd_chunks);
    FAIL();
  } catch (const DataError& e) {
    EXPECT_STREQ(e.what(), "2*cp=8 does not divide seq_length=8196 (the load-balanced causal split)");
  }
  EXPECT_THROW(shard_graph(g, context_parallel(2, "a2a")), UsageError);
  Graph unfused = attention_graph();
  unfused.model->attention_backend = "unfused";
  EXPECT_THROW(shard_graph(unfused, context_parallel(2)), UsageError);
}

}  // namespace
}  // namespace syssim
