// Low precision (lib/shard/fp8.cpp) on a small hand-built MLP layer: a norm, a column-parallel
// fc1 and a row-parallel fc2, forward and backward. Every count and byte number is worked out
// by hand from Transformer Engine's recipes (docs/syssim-shard.md "Low precision").
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "common/error.hpp"
#include "shard/shard.hpp"
#include "trace_builder.hpp"

namespace syssim {
namespace {

using testing::ref;

constexpr double s = 2048, b = 1, h = 1024, f = 4096;
constexpr double kScale = 4;  // one fp32 scale per tensor (delayed, current; NVFP4's global scale)

ModelConfig small_model() { return testing::dense_model("small", 1, 1024, 16, 16, 4096, 2048, 50257); }

// The buffers of testing::add_mlp_tensors. Each GEMM's bytes count its operands.
Graph mlp_graph() {
  Graph g;
  g.model = small_model();
  testing::TraceBuilder t(*g.model, "decoder.layers.0.mlp");
  testing::add_mlp_tensors(t);
  const std::string gemm_bytes = "2*s*b*h + 2*h*f + 2*s*b*f";
  t.op("syssim::rms_norm", "math", "fwd", "none", {ref(0, {"s", "b", "h"})}, {ref(1, {"s", "b", "h"})}, "4*s*b*h",
       "4*s*b*h");
  t.op("syssim::linear", "gemm", "fwd", "column", {ref(1, {"s", "b", "h"}), ref(2, {"f", "h"})},
       {ref(3, {"s", "b", "f"})}, "2*s*b*h*f", gemm_bytes);
  t.op("syssim::linear", "gemm", "fwd", "row", {ref(3, {"s", "b", "f"}), ref(4, {"h", "f"})}, {ref(5, {"s", "b", "h"})},
       "2*s*b*h*f", gemm_bytes);
  // The output gradient, seeded like the loss gradient (under SP an s/tp piece).
  t.op("aten::fill_", "memory", "bwd", "none", {}, {ref(6, {"s", "b", "h"})}, "0", "2*s*b*h");
  t.op("syssim::linear_dgrad", "gemm", "bwd", "row", {ref(6, {"s", "b", "h"}), ref(4, {"h", "f"})},
       {ref(7, {"s", "b", "f"})}, "2*s*b*h*f", gemm_bytes, 2);
  t.op("syssim::linear_wgrad", "gemm", "bwd", "row", {ref(6, {"s", "b", "h"}), ref(3, {"s", "b", "f"})},
       {ref(8, {"h", "f"})}, "2*s*b*h*f", gemm_bytes, 2);
  t.op("syssim::linear_dgrad", "gemm", "bwd", "column", {ref(7, {"s", "b", "f"}), ref(2, {"f", "h"})},
       {ref(9, {"s", "b", "h"})}, "2*s*b*h*f", gemm_bytes, 1);
  t.op("syssim::linear_wgrad", "gemm", "bwd", "column", {ref(7, {"s", "b", "f"}), ref(1, {"s", "b", "h"})},
       {ref(10, {"f", "h"})}, "2*s*b*h*f", gemm_bytes, 1);
  g.trace = t.trace;
  return g;
}

ShardOptions layout(const std::string& dtype, std::optional<std::string> recipe, int64_t tp = 1, int64_t dp = 1) {
  ShardOptions o;
  o.parallelism.tp = tp;
  o.parallelism.sp = tp > 1;
  o.parallelism.dp = dp;
  o.training.global_batch = dp;
  o.training.clip_grad = 0;
  o.training.dtype = dtype;
  o.training.fp8_recipe = std::move(recipe);
  return o;
}

ShardSection sharded(const ShardOptions& options) {
  Graph g = mlp_graph();
  shard_graph(g, options);
  return *g.shard;
}

std::vector<const ShardOp*> named(const ShardSection& shard, const std::string& name,
                                  OpScope scope = OpScope::microbatch) {
  std::vector<const ShardOp*> ops;
  for (const ShardOp& op : shard.ops)
    if (op.name == name && op.scope == scope) ops.push_back(&op);
  return ops;
}

size_t count(const ShardSection& shard, const std::string& name, OpScope scope = OpScope::microbatch) {
  return named(shard, name, scope).size();
}

size_t tp_collectives(const ShardSection& shard, const std::string& collective) {
  size_t n = 0;
  for (const ShardOp& op : shard.ops) n += op.kind == OpKind::collective && op.group == CommGroup::tp && to_string(op.collective) == collective;
  return n;
}

// Bytes a forward op writes and a backward op reads: what the layer keeps for the backward pass.
double saved_for_backward(const ShardSection& shard) {
  std::set<int64_t> written, read;
  for (const ShardOp& op : shard.ops) {
    if (op.phase == OpPhase::fwd && op.scope == OpScope::microbatch) written.insert(op.writes.begin(), op.writes.end());
    if (op.phase == OpPhase::bwd) read.insert(op.reads.begin(), op.reads.end());
  }
  double bytes = 0;
  for (int64_t buffer : written)
    if (read.count(buffer)) bytes += shard.buffers[buffer].bytes;
  return bytes;
}

TEST(Recipes, CastAndScalingOpsOfOneLayer) {
  // Per micro-batch four tensors are quantized: fc1's input y and fc2's input z forward, the
  // output gradient of fc2 and the gradient of z backward; once per step the two weights.
  struct Expected {
    std::string dtype, recipe;
    size_t amax_passes, scale_updates;
  };
  for (const Expected& e : {Expected{"fp8", "delayed", 0, 2}, Expected{"fp8", "current", 4, 0},
                            Expected{"fp8", "mxfp8", 0, 0}, Expected{"fp4", "nvfp4", 4, 0}}) {
    SCOPED_TRACE(e.recipe);
    ShardSection shard = sharded(layout(e.dtype, e.recipe));
    EXPECT_EQ(count(shard, "te::quantize"), 4u);
    EXPECT_EQ(count(shard, "te::quantize", OpScope::step_start), 2u);
    EXPECT_EQ(count(shard, "te::amax"), e.amax_passes);
    EXPECT_EQ(count(shard, "te::amax", OpScope::step_start), e.amax_passes / 2);
    EXPECT_EQ(count(shard, "te::amax_and_scale_update"), e.scale_updates);
    EXPECT_EQ(shard.training.fp8_recipe, e.recipe);
  }
}

TEST(Recipes, DefaultsToDelayedForFp8AndNvfp4ForFp4) {
  EXPECT_EQ(sharded(layout("fp8", std::nullopt)).training.fp8_recipe, "delayed");
  EXPECT_EQ(sharded(layout("fp4", std::nullopt)).training.fp8_recipe, "nvfp4");
  EXPECT_FALSE(sharded(layout("bf16", std::nullopt)).training.fp8_recipe.has_value());
}

TEST(Casts, BytesOfTheInputCastPerRecipe) {
  // fc1's input y: N = s*b*h elements read in bf16 (2N) and written in two usages (rowwise
  // for the forward GEMM, columnwise for the wgrad).
  const double n = s * b * h;
  auto cast_of_y = [](const ShardSection& shard) {
    for (const ShardOp* op : named(shard, "te::quantize"))
      if (op->reads[0] == 1) return op->bytes;
    return -1.0;
  };
  // delayed: two fp8 copies with a scale each, and the amax the cast records.
  EXPECT_DOUBLE_EQ(cast_of_y(sharded(layout("fp8", "delayed"))), 2 * n + 2 * (n + kScale) + 4);
  // current: the same copies, the amax read from its own pass.
  EXPECT_DOUBLE_EQ(cast_of_y(sharded(layout("fp8", "current"))), 2 * n + 4 + 2 * (n + kScale));
  // mxfp8: one E8M0 byte per 32 elements in each copy.
  EXPECT_DOUBLE_EQ(cast_of_y(sharded(layout("fp8", "mxfp8"))), 2 * n + 2 * (n + n / 32));
  // nvfp4: half a byte per element, one E4M3 byte per 16, an fp32 global scale.
  EXPECT_DOUBLE_EQ(cast_of_y(sharded(layout("fp4", "nvfp4"))), 2 * n + 4 + 2 * (n / 2 + n / 16 + kScale));
  // The amax pass of current scaling reads the tensor once more.
  ShardSection current = sharded(layout("fp8", "current"));
  EXPECT_DOUBLE_EQ(named(current, "te::amax")[0]->bytes, 2 * n + 4);
  EXPECT_DOUBLE_EQ(named(current, "te::amax")[0]->flops, n);
}

TEST(Casts, WeightsAreQuantizedOncePerStepBeforeTheFirstMicroBatch) {
  ShardOptions options = layout("fp8", "delayed", 1, 4);
  options.training.global_batch = 16;  // 4 micro-batches per rank
  ShardSection shard = sharded(options);
  std::vector<const ShardOp*> casts = named(shard, "te::quantize", OpScope::step_start);
  ASSERT_EQ(casts.size(), 2u);
  // Each reads the bf16 weight (2fh) and writes its rowwise and columnwise copies (fh + 4 each).
  EXPECT_DOUBLE_EQ(casts[0]->bytes, 2 * f * h + 2 * (f * h + kScale));
  // Delayed scaling: the multiply of each copy and the amax, per element.
  EXPECT_DOUBLE_EQ(casts[0]->flops, 3 * f * h);
  // fc1's forward GEMM reads y's rowwise copy, w1's rowwise copy (and names the bf16 w1),
  // waiting for the weight cast; its dgrad reads w1's columnwise copy.
  const ShardOp& fc1 = *named(shard, "syssim::linear")[0];
  const ShardOp& fc1_dgrad = *named(shard, "syssim::linear_dgrad")[1];
  EXPECT_EQ(fc1.reads.size(), 3u);
  EXPECT_EQ(fc1.reads[1], casts[0]->writes[0]);
  EXPECT_EQ(fc1.reads[2], 2);
  EXPECT_EQ(fc1_dgrad.reads[1], casts[0]->writes[1]);
  EXPECT_EQ(std::count(fc1.deps.begin(), fc1.deps.end(), casts[0]->id), 1);
  EXPECT_EQ(shard.buffers[casts[0]->writes[0]].role, TensorRole::quantized_weight);
}

TEST(Gemms, RunInFp8OnQuantizedOperands) {
  // Each GEMM reads its two operands in fp8 (one byte per element and a scale) instead of bf16:
  // its bytes 2sbh + 2hf + 2sbf lose one byte per operand element and gain two scales.
  const double gemm_bytes = 2 * s * b * h + 2 * h * f + 2 * s * b * f;
  const std::vector<double> operand_elements = {
      s * b * h + h * f,      // fc1: y, w1
      s * b * f + h * f,      // fc2: z, w2
      s * b * h + h * f,      // fc2 dgrad: output gradient, w2
      s * b * h + s * b * f,  // fc2 wgrad: output gradient, z
      s * b * f + h * f,      // fc1 dgrad: gradient of z, w1
      s * b * f + s * b * h,  // fc1 wgrad: gradient of z, y
  };
  ShardSection shard = sharded(layout("fp8", "delayed"));
  size_t gemm = 0;
  for (const ShardOp& op : shard.ops) {
    if (op.kind == OpKind::gemm) {
      ASSERT_LT(gemm, operand_elements.size());
      EXPECT_EQ(op.dtype, "fp8") << op.name;
      EXPECT_DOUBLE_EQ(op.bytes, gemm_bytes - operand_elements[gemm] + 2 * kScale) << op.name;
      ++gemm;
    } else if (op.name == "syssim::rms_norm") {
      EXPECT_EQ(op.dtype, "bf16");
    }
  }
  EXPECT_EQ(gemm, operand_elements.size());
  size_t fp4_gemms = 0;
  for (const ShardOp& op : sharded(layout("fp4", "nvfp4")).ops) fp4_gemms += op.kind == OpKind::gemm && op.dtype == "fp4";
  EXPECT_EQ(fp4_gemms, operand_elements.size());
}

TEST(Activations, TheLinearsKeepTheirInputsInFp8ForBackward) {
  // bf16: the wgrads keep y (2sbh) and z (2sbf). fp8: their columnwise copies, s*b*h + 4 and
  // s*b*f + 4 bytes; nothing else is read backward.
  EXPECT_DOUBLE_EQ(saved_for_backward(sharded(layout("bf16", std::nullopt))), 2 * s * b * h + 2 * s * b * f);
  EXPECT_DOUBLE_EQ(saved_for_backward(sharded(layout("fp8", "delayed"))), s * b * h + kScale + s * b * f + kScale);
  EXPECT_DOUBLE_EQ(saved_for_backward(sharded(layout("fp8", "mxfp8"))),
                   (s * b * h + s * b * h / 32) + (s * b * f + s * b * f / 32));
}

TEST(SequenceParallel, QuantizedCopiesAreAllGathered) {
  // tp 2 with SP: y and fc2's output gradient are s/2 pieces. bf16 gathers y forward, y again
  // for fc1's wgrad, and the gradient for fc2's dgrad and wgrad: 3 all-gathers. fp8 gathers the
  // quantized pieces, one per usage: y rowwise, y columnwise, gradient rowwise and columnwise.
  EXPECT_EQ(tp_collectives(sharded(layout("bf16", std::nullopt, 2)), "all_gather"), 3u);
  ShardSection shard = sharded(layout("fp8", "delayed", 2));
  EXPECT_EQ(tp_collectives(shard, "all_gather"), 4u);
  const double piece = s / 2 * b * h;
  for (const ShardOp& op : shard.ops)
    if (op.kind == OpKind::collective && op.collective == Collective::all_gather) {
      EXPECT_DOUBLE_EQ(op.message_bytes, 2 * (piece + kScale));
      EXPECT_EQ(shard.buffers[op.reads[0]].bytes, piece + kScale);
    }
  // Current scaling agrees on one scale across the TP ranks before casting a gathered tensor:
  // a 4-byte all-reduce of the amax for y and for the gradient.
  ShardSection current = sharded(layout("fp8", "current", 2));
  size_t amax_reductions = 0;
  for (const ShardOp& op : current.ops)
    amax_reductions += op.kind == OpKind::collective && op.collective == Collective::all_reduce && op.message_bytes == 4;
  EXPECT_EQ(amax_reductions, 2u);
}

TEST(Rowwise, TorchaoCastsEachUsageAlongItsOwnAxisAndRescalesTheBackwardOutputs) {
  // torchao's rowwise recipe: the four per-micro-batch tensors and the two weights are cast by
  // torchao's kernels, with no amax pass and no scale update; each cast reads the bf16 tensor
  // and writes two one-byte copies (per-row scales not counted), finding each copy's row amaxes:
  // y's cast moves 2N + 2N bytes and does 2 x 2N FLOPs.
  ShardSection shard = sharded(layout("fp8", "rowwise"));
  EXPECT_EQ(count(shard, "torchao::quantize"), 4u);
  EXPECT_EQ(count(shard, "torchao::quantize", OpScope::step_start), 2u);
  EXPECT_EQ(count(shard, "te::quantize") + count(shard, "te::amax") + count(shard, "te::amax_and_scale_update"), 0u);
  const double n = s * b * h;
  const ShardOp* cast_of_y = nullptr;
  for (const ShardOp* op : named(shard, "torchao::quantize"))
    if (op->reads[0] == 1) cast_of_y = op;
  ASSERT_NE(cast_of_y, nullptr);
  EXPECT_DOUBLE_EQ(cast_of_y->bytes, 2 * n + 2 * n);
  EXPECT_DOUBLE_EQ(cast_of_y->flops, 2 * 2 * n);
  // The four backward GEMMs (two dgrads, two wgrads) run cuBLAS's per-tensor kernel and scale
  // their bf16 output in place afterwards: fc2's dgrad output is the gradient of z (2sbf bytes,
  // read and written), fc2's wgrad the gradient of w2 (2hf).
  std::vector<const ShardOp*> rescales = named(shard, "torchao::rescale");
  ASSERT_EQ(rescales.size(), 4u);
  EXPECT_DOUBLE_EQ(rescales[0]->bytes, 2 * 2 * s * b * f);
  EXPECT_DOUBLE_EQ(rescales[0]->flops, s * b * f);
  EXPECT_DOUBLE_EQ(rescales[1]->bytes, 2 * 2 * h * f);
  EXPECT_EQ(rescales[0]->reads, rescales[0]->writes);
  // Under SP, torchtitan gathers the bf16 pieces (3 gathers, as bf16 does) and casts after.
  ShardSection tp2 = sharded(layout("fp8", "rowwise", 2));
  EXPECT_EQ(tp_collectives(tp2, "all_gather"), 3u);
  for (const ShardOp& op : tp2.ops) {
    if (op.kind == OpKind::collective && op.collective == Collective::all_gather) {
      EXPECT_EQ(op.dtype, "bf16");
    }
  }
  // Every linear GEMM runs in fp8.
  size_t fp8_gemms = 0;
  for (const ShardOp& op : shard.ops) fp8_gemms += op.kind == OpKind::gemm && op.dtype == "fp8";
  EXPECT_EQ(fp8_gemms, 6u);
}

TEST(DelayedScaling, AmaxesAreReducedOverTheStageRanksAfterEachPass) {
  // tp 2, dp 2: Megatron's amax reduction group is tp x dp x cp = 4 ranks. Forward: two
  // linears with an input and a weight amax each (16 bytes); backward: an output gradient each (8).
  ShardSection shard = sharded(layout("fp8", "delayed", 2, 2));
  std::vector<double> messages;
  for (const ShardOp& op : shard.ops)
    if (op.kind == OpKind::collective && op.stream == Stream::amax) {
      EXPECT_EQ(op.group_size, 4);
      EXPECT_EQ(op.collective, Collective::all_reduce);
      messages.push_back(op.message_bytes);
    }
  EXPECT_EQ(messages, (std::vector<double>{16, 8}));
  std::vector<const ShardOp*> updates = named(shard, "te::amax_and_scale_update");
  ASSERT_EQ(updates.size(), 2u);
  EXPECT_EQ(updates[0]->phase, OpPhase::fwd);
  EXPECT_EQ(updates[1]->phase, OpPhase::bwd);
  // Per tensor: the reduced amax read (4), history, scale and inverse written (12).
  EXPECT_DOUBLE_EQ(updates[0]->bytes, 4 * (4 + 12));
}

TEST(Fp8Parameters, WeightsAreFp8AndGatheredInFp8) {
  ShardOptions options = layout("fp8", "delayed", 1, 2);
  options.training.distributed_optimizer = true;
  options.training.fp8_param_gather = true;
  ShardSection shard = sharded(options);
  // The weights hold fp8 (f*h + 4 bytes); only their transposes are made per step.
  EXPECT_DOUBLE_EQ(shard.buffers[2].bytes, f * h + kScale);
  EXPECT_EQ(count(shard, "te::quantize", OpScope::step_start), 0u);
  std::vector<const ShardOp*> transposes = named(shard, "te::transpose", OpScope::step_start);
  ASSERT_EQ(transposes.size(), 2u);
  EXPECT_DOUBLE_EQ(transposes[0]->bytes, 2 * (f * h + kScale));
  // The distributed optimizer's all-gather (one bucket) moves the two fp8 weights.
  std::vector<double> gathers;
  for (const ShardOp& op : shard.ops)
    if (op.kind == OpKind::collective && op.collective == Collective::all_gather && op.group == CommGroup::dp) gathers.push_back(op.message_bytes);
  EXPECT_EQ(gathers, std::vector<double>{2 * (f * h + kScale)});
}

TEST(Fp8Parameters, OnlyThemAreGatheredInFp8) {
  // bf16 weights under fp8 training: the distributed optimizer gathers 2 bytes per parameter.
  ShardOptions options = layout("fp8", "delayed", 1, 2);
  options.training.distributed_optimizer = true;
  auto dp_gathers = [](const ShardSection& shard) {
    std::vector<double> messages;
    for (const ShardOp& op : shard.ops)
      if (op.kind == OpKind::collective && op.collective == Collective::all_gather && op.group == CommGroup::dp)
        messages.push_back(op.message_bytes);
    return messages;
  };
  EXPECT_EQ(dp_gathers(sharded(options)), std::vector<double>{2 * 2 * f * h});
  // fp8 parameters gathered before the next forward (--overlap-param-gather): in fp8 too.
  options.training.fp8_param_gather = true;
  options.training.overlap_grad_reduce = true;
  options.training.overlap_param_gather = true;
  ShardSection shard = sharded(options);
  EXPECT_EQ(dp_gathers(shard), std::vector<double>{2 * (f * h + kScale)});
  EXPECT_EQ(named(shard, "collective::all_gather", OpScope::step_start).size(), 1u);
}

TEST(Errors, SettingsMegatronRefuses) {
  auto refused = [](ShardOptions options, const std::string& message) {
    Graph g = mlp_graph();
    try {
      shard_graph(g, options);
      ADD_FAILURE() << "accepted: " << message;
    } catch (const UsageError& e) {
      EXPECT_EQ(std::string(e.what()), message);
    }
  };
  refused(layout("fp8", "nvfp4"), "fp8_recipe=nvfp4 is a 4-bit recipe: it needs --dtype fp4");
  refused(layout("fp4", "mxfp8"), "dtype=fp4 needs fp8_recipe=nvfp4 (Transformer Engine's 4-bit recipe), got mxfp8");
  refused(layout("bf16", "delayed"), "fp8_recipe=delayed needs --dtype fp8");
  refused(layout("fp8", "tensorwise"), "fp8_recipe=tensorwise: expected delayed, current, mxfp8, nvfp4 or rowwise");
  refused(layout("int8", std::nullopt), "dtype=int8: expected bf16, fp16, fp8 or fp4");
  ShardOptions param_gather = layout("fp8", "delayed");
  param_gather.training.fp8_param_gather = true;
  refused(param_gather, "fp8_param_gather needs --distributed-optimizer (as in Megatron-LM)");
  param_gather.training.distributed_optimizer = true;
  param_gather.training.fp8_recipe = "mxfp8";
  refused(param_gather, "fp8_param_gather with fp8_recipe=mxfp8 is not simulated yet (delayed or current only)");
  param_gather.training.fp8_recipe = "rowwise";
  refused(param_gather, "fp8_param_gather with fp8_recipe=rowwise is not simulated yet (delayed or current only)");
  param_gather.training.dtype = "bf16";
  param_gather.training.fp8_recipe.reset();
  refused(param_gather, "fp8_param_gather needs --dtype fp8");
}

TEST(Hardware, LowPrecisionNeedsItsTensorCores) {
  HardwareConfig ampere;
  ampere.name = "a100";
  TrainingConfig training;
  training.dtype = "fp8";
  try {
    check_precision_support(ampere, training);
    ADD_FAILURE() << "fp8 accepted on hardware without fp8 tensor cores";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()), "dtype=fp8 needs fp8 tensor cores; hardware a100 has none (peak_tflops_mm_fp8)");
  }
  ampere.peak_tflops_mm_fp8 = 1;
  EXPECT_NO_THROW(check_precision_support(ampere, training));
  training.dtype = "fp4";
  EXPECT_THROW(check_precision_support(ampere, training), UsageError);
}

TEST(Hardware, BlockScaledRecipesNeedBlockScalingTensorCores) {
  HardwareConfig hopper;
  hopper.name = "h100";
  hopper.peak_tflops_mm_fp8 = 1979;
  TrainingConfig training;
  training.dtype = "fp8";
  training.fp8_recipe = "mxfp8";
  try {
    check_precision_support(hopper, training);
    ADD_FAILURE() << "mxfp8 accepted on hardware without block scaling";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()),
              "fp8_recipe=mxfp8 needs tensor cores with mxfp8 block scaling; hardware h100 has none "
              "(block_scaled_formats)");
  }
  training.fp8_recipe = "delayed";
  EXPECT_NO_THROW(check_precision_support(hopper, training));
  HardwareConfig blackwell = hopper;
  blackwell.block_scaled_formats = {"mxfp8", "nvfp4"};
  training.fp8_recipe = "mxfp8";
  EXPECT_NO_THROW(check_precision_support(blackwell, training));
}

// The block-scaled formats of a hardware file: strict, and consistent with the peaks.
const char* kBlackwell = R"(peak_tflops_mm: 2250
peak_tflops_mm_fp8: 4500
peak_tflops_math: 75
peak_memory_bandwidth_GBps: 8000
gpus_per_node: 1
)";

std::string hardware_error(const std::string& text) {
  try {
    parse_hardware_yaml(text, "hw.yaml");
  } catch (const DataError& e) {
    return e.what();
  }
  return "";
}

TEST(Hardware, BlockScaledFormatsAreReadStrictly) {
  HardwareConfig b200 = load_hardware_yaml(std::string(SYSSIM_SOURCE_DIR) + "/configs/hardware/b200.yaml");
  EXPECT_EQ(b200.block_scaled_formats, (std::vector<std::string>{"mxfp8", "nvfp4"}));
  EXPECT_EQ(hardware_from_json(to_json(b200), "/hardware").block_scaled_formats, b200.block_scaled_formats);
  EXPECT_TRUE(parse_hardware_yaml(kBlackwell, "hw.yaml").block_scaled_formats.empty());
  EXPECT_EQ(hardware_error(std::string(kBlackwell) + "block_scaled_formats: [mxfp8]\n"), "");
  EXPECT_EQ(hardware_error(std::string(kBlackwell) + "block_scaled_formats: [mxfp6]\n"),
            "hw.yaml: key 'block_scaled_formats' must be one of mxfp8|nvfp4, got 'mxfp6'");
  EXPECT_EQ(hardware_error(std::string(kBlackwell) + "block_scaled_formats: nvfp4\n"),
            "hw.yaml: key 'block_scaled_formats' must be a list (mxfp8, nvfp4)");
  EXPECT_EQ(hardware_error(std::string(kBlackwell) + "block_scaled_formats: [nvfp4]\n"),
            "hw.yaml: block_scaled_formats lists nvfp4 but peak_tflops_mm_fp4 is not given");
}

TEST(Recipes, TrainingKeysRoundTripThroughTheGraph) {
  TrainingConfig t;
  t.dtype = "fp8";
  t.fp8_recipe = "current";
  t.fp8_param_gather = true;
  TrainingConfig back = training_from_json(to_json(t), "/training");
  EXPECT_EQ(back.fp8_recipe, "current");
  EXPECT_TRUE(back.fp8_param_gather);
  EXPECT_EQ(low_precision_recipe(back), "current");
}

}  // namespace
}  // namespace syssim
