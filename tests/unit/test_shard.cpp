// syssim-shard on a small hand-built trace (one norm, a column- and a row-parallel linear,
// forward and backward), checked against hand-derived numbers.
#include <gtest/gtest.h>

#include "common/error.hpp"
#include "shard/shard.hpp"
#include "trace_builder.hpp"

namespace syssim {
namespace {

using testing::ref;

ModelConfig small_model() { return testing::dense_model("small", 1, 1024, 16, 16, 4096, 2048, 50257); }

// The buffers of testing::add_mlp_tensors.
Graph small_graph() {
  Graph g;
  g.model = small_model();
  testing::TraceBuilder t(*g.model, "decoder.layers.0.mlp");
  testing::add_mlp_tensors(t);
  t.op("syssim::rms_norm", "math", "fwd", "none", {ref(0, {"s", "b", "h"})}, {ref(1, {"s", "b", "h"})}, "4*s*b*h",
       "2*s*b*h");
  t.op("syssim::linear", "gemm", "fwd", "column", {ref(1, {"s", "b", "h"}), ref(2, {"f", "h"})},
       {ref(3, {"s", "b", "f"})}, "2*s*b*h*f", "2*s*b*h");
  t.op("syssim::linear", "gemm", "fwd", "row", {ref(3, {"s", "b", "f"}), ref(4, {"h", "f"})}, {ref(5, {"s", "b", "h"})},
       "2*s*b*h*f", "2*s*b*h");
  t.op("syssim::linear_dgrad", "gemm", "bwd", "row", {ref(6, {"s", "b", "h"}), ref(4, {"h", "f"})},
       {ref(7, {"s", "b", "f"})}, "2*s*b*h*f", "2*s*b*h", 2);
  t.op("syssim::linear_wgrad", "gemm", "bwd", "row", {ref(6, {"s", "b", "h"}), ref(3, {"s", "b", "f"})},
       {ref(8, {"h", "f"})}, "2*s*b*h*f", "2*s*b*h", 2);
  t.op("syssim::linear_dgrad", "gemm", "bwd", "column", {ref(7, {"s", "b", "f"}), ref(2, {"f", "h"})},
       {ref(9, {"s", "b", "h"})}, "2*s*b*h*f", "2*s*b*h", 1);
  t.op("syssim::linear_wgrad", "gemm", "bwd", "column", {ref(7, {"s", "b", "f"}), ref(1, {"s", "b", "h"})},
       {ref(10, {"f", "h"})}, "2*s*b*h*f", "2*s*b*h", 1);
  g.trace = t.trace;
  return g;
}

ShardOptions layout(int64_t tp, bool sp, int64_t dp = 1, int64_t micro_batch = 1, int64_t global_batch = 1) {
  ShardOptions o;
  o.parallelism.tp = tp;
  o.parallelism.sp = sp;
  o.parallelism.dp = dp;
  o.training.micro_batch = micro_batch;
  o.training.global_batch = global_batch;
  o.training.clip_grad = 0;  // no gradient-norm ops here: tests/unit/test_data_parallel.cpp checks them
  return o;
}

std::vector<const ShardOp*> collectives(const ShardSection& s) {
  std::vector<const ShardOp*> out;
  for (const auto& op : s.ops)
    if (op.kind == OpKind::collective) out.push_back(&op);
  return out;
}

const double kTokens = 2048;  // s * b

TEST(Shard, TensorParallelHalvesTheSplitGemmDimension) {
  Graph one = small_graph(), two = small_graph();
  shard_graph(one, layout(1, false));
  shard_graph(two, layout(2, false));
  // fc1: 2 * 2048 tokens * 1024 * 4096 FLOPs on one GPU, half of it per rank at tp 2.
  EXPECT_DOUBLE_EQ(one.shard->ops[1].flops, 2.0 * kTokens * 1024 * 4096);
  EXPECT_DOUBLE_EQ(two.shard->ops[1].flops, kTokens * 1024 * 4096);
  EXPECT_DOUBLE_EQ(two.shard->axes.at("f"), 2048);
  EXPECT_DOUBLE_EQ(two.shard->axes.at("h"), 1024);
  // Weights: fc1 and fc2 are 2 * 1024 * 4096 parameters, split in two.
  EXPECT_DOUBLE_EQ(two.shard->params_total, 2.0 * 1024 * 4096);
  EXPECT_DOUBLE_EQ(two.shard->params_local, 1024.0 * 4096);
  EXPECT_TRUE(collectives(*one.shard).empty());
}

TEST(Shard, WithoutSequenceParallelTheRowOutputAndColumnInputGradAreAllReduced) {
  Graph g = small_graph();
  shard_graph(g, layout(2, false));
  auto c = collectives(*g.shard);
  ASSERT_EQ(c.size(), 2u);
  for (const auto* op : c) {
    EXPECT_EQ(op->collective, Collective::all_reduce);
    EXPECT_EQ(op->group, CommGroup::tp);
    EXPECT_EQ(op->group_size, 2);
    EXPECT_DOUBLE_EQ(op->message_bytes, kTokens * 1024 * 2);  // [s, b, h] in bf16
  }
  EXPECT_EQ(c[0]->phase, OpPhase::fwd);
  EXPECT_EQ(c[1]->phase, OpPhase::bwd);
  // The all-reduce waits for the row-parallel GEMM that produced the partial sum.
  EXPECT_EQ(g.shard->ops[c[0]->deps.at(0)].name, "syssim::linear");
}

TEST(Shard, SequenceParallelIsOffWithoutTensorParallelism) {
  // Megatron-LM turns sequence parallelism off at tp 1 (arguments.py), and so is it recorded.
  Graph g = small_graph();
  shard_graph(g, layout(1, true));
  EXPECT_FALSE(g.shard->parallelism.sp);
  EXPECT_DOUBLE_EQ(g.shard->ops[0].flops, 4.0 * kTokens * 1024);  // the norm sees the whole sequence
}

TEST(Shard, SequenceParallelGathersBeforeColumnAndScattersAfterRow) {
  Graph g = small_graph();
  shard_graph(g, layout(2, true));
  auto c = collectives(*g.shard);
  std::vector<std::string> kinds;
  for (const auto* op : c) kinds.push_back(std::string(to_string(op->phase)) + ":" + to_string(op->collective));
  // Forward: gather the norm output, reduce-scatter fc2's output. Backward: gather the
  // output gradient for fc2's dgrad+wgrad (once), gather fc1's input for its wgrad (launched
  // before fc1's dgrad), reduce-scatter fc1's input gradient.
  EXPECT_EQ(kinds, (std::vector<std::string>{"fwd:all_gather", "fwd:reduce_scatter", "bwd:all_gather", "bwd:all_gather",
                                             "bwd:reduce_scatter"}));
  // The norm works on s/tp tokens: 4 FLOPs * 1024 tokens * 1024.
  EXPECT_DOUBLE_EQ(g.shard->ops[0].flops, 4.0 * 1024 * 1024);
  // Its output is a [s/tp, b, h] buffer; the gathered copy is the whole sequence.
  EXPECT_DOUBLE_EQ(g.shard->buffers[1].bytes, 1024.0 * 1024 * 2);
  EXPECT_DOUBLE_EQ(c[0]->message_bytes, kTokens * 1024 * 2);
  // fc1 reads the gathered buffer, not the norm output.
  const ShardOp& fc1 = g.shard->ops[c[0]->id + 1];
  EXPECT_EQ(fc1.name, "syssim::linear");
  EXPECT_EQ(fc1.reads.at(0), c[0]->writes.at(0));
}

// The kernel shapes the calibrated estimator reads: an m x n output reduced over k, on one
// rank. At tp 2 with SP, fc1 is [2048 tokens, 1024] x [1024, 4096/2]; its weight gradient
// reduces over the tokens; the norm sweeps 2048/2 rows of 1024.
TEST(Shard, KernelShapesAreTheGemmsOfOneRank) {
  Graph g = small_graph();
  shard_graph(g, layout(2, true));
  auto shape_of = [&](const std::string& name, const std::string& module_pass) {
    for (const auto& op : g.shard->ops)
      if (op.name == name && to_string(op.pass) == module_pass) return op.shape;
    return KernelShape{};
  };
  EXPECT_EQ(shape_of("syssim::rms_norm", "forward"), (KernelShape{{"rows", 1024}, {"dim", 1024}}));
  EXPECT_EQ(shape_of("syssim::linear", "forward"), (KernelShape{{"m", 2048}, {"n", 2048}, {"k", 1024}}));
  // fc2's dgrad (the first backward GEMM): [2048, 1024] x [1024, 2048] -> [2048, 2048].
  EXPECT_EQ(shape_of("syssim::linear_dgrad", "backward"), (KernelShape{{"m", 2048}, {"n", 2048}, {"k", 1024}}));
  // fc2's wgrad: grad^T [1024, 2048 tokens] x z [2048 tokens, 2048] -> [1024, 2048].
  EXPECT_EQ(shape_of("syssim::linear_wgrad", "weight"), (KernelShape{{"m", 1024}, {"n", 2048}, {"k", 2048}}));
  for (const auto& op : g.shard->ops)
    if (op.kind == OpKind::collective) {
      EXPECT_TRUE(op.shape.empty()) << op.name;
    }
}

// A traced GEMM with fewer operands, or fewer dims of one, than its kernel shape reads (an
// edited trace) is bad data naming the JSON path, not a read past the end.
TEST(Shard, TracedGemmsWithMissingOperandsAreErrorsThatNameThePath) {
  auto error_of = [](void (*edit)(TraceSection&)) -> std::string {
    Graph g = small_graph();
    edit(*g.trace);
    try {
      shard_graph(g, layout(2, true));
    } catch (const DataError& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_EQ(error_of([](TraceSection& t) { t.ops[1].inputs.resize(1); }),
            "/trace/ops/1/inputs: syssim::linear needs 2 inputs, got 1");
  EXPECT_EQ(error_of([](TraceSection& t) { t.ops[2].inputs[1].dims.clear(); }),
            "/trace/ops/2/inputs/1/dims: syssim::linear needs at least 2 dims, got 0");
  EXPECT_EQ(error_of([](TraceSection& t) { t.ops[3].inputs[0].dims.clear(); }),
            "/trace/ops/3/inputs/0/dims: syssim::linear_dgrad needs at least 1 dim, got 0");
  EXPECT_EQ(error_of([](TraceSection& t) { t.ops[4].inputs.clear(); }),
            "/trace/ops/4/inputs: syssim::linear_wgrad needs 2 inputs, got 0");
}

TEST(Shard, DataParallelAddsGradientReductionAndAdam) {
  Graph g = small_graph();
  shard_graph(g, layout(1, false, 4, 2, 64));
  EXPECT_EQ(g.shard->num_microbatches, 8);  // 64 / (2 * 4)
  auto c = collectives(*g.shard);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0]->collective, Collective::all_reduce);
  EXPECT_EQ(c[0]->scope, OpScope::step);
  EXPECT_DOUBLE_EQ(c[0]->message_bytes, 2.0 * 1024 * 4096 * 4);  // fp32 gradients
  const ShardOp& adam =
      *std::find_if(g.shard->ops.begin(), g.shard->ops.end(), [](const ShardOp& op) { return op.kind == OpKind::optimizer; });
  EXPECT_EQ(adam.kind, OpKind::optimizer);
  EXPECT_DOUBLE_EQ(adam.bytes, 2.0 * 1024 * 4096 * 30);
}

// Jobs that share a ShardReuse get the sections they would get alone: the kept
// instantiation serves layouts that differ in data parallelism and the optimizer, another
// micro-batch makes its own, and a reuse of another trace is not used.
TEST(Shard, ReusedInstantiationsGiveTheSameSections) {
  const Graph g = small_graph();
  ShardReuse reuse(*g.trace);
  ShardOptions distributed = layout(2, true, 4, 1, 8);
  distributed.training.distributed_optimizer = true;
  for (const ShardOptions& o : {layout(2, true, 1, 1, 4), layout(2, true, 4, 1, 8), distributed, layout(2, true, 1, 2, 4),
                                layout(2, true, 1, 1, 4)}) {
    const std::string alone = to_json(shard_trace(*g.model, *g.trace, o)).dump();
    EXPECT_EQ(to_json(shard_trace(*g.model, *g.trace, o, &reuse)).dump(), alone);
  }
  const Graph other = small_graph();  // an equal trace, but not the one `reuse` is of
  EXPECT_EQ(to_json(shard_trace(*other.model, *other.trace, layout(1, false), &reuse)).dump(),
            to_json(shard_trace(*other.model, *other.trace, layout(1, false))).dump());
}

TEST(Shard, DistributedOptimizerReduceScattersAndGathers) {
  Graph g = small_graph();
  ShardOptions o = layout(1, false, 4, 1, 4);
  o.training.distributed_optimizer = true;
  shard_graph(g, o);
  auto c = collectives(*g.shard);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0]->collective, Collective::reduce_scatter);
  EXPECT_EQ(c[1]->collective, Collective::all_gather);
  EXPECT_DOUBLE_EQ(c[1]->message_bytes, 2.0 * 1024 * 4096 * 2);  // bf16 weights
  // Adam updates a quarter of the parameters.
  EXPECT_DOUBLE_EQ(g.shard->ops[c[1]->id - 1].bytes, 2.0 * 1024 * 4096 / 4 * 30);
}

TEST(Shard, ImpossibleLayoutsAreErrorsThatNameTheValues) {
  Graph g = small_graph();
  try {
    shard_graph(g, layout(3, false));
    FAIL();
  } catch (const DataError& e) {
    EXPECT_STREQ(e.what(), "tp=3 does not divide num_attention_heads=16");
  }
  try {
    shard_graph(g, layout(1, false, 4, 2, 12));
    FAIL();
  } catch (const DataError& e) {
    EXPECT_STREQ(e.what(), "micro_batch*dp=8 does not divide global_batch=12");
  }
  ShardOptions pipeline = layout(1, false);
  pipeline.parallelism.pp = 2;
  try {
    shard_graph(g, pipeline);
    FAIL();
  } catch (const DataError& e) {
    EXPECT_STREQ(e.what(), "pp*vpp=2 does not divide num_layers=1 (give --pp-layout for an uneven split)");
  }
  ShardOptions gpus = layout(2, false, 2, 1, 2);
  gpus.gpus = 8;
  EXPECT_THROW(shard_graph(g, gpus), DataError);
}

// Sizes no job has are refused before a schedule or rank is sized by them: 2^31 as a global
// batch made half a billion micro-batch slots (issue 23).
TEST(Shard, SizesBeyondAnyJobAreRefusedFirst) {
  Graph g = small_graph();
  auto error_of = [&](const ShardOptions& options) {
    try {
      shard_graph(g, options);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error_of(layout(1, false, 1, 1, int64_t{1} << 31)),
            "global_batch=2147483648 makes 2147483648 micro-batches per step; syssim takes at most 1048576 (2^20 / vpp)");
  EXPECT_EQ(error_of(layout(1, false, int64_t{1} << 31, 1, int64_t{1} << 31)),
            "dp=2147483648 exceeds the 1048576 GPUs a job can have");
  ShardOptions wide = layout(1, false, 1 << 20, 1, 1 << 20);
  wide.parallelism.cp = 2;
  EXPECT_EQ(error_of(wide), "tp*cp*dp*pp=1*2*1048576*1 GPUs, more than the 1048576 a job can have");
}

// Attention's score and context GEMMs in Megatron-LM's count: 3 passes x 2 FLOPs x 2 GEMMs of
// s x s x (heads x head dim) per sequence and layer: 12 x 32 x 128 x 8192^2 x 32 layers for one
// Llama-3-8B sequence of 8,192 tokens = 105,553,116,266,496.
TEST(Shard, AttentionScoreFlopsAreTheQuadraticTerm) {
  ModelConfig m;
  m.num_layers = 32;
  m.hidden_size = 4096;
  m.num_attention_heads = 32;
  m.num_query_groups = 8;
  m.kv_channels = 128;
  EXPECT_DOUBLE_EQ(megatron_attention_score_flops(m, 1, 8192), 105553116266496.0);
  EXPECT_DOUBLE_EQ(megatron_attention_score_flops(m, 4, 8192), 4 * 105553116266496.0);
}

TEST(Shard, PaddedVocabularyFollowsMegatron) {
  ModelConfig m = small_model();
  m.vocab_size = 128256;
  EXPECT_EQ(padded_vocab_size(m, 1), 128256);  // 1002 * 128
  EXPECT_EQ(padded_vocab_size(m, 8), 129024);  // ceil(128256 / 1024) * 1024
  m.vocab_size = 50257;
  EXPECT_EQ(padded_vocab_size(m, 1), 50304);
}

TEST(Shard, ModelFlopsMatchNarayanansFormulaForGpt3) {
  // Narayanan et al. 2021, eq. (3) without recompute: F = 72 B s l h^2 (1 + s/(6h) + V/(12 l h))
  // for GPT (ffn = 4h, MHA); its 96 factor includes the recomputed forward, 72 = 96 * 3/4.
  ModelConfig m = small_model();
  m.num_layers = 96;
  m.hidden_size = 12288;
  m.num_attention_heads = 96;
  m.num_query_groups = 96;
  m.kv_channels = 128;
  m.ffn_hidden_size = 4 * 12288;
  m.swiglu = false;
  m.vocab_size = 51200;
  const double B = 1536, s = 2048, l = 96, h = 12288, V = 51200;
  double expected = 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
  EXPECT_NEAR(megatron_model_flops(m, 1536, 2048, 1) / expected, 1.0, 1e-12);
}

}  // namespace
}  // namespace syssim
