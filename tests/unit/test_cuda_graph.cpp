// CUDA graphs (--cuda-graph-scope): the ops each scope captures, the scopes Megatron refuses,
// and the host time a full-iteration graph leaves, worked out by hand (docs/syssim-sim.md,
// "The host").
#include <gtest/gtest.h>

#include "common/error.hpp"
#include "cost/cost.hpp"
#include "driver/driver.hpp"
#include "shard/shard.hpp"
#include "trace_builder.hpp"

namespace syssim {
namespace {

ModelConfig dense() { return testing::dense_model("dense", 2, 256, 8, 4, 1024, 512, 1024); }

ModelConfig moe() {
  ModelConfig model = testing::dense_model("tiny-moe", 2, 256, 8, 4, 1024, 512, 1024);
  model.num_moe_experts = 8;
  model.moe_router_topk = 2;
  model.moe_ffn_hidden_size = 128;
  model.moe_layer_pattern = {1, 1};
  return model;
}

ShardOptions layout(std::vector<CudaGraphScope> scopes, int64_t ep = 1) {
  ShardOptions options;
  options.parallelism.dp = ep;
  options.parallelism.ep = ep;
  options.training.global_batch = ep;
  options.training.cuda_graph_scope = std::move(scopes);
  return options;
}

ShardSection sharded(const ModelConfig& model, const ShardOptions& options) {
  return shard_trace(model, trace_of(model), options);
}

// "<module> <name>" of layer 0's forward ops a scope captures, in order.
std::vector<std::string> captured(const ShardSection& shard, CudaGraphScope scope) {
  std::vector<std::string> found;
  for (const ShardOp& op : shard.ops)
    if (op.layer == 0 && op.phase == OpPhase::fwd && op.cuda_graph == scope) found.push_back(op.module.str() + " " + op.name);
  return found;
}

TEST(CudaGraphs, AttnAndMlpCaptureTheirPartOfEachLayerWithItsResidualAdd) {
  ShardSection attn = sharded(dense(), layout({CudaGraphScope::attn}));
  EXPECT_EQ(captured(attn, CudaGraphScope::attn),
            (std::vector<std::string>{"decoder.layers.0.input_layernorm syssim::rms_norm",
                                      "decoder.layers.0.self_attention.linear_qkv syssim::qkv_linear",
                                      "decoder.layers.0.self_attention syssim::rope",
                                      "decoder.layers.0.self_attention syssim::rope",
                                      "decoder.layers.0.self_attention.core_attention syssim::flash_attn",
                                      "decoder.layers.0.self_attention.linear_proj syssim::linear",
                                      "decoder.layers.0 aten::add"}));
  // Outside the decoder layers, and the MLP without its scope, nothing is captured.
  for (const ShardOp& op : attn.ops) {
    if (!op.layer || op.module.str().find(".mlp") != std::string::npos || op.scope != OpScope::microbatch) {
      EXPECT_FALSE(op.cuda_graph.has_value()) << op.module << " " << op.name;
    }
  }
  ShardSection both = sharded(dense(), layout({CudaGraphScope::attn, CudaGraphScope::mlp}));
  const std::vector<std::string> mlp = captured(both, CudaGraphScope::mlp);
  ASSERT_FALSE(mlp.empty());
  EXPECT_EQ(mlp.front(), "decoder.layers.0.pre_mlp_layernorm syssim::rms_norm");
  EXPECT_EQ(mlp.back(), "decoder.layers.0 aten::add");
  // Every op of a layer is in one of the two graphs, backward ops too.
  for (const ShardOp& op : both.ops) {
    if (op.layer) {
      EXPECT_TRUE(op.cuda_graph.has_value()) << op.module << " " << op.name;
    }
  }
}

TEST(CudaGraphs, DroplessMoeGraphsTheRouterAndThePreprocessingBeforeTheSync) {
  // ep 4: the router (with the norm before it) and the permutation up to the dispatch's
  // all-to-all, where the host waits for the token counts; the rest runs eagerly.
  ShardSection shard = sharded(moe(), layout({CudaGraphScope::moe_router, CudaGraphScope::moe_preprocess}, 4));
  const std::vector<std::string> router = captured(shard, CudaGraphScope::moe_router);
  ASSERT_FALSE(router.empty());
  EXPECT_EQ(router.front(), "decoder.layers.0.pre_mlp_layernorm syssim::rms_norm");
  for (const std::string& op : router)
    EXPECT_TRUE(op.find("pre_mlp_layernorm") != std::string::npos || op.find("mlp.router") != std::string::npos) << op;
  EXPECT_EQ(captured(shard, CudaGraphScope::moe_preprocess),
            (std::vector<std::string>{"decoder.layers.0.mlp.token_dispatcher syssim::moe_permute"}));
  for (const ShardOp& op : shard.ops) {
    if (op.host_waits_for) {
      EXPECT_FALSE(op.cuda_graph.has_value()) << "a graph holds the host sync at op " << op.id;
    }
    if (op.module.str().find("mlp.experts") != std::string::npos) {
      EXPECT_FALSE(op.cuda_graph.has_value());
    }
  }
  // Padded to a capacity the whole MoE layer is one graph.
  ShardOptions padded = layout({CudaGraphScope::moe}, 4);
  padded.training.moe_expert_capacity_factor = 1;
  padded.training.moe_pad_expert_input_to_capacity = true;
  for (const ShardOp& op : sharded(moe(), padded).ops) {
    if (op.layer == 0 && op.module.str().find(".mlp") != std::string::npos) {
      EXPECT_EQ(op.cuda_graph, CudaGraphScope::moe);
    }
  }
}

TEST(CudaGraphs, ScopesMegatronRefusesAreUsageErrors) {
  auto error_of = [](const ModelConfig& model, ShardOptions options) {
    try {
      sharded(model, options);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  using S = CudaGraphScope;
  EXPECT_EQ(error_of(dense(), layout({S::full_iteration, S::attn})),
            "cuda_graph_scope=full_iteration,attn: full_iteration (Megatron's local graph of the whole iteration) "
            "takes no other scope");
  EXPECT_EQ(error_of(dense(), layout({S::attn, S::mlp, S::attn})),
            "cuda_graph_scope=attn,mlp,attn: lists attn twice; give each scope once");
  EXPECT_EQ(error_of(dense(), layout({S::moe_router})),
            "cuda_graph_scope=moe_router: moe_router needs a model with experts; dense has none");
  EXPECT_EQ(error_of(moe(), layout({S::moe, S::moe_router})),
            "cuda_graph_scope=moe,moe_router: moe and moe_router exclude each other, as in Megatron-Core");
  EXPECT_EQ(error_of(moe(), layout({S::moe_preprocess})),
            "cuda_graph_scope=moe_preprocess: moe_preprocess needs moe_router, as in Megatron-Core");
  EXPECT_NE(error_of(moe(), layout({S::moe})).find("a graph cannot hold the token dispatcher's copy"), std::string::npos);
  EXPECT_NE(error_of(moe(), layout({S::full_iteration})).find("a graph cannot hold"), std::string::npos);
  ShardOptions full = layout({S::attn});
  full.training.recompute = "full";
  EXPECT_EQ(error_of(dense(), full),
            "cuda_graph_scope=attn: full recompute is only supported with full_iteration graphs, as in Megatron-Core");
}

TEST(CudaGraphs, AFullIterationGraphLeavesTheHostOneReplayPerPass) {
  // One rank, 2 micro-batches: the host replays the forward and the backward graph of each,
  // 4 x op_us, and the GPU waits only for the first replay: the step is the eager GPU step
  // plus op_us, the host's own time hidden behind the GPU's.
  HardwareConfig hw = load_hardware_yaml(std::string(SYSSIM_SOURCE_DIR) + "/configs/hardware/h100-sxm-80gb.yaml");
  HardwareConfig no_host = hw;
  no_host.host = {};
  ShardOptions options = layout({CudaGraphScope::full_iteration});
  options.training.global_batch = 2;
  const ModelConfig model = dense();
  const TraceSection trace = trace_of(model);
  const Graph graphed = simulate(model, trace, CostEstimator(hw, {"roofline", ""}), options);
  const Graph gpu_only = simulate(model, trace, CostEstimator(no_host, {"roofline", ""}), options);
  EXPECT_NEAR(graphed.sim->host_busy_ms, 4 * hw.host.op_us / 1000, 1e-12);
  EXPECT_NEAR(graphed.sim->step_time_ms, gpu_only.sim->step_time_ms + hw.host.op_us / 1000, 1e-9);
}

}  // namespace
}  // namespace syssim
