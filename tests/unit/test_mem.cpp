// Memory accounting on a hand-built shard section; the live-buffer trace is worked out by
// hand in the comments.
#include <gtest/gtest.h>

#include "common/error.hpp"
#include "mem/allocator.hpp"
#include "mem/mem.hpp"
#include "mem/reserve.hpp"

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

MemSection account(const ShardSection& shard, std::optional<double> gpu_memory_GB = std::nullopt,
                   const MemOptions& options = {}) {
  Graph g;
  g.shard = shard;
  if (gpu_memory_GB) {
    g.cost = CostSection{};
    g.cost->hardware.gpu_memory_GB = gpu_memory_GB;
  }
  account_memory(g, options);
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

// Two layers on one rank, forward then backward; bytes by buffer:
//   b1 x, 100 B, nobody writes it: layer 0's input, last read by layer 0's backward
//   b2 h0 = layer 0 (x), 1000 B: layer 1's input, last read by layer 1's backward
//   b3 layer 0's workspace, 300 B, never read   b4 h1 = layer 1 (h0), 500 B
//   b5 loss (h1), 4 B   b6 dh1, 500 B   b7 dh0, 1000 B   b8 dx, 100 B   b9 weight grad
// Kept from the forward slot into the backward slot: x and h0, each for the layer that reads
// it last, and h1 and the loss, which the loss's backward (no layer) reads last.
TEST(Activations, EachLayerKeepsForItsBackwardWhatItsBackwardReadsLast) {
  ShardSection s;
  s.stage_params_local = {1e6};
  s.schedule = {{{0, 0, OpPass::forward}, {0, 0, OpPass::backward}}};
  s.buffers = {buffer(0, 2e6, "param"),       buffer(1, 100, "input"),        buffer(2, 1000, "activation"),
               buffer(3, 300, "activation"),  buffer(4, 500, "activation"),   buffer(5, 4, "activation"),
               buffer(6, 500, "activation"),  buffer(7, 1000, "activation"),  buffer(8, 100, "activation"),
               buffer(9, 4e6, "grad")};
  s.ops = {op(0, "decoder.layers.0", "fwd", {0, 1}, {2, 3}), op(1, "decoder.layers.1", "fwd", {0, 2}, {4}),
           op(2, "loss", "fwd", {4}, {5}),                   op(3, "loss", "bwd", {4, 5}, {6}),
           op(4, "decoder.layers.1", "bwd", {6, 2, 0}, {7, 9}), op(5, "decoder.layers.0", "bwd", {7, 1, 0}, {8, 9})};
  for (int64_t id : {0, 5}) s.ops[id].layer = 0;
  for (int64_t id : {1, 4}) s.ops[id].layer = 1;
  EXPECT_EQ(layer_bytes_kept_for_backward(s, 2), (std::vector<double>{100, 1000}));
  s.parallelism.pp = 2;
  EXPECT_THROW(layer_bytes_kept_for_backward(s, 2), DataError);
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

constexpr int64_t kMiB = 1 << 20;

TEST(CachingAllocator, SmallRequestsShareATwoMebibyteSegment) {
  CachingAllocator allocator;
  // 1000 B rounds up to 1024 B, in a new 2 MiB segment; the next request takes the rest.
  allocator.allocate(1000);
  EXPECT_EQ(allocator.allocated_bytes(), 1024);
  EXPECT_EQ(allocator.reserved_bytes(), 2 * kMiB);
  allocator.allocate(1000);
  EXPECT_EQ(allocator.reserved_bytes(), 2 * kMiB);
}

TEST(CachingAllocator, MidSizedRequestsSplitATwentyMebibyteSegment) {
  CachingAllocator allocator;
  // 5 MiB: a 20 MiB segment, split; 12 MiB fits the 15 MiB that remain, 4 MiB does not fit
  // the 3 MiB left after that.
  allocator.allocate(5 * kMiB);
  allocator.allocate(12 * kMiB);
  EXPECT_EQ(allocator.reserved_bytes(), 20 * kMiB);
  allocator.allocate(4 * kMiB);
  EXPECT_EQ(allocator.reserved_bytes(), 40 * kMiB);
}

TEST(CachingAllocator, FreedNeighboursMergeAndAHoleTooSmallStaysReserved) {
  CachingAllocator allocator;
  // Two 4 MiB blocks and the 12 MiB rest of one 20 MiB segment merge back into 20 MiB when
  // freed, which then serves 18 MiB.
  const auto x = allocator.allocate(4 * kMiB), y = allocator.allocate(4 * kMiB);
  allocator.free(x);
  allocator.free(y);
  allocator.allocate(18 * kMiB);
  EXPECT_EQ(allocator.reserved_bytes(), 20 * kMiB);
  // 100 MiB freed cannot serve 150 MiB: a segment of its own (2 MiB multiples beyond 10 MiB).
  const auto a = allocator.allocate(100 * kMiB);
  allocator.free(a);
  allocator.allocate(150 * kMiB);
  EXPECT_EQ(allocator.reserved_bytes(), (20 + 100 + 150) * kMiB);
  EXPECT_EQ(allocator.allocated_bytes(), (18 + 150) * kMiB);
}

TEST(CachingAllocator, TheSmallestFreeBlockThatFitsServes) {
  CachingAllocator allocator;
  const auto a = allocator.allocate(30 * kMiB), b = allocator.allocate(50 * kMiB);
  allocator.free(b);
  allocator.free(a);
  allocator.allocate(25 * kMiB);  // the 30 MiB block, split into 25 and 5
  allocator.allocate(45 * kMiB);  // the 50 MiB block
  EXPECT_EQ(allocator.reserved_bytes(), 80 * kMiB);
}

// one_layer() with the transients in MiB: x 100, h 100, ws 300, y 200, dy 400, dh 100. The
// allocator, op by op (outputs allocated, then the buffers last used freed):
//   embed     x, h, ws: new segments of 100, 100, 300 (500 reserved); frees x, ws
//   mlp       y: the 300 MiB block, split into 200 and 100
//   loss_grad dy: no free block of 400 (100 and 100), a new segment: 900 reserved; frees y
//   mlp_grad  dh: a free 100 MiB block
// The tensors peak at 700 MiB (h + y + dy); the allocator reserves 900.
TEST(CachingAllocator, ReplayedOverTheRanksOps) {
  ShardSection shard = one_layer();
  const std::vector<double> mib = {100, 100, 300, 200, 400, 100};
  for (size_t b = 0; b < mib.size(); ++b) shard.buffers[b + 1].bytes = mib[b] * kMiB;
  MemSection mem = account(shard, std::nullopt, MemOptions{true});
  EXPECT_DOUBLE_EQ(mem.activation_bytes + mem.temporary_bytes, 700.0 * kMiB);
  ASSERT_TRUE(mem.reserved_memory_gb.has_value());
  EXPECT_DOUBLE_EQ(*mem.reserved_memory_gb, (18e6 + 900.0 * kMiB) / 1e9);
  // The small buffers of one_layer() fit one 2 MiB segment.
  EXPECT_DOUBLE_EQ(*account(one_layer(), std::nullopt, MemOptions{true}).reserved_memory_gb, (18e6 + 2.0 * kMiB) / 1e9);
  // Not asked for: null.
  EXPECT_FALSE(account(shard).reserved_memory_gb.has_value());
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

// Memory outside the allocator (docs/memory.md "Memory outside the allocator").
TEST(Capacity, TheCudaContextCountsTowardTheCapacity) {
  // The tensors' peak 0.018002 GB fits 0.2 GB; with a 0.4 GB context the GPU needs 0.418002.
  ShardSection shard = one_layer();
  Graph g;
  g.shard = shard;
  g.cost = CostSection{};
  g.cost->hardware.gpu_memory_GB = 0.2;
  g.cost->hardware.cuda_context_GB = 0.4;
  account_memory(g);
  EXPECT_DOUBLE_EQ(g.mem->peak_memory_gb, 0.018002);
  EXPECT_DOUBLE_EQ(g.mem->cuda_context_bytes, 4e8);
  EXPECT_DOUBLE_EQ(g.mem->nccl_buffer_bytes, 0);  // no channel counts: not counted
  EXPECT_DOUBLE_EQ(g.mem->device_memory_gb, 0.418002);
  ASSERT_TRUE(g.mem->oom.has_value());
  EXPECT_DOUBLE_EQ(g.mem->oom->required_gb, 0.418002);
}

TEST(Capacity, TheAllocatorsFragmentationIsAShareOfTheTensors) {
  // 10% of the tensors' 0.018002 GB: 0.0018002 GB held unused, 0.0198022 GB on the GPU.
  ShardSection shard = one_layer();
  shard.training.allocator_fragmentation = 0.1;
  MemSection mem = account(shard, 0.019);
  EXPECT_DOUBLE_EQ(mem.peak_memory_gb, 0.018002);
  EXPECT_DOUBLE_EQ(mem.fragmentation_bytes, 1800200);
  EXPECT_DOUBLE_EQ(mem.device_memory_gb, 0.0198022);
  ASSERT_TRUE(mem.oom.has_value());
  EXPECT_DOUBLE_EQ(mem.oom->required_gb, 0.0198022);
}

// A collective of stage 0 in `group` of `size` ranks.
ShardOp collective(Collective kind, CommGroup group, int64_t size, OpPhase phase = OpPhase::fwd) {
  ShardOp o;
  o.kind = OpKind::collective;
  o.collective = kind;
  o.group = group;
  o.group_size = size;
  o.phase = phase;
  return o;
}

// NCCL's buffers on 8-GPU nodes with the H100 SXM preset's channels: 24 ring channels inside a
// node, 16 across nodes, 32 send/recv channels per peer inside a node (2 across), 16 send/recv
// channels across nodes, 16 NVLS channels. A connection's receiver holds 10 MiB, an NVLink
// sender 2 MiB, a network sender 10 MiB; NVLS 1 MiB per channel, direction and GPU of the
// node; the network send/recv pool 16 x 128 KiB per channel and direction.
double nccl_bytes(const ParallelismConfig& p, const std::vector<ShardOp>& ops) {
  ShardSection shard;
  shard.parallelism = p;
  shard.ops = ops;
  HardwareConfig hw;
  hw.gpus_per_node = 8;
  hw.nccl_channels = {24, 16, 32, 2, 16, 16};
  return memory_reserves(shard, hw).at(0).nccl_buffer_bytes;
}

// Parallel sizes in Megatron's default rank order (tp fastest).
ParallelismConfig sizes(int64_t tp, int64_t cp, int64_t ep, int64_t dp, int64_t pp) {
  ParallelismConfig p;
  p.tp = tp, p.cp = cp, p.ep = ep, p.dp = dp, p.pp = pp;
  return p;
}

TEST(Reserve, NcclBuffersOfEachCommunicatorTheRankUses) {
  const double MiB = 1 << 20;
  using C = Collective;
  // A ring inside the node: 24 x (10 + 2) MiB, and NVLS over its 8 GPUs 16 x 2 x 1 MiB x 8:
  // 288 + 256 = 544 MiB, counted once for all the group's collectives.
  const ShardOp tp_gather = collective(C::all_gather, CommGroup::tp, 8);
  EXPECT_DOUBLE_EQ(nccl_bytes(sizes(8, 1, 1, 1, 1), {tp_gather, collective(C::reduce_scatter, CommGroup::tp, 8)}), 544 * MiB);
  // dp 4 with tp 8: one GPU per node, each channel a receive and a network send: 16 x 20 MiB.
  EXPECT_DOUBLE_EQ(nccl_bytes(sizes(8, 1, 1, 4, 1), {tp_gather, collective(C::all_reduce, CommGroup::dp, 4)}),
                   (544 + 320) * MiB);
  // tp 2, dp 8: the dp group holds 4 GPUs in each of 2 nodes; per channel the node's 4 receives,
  // 3 NVLink sends and 1 network send, (40 + 6 + 10) / 4 = 14 MiB per GPU: 16 x 14 = 224 MiB.
  EXPECT_DOUBLE_EQ(nccl_bytes(sizes(2, 1, 1, 8, 1), {collective(C::all_reduce, CommGroup::dp, 8)}), 224 * MiB);
  // An 8-way all-to-all inside the node: 7 NVLink peers x 32 channels x 12 MiB = 2,688 MiB.
  EXPECT_DOUBLE_EQ(nccl_bytes(sizes(1, 1, 8, 8, 1), {collective(C::all_to_all, CommGroup::ep, 8)}), 2688 * MiB);
  // Context parallelism's ring exchange, cp 4 inside the node: its 2 neighbours x 32 x 12 MiB.
  EXPECT_DOUBLE_EQ(nccl_bytes(sizes(2, 4, 1, 1, 1), {collective(C::send_recv, CommGroup::cp, 4)}), 768 * MiB);
  // Pipeline neighbours on other nodes (tp 8, pp 2): the network pool, 2 x 16 x 16 x 128 KiB;
  // on the same node (tp 4, pp 2): one NVLink peer, 32 channels x 12 MiB.
  const ShardOp to_next = collective(C::send_recv, CommGroup::pp, 2, OpPhase::bwd);
  EXPECT_DOUBLE_EQ(nccl_bytes(sizes(8, 1, 1, 1, 2), {to_next}), 64 * MiB);
  EXPECT_DOUBLE_EQ(nccl_bytes(sizes(4, 1, 1, 1, 2), {to_next}), 384 * MiB);
}

TEST(Capacity, NeedsTheShardSection) {
  Graph g;
  EXPECT_THROW(account_memory(g), DataError);
}

}  // namespace
}  // namespace syssim
