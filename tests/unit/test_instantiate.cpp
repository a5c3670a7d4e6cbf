// The instantiation of a traced attention layer on one tensor-parallel rank, traced at real
// sizes: with more ranks than query groups, Megatron-Core's even split of linear_qkv and the
// all-gather of its output (megatron/core/transformer/attention.py), checked by hand.
#include <gtest/gtest.h>

#include <algorithm>

#include "common/error.hpp"
#include "driver/driver.hpp"
#include "shard/shard.hpp"
#include "trace_builder.hpp"

namespace syssim {
namespace {

// One layer of width 512: 8 query heads of 64 sharing one KV head (multi-query attention);
// s = 256 tokens, b = 1.
constexpr double s = 256, h = 512, heads = 8, d = 64;
ModelConfig multi_query_model(int64_t groups = 1) { return testing::dense_model("mqa", 1, 512, 8, groups, 1024, 256, 1024); }

ShardOptions tensor_parallel(int64_t tp, int64_t cp = 1) {
  ShardOptions options;
  options.parallelism.tp = tp;
  options.parallelism.sp = true;
  options.parallelism.cp = cp;
  options.training.global_batch = 1;
  return options;
}

ShardSection sharded(const ShardOptions& options, const ModelConfig& model = multi_query_model()) {
  return shard_trace(model, trace_of(model), options);
}

std::vector<const ShardOp*> ops_where(const ShardSection& shard, bool (*pick)(const ShardOp&)) {
  std::vector<const ShardOp*> found;
  for (const ShardOp& op : shard.ops)
    if (pick(op)) found.push_back(&op);
  return found;
}

bool qkv_collective(const ShardOp& op) {
  return op.kind == OpKind::collective && op.module == "decoder.layers.0.self_attention.linear_qkv";
}

TEST(Instantiate, MoreRanksThanQueryGroupsSplitTheProjectionEvenlyAndGatherIt) {
  ShardSection shard = sharded(tensor_parallel(4));
  // linear_qkv's (8 + 2 x 1) heads of 64 split over 4 ranks: 160 outputs of 512 inputs per rank.
  const auto projections = ops_where(shard, [](const ShardOp& op) { return op.name == "syssim::qkv_linear"; });
  ASSERT_EQ(projections.size(), 1u);
  EXPECT_DOUBLE_EQ(projections[0]->flops, 2 * s * h * (heads + 2) * d / 4);
  // Forward: SP's gather of the input, then the gather of the projection (every rank's 160
  // columns of the 256 tokens, bf16). Backward: the gradient's reduce-scatter of the same
  // bytes, then SP's gather of the input for the weight gradient, then the input gradient's
  // reduce-scatter.
  const auto exchanges = ops_where(shard, qkv_collective);
  std::vector<std::string> kinds;
  for (const ShardOp* op : exchanges) kinds.push_back(std::string(to_string(op->phase)) + ":" + to_string(op->collective));
  EXPECT_EQ(kinds, (std::vector<std::string>{"fwd:all_gather", "fwd:all_gather", "bwd:reduce_scatter", "bwd:all_gather",
                                             "bwd:reduce_scatter"}));
  EXPECT_DOUBLE_EQ(exchanges[0]->message_bytes, s * h * 2);
  EXPECT_DOUBLE_EQ(exchanges[1]->message_bytes, s * (heads + 2) * d * 2);
  EXPECT_DOUBLE_EQ(exchanges[2]->message_bytes, s * (heads + 2) * d * 2);
  // The attention runs the rank's 2 query heads on one whole KV head.
  const auto attention = ops_where(shard, [](const ShardOp& op) { return op.kind == OpKind::attention; });
  ASSERT_FALSE(attention.empty());
  EXPECT_DOUBLE_EQ(attention[0]->shape.at("heads"), heads / 4);
  EXPECT_DOUBLE_EQ(attention[0]->shape.at("kv_heads"), 1);
  // Only the gather reads the projection's own output (the rank's share); RoPE reads the
  // gathered queries. The projection's backward reads what the scatter wrote.
  const int64_t queries = projections[0]->writes.at(0);
  for (const ShardOp& op : shard.ops)
    if (op.id != exchanges[1]->id) EXPECT_EQ(std::count(op.reads.begin(), op.reads.end(), queries), 0) << op.name;
  const auto rope = ops_where(shard, [](const ShardOp& op) { return op.name == "syssim::rope" && op.phase == OpPhase::fwd; });
  ASSERT_FALSE(rope.empty());
  EXPECT_EQ(rope[0]->reads.at(0), exchanges[1]->writes.at(0));
  const auto dgrad = ops_where(shard, [](const ShardOp& op) { return op.name == "syssim::qkv_linear_dgrad"; });
  ASSERT_EQ(dgrad.size(), 1u);
  EXPECT_EQ(dgrad[0]->reads.at(0), exchanges[2]->writes.at(0));
}

TEST(Instantiate, RanksThatSplitTheQueryGroupsExchangeNothingMore) {
  // tp 2 of 2 groups: one group per rank, the projection's output stays where it is.
  ShardSection shard = sharded(tensor_parallel(2), multi_query_model(2));
  const auto exchanges = ops_where(shard, qkv_collective);
  ASSERT_EQ(exchanges.size(), 3u);  // SP's gathers of the input and the input gradient's scatter
  EXPECT_DOUBLE_EQ(exchanges[0]->message_bytes, s * h * 2);
}

TEST(Instantiate, QueryGroupsNeitherSplitNorSharedAreRefused) {
  ModelConfig model = testing::dense_model("odd", 1, 768, 12, 4, 1024, 256, 1024);
  try {
    shard_trace(model, trace_of(model), tensor_parallel(6));
    FAIL();
  } catch (const DataError& e) {
    EXPECT_STREQ(e.what(), "num_query_groups=4 is neither a multiple nor a divisor of tp=6 (Megatron-Core needs one or the other)");
  }
  try {
    sharded(tensor_parallel(2, 2));
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "cp=2 with tp=2 above the 1 query groups (a KV head shared by tp ranks) is not simulated");
  }
}

}  // namespace
}  // namespace syssim
