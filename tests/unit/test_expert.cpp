// Mixture of experts and expert parallelism, traced at real sizes and sharded by the real
// stages: the routed FLOPs, the token dispatcher's traffic, the routing-skew model, the
// experts' memory and their groups, each against a hand calculation (docs/parallelism.md
// "Expert parallelism").
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>

#include "calibrate/calibrate.hpp"
#include "common/error.hpp"
#include "driver/driver.hpp"
#include "mem/mem.hpp"
#include "network/network.hpp"
#include "shard/shard.hpp"
#include "sim/sim.hpp"
#include "trace_builder.hpp"

namespace syssim {
namespace {

// Two MoE layers of 8 experts, top-2, expert FFN m = 128, on h = 256; s = 512 tokens, b = 1.
constexpr double s = 512, h = 256, m = 128, k = 2, experts = 8;

ModelConfig moe_model(int64_t shared = 0) {
  ModelConfig model = testing::dense_model("tiny-moe", 2, 256, 8, 4, 1024, 512, 1024);
  model.num_moe_experts = 8;
  model.moe_router_topk = 2;
  model.moe_ffn_hidden_size = 128;
  model.moe_shared_expert_intermediate_size = shared;
  model.moe_layer_pattern = {1, 1};
  return model;
}

ShardOptions layout(int64_t tp, int64_t dp, int64_t ep, std::optional<int64_t> etp = 1) {
  ShardOptions options;
  options.parallelism.tp = tp;
  options.parallelism.sp = tp > 1;
  options.parallelism.dp = dp;
  options.parallelism.ep = ep;
  options.parallelism.etp = etp;
  options.training.global_batch = dp;
  return options;
}

ShardSection sharded(const ShardOptions& options, const ModelConfig& model = moe_model()) {
  return shard_trace(model, trace_of(model), options);
}

// The ops of layer 0's forward named `name` (or collectives of `collective`), in order.
std::vector<const ShardOp*> forward_ops(const ShardSection& shard, const std::function<bool(const ShardOp&)>& pick) {
  std::vector<const ShardOp*> found;
  for (const ShardOp& op : shard.ops)
    if (op.layer == 0 && op.phase == OpPhase::fwd && pick(op)) found.push_back(&op);
  return found;
}
std::vector<const ShardOp*> named(const ShardSection& shard, const std::string& name) {
  return forward_ops(shard, [&](const ShardOp& op) { return op.name == name; });
}
std::vector<const ShardOp*> collectives(const ShardSection& shard, const std::string& group) {
  return forward_ops(shard, [&](const ShardOp& op) { return op.kind == OpKind::collective && to_string(op.group) == group; });
}

TEST(Experts, RoutedFlopsAndGemmShapesOfARank) {
  // dp 4, ep 4: each rank routes its 512 tokens to 2 experts each and holds 8/4 = 2 experts.
  // Balanced, the rank's experts get 512 x 2 routed tokens, 512 per expert.
  ShardSection shard = sharded(layout(1, 4, 4));
  auto gemms = named(shard, "syssim::grouped_linear");
  ASSERT_EQ(gemms.size(), 2u);
  // fc1 (SwiGLU: 2m outputs) 2 x 1024 x 256 x 256; fc2 2 x 1024 x 128 x 256.
  EXPECT_DOUBLE_EQ(gemms[0]->flops, 2 * (s * k) * h * (2 * m));
  EXPECT_DOUBLE_EQ(gemms[1]->flops, 2 * (s * k) * m * h);
  EXPECT_EQ(gemms[0]->shape, (KernelShape{{"groups", 2}, {"m", 512}, {"n", 256}, {"k", 256}}));
  EXPECT_EQ(gemms[1]->shape, (KernelShape{{"groups", 2}, {"m", 512}, {"n", 256}, {"k", 128}}));
  // The same FLOPs with the experts split over etp 2 ranks (tp 2, SP: 256 tokens per rank,
  // gathered over the two expert-TP ranks, half of each expert's FFN).
  ShardSection split = sharded(layout(2, 2, 2, 2));
  EXPECT_DOUBLE_EQ(named(split, "syssim::grouped_linear")[0]->flops, 2 * (s / 2 * k * 2) * h * (2 * m / 2));
}

TEST(Experts, Fp32RouterRunsItsBackwardGemmsInFp32) {
  // Megatron-Core's RouterGatingLinearFunction (moe_router_dtype fp32): forward, the 16-bit
  // GEMM to fp32 logits, 2 x 512 x 256 x 8 FLOPs, 512 x 8 x 4 bytes out; backward, the input
  // and weight cast to fp32, then the data and weight gradients as fp32 GEMMs.
  ModelConfig model = moe_model();
  model.moe_router_dtype = "fp32";
  ShardSection shard = sharded(layout(1, 4, 4), model);
  const ShardOp* logits = named(shard, "syssim::router_linear")[0];
  EXPECT_EQ(logits->kind, OpKind::gemm);
  EXPECT_EQ(logits->dtype, "bf16");
  EXPECT_DOUBLE_EQ(logits->flops, 2 * s * h * experts);
  EXPECT_DOUBLE_EQ(shard.buffers[logits->writes[0]].bytes, s * experts * 4);
  std::vector<const ShardOp*> router_grads;
  for (const ShardOp& op : shard.ops)
    if (op.layer == 0 && op.phase == OpPhase::bwd && op.module.str().find("mlp.router") != std::string::npos &&
        op.kind == OpKind::gemm)
      router_grads.push_back(&op);
  ASSERT_EQ(router_grads.size(), 2u);
  for (const ShardOp* op : router_grads) {
    EXPECT_EQ(op->dtype, "fp32");
    EXPECT_DOUBLE_EQ(op->flops, 2 * s * experts * h);
  }
  // The 16-bit router keeps the training's precision.
  const ShardSection bf16_router = sharded(layout(1, 4, 4));
  for (const ShardOp& op : bf16_router.ops) {
    if (op.kind == OpKind::gemm) {
      EXPECT_NE(op.dtype, "fp32") << op.name;
    }
  }
}

TEST(Experts, GeluExpertsHaveNoGate) {
  // Without SwiGLU an expert's fc1 has m outputs: 2 x 1024 x 256 x 128 FLOPs; its activation
  // output is weighted by the fp32 routing probability, then cast back to bf16, as Megatron's
  // activation_func_with_probs; each expert holds 2 h m parameters.
  ModelConfig model = moe_model();
  model.swiglu = false;
  model.activation = "gelu";
  ShardSection shard = sharded(layout(1, 4, 4), model);
  auto gemms = named(shard, "syssim::grouped_linear");
  ASSERT_EQ(gemms.size(), 2u);
  EXPECT_DOUBLE_EQ(gemms[0]->flops, 2 * (s * k) * h * m);
  EXPECT_EQ(named(shard, "aten::gelu").size(), 1u);
  EXPECT_EQ(named(shard, "aten::mul").size(), 1u);
  EXPECT_DOUBLE_EQ(shard.stage_expert_params_local[0], 2 * (experts / 4) * 2 * h * m);
}

TEST(Experts, ClampedGluAndFc2BiasRunAsMegatronCoresSeparateKernels) {
  // GPT-OSS's experts (Megatron-Core's weighted_bias_quick_geglu_impl and
  // TEGroupedMLP._apply_bias). One rank of dp 4, ep 4 receives s x k = 1024 routed copies.
  // fc1's output [1024, 2m] bf16: each half clamped (reads and writes 1024 x 128 x 2 bytes),
  // then the halves concatenated (reads both, writes [1024, 256] bf16).
  ModelConfig model = moe_model();
  model.add_bias_linear = true;
  model.activation_func_clamp_value = 7.0;
  ShardSection shard = sharded(layout(1, 4, 4), model);
  const double half = s * k * m * 2, whole = 2 * half;
  auto clamps = named(shard, "syssim::clamp");
  ASSERT_EQ(clamps.size(), 2u);
  for (const ShardOp* clamp : clamps) EXPECT_DOUBLE_EQ(clamp->bytes, 2 * half);
  auto cats = named(shard, "aten::cat");
  ASSERT_EQ(cats.size(), 2u);
  EXPECT_DOUBLE_EQ(cats[0]->bytes, 2 * whole);
  // Backward, PyTorch's clamp_backward: the gradient where the input lies inside the bounds, a
  // comparison per bound (bf16 in, bool out: 3 bytes per value), their conjunction (3), the
  // where (the mask and the bf16 gradient in, bf16 out: 5).
  std::map<std::string, std::vector<double>> backward;
  for (const ShardOp& op : shard.ops)
    if (op.layer == 0 && op.phase == OpPhase::bwd && op.module.str().find("activation_func") != std::string::npos)
      backward[op.name].push_back(op.bytes);
  const double values = s * k * m;
  EXPECT_EQ(backward["aten::le"], (std::vector<double>{3 * values, 3 * values}));
  EXPECT_EQ(backward["aten::ge"], (std::vector<double>{3 * values}));
  EXPECT_EQ(backward["aten::bitwise_and"], (std::vector<double>{3 * values}));
  EXPECT_EQ(backward["syssim::where_else_zero"], (std::vector<double>{5 * values, 5 * values}));
  // fc2's bias, not in its GEMM: the bias [h] bf16 times the fp32 probability [1024, 1] makes
  // [1024, h] fp32; added to the GEMM's [1024, h] bf16 output in fp32; the experts' pieces
  // concatenated (fp32 in and out) and cast back to bf16.
  const double out16 = s * k * h * 2, out32 = s * k * h * 4;
  auto muls = named(shard, "aten::mul");
  ASSERT_EQ(muls.size(), 1u);
  EXPECT_DOUBLE_EQ(muls[0]->bytes, h * 2 + s * k * 4 + out32);
  auto adds = forward_ops(shard, [](const ShardOp& op) {
    return op.name == "aten::add" && op.module.str().find("experts") != std::string::npos;
  });
  ASSERT_EQ(adds.size(), 1u);
  EXPECT_DOUBLE_EQ(adds[0]->bytes, out16 + 2 * out32);
  EXPECT_DOUBLE_EQ(cats[1]->bytes, 2 * out32);
  auto casts = forward_ops(shard, [](const ShardOp& op) {
    return op.name == "aten::_to_copy" && op.module.str().find("experts") != std::string::npos;
  });
  ASSERT_EQ(casts.size(), 1u);
  EXPECT_DOUBLE_EQ(casts[0]->bytes, out32 + out16);
  // Both biases stay the experts' parameters: 2 layers of 2 local experts of 2hm + 2m + mh + h.
  EXPECT_DOUBLE_EQ(shard.stage_expert_params_local[0], 2 * (experts / 4) * (3 * h * m + 2 * m + h));
}

TEST(Experts, LowPrecisionPadsTheExpertsRowsUnlessPaddedToCapacity) {
  // TE's Fp8Padding/Fp8Unpadding around TEGroupedMLP: one copy of fc1's input (s x k = 1024
  // routed copies of h bf16 values: read and written) before its cast, one of fc2's output
  // after its GEMM, and the reverse on their gradients; none when every expert is padded to
  // its capacity (the counts are multiples already).
  ShardOptions options = layout(1, 4, 4);
  options.training.dtype = "fp8";
  options.training.fp8_recipe = "current";
  ShardSection shard = sharded(options);
  const double copy = 2 * (s * k * h * 2);
  std::vector<std::pair<OpPhase, std::string>> order;
  for (const ShardOp& op : shard.ops) {
    if (op.layer != 0 || (op.name != "te::fp8_padding" && op.name != "te::fp8_unpadding")) continue;
    EXPECT_DOUBLE_EQ(op.bytes, copy) << op.name;
    order.emplace_back(op.phase, op.name.str());
  }
  EXPECT_EQ(order, (std::vector<std::pair<OpPhase, std::string>>{{OpPhase::fwd, "te::fp8_padding"},
                                                                  {OpPhase::fwd, "te::fp8_unpadding"},
                                                                  {OpPhase::bwd, "te::fp8_padding"},
                                                                  {OpPhase::bwd, "te::fp8_unpadding"}}));
  // fc1's input is padded before the cast that quantizes it reads it.
  auto pad = std::find_if(shard.ops.begin(), shard.ops.end(), [](const ShardOp& op) { return op.name == "te::fp8_padding"; });
  auto fc1_cast = std::find_if(shard.ops.begin(), shard.ops.end(), [&](const ShardOp& op) {
    return op.name == "te::quantize" && std::count(op.reads.begin(), op.reads.end(), pad->writes[0]);
  });
  ASSERT_NE(fc1_cast, shard.ops.end());
  EXPECT_LT(pad->id, fc1_cast->id);
  EXPECT_TRUE(std::count(fc1_cast->deps.begin(), fc1_cast->deps.end(), pad->id)) << "the cast waits for the padding";
  // Megatron-Core's moe_router_padding_for_quantization pads the routing map instead.
  ShardOptions router_padded = options;
  router_padded.training.moe_router_padding_for_quantization = true;
  EXPECT_TRUE(named(sharded(router_padded), "te::fp8_unpadding").empty());
  options.training.moe_expert_capacity_factor = 1.0;
  options.training.moe_pad_expert_input_to_capacity = true;
  EXPECT_TRUE(named(sharded(options), "te::fp8_padding").empty());
  // The setting round-trips through the graph, written only when set.
  EXPECT_TRUE(training_from_json(to_json(router_padded.training), "t").moe_router_padding_for_quantization);
  EXPECT_FALSE(to_json(options.training).contains("moe_router_padding_for_quantization"));
  router_padded.training.dtype = "bf16";
  router_padded.training.fp8_recipe.reset();
  EXPECT_THROW(sharded(router_padded), UsageError);
}

TEST(Experts, LowPrecisionCastsTheExpertsRowsExpertByExpertButForDelayedScaling) {
  // ep 4 of 8 experts: 2 local experts. TE quantizes fc1's and fc2's inputs forward and their
  // output gradients backward, four casts per layer and micro-batch. Current scaling runs
  // three kernels per tensor (the amax, the scale from it, the cast), each local expert's rows
  // a tensor: the amax pass 2 x 2 kernels, the cast 2. MXFP8 casts each expert's rows in one
  // kernel; delayed scaling's fused multi-tensor cast takes them all in one.
  struct Expected {
    std::string recipe;
    size_t amax_passes;
    std::optional<double> amax_kernels, cast_kernels;
  };
  for (const Expected& e : {Expected{"current", 4, 4.0, 2.0}, Expected{"mxfp8", 0, std::nullopt, 2.0},
                            Expected{"delayed", 0, std::nullopt, std::nullopt}}) {
    SCOPED_TRACE(e.recipe);
    ShardOptions options = layout(1, 4, 4);
    options.training.dtype = "fp8";
    options.training.fp8_recipe = e.recipe;
    ShardSection shard = sharded(options);
    auto kernels = [](const ShardOp& op) -> std::optional<double> {
      return op.shape.count("kernels") ? std::optional<double>(op.shape.at("kernels")) : std::nullopt;
    };
    size_t casts = 0, amax_passes = 0;
    for (const ShardOp& op : shard.ops) {
      if (op.layer != 0 || op.scope != OpScope::microbatch || op.module.str().find("experts") == std::string::npos) continue;
      if (op.name == "te::quantize") {
        ++casts;
        EXPECT_EQ(kernels(op), e.cast_kernels);
      }
      if (op.name == "te::amax") {
        ++amax_passes;
        EXPECT_EQ(kernels(op), e.amax_kernels);
      }
    }
    EXPECT_EQ(casts, 4u);
    EXPECT_EQ(amax_passes, e.amax_passes);
  }
  // The attention's linears quantize one tensor: current scaling's amax pass is two kernels.
  ShardOptions options = layout(1, 4, 4);
  options.training.dtype = "fp8";
  options.training.fp8_recipe = "current";
  size_t attention_passes = 0;
  for (const ShardOp& op : sharded(options).ops)
    if (op.layer == 0 && op.scope == OpScope::microbatch && op.name == "te::amax" &&
        op.module.str().find("self_attention") != std::string::npos) {
      ++attention_passes;
      EXPECT_EQ(op.shape, (KernelShape{{"kernels", 2}}));
    }
  EXPECT_EQ(attention_passes, 4u);  // QKV's and the projection's inputs, their output gradients
}

TEST(Experts, AllToAllMovesEachRoutedTokenOnce) {
  // Dispatch and combine each move the rank's 1024 routed tokens of h bf16 values over the
  // ep group; the routing probabilities (fp32) travel with them.
  ShardSection shard = sharded(layout(1, 4, 4));
  auto exchanges = collectives(shard, "ep");
  ASSERT_EQ(exchanges.size(), 3u);  // tokens, probabilities, then the combine
  for (const ShardOp* op : exchanges) {
    EXPECT_EQ(op->collective, Collective::all_to_all);
    EXPECT_EQ(op->group_size, 4);
    EXPECT_EQ(op->stream, Stream::ep);
  }
  EXPECT_DOUBLE_EQ(exchanges[0]->message_bytes, s * k * h * 2);
  EXPECT_DOUBLE_EQ(exchanges[1]->message_bytes, s * k * 4);
  EXPECT_DOUBLE_EQ(exchanges[2]->message_bytes, s * k * h * 2);
  // With expert TP 2 each rank sends its 256 tokens' copies, then the expert-TP ranks gather
  // each other's (all_gather of the whole: 2 x) and reduce-scatter the experts' outputs.
  ShardSection split = sharded(layout(2, 2, 2, 2));
  EXPECT_DOUBLE_EQ(collectives(split, "ep")[0]->message_bytes, s / 2 * k * h * 2);
  auto gathers = collectives(split, "etp");
  ASSERT_EQ(gathers.size(), 3u);
  EXPECT_EQ(gathers[0]->collective, Collective::all_gather);
  EXPECT_DOUBLE_EQ(gathers[0]->message_bytes, s * k * h * 2);
  EXPECT_EQ(gathers[2]->collective, Collective::reduce_scatter);
  EXPECT_DOUBLE_EQ(gathers[2]->message_bytes, s * k * h * 2);
}

TEST(Experts, AllGatherDispatcherGathersTheTokensOfTheExpertGroup) {
  // Megatron's MoEAllGatherTokenDispatcher: the rank's 512 tokens of h are gathered over the
  // etp x ep = 4 ranks, the routing map and probabilities with them; the local experts' share
  // is permuted from there and the outputs reduce-scattered back.
  ShardOptions options = layout(1, 4, 4);
  options.training.moe_token_dispatcher_type = "allgather";
  ShardSection shard = sharded(options);
  auto exchanges = collectives(shard, "ep");
  ASSERT_FALSE(exchanges.empty());
  EXPECT_EQ(exchanges.front()->collective, Collective::all_gather);
  EXPECT_EQ(exchanges.front()->group_size, 4);
  EXPECT_EQ(exchanges.back()->collective, Collective::reduce_scatter);
  EXPECT_DOUBLE_EQ(exchanges.back()->message_bytes, 4 * s * h * 2);
  // The experts compute as much as with the alltoall dispatcher.
  EXPECT_DOUBLE_EQ(named(shard, "syssim::grouped_linear")[0]->flops, 2 * (s * k) * h * (2 * m));
}

TEST(Experts, FlexDispatcherSendsEachTokenOnceToEachGpuOfItsExperts) {
  // Megatron-Core's MoEFlexTokenDispatcher (DeepEP's, HybridEP's kernels), ep 4: a rank holds 2
  // of the 8 experts and gets a token with chance 1 - C(6,2)/C(8,2) = 13/28, so a token goes to
  // 4 x 13/28 = 13/7 GPUs, where the alltoall dispatcher sends its 2 copies.
  ShardOptions options = layout(1, 4, 4);
  options.training.moe_token_dispatcher_type = "flex";
  ShardSection shard = sharded(options);
  const double gpus = 13.0 / 7;
  auto exchanges = collectives(shard, "ep");
  ASSERT_EQ(exchanges.size(), 4u);  // the tokens, the routing map and probabilities, the combine
  for (const ShardOp* op : exchanges) {
    EXPECT_EQ(op->collective, Collective::flex_all_to_all);
    EXPECT_EQ(op->shape.at("experts"), experts);
    EXPECT_EQ(op->shape.at("topk"), k);
  }
  // One copy of the rank's token rows is the message; the experts' side holds 13/7 of them.
  EXPECT_DOUBLE_EQ(exchanges[0]->message_bytes, s * h * 2);
  EXPECT_NEAR(shard.buffers[exchanges[0]->writes[0]].bytes, s * h * 2 * gpus, 1e-6);
  EXPECT_DOUBLE_EQ(exchanges[3]->message_bytes, s * h * 2);
  EXPECT_DOUBLE_EQ(shard.buffers[exchanges[3]->writes[0]].bytes, s * h * 2);
  // The received tokens are copied to the local experts there: no sort by expert, the same
  // expert GEMMs as the alltoall dispatcher's.
  const ShardOp* permute = named(shard, "syssim::moe_permute")[0];
  EXPECT_GT(permute->id, exchanges[0]->id);
  EXPECT_NEAR(shard.buffers[permute->writes[0]].bytes, s * k * h * 2, 1e-6);
  EXPECT_TRUE(named(shard, "moe::sort_chunks").empty());
  EXPECT_NEAR(named(shard, "syssim::grouped_linear")[0]->flops, 2 * (s * k) * h * (2 * m), 1e-6);
  // The dispatch's first exchange waits on the host for the router (DeepEP's received counts).
  ASSERT_TRUE(exchanges[0]->host_waits_for);
  EXPECT_EQ(*exchanges[0]->host_waits_for, exchanges[0]->id - 1);
  // moe_imbalance 2: the busiest rank receives (2 + 6/7) / 2 = 10/7 of the balanced rows.
  options.training.moe_imbalance = 2;
  ShardSection skewed = sharded(options);
  const ShardOp* received = collectives(skewed, "ep")[0];
  EXPECT_NEAR(received->message_bytes, s * h * 2 * 10 / 7, 1e-6);
  EXPECT_NEAR(skewed.buffers[received->writes[0]].bytes, s * h * 2 * gpus * 10 / 7, 1e-6);
  EXPECT_NEAR(named(skewed, "syssim::grouped_linear")[0]->flops, 2 * (s * k * 10 / 7) * h * (2 * m), 1e-6);
  options.training.moe_imbalance = 1;
  // What Megatron-Core refuses, and expert TP, which is not simulated.
  ShardOptions refused = layout(2, 2, 2, 2);
  refused.training.moe_token_dispatcher_type = "flex";
  EXPECT_THROW(sharded(refused), UsageError);
  refused = layout(1, 4, 1);
  refused.training.moe_token_dispatcher_type = "flex";
  EXPECT_THROW(sharded(refused), UsageError);
  options.training.moe_expert_capacity_factor = 1;
  options.training.moe_pad_expert_input_to_capacity = true;
  EXPECT_THROW(sharded(options), UsageError);
}

TEST(Experts, TheBusiestExpertSetsThePace) {
  // moe_imbalance 2: the busiest of the 8 experts gets 2x the mean, the other 7 share the rest,
  // (8 - 2) / 7 = 6/7 of the mean each. The busiest rank holds it and one other: it receives
  // (2 + 6/7) / 2 = 10/7 of the balanced tokens.
  ShardOptions options = layout(1, 4, 4);
  options.training.moe_imbalance = 2;
  ShardSection shard = sharded(options);
  const double load = (2 + 6.0 / 7) / 2;
  EXPECT_DOUBLE_EQ(collectives(shard, "ep")[0]->message_bytes, s * k * h * 2 * load);
  const ShardOp* fc1 = named(shard, "syssim::grouped_linear")[0];
  EXPECT_NEAR(fc1->flops, 2 * (s * k * load) * h * (2 * m), 1e-6);
  EXPECT_NEAR(fc1->shape.at("busiest"), 512 * 2, 1e-9);
  EXPECT_NEAR(fc1->shape.at("m"), 512 * 6.0 / 7, 1e-9);
  // A capacity of 1.5 x the mean drops the busiest expert's tokens past it.
  options.training.moe_expert_capacity_factor = 1.5;
  EXPECT_DOUBLE_EQ(collectives(sharded(options), "ep")[0]->message_bytes, s * k * h * 2 * (1.5 + 6.0 / 7) / 2);
  // Below the others' share (6/7) too, a capacity of 0.75 caps every expert: a rank routes and
  // receives 0.75 of the balanced tokens, and the router's permutation holds only those.
  options.training.moe_expert_capacity_factor = 0.75;
  ShardSection dropped = sharded(options);
  EXPECT_DOUBLE_EQ(collectives(dropped, "ep")[0]->message_bytes, s * k * h * 2 * 0.75);
  EXPECT_DOUBLE_EQ(named(dropped, "syssim::moe_permute")[0]->writes.size() > 0 ? dropped.buffers[named(dropped, "syssim::moe_permute")[0]->writes[0]].bytes : 0,
                   s * k * h * 2 * 0.75);
  // Padded to a capacity of 1.25: every expert gets 1.25 x the mean, sent and received.
  options.training.moe_expert_capacity_factor = 1.25;
  options.training.moe_pad_expert_input_to_capacity = true;
  ShardSection padded = sharded(options);
  EXPECT_DOUBLE_EQ(collectives(padded, "ep")[0]->message_bytes, s * k * h * 2 * 1.25);
  EXPECT_EQ(named(padded, "syssim::grouped_linear")[0]->shape.count("busiest"), 0u);
  // Padded past the token count, every expert gets every token: 8 experts / top-2 = 4 x the mean.
  options.training.moe_expert_capacity_factor = 10;
  EXPECT_DOUBLE_EQ(collectives(sharded(options), "ep")[0]->message_bytes, s * k * h * 2 * 4);
  // A negative capacity is dropless routing, as Megatron-Core's TransformerConfig reads it.
  options.training.moe_expert_capacity_factor = -1;
  options.training.moe_pad_expert_input_to_capacity = false;
  ShardSection dropless = sharded(options);
  EXPECT_FALSE(dropless.training.moe_expert_capacity_factor.has_value());
  EXPECT_DOUBLE_EQ(collectives(dropless, "ep")[0]->message_bytes, s * k * h * 2 * load);
}

// Megatron-Core's dropless dispatchers copy the tokens per expert to the host after routing
// (MoEAlltoAllTokenDispatcher's cuda_dtoh sync before the all-to-all with ep x etp > 1, before
// the experts otherwise; the allgather dispatcher's .cpu()); a padded capacity needs no counts.
TEST(Experts, DroplessRoutingMakesTheHostWaitOncePerMoeLayerForward) {
  auto waits = [](const ShardSection& shard) {
    std::vector<std::pair<const ShardOp*, const ShardOp*>> found;  // (waiting op, op waited for)
    for (const ShardOp& op : shard.ops)
      if (op.host_waits_for) found.emplace_back(&op, &shard.ops[*op.host_waits_for]);
    return found;
  };
  // ep 4: the host waits, in each of the 2 layers, for the router's last op (the op before the
  // permutation) before it issues the dispatch all-to-all.
  ShardOptions options = layout(1, 4, 4);
  ShardSection dropless = sharded(options);
  auto found = waits(dropless);
  ASSERT_EQ(found.size(), 2u);
  for (auto [op, waited] : found) {
    EXPECT_EQ(op->collective, Collective::all_to_all);
    EXPECT_EQ(op->group, CommGroup::ep);
    EXPECT_EQ(op->phase, OpPhase::fwd);
    const ShardOp& permute = dropless.ops[waited->id + 1];
    EXPECT_EQ(permute.name, "syssim::moe_permute");
    EXPECT_LT(permute.id, op->id);
  }
  // Without expert parallelism it waits before the experts' first op.
  found = waits(sharded(layout(1, 1, 1)));
  ASSERT_EQ(found.size(), 2u);
  for (auto [op, waited] : found) EXPECT_NE(op->kind, OpKind::collective);
  // Padded to a capacity, the counts are known: no wait.
  options.training.moe_expert_capacity_factor = 1.25;
  options.training.moe_pad_expert_input_to_capacity = true;
  EXPECT_TRUE(waits(sharded(options)).empty());
  // A dense model never waits.
  EXPECT_TRUE(waits(shard_trace(testing::dense_model("dense", 2, 256, 8, 4, 1024, 512, 1024),
                                trace_of(testing::dense_model("dense", 2, 256, 8, 4, 1024, 512, 1024)), layout(1, 4, 1)))
                  .empty());
}

TEST(Experts, ExpertWeightsAreShardedByEpAndEtpAndTheirOptimizerByExpertDp) {
  // Per MoE layer a rank holds 8 / ep experts, each fc1 [2m/etp, h] and fc2 [h, m/etp].
  const double per_expert = 2 * m * h + h * m;
  ShardSection shard = sharded(layout(1, 4, 4));
  ASSERT_EQ(shard.stage_expert_params_local.size(), 1u);
  EXPECT_DOUBLE_EQ(shard.stage_expert_params_local[0], 2 * (experts / 4) * per_expert);
  ShardSection split = sharded(layout(2, 2, 2, 2));
  EXPECT_DOUBLE_EQ(split.stage_expert_params_local[0], 2 * (experts / 2) * per_expert / 2);
  // The distributed optimizer shards the experts' Adam state over the expert-DP ranks, tp*cp*dp
  // / (ep*etp): dp 8, ep 4 gives 2; the other parameters over dp 8.
  ShardOptions options = layout(1, 8, 4);
  options.training.distributed_optimizer = true;
  ShardSection folded = sharded(options);
  const double expert_params = folded.stage_expert_params_local[0];
  TrainingStateBytes states = training_state_bytes(folded.stage_params_local[0], folded.parallelism,
                                                   folded.training, expert_params);
  EXPECT_DOUBLE_EQ(states.optimizer_state_bytes,
                   (folded.stage_params_local[0] - expert_params) * 12 / 8 + expert_params * 12 / 2);
  EXPECT_DOUBLE_EQ(states.grad_bytes, folded.stage_params_local[0] * 4);
}

TEST(Experts, ExpertGradientsAreReducedOverTheExpertDataParallelGroup) {
  ShardOptions options = layout(1, 8, 4);
  options.training.distributed_optimizer = true;
  ShardSection shard = sharded(options);
  auto reduced = [&](const std::string& group) {
    double bytes = 0;
    for (const ShardOp& op : shard.ops)
      if (op.kind == OpKind::collective && to_string(op.group) == group && op.collective == Collective::reduce_scatter && op.scope == OpScope::step)
        bytes += op.message_bytes;
    return bytes;
  };
  // fp32 gradients: the experts' over the 2 expert-DP ranks, the rest over the 8 DP ranks.
  EXPECT_DOUBLE_EQ(reduced("edp"), shard.stage_expert_params_local[0] * 4);
  EXPECT_DOUBLE_EQ(reduced("dp"), (shard.params_local - shard.stage_expert_params_local[0]) * 4);
}

TEST(Experts, WithoutOverlapTheExpertGradientsAndWeightsSyncAfterTheDenseOnes) {
  // Megatron-LM's finish_grad_sync and start_param_sync walk the dense bucket groups, then the
  // expert ones, each collective synchronous: the edp reduce-scatter waits for the dp one, and
  // the edp all-gather after Adam for the dp one.
  ShardOptions options = layout(1, 8, 4);
  options.training.distributed_optimizer = true;
  ShardSection shard = sharded(options);
  auto step_collective = [&](const std::string& group, Collective collective) {
    for (const ShardOp& op : shard.ops)
      if (op.kind == OpKind::collective && to_string(op.group) == group && op.collective == collective &&
          op.scope == OpScope::step)
        return op;
    ADD_FAILURE() << "no " << group << " collective";
    return ShardOp{};
  };
  for (Collective collective : {Collective::reduce_scatter, Collective::all_gather}) {
    const ShardOp dense = step_collective("dp", collective), expert = step_collective("edp", collective);
    EXPECT_EQ(std::count(expert.deps.begin(), expert.deps.end(), dense.id), 1);
  }
}

TEST(Experts, OneExpertRankExchangesNothing) {
  // ep 1 and etp 1: Megatron-Core's _AllToAll returns its input over a group of one rank, and so
  // do the allgather dispatcher's gathers over etp x ep = 1: no collective, no buffer.
  for (const char* dispatcher : {"alltoall", "allgather"}) {
    ShardOptions options = layout(1, 4, 1);
    options.training.moe_token_dispatcher_type = dispatcher;
    const ShardSection shard = sharded(options);
    EXPECT_TRUE(collectives(shard, "ep").empty()) << dispatcher;
    EXPECT_TRUE(collectives(shard, "etp").empty()) << dispatcher;
  }
}

TEST(Experts, ActiveParametersCountTheTopKExperts) {
  // Two layers of 8 experts of 3 x h x m parameters; a token uses 2 of them.
  ShardSection shard = sharded(layout(1, 1, 1));
  const double expert_params = 2 * experts * 3 * h * m;
  EXPECT_DOUBLE_EQ(shard.params_total - shard.params_active, expert_params * (1 - k / experts));
}

TEST(Experts, ExpertGroupsFollowMegatronsExpertRankOrder) {
  // The expert RankGenerator takes the order tp-cp-ep-dp-pp over etp, ep and expert-dp: with
  // etp 1 the 4 ep ranks are consecutive (one GH200 node of 4), with etp 2 they are 2 apart
  // and span two nodes, whose NICs the all-to-all then loads.
  HardwareConfig hw = load_hardware_yaml(std::string(SYSSIM_SOURCE_DIR) + "/configs/hardware/gh200.yaml");
  auto crosses_nodes = [&](const ShardOptions& options) {
    ShardSection shard = sharded(options);
    const ShardOp* a2a = collectives(shard, "ep").front();
    CollectiveTime time = shard_collective_time(*a2a, shard.parallelism, hw);
    return std::any_of(time.phases.begin(), time.phases.end(), [](const Phase& p) {
      return std::find(p.links.begin(), p.links.end(), 1) != p.links.end();
    });
  };
  EXPECT_FALSE(crosses_nodes(layout(2, 4, 4, 1)));
  EXPECT_TRUE(crosses_nodes(layout(2, 4, 4, 2)));
}

TEST(Experts, AGroupedGemmIsPricedAsOneGemmPerLocalExpert) {
  // The roofline of each of the rank's 2 experts' GEMMs, the busiest expert's at its own
  // tokens, each priced at whole rows up to a multiple of 16 (the other expert's 512 x 6/7 =
  // 438.9 tokens at 448); and no faster than the host launching the 2 GEMMs, one kernel each.
  HardwareConfig hw = load_hardware_yaml(std::string(SYSSIM_SOURCE_DIR) + "/configs/hardware/h100-sxm-80gb.yaml");
  ShardOptions options = layout(1, 4, 4);
  options.training.moe_imbalance = 2;
  const ModelConfig model = moe_model();
  auto fc1_us = [&](const HardwareConfig& hardware) {
    Graph graph = simulate(model, trace_of(model), CostEstimator(hardware, {"roofline", ""}), options);
    return graph.cost->ops[named(*graph.shard, "syssim::grouped_linear")[0]->id].time_us;
  };
  EXPECT_DOUBLE_EQ(fc1_us(hw), 2 * hw.kernel_launch_us);
  hw.kernel_launch_us = 1e-6;
  const double expected = roofline_us(gemm_kernel(448, 256, 256, "bf16"), hw) +
                          roofline_us(gemm_kernel(1024, 256, 256, "bf16"), hw);
  EXPECT_NEAR(fc1_us(hw), expected, 1e-9);
}

TEST(Experts, ASkewNoOneNoticesCostsNextToNothing) {
  // One Mixtral-8x7B layer on tp 2, ep 8 (4096 tokens an expert): a skew of 1.0001 gives the
  // busiest expert 4096.4 tokens, priced at 4112, the others 4095.94 at 4096, so its grouped
  // weight gradient costs at most a 16-token granule more than at skew 1 (the calibrated model,
  // fitted on contiguous reduction dims, priced 4096.4 tokens at a fifth of 4096's speed), and
  // its weight dim stays exact (it was 14336.000000000002 at some skews).
  HardwareConfig hw = load_hardware_yaml(std::string(SYSSIM_SOURCE_DIR) + "/configs/hardware/h100-sxm-80gb.yaml");
  ModelConfig model = load_model_yaml("mixtral-8x7b");
  model.num_layers = 1;
  model.moe_layer_pattern = {1};
  auto wgrad = [&](double skew) {
    ShardOptions options = layout(2, 32, 8);
    options.training.moe_imbalance = skew;
    Graph graph = simulate(model, trace_of(model), CostEstimator(hw), options);
    const ShardOp& op = *std::find_if(graph.shard->ops.begin(), graph.shard->ops.end(),
                                      [](const ShardOp& o) { return o.name == "syssim::grouped_linear_wgrad"; });
    return std::pair{op.shape.at("m"), graph.cost->ops[op.id].time_us};
  };
  const auto [m_skewed, skewed_us] = wgrad(1.0001);
  const auto [m_balanced, balanced_us] = wgrad(1);
  EXPECT_EQ(m_skewed, m_balanced);
  EXPECT_GE(skewed_us, balanced_us);
  EXPECT_LT(skewed_us, balanced_us * (1 + 16.0 / 4096));
}

TEST(Experts, SharedExpertsAreTensorParallelLikeTheDenseMlp) {
  // A shared expert of width 256 on tp 2: its fc1 holds 2 x 256 / 2 outputs per rank and its
  // input is gathered over the sequence-parallel ranks, as a dense MLP's.
  ShardSection shard = sharded(layout(2, 2, 2, 1), moe_model(256));
  auto fc1 = forward_ops(shard, [](const ShardOp& op) {
    return op.name == "syssim::linear" && op.module.str().find("shared_experts.linear_fc1") != std::string::npos;
  });
  ASSERT_EQ(fc1.size(), 1u);
  EXPECT_DOUBLE_EQ(fc1[0]->flops, 2 * s * h * (2 * 256 / 2));
}

// The combined 1F1B schedule on real MoE layers, ep 8 over two GH200 nodes, pp 2 with vpp 2
// and 16 micro-batches: the all-to-alls of one micro-batch run under another's compute, so the
// step is shorter than in order; jumping over its steady state gives the step simulated
// micro-batch by micro-batch; and the search's bound stays under it (docs/syssim-sim.md, "The
// combined 1F1B schedule").
TEST(Experts, CombinedScheduleShortensTheStepAndKeepsTheBound) {
  HardwareConfig hw = load_hardware_yaml(std::string(SYSSIM_SOURCE_DIR) + "/configs/hardware/gh200.yaml");
  const ModelConfig model = [] {
    ModelConfig m = moe_model();
    m.num_layers = 4;
    m.moe_layer_pattern = {1, 1, 1, 1};
    return m;
  }();
  ShardOptions options = layout(1, 4, 4);
  options.parallelism.pp = 2;
  options.parallelism.vpp = 2;
  options.training.global_batch = 4 * 16;
  const CostEstimator roofline(hw, {"roofline", ""});
  const Graph in_order = simulate(model, trace_of(model), roofline, options);
  options.training.overlap_moe_expert_parallel_comm = true;
  SimOptions every_microbatch;
  every_microbatch.extrapolate_microbatches = false;
  const Graph full = simulate(model, trace_of(model), roofline, options, every_microbatch);
  const Graph combined = simulate(model, trace_of(model), roofline, options);
  EXPECT_LT(combined.sim->step_time_ms, in_order.sim->step_time_ms);
  EXPECT_LT(combined.sim->collective_exposed_ms, in_order.sim->collective_exposed_ms);
  EXPECT_NEAR(combined.sim->step_time_ms, full.sim->step_time_ms, 1e-9 * full.sim->step_time_ms);
  EXPECT_LE(step_time_lower_bound_ms(*combined.shard, *combined.cost), combined.sim->step_time_ms);
}

TEST(Experts, SharedExpertOverlapHidesTheSharedExpertsBehindTheAllToAlls) {
  // ep 8 over two GH200 nodes of 4: each all-to-all crosses the NICs and outlasts the shared
  // expert's few microseconds of work. Overlapped, the forward runs fc1 and the activation
  // after the dispatch all-to-all and fc2 after the combine one, the backward fc2's gradients
  // after its first all-to-all and the rest after its last; each then runs while the compute
  // stream would wait, and the step is shorter by exactly their time in every micro-batch.
  // The closed form is the GPU streams': the host issuing the ops is left out.
  HardwareConfig hw = load_hardware_yaml(std::string(SYSSIM_SOURCE_DIR) + "/configs/hardware/gh200.yaml");
  hw.host = {};
  const ModelConfig model = moe_model(256);
  ShardOptions options = layout(1, 8, 8);
  options.training.global_batch = 16;  // 2 micro-batches
  const CostEstimator roofline(hw, {"roofline", ""});
  const Graph plain = simulate(model, trace_of(model), roofline, options);
  options.training.moe_shared_expert_overlap = true;
  const Graph overlapped = simulate(model, trace_of(model), roofline, options);
  const ShardSection& shard = *overlapped.shard;

  // In the compute stream's order each shared-expert op follows an all-to-all of its layer.
  double shared_us = 0, shortest_all_to_all_us = 1e30;
  std::optional<double> group_us;
  for (const ShardOp& op : shard.ops) {
    if (op.scope != OpScope::microbatch) continue;
    const double us = overlapped.cost->ops[op.id].time_us;
    if (op.collective == Collective::all_to_all) {
      shortest_all_to_all_us = std::min(shortest_all_to_all_us, us);
      group_us = 0.0;
    } else if (op.module.str().find("shared_experts") != std::string::npos && op.name != "aten::add") {
      ASSERT_TRUE(group_us.has_value()) << op.name << " of " << op.module << " runs before any all-to-all";
      shared_us += us;
      *group_us += us;
      EXPECT_LT(*group_us, shortest_all_to_all_us) << "the shared experts outlast an all-to-all";
    } else if (op.stream == Stream::compute) {
      group_us.reset();  // only shared-expert ops follow an all-to-all directly
    }
  }
  EXPECT_NEAR(plain.sim->step_time_ms - overlapped.sim->step_time_ms, 2 * shared_us / 1000, 1e-9);
}

TEST(Experts, RecomputingTheExpertsActivationDropsItsOutput) {
  // moe_act is Megatron's CheckpointWithoutOutput: the weighted SwiGLU's output, fc2's input of
  // m bf16 values per routed copy, is dropped after fc2 and recomputed for the backward.
  // One rank of dp 4, ep 4 receives s x k routed copies per layer (balanced), 2 layers.
  HardwareConfig hw = load_hardware_yaml(std::string(SYSSIM_SOURCE_DIR) + "/configs/hardware/h100-sxm-80gb.yaml");
  const ModelConfig model = moe_model();
  ShardOptions options = layout(1, 4, 4);
  auto activation_bytes = [&](const ShardOptions& o) {
    return estimate_memory(model, trace_of(model), CostEstimator(hw), o).mem->activation_bytes;
  };
  const double kept = activation_bytes(options);
  options.training.recompute = "selective";
  options.training.recompute_modules = {"moe_act"};
  EXPECT_DOUBLE_EQ(kept - activation_bytes(options), 2 * s * k * m * 2);
}

TEST(Experts, LayoutsMegatronRefusesAreErrors) {
  auto error_of = [](const ShardOptions& options) -> std::string {
    try {
      sharded(options);
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_EQ(error_of(layout(1, 3, 3)), "ep=3 does not divide num_moe_experts=8");
  EXPECT_EQ(error_of(layout(1, 2, 4)),
            "ep*etp=4 does not divide the tp*cp*dp=2 ranks of a pipeline stage (Megatron-Core's parallel folding)");
  // Without an etp, the message says where its value came from.
  EXPECT_EQ(error_of(layout(1, 2, 4, std::nullopt)),
            "ep*etp=4 does not divide the tp*cp*dp=2 ranks of a pipeline stage (Megatron-Core's parallel folding; "
            "etp defaults to tp)");
  ShardOptions no_sp = layout(2, 2, 2);
  no_sp.parallelism.sp = false;
  EXPECT_EQ(error_of(no_sp),
            "tp=2 with experts needs --sp (Megatron-Core's MoE layer requires sequence parallelism with tensor "
            "parallelism)");
  ShardOptions unordered = layout(1, 4, 4);
  unordered.parallelism.order = "tp-cp-dp-pp";
  EXPECT_EQ(error_of(unordered), "parallelism.order \"tp-cp-dp-pp\": leaves out ep=4");
  ShardOptions skewed = layout(1, 4, 4);
  skewed.training.moe_imbalance = 5;  // more than every token once: 8 / 2 = 4
  EXPECT_EQ(error_of(skewed),
            "moe_imbalance=5: expected the busiest expert's tokens over the mean, from 1 (balanced) to "
            "num_moe_experts/moe_router_topk=4");
  ModelConfig dense = testing::dense_model("dense", 2, 256, 8, 4, 1024, 512, 1024);
  EXPECT_EQ([&]() -> std::string {
    try {
      shard_trace(dense, trace_of(dense), layout(1, 4, 4));
    } catch (const UsageError& e) {
      return e.what();
    }
    return "no error";
  }(), "ep and etp need a model with experts (num_moe_experts); dense has none");
  // overlap_moe_expert_parallel_comm as TransformerConfig checks it.
  ShardOptions overlap = layout(1, 4, 4);
  overlap.training.overlap_moe_expert_parallel_comm = true;
  ShardOptions no_ep = overlap;
  no_ep.parallelism.ep = 1;
  EXPECT_EQ(error_of(no_ep), "overlap_moe_expert_parallel_comm needs expert parallelism (ep > 1)");
  ShardOptions gathered = overlap;
  gathered.training.moe_token_dispatcher_type = "allgather";
  EXPECT_EQ(error_of(gathered), "overlap_moe_expert_parallel_comm needs the alltoall or flex token dispatcher");
  ShardOptions piped = overlap;
  piped.parallelism.pp = 2;
  piped.parallelism.dp = 2;
  piped.parallelism.ep = 2;
  EXPECT_EQ(error_of(piped),
            "overlap_moe_expert_parallel_comm with pp > 1 needs virtual pipeline stages (--vpp), as Megatron-Core");
  ShardOptions recomputed = overlap;
  recomputed.training.recompute = "full";
  EXPECT_EQ(error_of(recomputed), "overlap_moe_expert_parallel_comm does not take full recomputation");
  EXPECT_EQ(error_of(overlap), "no error");
}

// Megatron-LM's num_floating_point_operations for DeepSeek-V3 per token (training.py), with the
// attention scores counted in full as the dense formula of docs/metrics.md:
//   attention (MLA, per layer): 6 x [1536 (7168 + 128 x 192 + 1) + 512 (7168 + 128 x 256 + 1)
//     + 7168 x 64 + 128 x 128 x 7168] = 6 x (48,760,320 + 20,447,744 + 458,752 + 117,440,512)
//     = 6 x 187,107,328 = 1,122,643,968, plus the scores 6 x 128 x 320 x 4096 = 1,006,632,960;
//     61 layers.
//   MLP: 3 dense layers of 12 x 7168 x 18432 x 1.5 = 2,378,170,368; 58 MoE layers of
//     12 x 7168 x 1.5 x (2048 x 8 + 2048) = 2,378,170,368 each.
//   logits: 6 x 7168 x 129280 (padded to a multiple of 128 already).
TEST(Experts, MegatronFlopsOfDeepSeekV3) {
  ModelConfig model = load_model_yaml(std::string(SYSSIM_SOURCE_DIR) + "/configs/models/deepseek-v3.yaml");
  const double per_token = 61 * (1122643968.0 + 1006632960.0) + 61 * 2378170368.0 + 6.0 * 7168 * 129280;
  EXPECT_NEAR(megatron_model_flops(model, 1, 4096, 1) / (4096 * per_token), 1.0, 1e-12);
}

}  // namespace
}  // namespace syssim
