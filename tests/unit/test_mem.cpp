// Memory accounting on a hand-built shard section; the live-buffer trace is worked out by
// hand in the comments.
#include <gtest/gtest.h>

#include "common/error.hpp"
#include "mem/mem.hpp"

namespace syssim {
namespace {

ShardBuffer buffer(int64_t id, double bytes, const std::string& role) {
  return ShardBuffer{id, bytes, parse_enum<TensorRole>(role).value(), "", {}};
}

ShardOp op(int64_t id, const std::string& module, const std::string& phase, std::vector<int64_t> reads,
           std::vector<int64_t> writes, OpScope scope = OpScope::microbatch) {
  ShardOp o;
  o.id = id;
  o.module = module;
  o.phase = parse_enum<OpPhase>(phase).value();
  o.scope = scope;
  o.pass = scope != OpScope::microbatch ? OpPass::step : phase == "fwd" ? OpPass::forward : OpPass::backward;
  o.reads = std::move(reads);
  o.writes = std::move(writes);
  return o;
}

// One layer, forward then backward, with 1e6 local parameters:
//   b0 weight (param)      b1 input x, 100 B, nobody writes it
//   b2 h = embed(x), 1000 B, read again by mlp_grad: saved for backward
//   b3 workspace of embed, 300 B, never read
//   b4 y = mlp(h), 500 B, read by loss_grad: saved for backward
//   b5 dy, 500 B          b6 dh, 200 B, never read      b7 weight grad (grad)
// Live bytes while each op runs (then freed):
//   embed     x + h + ws      = 1400 (frees x, ws)
//   mlp       h + y           = 1500
//   loss_grad h + y + dy      = 2000 <- peak: activations h + y = 1500, temporary dy = 500
//   mlp_grad  h + dy + dh     = 1700
ShardSection one_layer() {
  ShardSection s;
  s.params_local = 1e6;
  s.stage_params_local = {1e6};
  s.parallelism.dp = 4;
  s.schedule = {{{0, 0, OpPass::forward}, {0, 0, OpPass::backward}}};
  s.buffers = {buffer(0, 1e6 * 2, "param"), buffer(1, 100, "input"),      buffer(2, 1000, "activation"),
               buffer(3, 300, "activation"), buffer(4, 500, "activation"), buffer(5, 500, "activation"),
               buffer(6, 200, "activation"), buffer(7, 1e6 * 4, "grad")};
  s.ops = {op(0, "embed", "fwd", {0, 1}, {2, 3}), op(1, "mlp", "fwd", {2, 0}, {4}),
           op(2, "loss_grad", "bwd", {4}, {5}), op(3, "mlp_grad", "bwd", {5, 2, 0}, {6, 7})};
  return s;
}

MemSection account(const ShardSection& shard, std::optional<double> gpu_memory_GB = std::nullopt) {
  Graph g;
  g.shard = shard;
  if (gpu_memory_GB) {
    g.cost = CostSection{};
    g.cost->hardware.gpu_memory_GB = gpu_memory_GB;
  }
  account_memory(g);
  return *g.mem;
}

TEST(ModelStates, EighteenBytesPerParameter) {
  MemSection mem = account(one_layer());
  EXPECT_DOUBLE_EQ(mem.param_bytes, 2e6);
  EXPECT_DOUBLE_EQ(mem.grad_bytes, 4e6);
  EXPECT_DOUBLE_EQ(mem.optimizer_state_bytes, 12e6);
}

TEST(ModelStates, DistributedOptimizerShardsTheStatesOverDataParallelRanks) {
  ShardSection shard = one_layer();
  shard.training.distributed_optimizer = true;
  MemSection mem = account(shard);
  // 6 + 12/dp bytes per parameter with dp = 4: 9 bytes.
  EXPECT_DOUBLE_EQ(mem.param_bytes + mem.grad_bytes + mem.optimizer_state_bytes, 9e6);
}

TEST(Activations, PeakOfTheLiveBuffers) {
  MemSection mem = account(one_layer());
  EXPECT_DOUBLE_EQ(mem.activation_bytes, 1500);
  EXPECT_DOUBLE_EQ(mem.temporary_bytes, 500);
  EXPECT_EQ(mem.peak_module, "loss_grad");
  EXPECT_DOUBLE_EQ(mem.peak_memory_gb, (18e6 + 2000) / 1e9);
  EXPECT_EQ(mem.pp_stage_memory_gb, std::vector<double>{mem.peak_memory_gb});
  EXPECT_FALSE(mem.gpu_memory_gb.has_value());
  EXPECT_FALSE(mem.oom.has_value());
}

TEST(Activations, StepOpTemporariesCount) {
  // An optimizer step reading the grads with a 5000 B workspace: all forward and backward
  // buffers are freed by then, so the peak is the workspace alone.
  ShardSection shard = one_layer();
  shard.buffers.push_back(buffer(8, 5000, "activation"));
  shard.ops.push_back(op(4, "optimizer", "optimizer", {7}, {8}, OpScope::step));
  MemSection mem = account(shard);
  EXPECT_DOUBLE_EQ(mem.activation_bytes, 0);
  EXPECT_DOUBLE_EQ(mem.temporary_bytes, 5000);
  EXPECT_EQ(mem.peak_module, "optimizer");
}

TEST(Capacity, OutOfMemoryWhenThePeakExceedsTheGpu) {
  MemSection fits = account(one_layer(), 80.0);
  EXPECT_EQ(fits.gpu_memory_gb, 80.0);
  EXPECT_FALSE(fits.oom.has_value());

  MemSection oom = account(one_layer(), 0.01);
  ASSERT_TRUE(oom.oom.has_value());
  EXPECT_DOUBLE_EQ(oom.oom->capacity_gb, 0.01);
  EXPECT_DOUBLE_EQ(oom.oom->required_gb, 0.018002);
  EXPECT_NEAR(oom.oom->excess_gb, 0.008002, 1e-15);
}

TEST(Activations, EveryMicroBatchOfTheScheduleIsReplayed) {
  // Two micro-batches back to back: the first's buffers are freed before the second starts,
  // so the peak is one micro-batch's, with one micro-batch in flight.
  ShardSection shard = one_layer();
  shard.num_microbatches = 2;
  shard.schedule = {{{0, 0, OpPass::forward}, {0, 0, OpPass::backward}, {0, 1, OpPass::forward}, {0, 1, OpPass::backward}}};
  MemSection mem = account(shard);
  EXPECT_DOUBLE_EQ(mem.activation_bytes + mem.temporary_bytes, 2000);
  EXPECT_EQ(mem.pp_stage_microbatches_in_flight, std::vector<int64_t>{1});
  // Both forwards before the backwards (GPipe): at the first loss_grad, micro-batch 1's h and y
  // (1500) are live too, and its input x was freed by its embed.
  shard.schedule = {{{0, 0, OpPass::forward}, {0, 1, OpPass::forward}, {0, 0, OpPass::backward}, {0, 1, OpPass::backward}}};
  mem = account(shard);
  EXPECT_DOUBLE_EQ(mem.activation_bytes, 3000);
  EXPECT_DOUBLE_EQ(mem.temporary_bytes, 500);
  EXPECT_EQ(mem.pp_stage_microbatches_in_flight, std::vector<int64_t>{2});
}

TEST(Activations, MicroBatchesRunningTheirSlotsInDifferentOrdersOfKinds) {
  // one_layer with the weight gradient split out of mlp_grad into a weight-pass op (b0 weight,
  // b1 x 100, b2 h 1000 saved, b3 ws 300, b4 y 500 saved, b5 dy 500, b6 dh 200, b7 grad):
  // micro-batch 0 has no weight slot (its backward runs wgrad), micro-batch 1 has one.
  ShardSection shard = one_layer();
  shard.num_microbatches = 2;
  shard.ops = {op(0, "embed", "fwd", {0, 1}, {2, 3}), op(1, "mlp", "fwd", {2, 0}, {4}),
               op(2, "loss_grad", "bwd", {4}, {5}), op(3, "mlp_grad", "bwd", {5, 0}, {6}),
               op(4, "wgrad", "bwd", {5, 2}, {7})};
  shard.ops[4].pass = OpPass::weight;
  shard.schedule = {{{0, 0, OpPass::forward},
                     {0, 1, OpPass::forward},
                     {0, 0, OpPass::backward},
                     {0, 1, OpPass::backward},
                     {0, 1, OpPass::weight}}};
  // Issue order and live bytes (h0 lives until wgrad 0, h1 until wgrad 1):
  //   embed 0      x0 h0 ws0                    1400
  //   mlp 0        h0 y0                        1500
  //   embed 1      h0 y0 x1 h1 ws1              2900
  //   mlp 1        h0 y0 h1 y1                  3000
  //   loss_grad 0  h0 y0 dy0 h1 y1              3500 <- peak: saved 3000, dy0 500; both in flight
  //   mlp_grad 0   h0 dy0 dh0 h1 y1             3200
  //   wgrad 0      h0 dy0 h1 y1                 3000
  //   loss_grad 1  h1 y1 dy1 2000, mlp_grad 1  h1 dy1 dh1 1700, wgrad 1  h1 dy1 1500
  MemSection mem = account(shard);
  EXPECT_DOUBLE_EQ(mem.activation_bytes, 3000);
  EXPECT_DOUBLE_EQ(mem.temporary_bytes, 500);
  EXPECT_EQ(mem.peak_module, "loss_grad");
  EXPECT_EQ(mem.pp_stage_microbatches_in_flight, std::vector<int64_t>{2});
  // Micro-batch 1's backward first: at its loss_grad, h0 y0 (1500) are kept and h1 y1 dy1
  // (2000) are its own; the first op reaching 3500.
  shard.schedule = {{{0, 0, OpPass::forward},
                     {0, 1, OpPass::forward},
                     {0, 1, OpPass::backward},
                     {0, 1, OpPass::weight},
                     {0, 0, OpPass::backward}}};
  mem = account(shard);
  EXPECT_DOUBLE_EQ(mem.activation_bytes + mem.temporary_bytes, 3500);
  EXPECT_EQ(mem.peak_module, "loss_grad");
  EXPECT_EQ(mem.pp_stage_microbatches_in_flight, std::vector<int64_t>{2});
}

TEST(ModelStates, EachPipelineRankCountsTheParametersItHolds) {
  // Two ranks each running a copy of the layer on its own buffers, rank 0 holding 2e6
  // parameters and rank 1 1e6: 18 bytes per parameter plus each one's 2000-byte peak.
  ShardSection shard = one_layer();
  ShardSection copy = one_layer();
  const int64_t offset = static_cast<int64_t>(shard.buffers.size());
  for (ShardBuffer b : copy.buffers) {
    b.id += offset;
    shard.buffers.push_back(b);
  }
  for (ShardOp op : copy.ops) {
    op.id += static_cast<int64_t>(copy.ops.size());
    op.stage = 1;
    for (auto* list : {&op.reads, &op.writes})
      for (int64_t& b : *list) b += offset;
    shard.ops.push_back(op);
  }
  shard.parallelism.pp = 2;
  shard.buffers[0].bytes = 2e6 * 2;  // rank 0's weights: 2e6 bf16 parameters
  shard.stage_params_local = {2e6, 1e6};
  shard.schedule = {{{0, 0, OpPass::forward}, {0, 0, OpPass::backward}}, {{0, 0, OpPass::forward}, {0, 0, OpPass::backward}}};
  MemSection mem = account(shard);
  EXPECT_EQ(mem.pp_stage_memory_gb, (std::vector<double>{(36e6 + 2000) / 1e9, (18e6 + 2000) / 1e9}));
  EXPECT_EQ(mem.peak_pp_stage, 0);
  EXPECT_DOUBLE_EQ(mem.param_bytes, 4e6);
  EXPECT_DOUBLE_EQ(mem.peak_memory_gb, (36e6 + 2000) / 1e9);
}

// fp8 training: a once-per-step cast (step_start) writes the weight's rowwise and columnwise
// fp8 copies, 1e6 one-byte elements and a 4-byte scale each, which the layer's ops read in
// every micro-batch.
ShardSection with_fp8_weight_copies(ShardSection s) {
  s.buffers.push_back(ShardBuffer{8, 1e6 + 4, TensorRole::quantized_weight, "weight", {}});
  s.buffers.push_back(ShardBuffer{9, 1e6 + 4, TensorRole::quantized_weight, "weight", {}});
  s.ops.push_back(op(4, "cast", "fwd", {0}, {8, 9}, OpScope::step_start));
  s.ops[1].reads.push_back(8);
  s.ops[3].reads.push_back(9);
  return s;
}

TEST(ModelStates, LowPrecisionWeightCopiesAreKeptWithTheWeights) {
  MemSection mem = account(with_fp8_weight_copies(one_layer()));
  // 2 bytes per bf16 parameter plus the two copies; nothing else changes.
  EXPECT_DOUBLE_EQ(mem.param_bytes, 2e6 + 2 * (1e6 + 4));
  EXPECT_DOUBLE_EQ(mem.grad_bytes, 4e6);
  EXPECT_DOUBLE_EQ(mem.optimizer_state_bytes, 12e6);
  EXPECT_DOUBLE_EQ(mem.activation_bytes, 1500);
  EXPECT_DOUBLE_EQ(mem.temporary_bytes, 500);
}

TEST(ModelStates, Fp8ParametersHoldOneBytePerParameter) {
  // --fp8-param-gather: the parameter itself is the fp8 rowwise copy (1e6 + 4 bytes, no bf16
  // weight), the columnwise copy is kept beside it; fp32 gradients and optimizer states stay.
  ShardSection shard = with_fp8_weight_copies(one_layer());
  shard.buffers[0].bytes = 1e6 + 4;
  shard.ops[4].writes = {9};
  shard.ops[1].reads.pop_back();
  MemSection mem = account(shard);
  EXPECT_DOUBLE_EQ(mem.param_bytes, 2 * (1e6 + 4));
  EXPECT_DOUBLE_EQ(mem.grad_bytes + mem.optimizer_state_bytes, 16e6);
}

TEST(Capacity, NeedsTheShardSection) {
  Graph g;
  EXPECT_THROW(account_memory(g), DataError);
}

}  // namespace
}  // namespace syssim
