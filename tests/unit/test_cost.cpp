// The roofline cost model on hand-built shard sections; every expected time is worked out
// by hand in the comments.
#include <gtest/gtest.h>

#include <map>
#include <tuple>

#include "common/csv.hpp"
#include "common/error.hpp"
#include "common/io.hpp"
#include "cost/cost.hpp"

namespace syssim {
namespace {

// 1000 TFLOP/s tensor cores, 50 TFLOP/s vector units, 2000 GB/s HBM, 8 GPUs per node on a
// 450 GB/s link with 2 us per hop, 50 GB/s and 5 us between nodes, a 4 us launch floor.
HardwareConfig test_hardware() {
  HardwareConfig hw;
  hw.name = "test-gpu";
  hw.peak_tflops_mm = 1000;
  hw.peak_tflops_math = 50;
  hw.peak_memory_bandwidth_GBps = 2000;
  hw.gpus_per_node = 8;
  hw.inter_node_bandwidth_GBps = 50;
  hw.inter_node_latency_us = 5;
  hw.kernel_launch_us = 4;
  hw.topology = {TopologyLevel{"nvlink", 8, 450, 2}};
  return hw;
}

ShardOp compute_op(const std::string& kind, double flops, double bytes, const std::string& dtype = "bf16") {
  ShardOp op;
  op.kind = parse_enum<OpKind>(kind).value();
  op.dtype = dtype;
  op.flops = flops;
  op.bytes = bytes;
  return op;
}

ShardOp collective_op(const std::string& collective, const std::string& group, int64_t group_size,
                      double message_bytes) {
  ShardOp op;
  op.kind = OpKind::collective;
  op.collective = parse_enum<Collective>(collective).value();
  op.group = parse_enum<CommGroup>(group).value();
  op.group_size = group_size;
  op.message_bytes = message_bytes;
  return op;
}

// Costs the ops as one shard section with the given parallelism.
CostSection cost_of(std::vector<ShardOp> ops, ParallelismConfig parallelism = {},
                    const HardwareConfig& hw = test_hardware()) {
  Graph g;
  g.shard = ShardSection{};
  g.shard->parallelism = parallelism;
  for (size_t i = 0; i < ops.size(); ++i) ops[i].id = static_cast<int64_t>(i);
  g.shard->ops = ops;
  cost_graph(g, hw);
  return *g.cost;
}

OpCost cost_of_one(const ShardOp& op, ParallelismConfig parallelism = {}, const HardwareConfig& hw = test_hardware()) {
  return cost_of({op}, parallelism, hw).ops.at(0);
}

TEST(Roofline, GemmIsComputeBoundOnTensorCores) {
  // 2*4096^3 = 137438953472 FLOPs / 1e15 FLOP/s = 137.4389534 us; its 3*4096^2*2 bytes
  // take 100663296 / 2e12 B/s = 50.33 us.
  OpCost cost = cost_of_one(compute_op("gemm", 2.0 * 4096 * 4096 * 4096, 3.0 * 4096 * 4096 * 2));
  EXPECT_NEAR(cost.time_us, 137.4389534, 1e-6);
  EXPECT_EQ(cost.bound, OpBound::compute);
}

TEST(Roofline, Fp8GemmUsesTheFp8PeakAndNeedsIt) {
  ShardOp gemm = compute_op("gemm", 2.0 * 4096 * 4096 * 4096, 0, "fp8");
  HardwareConfig hw = test_hardware();
  try {
    cost_of_one(gemm, {}, hw);
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("peak_tflops_mm_fp8"), std::string::npos) << e.what();
  }
  hw.peak_tflops_mm_fp8 = 2000;  // half the time of the bf16 case
  EXPECT_NEAR(cost_of_one(gemm, {}, hw).time_us, 68.7194767, 1e-6);
}

TEST(Roofline, MathOpUsesTheVectorPeakAndCanBeMemoryBound) {
  // 1e9 FLOPs / 50e12 = 20 us; 1e8 bytes / 2e12 = 50 us.
  OpCost cost = cost_of_one(compute_op("math", 1e9, 1e8));
  EXPECT_DOUBLE_EQ(cost.time_us, 50.0);
  EXPECT_EQ(cost.bound, OpBound::memory);
  // 1e9 FLOPs of attention on tensor cores: 1 us, below the 4 us launch floor.
  OpCost attention = cost_of_one(compute_op("attention", 1e9, 0));
  EXPECT_DOUBLE_EQ(attention.time_us, 4.0);
  EXPECT_EQ(attention.bound, OpBound::launch);
}

TEST(Efficiency, EachFamilyTakesItsShareOfTheRoofline) {
  HardwareConfig hw = test_hardware();
  hw.efficiency = {{"gemm", 0.5}, {"norm", 0.8}};
  // The GEMM above at half speed: 2 * 137.4389534 us.
  EXPECT_NEAR(cost_of_one(compute_op("gemm", 2.0 * 4096 * 4096 * 4096, 0), {}, hw).time_us, 274.8779068, 1e-6);
  // An RMSNorm moving 2e8 bytes: 100 us at 2000 GB/s, 125 us at 80% of it.
  ShardOp norm = compute_op("math", 0, 2e8);
  norm.name = "syssim::rms_norm";
  EXPECT_NEAR(cost_of_one(norm, {}, hw).time_us, 125, 1e-9);
  // An element-wise op is not listed: the bare roofline.
  ShardOp add = compute_op("math", 0, 2e8);
  add.name = "aten::add";
  EXPECT_NEAR(cost_of_one(add, {}, hw).time_us, 100, 1e-9);
  // Transformer Engine's fp8 casts and transposes are a family of their own: 100 us at 40%.
  hw.efficiency["quantize"] = 0.4;
  for (const char* name : {"te::quantize", "te::transpose"}) {
    ShardOp cast = compute_op("memory", 0, 2e8);
    cast.name = name;
    EXPECT_NEAR(cost_of_one(cast, {}, hw).time_us, 250, 1e-9) << name;
  }
}

// Without a bundle, an FP8 GEMM on hardware with a measured FP8 speed-up is its 16-bit twin's
// time over it: 1e12 FLOPs take 1000 us at the 1000 TFLOP/s 16-bit peak, 2000 us at half of
// it, 1250 us over a 1.6x speed-up; without one, the FP8 peak: 500 us, 1000 at half.
TEST(Efficiency, Fp8GemmsWithoutABundleTakeTheMeasuredSpeedup) {
  HardwareConfig hw = test_hardware();
  hw.peak_tflops_mm_fp8 = 2000;
  hw.efficiency = {{"gemm", 0.5}};
  EXPECT_NEAR(cost_of_one(compute_op("gemm", 1e12, 0, "fp8"), {}, hw).time_us, 1000, 1e-9);
  hw.fp8_gemm_speedup = 1.6;
  EXPECT_NEAR(cost_of_one(compute_op("gemm", 1e12, 0, "fp8"), {}, hw).time_us, 1250, 1e-9);
  EXPECT_NEAR(cost_of_one(compute_op("gemm", 1e12, 0, "bf16"), {}, hw).time_us, 2000, 1e-9);
  // A speed-up past the peaks' 2x is no faster than the FP8 peak at the efficiency: 1000 us.
  hw.fp8_gemm_speedup = 20;
  EXPECT_NEAR(cost_of_one(compute_op("gemm", 1e12, 0, "fp8"), {}, hw).time_us, 1000, 1e-9);
  // The bare roofline (--roofline) is the FP8 peak's: 500 us.
  Graph g;
  g.shard = ShardSection{};
  g.shard->ops = {compute_op("gemm", 1e12, 0, "fp8")};
  CostOptions bare;
  bare.estimator = "roofline";
  cost_graph(g, hw, bare);
  EXPECT_NEAR(g.cost->ops.at(0).time_us, 500, 1e-9);
}

// The uncalibrated Hopper presets' FP8 speed-up is the H200's, recomputed here: the median
// over the GEMMs of at least 1 TFLOP (2 M N K) timed in both dtypes of their 16-bit over FP8 time.
TEST(Efficiency, UncalibratedHopperPresetsTakeTheH200sFp8Speedup) {
  const std::string dir = std::string(SYSSIM_SOURCE_DIR) + "/tests/data/calibration/h200/";
  auto times = [&](const std::string& file) {
    std::map<std::tuple<double, double, double>, double> by_shape;
    for (const auto& r : parse_csv(read_input(dir + file), dir + file).records)  // M,N,K,t_measured_ms
      by_shape[{std::stod(r[0]), std::stod(r[1]), std::stod(r[2])}] = std::stod(r[3]);
    return by_shape;
  };
  const auto sixteen = times("gemm.csv"), fp8 = times("gemm_fp8.csv");
  std::vector<double> speedups;
  for (const auto& [shape, fp8_ms] : fp8) {
    const auto& [m, n, k] = shape;
    if (2 * m * n * k >= 1e12 && sixteen.count(shape)) speedups.push_back(sixteen.at(shape) / fp8_ms);
  }
  ASSERT_EQ(speedups.size(), 79u);
  for (const char* name : {"h100-nvl", "h100-sxm-96gb-500w"}) {
    HardwareConfig hw = load_hardware_yaml(std::string(SYSSIM_SOURCE_DIR) + "/configs/hardware/" + name + ".yaml");
    ASSERT_TRUE(hw.fp8_gemm_speedup) << name;
    EXPECT_NEAR(*hw.fp8_gemm_speedup, percentile(speedups, 0.5), 0.005) << name;
  }
}

// Every preset that names a bundle loads it: the bundle exists and was fitted against the
// preset's peaks.
TEST(Efficiency, PresetBundlesFitTheirHardware) {
  for (const char* name :
       {"h100-sxm-80gb", "gh200", "h200-sxm", "b200", "b300", "gb200-nvl72", "gb300-nvl72", "mi300x"}) {
    HardwareConfig hw = load_hardware_yaml(std::string(SYSSIM_SOURCE_DIR) + "/configs/hardware/" + name + ".yaml");
    ASSERT_FALSE(hw.calibrated_model_dir.empty()) << name;
    EXPECT_NO_THROW(CostEstimator{hw}) << name;
  }
}

TEST(Collectives, AllReduceInsideANodeUsesTheRingFormula) {
  // 2*(8-1)/8 * 2^30 B / 450e9 B/s = 4175.6626489 us, plus 2*(8-1) hops of 2 us.
  ParallelismConfig p;
  p.tp = 8;
  OpCost cost = cost_of_one(collective_op("all_reduce", "tp", 8, 1073741824.0), p);
  EXPECT_NEAR(cost.time_us, 4175.6626489 + 28, 1e-6);
  EXPECT_EQ(cost.bound, OpBound::network);
}

TEST(Collectives, DataParallelGroupAcrossNodesUsesTheInterNodeLink) {
  // tp=8, dp=2: the dp group spans 16 ranks, two nodes. all_gather of 1e9 bytes:
  // (2-1)/2 * 1e9 / 50e9 = 10000 us, plus one hop of 5 us.
  ParallelismConfig p;
  p.tp = 8;
  p.dp = 2;
  EXPECT_DOUBLE_EQ(cost_of_one(collective_op("all_gather", "dp", 2, 1e9), p).time_us, 10005.0);
  // tp=2, dp=4 spans 8 ranks: one node. reduce_scatter: 3/4 * 1e9 / 450e9 s + 3 hops of 2 us.
  p.tp = 2;
  p.dp = 4;
  EXPECT_NEAR(cost_of_one(collective_op("reduce_scatter", "dp", 4, 1e9), p).time_us, 1666.6666667 + 6, 1e-6);
}

TEST(Collectives, InterNodeGroupNeedsTheInterNodeBandwidth) {
  HardwareConfig hw = test_hardware();
  hw.inter_node_bandwidth_GBps.reset();
  ParallelismConfig p;
  p.dp = 16;
  try {
    cost_of_one(collective_op("all_reduce", "dp", 16, 1e9), p, hw);
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("inter_node_bandwidth_GBps"), std::string::npos) << e.what();
  }
}

TEST(Collectives, SendRecvIsOneRingStepOnTheLinkOfTheContextParallelGroup) {
  // tp=2, cp=4: the cp group spans 8 ranks, one node. An 8 MiB K/V block:
  // 8388608 B / 450e9 B/s = 18.6413511 us, plus one hop of 2 us.
  ParallelismConfig p;
  p.tp = 2;
  p.cp = 4;
  OpCost cost = cost_of_one(collective_op("send_recv", "cp", 4, 8388608.0), p);
  EXPECT_NEAR(cost.time_us, 18.6413511 + 2, 1e-6);
  EXPECT_EQ(cost.bound, OpBound::network);
  // tp=8, cp=8 spans 64 ranks: every ring neighbour is on another node.
  // 8388608 / 50e9 s = 167.77216 us, plus one hop of 5 us.
  p.tp = 8;
  p.cp = 8;
  EXPECT_NEAR(cost_of_one(collective_op("send_recv", "cp", 8, 8388608.0), p).time_us, 172.77216, 1e-6);
}

TEST(Collectives, PipelineSendRecvUsesTheLinkBetweenTheTwoStages) {
  // tp 2 x dp 2: pipeline stage s of position i is rank 4 s + i, so with 8 GPUs per node
  // stages 0-1 share node 0 and 2-3 node 1. A 1 MB activation received by stage 1 from stage
  // 0 (forward) crosses NVLink: 1e6 / 450e9 s + 2 us = 4.2222 us; received by stage 1 from
  // stage 2 (backward) it crosses nodes: 1e6 / 50e9 s + 5 us = 25 us.
  ParallelismConfig p;
  p.tp = 2;
  p.dp = 2;
  p.pp = 4;
  ShardOp recv = collective_op("send_recv", "pp", 2, 1e6);
  recv.stage = 1;
  recv.phase = OpPhase::fwd;
  EXPECT_NEAR(cost_of_one(recv, p).time_us, 1e6 / 450e9 * 1e6 + 2, 1e-9);
  recv.phase = OpPhase::bwd;
  EXPECT_NEAR(cost_of_one(recv, p).time_us, 1e6 / 50e9 * 1e6 + 5, 1e-9);
  // Interleaved: chunk 1 of stage 0 (virtual stage 4) receives from virtual stage 3 on stage
  // 3, in the other node.
  recv.stage = 0;
  recv.chunk = 1;
  recv.phase = OpPhase::fwd;
  p.vpp = 2;
  EXPECT_NEAR(cost_of_one(recv, p).time_us, 25, 1e-9);
}

TEST(Collectives, EmbeddingGroupAllReducesBetweenFirstAndLastStage) {
  // pp 2 with tp 4: ranks 0-3 and 4-7 share a node. The ring all-reduce of two ranks: 2 x 1/2
  // x 9e6 B / 450 GB/s + 2 x 2 us = 24 us.
  ParallelismConfig p;
  p.tp = 4;
  p.pp = 2;
  EXPECT_NEAR(cost_of_one(collective_op("all_reduce", "embedding", 2, 9e6), p).time_us, 24, 1e-9);
}

TEST(Collectives, GroupOfOneTakesNoTime) {
  EXPECT_DOUBLE_EQ(cost_of_one(collective_op("all_reduce", "dp", 1, 1e9)).time_us, 0.0);
}

// Plumbing: the model's attention_backend picks the hardware's time factors, forward for the
// forward kernel and backward for its backward; GEMMs keep their time.
TEST(AttentionKernels, TheModelsBackendScalesEachDirectionOfAttention) {
  HardwareConfig hw = test_hardware();
  hw.attention_kernels["triton"] = {2.5, 3.5};
  ShardOp forward = compute_op("attention", 1e12, 0);  // 1000 us at 1000 TFLOP/s
  ShardOp backward = forward;
  backward.phase = OpPhase::bwd;
  // Head dimension 80: the Triton kernel computes at 128 (the next power of two), 1.6x.
  ShardOp padded = forward;
  padded.shape = {{"head_dim", 80}};
  auto times = [&](const std::string& backend) {
    Graph g;
    g.model = ModelConfig{};
    g.model->attention_backend = backend;
    g.shard = ShardSection{};
    g.shard->ops = {forward, backward, compute_op("gemm", 1e12, 0), padded};
    for (size_t i = 0; i < g.shard->ops.size(); ++i) g.shard->ops[i].id = static_cast<int64_t>(i);
    cost_graph(g, hw);
    return std::make_tuple(g.cost->ops[0].time_us, g.cost->ops[1].time_us, g.cost->ops[2].time_us,
                           g.cost->ops[3].time_us);
  };
  EXPECT_EQ(times("flash"), std::make_tuple(1000.0, 1000.0, 1000.0, 1000.0));
  EXPECT_EQ(times("triton"), std::make_tuple(2500.0, 3500.0, 1000.0, 4000.0));
  try {
    times("flash2");
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("no attention_kernels.flash2"), std::string::npos) << e.what();
  }
}

// The Hopper presets' factors come from data, recomputed here: flash2 is the median, over the
// shapes timed with both kernels on an H200, of FlashAttention-2's time over cuDNN's, forward
// and backward (backward = forward+backward - forward); triton is FlashAttention-2's time times
// the 1.4x forward (middle of 1.3-1.5x) and 2x backward by which FlashAttention-2 beats the
// Triton kernel (Dao, arXiv 2307.08691, section 4.1).
TEST(AttentionKernels, HopperFactorsAreTheMeasuredMediansTimesThePapersRatios) {
  const std::string data = std::string(SYSSIM_SOURCE_DIR) + "/tests/data/calibration/h200/attention_sdpa.csv";
  CsvTable table = parse_csv(read_input(data), data);
  std::map<std::vector<std::string>, std::map<std::string, std::pair<double, double>>> by_shape;
  for (const auto& r : table.records) {  // backend,b,seq,heads,kv_heads,head_dim,v_head_dim,fwd_us,fwd_bwd_us
    const double fwd = std::stod(r[7]);
    by_shape[{r[1], r[2], r[3], r[4], r[5], r[6]}][r[0]] = {fwd, std::stod(r[8]) - fwd};
  }
  std::vector<double> forward, backward;
  for (const auto& [shape, backends] : by_shape) {
    if (!backends.count("flash") || !backends.count("cudnn")) continue;
    forward.push_back(backends.at("flash").first / backends.at("cudnn").first);
    backward.push_back(backends.at("flash").second / backends.at("cudnn").second);
  }
  ASSERT_EQ(forward.size(), 54u);
  for (const char* name : {"h100-sxm-80gb", "h100-100gbe", "h100-nvl", "h800-sxm", "h200-sxm", "gh200"}) {
    HardwareConfig hw = load_hardware_yaml(std::string(SYSSIM_SOURCE_DIR) + "/configs/hardware/" + name + ".yaml");
    const auto& flash2 = hw.attention_kernels.at("flash2");
    const auto& triton = hw.attention_kernels.at("triton");
    EXPECT_NEAR(flash2.forward, percentile(forward, 0.5), 0.005) << name;
    EXPECT_NEAR(flash2.backward, percentile(backward, 0.5), 0.005) << name;
    EXPECT_NEAR(triton.forward, 1.4 * flash2.forward, 0.005) << name;
    EXPECT_NEAR(triton.backward, 2.0 * flash2.backward, 0.005) << name;
  }
}

// A flash attention op of one sequence: b 1, s 4096 causal, 32 heads of head dimension d (d_v
// = d), FLOPs as the trace counts them: 2 (d + d) per score forward, 2.5 times that backward.
ShardOp attention_at_head_dim(double head_dim, bool backward) {
  const double scores = 4096.0 * 4096 / 2 * 32;
  ShardOp op = compute_op("attention", scores * 4 * head_dim * (backward ? 2.5 : 1), 0);
  op.phase = backward ? OpPhase::bwd : OpPhase::fwd;
  op.shape = {{"b", 1}, {"s_q", 4096}, {"s_kv", 4096}, {"heads", 32}, {"kv_heads", 32}, {"head_dim", head_dim}, {"causal", 1}};
  return op;
}

// Per score, the GEMMs' FLOPs at the tensor-core peak plus one exponential at sfu_peak; the
// efficiency holds at head dimension 128. With 1000 TFLOPS and 4 T exponentials/s (250 FLOPs
// per exponential), head dimension 64 forward: (1 + 250/256) / (1 + 250/512) = 1.328 times
// the time at its FLOPs; backward (1 + 250/640) / (1 + 250/1280) = 1.164; head dimension 128
// and above: 1.
TEST(AttentionExponentials, SmallHeadDimensionsPayTheirExponentialsAtTheSfuPeak) {
  HardwareConfig hw = test_hardware();
  hw.sfu_peak = 4;
  auto time_of = [&](double head_dim, bool backward) {
    return cost_of({attention_at_head_dim(head_dim, backward)}, {}, hw).ops[0].time_us;
  };
  auto roofline = [](double head_dim, bool backward) {
    return 4096.0 * 4096 / 2 * 32 * 4 * head_dim * (backward ? 2.5 : 1) / 1e15 * 1e6;
  };
  EXPECT_NEAR(time_of(64, false) / roofline(64, false), (1 + 250.0 / 256) / (1 + 250.0 / 512), 1e-12);
  EXPECT_NEAR(time_of(64, true) / roofline(64, true), (1 + 250.0 / 640) / (1 + 250.0 / 1280), 1e-12);
  for (bool backward : {false, true}) {
    EXPECT_DOUBLE_EQ(time_of(128, backward), roofline(128, backward));
    EXPECT_DOUBLE_EQ(time_of(192, backward), roofline(192, backward));
  }
  // --roofline is the bare peaks': the FLOPs at the tensor-core peak at every head dimension.
  Graph bare;
  bare.shard = ShardSection{};
  bare.shard->ops = {attention_at_head_dim(64, false)};
  cost_graph(bare, hw, CostOptions{"roofline", ""});
  EXPECT_DOUBLE_EQ(bare.cost->ops[0].time_us, roofline(64, false));
  hw.sfu_peak.reset();  // without sfu_peak: the roofline at every head dimension
  EXPECT_DOUBLE_EQ(time_of(64, false), roofline(64, false));
}

// A forward attention recomputed in the backward pass (selective or full recomputation) runs
// the forward kernel again: its time is the forward's, not the backward kernel's. Head
// dimension 64 with the exponentials above: 1.328 times the roofline, not 1.164; and under the
// Triton backend of the test above, the forward's factor 2.5, not 3.5.
TEST(AttentionExponentials, ARecomputedForwardIsPricedAsTheForward) {
  HardwareConfig hw = test_hardware();
  hw.sfu_peak = 4;
  hw.attention_kernels["triton"] = {2.5, 3.5};
  ShardOp forward = attention_at_head_dim(64, false);
  ShardOp recomputed = forward;
  recomputed.phase = OpPhase::bwd;
  recomputed.pass = OpPass::backward;
  recomputed.recompute = true;
  const double roofline = 4096.0 * 4096 / 2 * 32 * 4 * 64 / 1e15 * 1e6;
  for (const std::string backend : {"flash", "triton"}) {
    Graph g;
    g.model = ModelConfig{};
    g.model->attention_backend = backend;
    g.shard = ShardSection{};
    g.shard->ops = {forward, recomputed};
    for (size_t i = 0; i < g.shard->ops.size(); ++i) g.shard->ops[i].id = static_cast<int64_t>(i);
    cost_graph(g, hw);
    const double factor = backend == "triton" ? 2.5 : 1.0;
    EXPECT_NEAR(g.cost->ops[0].time_us / roofline, factor * (1 + 250.0 / 256) / (1 + 250.0 / 512), 1e-12) << backend;
    EXPECT_NEAR(g.cost->ops[1].time_us / roofline, factor * (1 + 250.0 / 256) / (1 + 250.0 / 512), 1e-12) << backend;
  }
}

// Against cuDNN's attention on an H200 (tests/data/calibration/h200/attention_sdpa.csv): at
// 8,192 tokens, 64 heads of 64 and 32 heads of 128 run the same FLOPs; the model's ratios of
// their times with the Hopper presets' sfu_peak (989 TFLOPS / 3.86 T exponentials/s) are within
// 5% of the measured ones, forward and backward.
TEST(AttentionExponentials, HopperRatiosOfHeadDimension64To128MatchCudnnOnAnH200) {
  const std::string data = std::string(SYSSIM_SOURCE_DIR) + "/tests/data/calibration/h200/attention_sdpa.csv";
  CsvTable table = parse_csv(read_input(data), data);
  std::map<std::string, std::pair<double, double>> at;  // by heads/head_dim: forward, backward us
  for (const auto& r : table.records)  // backend,b,seq,heads,kv_heads,head_dim,v_head_dim,fwd_us,fwd_bwd_us
    if (r[0] == "cudnn" && r[1] == "1" && r[2] == "8192" && r[4] == "8" && r[5] == r[6])
      at[r[3] + "/" + r[5]] = {std::stod(r[7]), std::stod(r[8]) - std::stod(r[7])};
  ASSERT_TRUE(at.count("64/64") && at.count("32/128"));
  HardwareConfig hw = load_hardware_yaml(std::string(SYSSIM_SOURCE_DIR) + "/configs/hardware/h100-nvl.yaml");
  hw.peak_tflops_mm = 989;
  hw.sfu_peak = 3.86;
  hw.efficiency.clear();
  for (bool backward : {false, true}) {
    const double model = cost_of({attention_at_head_dim(64, backward)}, {}, hw).ops[0].time_us /
                         cost_of({attention_at_head_dim(128, backward)}, {}, hw).ops[0].time_us * 2;
    const double measured = backward ? at["64/64"].second / at["32/128"].second : at["64/64"].first / at["32/128"].first;
    EXPECT_NEAR(model / measured, 1.0, 0.05) << (backward ? "backward" : "forward") << ": " << model << " vs " << measured;
  }
}

// An 8192 x 28672 x 4096 GEMM in `dtype` (fp8 or fp4) on the hardware, its bytes at the dtype's width.
double large_gemm_us(const HardwareConfig& hw, const std::string& dtype) {
  const double m = 8192, n = 28672, k = 4096, width = dtype == "fp8" ? 1 : 0.5;
  ShardOp op = compute_op("gemm", 2 * m * n * k, (m * k + n * k + m * n) * width, dtype);
  op.shape = {{"m", m}, {"n", n}, {"k", k}};
  return cost_of_one(op, {}, hw).time_us;
}

TEST(Fp4Gemms, TakeTheirFp8TwinsCalibratedTimeOverThePeaks) {
  // B200: dense FP8 4.5 PFLOPS, FP4 9 (its datasheet); its bundle measured FP8, not FP4. A
  // compute-bound FP4 GEMM takes its FP8 twin's time over 2, never the FP4 roofline over the
  // 0.72 gemm efficiency, which made it 2.35x faster than FP8.
  const HardwareConfig b200 = load_hardware_yaml(std::string(SYSSIM_SOURCE_DIR) + "/configs/hardware/b200.yaml");
  EXPECT_NEAR(large_gemm_us(b200, "fp4"), large_gemm_us(b200, "fp8") / 2, 1e-9 * large_gemm_us(b200, "fp8"));
}

// B300: FP8 4.5 PFLOPS dense, FP4 13.5, but Transformer Engine's profiling guide measures its
// NVFP4 GEMMs 1.90 times as fast as MXFP8 (7.16 and 3.76 ms, the preset's fp4_gemm_speedup):
// an FP4 GEMM takes its FP8 twin's time over 1.90, not over the peaks' 3. A speed-up above the
// peaks' ratio is refused, as it would beat the FP4 roofline.
TEST(Fp4Gemms, TakeTheirFp8TwinsCalibratedTimeOverTheMeasuredSpeedup) {
  HardwareConfig b300 = load_hardware_yaml(std::string(SYSSIM_SOURCE_DIR) + "/configs/hardware/b300.yaml");
  ASSERT_EQ(b300.fp4_gemm_speedup, 1.90);
  EXPECT_NEAR(large_gemm_us(b300, "fp4"), large_gemm_us(b300, "fp8") / 1.90, 1e-9 * large_gemm_us(b300, "fp8"));
  b300.fp4_gemm_speedup = 3.5;
  try {
    validate(b300, "b300.yaml");
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    EXPECT_STREQ(e.what(), "b300.yaml: fp4_gemm_speedup=3.5 exceeds peak_tflops_mm_fp4 / peak_tflops_mm_fp8 = 3");
  }
}

TEST(CostSection, OneCostPerShardOpInOrder) {
  CostSection cost = cost_of({compute_op("gemm", 1e12, 0), compute_op("memory", 0, 2e6)});
  EXPECT_EQ(cost.estimator, "roofline");
  EXPECT_EQ(cost.hardware.name, "test-gpu");
  ASSERT_EQ(cost.ops.size(), 2u);
  EXPECT_EQ(cost.ops[0].id, 0);
  EXPECT_DOUBLE_EQ(cost.ops[0].time_us, 1000.0);  // 1e12 / 1e15 s
  EXPECT_EQ(cost.ops[1].id, 1);
  EXPECT_DOUBLE_EQ(cost.ops[1].time_us, 4.0);  // 2e6 B / 2e12 B/s = 1 us, launch floor 4 us
}

TEST(Roofline, AnOpOfSeveralKernelsHasTheLaunchFloorOfEach) {
  // A cast of 2e6 bytes (1 us at 2 TB/s) run as 6 kernels (an expert's rows each): 6 x 4 us.
  // The host issues it as one PyTorch call, 10 us, and 5 further launches of 2 us.
  HardwareConfig hw = test_hardware();
  hw.host = {10, 30, 2};
  ShardOp cast = compute_op("memory", 0, 2e6);
  cast.shape = {{"kernels", 6}};
  CostSection cost = cost_of({cast}, {}, hw);
  EXPECT_DOUBLE_EQ(cost.ops[0].time_us, 24.0);
  EXPECT_EQ(cost.ops[0].bound, OpBound::launch);
  EXPECT_DOUBLE_EQ(cost.ops[0].host_us, 20.0);
}

TEST(HostTime, OneCallPerModuleAndPassAndALaunchPerFurtherKernel) {
  // Host: a PyTorch op 10 us, a Transformer Engine module 30 us, 2 us per further kernel.
  HardwareConfig hw = test_hardware();
  hw.host = {10, 30, 2};
  auto op_of = [](const std::string& kind, const std::string& module, OpPhase phase) {
    ShardOp op = compute_op(kind, 1e9, 1e6);
    op.module = module;
    op.phase = phase;
    op.pass = phase == OpPhase::fwd ? OpPass::forward : OpPass::backward;
    return op;
  };
  ShardOp grouped = op_of("gemm", "experts", OpPhase::fwd);
  grouped.shape = {{"groups", 4}, {"m", 8}, {"n", 8}, {"k", 8}};
  CostSection cost = cost_of({
      op_of("math", "fc1", OpPhase::fwd),      // fc1's cast and GEMM: one module call, 30 us
      op_of("gemm", "fc1", OpPhase::fwd),      //   its second kernel: 2 us
      op_of("math", "act", OpPhase::fwd),      // a PyTorch op: 10 us
      grouped,                                 // 4 expert GEMMs in one module call: 30 + 3 x 2 us
      op_of("gemm", "fc1", OpPhase::bwd),      // fc1's backward: a new call, 30 us
      op_of("gemm", "fc1", OpPhase::bwd),      //   its wgrad: 2 us
      op_of("math", "act", OpPhase::bwd),      // 10 us
  }, {}, hw);
  std::vector<double> host_us;
  for (const OpCost& op : cost.ops) host_us.push_back(op.host_us);
  EXPECT_EQ(host_us, (std::vector<double>{30, 2, 10, 36, 30, 2, 10}));
  // Without a host block nothing is charged.
  for (const OpCost& op : cost_of({op_of("gemm", "fc1", OpPhase::fwd)}).ops) EXPECT_EQ(op.host_us, 0);
}

TEST(HostTime, ACudaGraphCostsOneCallPerReplay) {
  // Host: op 10 us, module 30 us, launch 2 us. Layer 0's three attention ops in one graph: one
  // replay, 10 us, on the first; an eager op after it: 10 us; layer 1's two attention ops: a
  // second replay, 10 us; a full-iteration graph: one replay for its whole pass.
  HardwareConfig hw = test_hardware();
  hw.host = {10, 30, 2};
  auto op_of = [](const std::string& kind, const std::string& module, int64_t layer, std::optional<CudaGraphScope> graph) {
    ShardOp op = compute_op(kind, 1e9, 1e6);
    op.module = module;
    op.layer = layer;
    op.cuda_graph = graph;
    return op;
  };
  const auto attn = CudaGraphScope::attn;
  CostSection cost = cost_of({op_of("math", "l0.norm", 0, attn), op_of("gemm", "l0.qkv", 0, attn),
                              op_of("attention", "l0.core", 0, attn), op_of("math", "l0.act", 0, std::nullopt),
                              op_of("gemm", "l1.qkv", 1, attn), op_of("attention", "l1.core", 1, attn)},
                             {}, hw);
  std::vector<double> host_us;
  for (const OpCost& op : cost.ops) host_us.push_back(op.host_us);
  EXPECT_EQ(host_us, (std::vector<double>{10, 0, 0, 10, 10, 0}));
  const auto whole = CudaGraphScope::full_iteration;
  host_us.clear();
  for (const OpCost& op : cost_of({op_of("gemm", "a", 0, whole), op_of("math", "b", 1, whole)}, {}, hw).ops)
    host_us.push_back(op.host_us);
  EXPECT_EQ(host_us, (std::vector<double>{10, 0}));
}

TEST(CostSection, NeedsTheShardSection) {
  Graph g;
  try {
    cost_graph(g, test_hardware());
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("syssim-shard"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace syssim
