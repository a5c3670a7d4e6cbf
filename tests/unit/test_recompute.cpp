// Activation memory and recomputation checked against the closed forms of Korthikanti et
// al. 2022, "Reducing Activation Recomputation in Large Transformer Models" (arXiv
// 2205.05198), on a GPT traced at real sizes, sharded and accounted by the real stages.
// docs/memory.md explains the one difference, the LayerNorm statistics.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "common/error.hpp"
#include "driver/driver.hpp"
#include "mem/mem.hpp"
#include "report/report.hpp"
#include "shard/shard.hpp"
#include "trace_builder.hpp"

namespace syssim {
namespace {

// The model of the paper's formulas: 16-bit activations, unfused attention with dropout on
// the probabilities, a GELU MLP with ffn = 4h, dropout after attention and after the MLP.
constexpr double s = 1024, b = 2, h = 2048, a = 16, t = 4;
// Two fp32 statistics per token (mean and reciprocal standard deviation) for each of a
// layer's two LayerNorms, which the paper leaves out: 2 norms x 2 x 4 bytes x s*b.
constexpr double kLayerNormStatistics = 16 * s * b;

ModelConfig gpt(int64_t layers) {
  auto n = [](double v) { return static_cast<int64_t>(v); };
  ModelConfig m =
      testing::megatron_gpt(testing::dense_model("gpt-korthikanti", layers, n(h), n(a), n(a), n(4 * h), n(s), 50257));
  m.attention_backend = "unfused";
  m.hidden_dropout = 0.1;
  m.attention_dropout = 0.1;
  return m;
}

ShardOptions layout(int64_t tp, bool sp, const std::string& recompute = "none") {
  ShardOptions options;
  options.parallelism.tp = tp;
  options.parallelism.sp = sp;
  options.training.micro_batch = static_cast<int64_t>(b);
  options.training.global_batch = static_cast<int64_t>(b);
  options.training.recompute = recompute;
  return options;
}

Graph sharded(const ModelConfig& model, const ShardOptions& options) {
  Graph g;
  g.model = model;
  g.trace = trace_of(model);
  shard_graph(g, options);
  return g;
}

// Bytes of the buffers that a forward op of `layer` writes and a backward op (recomputation
// included) reads: what the layer keeps for the backward pass. Its input is the previous
// layer's output, counted there; the last layer's output is the final norm's input.
double saved_for_backward(const ShardSection& shard, int64_t layer) {
  std::set<int64_t> written, read;
  for (const ShardOp& op : shard.ops) {
    if (op.phase == OpPhase::fwd && op.layer == layer) written.insert(op.writes.begin(), op.writes.end());
    if (op.phase == OpPhase::bwd) read.insert(op.reads.begin(), op.reads.end());
  }
  double bytes = 0;
  for (int64_t buffer : written)
    if (read.count(buffer)) bytes += shard.buffers[buffer].bytes;
  return bytes;
}

void expect_every_layer_saves(const Graph& g, double bytes) {
  for (int64_t layer = 0; layer < g.model->num_layers; ++layer)
    EXPECT_DOUBLE_EQ(saved_for_backward(*g.shard, layer), bytes) << "layer " << layer;
}

TEST(Activations, WithoutParallelismTheLayerSavesSbh34Plus5asOverH) {
  expect_every_layer_saves(sharded(gpt(3), layout(1, false)), s * b * h * (34 + 5 * a * s / h) + kLayerNormStatistics);
}

TEST(Activations, TensorParallelismSplitsAllButTheNormAndDropoutRegions) {
  expect_every_layer_saves(sharded(gpt(3), layout(4, false)),
                           s * b * h * (10 + 24 / t + 5 * a * s / (h * t)) + kLayerNormStatistics);
}

TEST(Activations, SequenceParallelismSplitsTheRest) {
  expect_every_layer_saves(sharded(gpt(3), layout(4, true)),
                           s * b * h / t * (34 + 5 * a * s / h) + kLayerNormStatistics / t);
}

TEST(Activations, SelectiveRecomputeDropsTheAttentionScores) {
  expect_every_layer_saves(sharded(gpt(3), layout(4, true, "selective")),
                           s * b * h / t * 34 + kLayerNormStatistics / t);
  expect_every_layer_saves(sharded(gpt(3), layout(1, false, "selective")), s * b * h * 34 + kLayerNormStatistics);
}

TEST(Activations, FullRecomputeStoresOnlyTheLayerInput) {
  expect_every_layer_saves(sharded(gpt(3), layout(1, false, "full")), 2 * s * b * h);
  expect_every_layer_saves(sharded(gpt(3), layout(4, true, "full")), 2 * s * b * h / t);
  // Without SP every TP rank keeps the whole input (Korthikanti's 2sbh, not 2sbh/t).
  expect_every_layer_saves(sharded(gpt(3), layout(4, false, "full")), 2 * s * b * h);
}

// Past Megatron's fused softmax kernel (more than 4096 keys) PyTorch's softmax runs in fp32
// and autograd keeps its fp32 output, 4 bytes per score where the kernel keeps 2; the bf16
// cast of it is the dropout's input only, so nothing else is kept: 7as/h where the paper has 5.
TEST(Activations, PyTorchsSoftmaxPastTheKernelKeepsItsFp32Output) {
  constexpr double long_s = 8192;
  ModelConfig model = gpt(2);
  model.seq_length = model.max_position_embeddings = static_cast<int64_t>(long_s);
  expect_every_layer_saves(sharded(model, layout(1, false)),
                           long_s * b * h * (34 + 7 * a * long_s / h) + 16 * long_s * b);
  expect_every_layer_saves(sharded(model, layout(4, true)),
                           long_s * b * h / t * (34 + 7 * a * long_s / h) + 16 * long_s * b / t);
}

TEST(Activations, UniformRecomputeKeepsTheInputOfEachGroupOfLayers) {
  ShardOptions options = layout(1, false, "full");
  options.training.recompute_num_layers = 2;
  Graph g = sharded(gpt(4), options);
  // Layers 0-1 and 2-3 are checkpoints: the output of layer 1 is the input of the second; the
  // output of layer 3 is the final norm's input.
  for (int64_t layer : {0, 2}) EXPECT_DOUBLE_EQ(saved_for_backward(*g.shard, layer), 0) << layer;
  for (int64_t layer : {1, 3}) EXPECT_DOUBLE_EQ(saved_for_backward(*g.shard, layer), 2 * s * b * h) << layer;
  EXPECT_EQ(g.shard->training.recompute_method, "uniform");
}

TEST(Activations, BlockRecomputeCheckpointsTheFirstLayersOnly) {
  ShardOptions options = layout(1, false, "full");
  options.training.recompute_method = "block";
  options.training.recompute_num_layers = 1;
  Graph g = sharded(gpt(3), options);
  EXPECT_DOUBLE_EQ(saved_for_backward(*g.shard, 0), 2 * s * b * h);
  for (int64_t layer : {1, 2})
    EXPECT_DOUBLE_EQ(saved_for_backward(*g.shard, layer), s * b * h * (34 + 5 * a * s / h) + kLayerNormStatistics);
}

TEST(Activations, SelectiveModulesDropWhatEachRecomputes) {
  // mlp: fc1's input is the norm output (kept), its output (8sbh), the GELU output (8sbh) are
  // recomputed; layernorm: both norm outputs (2sbh each) and their statistics.
  ShardOptions options = layout(1, false, "selective");
  options.training.recompute_modules = {"core_attn", "mlp", "layernorm"};
  Graph g = sharded(gpt(3), options);
  expect_every_layer_saves(g, s * b * h * (34 - 16 - 4));
}

TEST(Activations, PeakMemoryGrowsByOneLayerOfSavedActivations) {
  auto transient_peak = [](int64_t layers, const ShardOptions& options) {
    Graph g = sharded(gpt(layers), options);
    account_memory(g);
    return g.mem->activation_bytes + g.mem->temporary_bytes;
  };
  for (bool sp : {false, true}) {
    ShardOptions none = layout(4, sp), full = layout(4, sp, "full");
    double norms = sp ? kLayerNormStatistics / t : kLayerNormStatistics;
    double per_layer = sp ? s * b * h / t * (34 + 5 * a * s / h) : s * b * h * (10 + 24 / t + 5 * a * s / (h * t));
    EXPECT_DOUBLE_EQ(transient_peak(3, none) - transient_peak(2, none), per_layer + norms) << "sp " << sp;
    EXPECT_DOUBLE_EQ(transient_peak(3, full) - transient_peak(2, full), 2 * s * b * h / (sp ? t : 1)) << "sp " << sp;
  }
}

// torchtitan's Llama (separate q, k, v and gate, up linears; RMSNorm, RoPE and SwiGLU fused as
// torch.compile runs them) at the paper's sizes with 4 key/value heads of width d.
ModelConfig torchtitan_llama(int64_t layers) {
  auto n = [](double v) { return static_cast<int64_t>(v); };
  ModelConfig m = testing::dense_model("torchtitan-llama", layers, n(h), n(a), 4, n(3.5 * h), n(s), 50257);
  m.projection_fusion = false;
  return m;
}

// torchtitan's op-level policy saves the attention and the 1st, 3rd, 5th and 7th GEMM of a layer
// (q, v, gate, down); the layer's output is the next checkpoint's input. What a layer keeps:
// its output (2sbh), q (2sbh), v (2sb 4d), the attention output (2sbh), the gate (2sbf) and the
// down projection's output (2sbh), which the recomputed residual add reads.
TEST(Activations, OpLevelRecomputeKeepsWhatTorchtitansPolicySaves) {
  ShardOptions options = layout(1, false, "selective");
  options.training.recompute_modules = {"op"};
  const double d = h / a, f = 3.5 * h;
  expect_every_layer_saves(sharded(torchtitan_llama(3), options), 2 * s * b * (4 * h + 4 * d + f));
}

// It recomputes the other GEMMs, k, the projection and up: 2 x tokens x h x (4d + h + f) FLOPs.
TEST(Recompute, OpLevelRecomputeRerunsTheEvenGemms) {
  ShardOptions options = layout(1, false, "selective");
  options.training.recompute_modules = {"op"};
  const Graph g = sharded(torchtitan_llama(2), options);
  const double d = h / a, f = 3.5 * h;
  double flops = 0;
  std::vector<std::string> modules;
  for (const ShardOp& op : g.shard->ops)
    if (op.recompute && op.layer == 1 && op.kind == OpKind::gemm) {
      flops += op.flops;
      modules.push_back(op.module.str());
    }
  EXPECT_EQ(modules, (std::vector<std::string>{"decoder.layers.1.self_attention.linear_k",
                                               "decoder.layers.1.self_attention.linear_proj",
                                               "decoder.layers.1.mlp.linear_fc1_up"}));
  EXPECT_DOUBLE_EQ(flops, 2 * s * b * h * (4 * d + h + f));
  for (const ShardOp& op : g.shard->ops) {
    if (op.recompute) {
      EXPECT_NE(op.kind, OpKind::attention) << op_label(op);
    }
  }
}

// torch.nn.functional.cross_entropy of fp32 logits holds, at the peak of its backward, the
// log-softmax autograd keeps, the NLL's gradient and the log-softmax's, 4 bytes per logit each,
// where Megatron's vocab-parallel loss holds its fp32 softmax and the bf16 gradient: 6 bytes per
// logit more (the padded vocabulary, 50304), up to the per-token loss and labels.
TEST(Activations, TorchCrossEntropyPeaksSixBytesPerLogitAboveMegatrons) {
  auto transient_peak = [](const std::string& cross_entropy) {
    ModelConfig model = torchtitan_llama(1);
    model.cross_entropy = cross_entropy;
    Graph g = sharded(model, layout(1, false));
    account_memory(g);
    return g.mem->activation_bytes + g.mem->temporary_bytes;
  };
  EXPECT_NEAR(transient_peak("torch_fp32") - transient_peak("vocab_parallel"), 6 * s * b * 50304, 16 * s * b);
}

TEST(Recompute, FullRecomputeRerunsEachLayerWithItsCollectives) {
  Graph g = sharded(gpt(2), layout(4, true, "full"));
  std::map<int64_t, int> forward, recomputed, recomputed_collectives;
  for (const ShardOp& op : g.shard->ops) {
    if (!op.layer) continue;
    if (op.phase == OpPhase::fwd) ++forward[*op.layer];
    if (op.recompute) {
      EXPECT_EQ(op.phase, OpPhase::bwd);
      EXPECT_EQ(op.pass, OpPass::backward);
      ++recomputed[*op.layer];
      if (op.kind == OpKind::collective) ++recomputed_collectives[*op.layer];
    }
  }
  for (int64_t layer : {0, 1}) {
    EXPECT_EQ(recomputed[layer], forward[layer]);
    // All-gathers before QKV and fc1, reduce-scatters after the projection and fc2.
    EXPECT_EQ(recomputed_collectives[layer], 4);
  }
}

TEST(Recompute, BadCombinationsAreRefused) {
  Graph g;
  g.model = gpt(2);
  g.trace = trace_of(*g.model);
  auto message = [&](const ShardOptions& options) -> std::string {
    try {
      shard_graph(g, options);
    } catch (const std::exception& e) {
      return e.what();
    }
    return "no error";
  };
  ShardOptions o = layout(1, false, "selective");
  o.training.recompute_num_layers = 2;
  EXPECT_EQ(message(o), "recompute_num_layers=2 needs recompute=full");
  o = layout(1, false, "none");
  o.training.recompute_method = "block";
  EXPECT_EQ(message(o), "recompute_method=block needs recompute=full");
  o = layout(1, false, "full");
  o.training.recompute_modules = {"mlp"};
  EXPECT_EQ(message(o), "recompute_modules=mlp needs recompute=selective");
  o = layout(1, false, "full");
  o.training.recompute_num_layers = 0;
  EXPECT_EQ(message(o), "recompute_num_layers=0 must be at least 1");
  EXPECT_THROW(shard_graph(g, o), UsageError);
  o.training.recompute_num_layers = 3;
  EXPECT_EQ(message(o), "recompute_num_layers=3 exceeds the layers of every virtual pipeline stage (at most 2)");
  EXPECT_THROW(shard_graph(g, o), DataError);
  o = layout(1, false, "selective");
  o.training.recompute_modules = {"moe_act"};
  EXPECT_EQ(message(o), "recompute_modules=moe_act needs a model with experts; gpt-korthikanti has none");
  o.training.recompute_modules = {"op", "mlp"};
  EXPECT_EQ(message(o), "recompute_modules=op is a policy over all of a layer's ops; it takes no other module");
}

// Activation offloading (--cpu-offloading-num-layers N): the first N layers' saved tensors go
// to host memory and back, the paper's bytes per layer each way.
ShardOptions offloading(int64_t layers) {
  ShardOptions options = layout(1, false);
  options.training.cpu_offloading_num_layers = layers;
  return options;
}

std::vector<const ShardOp*> host_copies(const Graph& g, OpPhase phase) {
  std::vector<const ShardOp*> copies;
  for (const ShardOp& op : g.shard->ops)
    if (op.kind == OpKind::host_copy && op.phase == phase) copies.push_back(&op);
  return copies;
}

TEST(Offloading, EachOffloadedLayerCopiesItsSavedActivationsBothWays) {
  const double per_layer = s * b * h * (34 + 5 * a * s / h) + kLayerNormStatistics;
  Graph g = sharded(gpt(4), offloading(2));
  for (OpPhase phase : {OpPhase::fwd, OpPhase::bwd}) {
    std::vector<const ShardOp*> copies = host_copies(g, phase);
    ASSERT_EQ(copies.size(), 2u);
    for (const ShardOp* copy : copies) {
      EXPECT_DOUBLE_EQ(copy->bytes, per_layer) << copy->module.str();
      EXPECT_EQ(copy->stream, phase == OpPhase::fwd ? Stream::d2h : Stream::h2d);
    }
  }
}

TEST(Offloading, PeakActivationsLoseTheOffloadedLayers) {
  auto peak_activations = [](const ShardOptions& options) {
    Graph g = sharded(gpt(4), options);
    account_memory(g);
    return g.mem->activation_bytes;
  };
  const double per_layer = s * b * h * (34 + 5 * a * s / h) + kLayerNormStatistics;
  EXPECT_DOUBLE_EQ(peak_activations(layout(1, false)) - peak_activations(offloading(3)), 3 * per_layer);
}

// Transformer Engine spreads the N copies over the L layers' forward pass (cpu_offload.py,
// layer_window_map): with L = 5, N = 2 the windows end at layers 5 // 2 x 1 - 1 + 1 = 2 and
// 5 // 2 x 2 - 1 + 1 = 4. The forward pass past a window's end waits for its copy; the copy back
// starts when the backward pass reaches the window's end layer.
TEST(Offloading, CopiesFollowTransformerEnginesWindows) {
  Graph g = sharded(gpt(5), offloading(2));
  const std::vector<ShardOp>& ops = g.shard->ops;
  std::vector<const ShardOp*> to_host = host_copies(g, OpPhase::fwd), to_device = host_copies(g, OpPhase::bwd);
  ASSERT_EQ(to_host.size(), 2u);
  ASSERT_EQ(to_device.size(), 2u);
  auto first_op = [&](int64_t layer, OpPhase phase) {
    for (const ShardOp& op : ops)
      if (op.layer == layer && op.phase == phase && op.kind != OpKind::host_copy) return &op;
    return static_cast<const ShardOp*>(nullptr);
  };
  auto depends = [](const ShardOp* op, const ShardOp* on) {
    return std::find(op->deps.begin(), op->deps.end(), on->id) != op->deps.end();
  };
  EXPECT_TRUE(depends(first_op(3, OpPhase::fwd), to_host[0]));
  EXPECT_FALSE(depends(first_op(2, OpPhase::fwd), to_host[0]));
  // Layer 1's copy back (window 1) starts with the backward of layer 4, before any of its ops;
  // layer 0's (window 0) after the backward ops of layers 4 and 3, before those of layer 2.
  ASSERT_EQ(to_device[0]->layer, 1);
  ASSERT_EQ(to_device[1]->layer, 0);
  EXPECT_LT(to_device[0]->id, first_op(4, OpPhase::bwd)->id);
  EXPECT_GT(to_device[1]->id, first_op(3, OpPhase::bwd)->id);
  EXPECT_LT(to_device[1]->id, first_op(2, OpPhase::bwd)->id);
}

TEST(Offloading, MegatronsRefusalsAreRefused) {
  Graph g;
  g.model = gpt(4);
  g.trace = trace_of(*g.model);
  auto message = [&](ShardOptions options) -> std::string {
    try {
      shard_graph(g, options);
    } catch (const UsageError& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_EQ(message(offloading(4)), "cpu_offloading_num_layers=4: CPU offloading can be done only for 1 to 3 layers (num_layers - 1)");
  ShardOptions full = offloading(1);
  full.training.recompute = "full";
  EXPECT_EQ(message(full),
            "cpu_offloading_num_layers=1 needs recompute=none: Megatron-Core's CPU offloading does not work with activation recomputation");
  ShardOptions pipelined = offloading(1);
  pipelined.parallelism.pp = 2;
  EXPECT_EQ(message(pipelined), "cpu_offloading_num_layers=1 needs pp=1: Megatron-Core has no pipeline parallelism with CPU offloading");
}

// HFU counts the recomputed forward, MFU does not. With full recompute every layer's forward
// runs twice: the layers' hardware FLOPs are 4/3 of their model FLOPs (Narayanan et al. 2021).
TEST(Utilization, FullRecomputeAddsAThirdOfTheLayerFlopsToHfu) {
  HardwareConfig h100 = load_hardware_yaml(std::string(SYSSIM_SOURCE_DIR) + "/configs/hardware/h100-sxm-80gb.yaml");
  const ModelConfig model = gpt(2);
  ShardOptions none = layout(1, false), full = layout(1, false, "full");
  none.training.global_batch = full.training.global_batch = 2 * static_cast<int64_t>(b);  // two micro-batches
  Graph plain = simulate(model, h100, none), recomputed = simulate(model, h100, full);
  Throughput plain_rate = throughput(plain), recomputed_rate = throughput(recomputed);
  EXPECT_DOUBLE_EQ(plain_rate.hfu, plain_rate.mfu);
  EXPECT_GT(recomputed.sim->step_time_ms, plain.sim->step_time_ms);
  EXPECT_LT(recomputed.mem->peak_memory_gb, plain.mem->peak_memory_gb);

  // Megatron's model FLOPs of a GPT layer per sequence: 3 x (24 s h^2 + 4 s^2 h); the logits 6 s h V.
  const double sequences = 2 * b, layers = 2, vocab = 50304;
  const double layer_forward = 24 * s * h * h + 4 * s * s * h;
  const double model_flops = sequences * (3 * layers * layer_forward + 6 * s * h * vocab);
  const double recomputed_flops = sequences * layers * layer_forward;  // the GEMMs; norms etc. add ~0.1%
  EXPECT_NEAR(recomputed_rate.hfu / recomputed_rate.mfu, 1 + recomputed_flops / model_flops, 2e-3);
}

}  // namespace
}  // namespace syssim
