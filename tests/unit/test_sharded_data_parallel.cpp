// Sharded data parallelism (--data-parallel-sharding-strategy, Megatron-FSDP's optim,
// optim_grads, optim_grads_params; docs/parallelism.md "Sharded data parallelism"): a small
// Llama and a small MoE traced at real sizes and sharded by the real stages; the collectives
// per micro-batch and per step, the memory of the training state, the refused combinations
// and the config keys, each against a hand calculation from the model's dimensions.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>

#include "common/error.hpp"
#include "driver/driver.hpp"
#include "mem/mem.hpp"
#include "network/network.hpp"
#include "shard/shard.hpp"
#include "trace_builder.hpp"

namespace syssim {
namespace {

// The dense model: 2 Llama layers, h = 256, 8 heads of d = 32 in 4 query groups, SwiGLU
// ffn f = 1024, vocabulary V = 1024 (a multiple of 128 x tp up to tp 8: no padding), untied
// embeddings, RMSNorm, no biases.
constexpr double L = 2, h = 256, a = 8, g = 4, d = 32, f = 1024, V = 1024;

// Parameters of one layer at tensor-parallel size tp: the two norms (h each, replicated over
// TP), QKV [(a + 2g) d, h], the projection [h, a d], SwiGLU's fc1 [2f, h] and fc2 [h, f]:
//   2h + (a + 2g) d h / tp + a d h / tp + 2 f h / tp + f h / tp
//   tp 1: 512 + 131,072 + 65,536 + 524,288 + 262,144 = 983,552
//   tp 2: 512 +  65,536 + 32,768 + 262,144 + 131,072 = 492,032
constexpr double layer_params(double tp) {
  return 2 * h + (a + 2 * g) * d * h / tp + a * d * h / tp + 2 * f * h / tp + f * h / tp;
}
// Outside the layers: the word embeddings [V, h] before them (vocab-parallel), the final norm
// [h] and the output layer [V, h] after them.
constexpr double embedding_params(double tp) { return V * h / tp; }
constexpr double after_layers_params(double tp) { return h + V * h / tp; }
// A rank's parameters: tp 1: 262,144 + 2 x 983,552 + 256 + 262,144 = 2,491,648;
// tp 2: 131,072 + 2 x 492,032 + 256 + 131,072 = 1,246,464; 4 layers at tp 1: 4,458,752.
constexpr double local_params(double tp, double layers = L) {
  return embedding_params(tp) + layers * layer_params(tp) + after_layers_params(tp);
}
static_assert(local_params(1) == 2491648);
static_assert(local_params(2) == 1246464);
static_assert(local_params(1, 4) == 4458752);

// Bytes per parameter: fp32 main gradients (reduced in fp32), 16-bit weights, Adam's fp32
// master weights and two moments.
constexpr double kGradBytes = 4, kWeightBytes = 2, kOptimizerBytes = 12;

ModelConfig tiny_llama(int64_t layers = static_cast<int64_t>(L)) {
  auto n = [](double v) { return static_cast<int64_t>(v); };
  return testing::dense_model("tiny-llama", layers, n(h), n(a), n(g), n(f), 512, n(V));
}

// The MoE model: the same attention, both layers MoE with 8 experts, top-2, expert FFN
// m = 128 (SwiGLU), and a router [8, h] per layer.
constexpr double experts = 8, m = 128;
ModelConfig tiny_moe() {
  ModelConfig model = tiny_llama();
  model.name = "tiny-moe";
  model.num_moe_experts = 8;
  model.moe_router_topk = 2;
  model.moe_ffn_hidden_size = 128;
  model.moe_layer_pattern = {1, 1};
  return model;
}

// The layout, and the strategy set as --data-parallel-sharding-strategy sets it: the flag
// alone, without --distributed-optimizer (which the strategies imply).
ShardOptions layout(int64_t dp, const std::string& strategy, int64_t tp = 1, int64_t cp = 1) {
  ShardOptions options;
  options.parallelism.tp = tp;
  options.parallelism.sp = tp > 1;
  options.parallelism.cp = cp;
  options.parallelism.dp = dp;
  options.training.global_batch = 2 * dp;  // two micro-batches
  options.training.data_parallel_sharding = *parse_data_parallel_sharding(strategy);
  return options;
}

ShardSection sharded(const ShardOptions& options, const ModelConfig& model = tiny_llama()) {
  return shard_trace(model, trace_of(model), options);
}

// Ops picked by a predicate, in order.
std::vector<const ShardOp*> ops_where(const ShardSection& shard, const std::function<bool(const ShardOp&)>& pick) {
  std::vector<const ShardOp*> found;
  for (const ShardOp& op : shard.ops)
    if (pick(op)) found.push_back(&op);
  return found;
}

bool is_fsdp(const ShardOp& op) { return op.module.str().find(".fsdp_") != std::string::npos; }

// The per-micro-batch collectives of sharded data parallelism of one kind.
std::vector<const ShardOp*> fsdp_collectives(const ShardSection& shard, const std::string& collective,
                                             const std::string& pass = "") {
  return ops_where(shard, [&](const ShardOp& op) {
    return is_fsdp(op) && to_string(op.collective) == collective && (pass.empty() || to_string(op.pass) == pass);
  });
}

// The once-per-step collectives of the bucketed DDP (data_parallel_grads) and the distributed
// optimizer (distributed_optimizer_params); not the 4-byte all-reduce of the gradient norm.
std::vector<const ShardOp*> step_collectives(const ShardSection& shard, const std::string& collective) {
  return ops_where(shard, [&](const ShardOp& op) {
    const std::string module = op.module.str();
    return op.scope != OpScope::microbatch && to_string(op.collective) == collective &&
           (module.find("data_parallel_grads") != std::string::npos ||
            module.find("distributed_optimizer_params") != std::string::npos);
  });
}

double message_bytes(const std::vector<const ShardOp*>& ops) {
  double bytes = 0;
  for (const ShardOp* op : ops) bytes += op->message_bytes;
  return bytes;
}

const ShardOp& op_named(const ShardSection& shard, const std::string& name) {
  for (const ShardOp& op : shard.ops)
    if (op.name == name) return op;
  throw std::runtime_error("no op " + name);
}

// Whether op `id` waits, directly or through other ops, for op `on`.
bool depends_transitively(const ShardSection& shard, int64_t id, int64_t on) {
  std::map<int64_t, bool> seen;
  std::function<bool(int64_t)> visit = [&](int64_t op) {
    auto [it, added] = seen.try_emplace(op, false);
    if (!added) return it->second;
    bool found = false;
    for (int64_t dep : shard.ops[op].deps)
      if (dep == on || visit(dep)) {
        found = true;
        break;
      }
    seen[op] = found;
    return found;
  };
  return visit(id);
}

bool reads_role(const ShardSection& shard, const ShardOp& op, const std::string& role) {
  for (int64_t b : op.reads)
    if (to_string(shard.buffers[b].role) == role) return true;
  return false;
}
bool writes_role(const ShardSection& shard, const ShardOp& op, const std::string& role) {
  for (int64_t b : op.writes)
    if (to_string(shard.buffers[b].role) == role) return true;
  return false;
}

TEST(ShardedDataParallel, OptimIsTheDistributedOptimizerWithoutPerMicrobatchCollectives) {
  // optim (zero1): the gradients reduce-scattered once per step in one bucket (no
  // --overlap-grad-reduce), 4 x 2,491,648 bytes; the weights gathered after Adam, 2 x
  // 2,491,648 bytes; Adam on a quarter of the parameters, as --distributed-optimizer.
  ShardSection shard = sharded(layout(4, "zero1"));
  EXPECT_TRUE(ops_where(shard, is_fsdp).empty());
  EXPECT_DOUBLE_EQ(shard.params_local, local_params(1));
  auto scatters = step_collectives(shard, "reduce_scatter");
  ASSERT_EQ(scatters.size(), 1u);
  EXPECT_EQ(scatters[0]->module, "data_parallel_grads.bucket_0");
  EXPECT_EQ(scatters[0]->group_size, 4);
  EXPECT_DOUBLE_EQ(scatters[0]->message_bytes, kGradBytes * local_params(1));
  EXPECT_TRUE(step_collectives(shard, "all_reduce").empty());
  EXPECT_DOUBLE_EQ(message_bytes(step_collectives(shard, "all_gather")), kWeightBytes * local_params(1));
  EXPECT_DOUBLE_EQ(op_named(shard, "optimizer::adam").bytes, local_params(1) / 4 * 30);
}

TEST(ShardedDataParallel, StrategyFlagAloneActsAsWithTheDistributedOptimizer) {
  // The strategies imply the distributed optimizer (normalize_sharding): the flag alone must
  // give the same ops as the flag with --distributed-optimizer.
  for (const char* strategy : {"optim", "optim_grads", "optim_grads_params"}) {
    ShardOptions alone = layout(4, strategy), explicit_ = alone;
    explicit_.training.distributed_optimizer = true;
    ShardSection a = sharded(alone), b = sharded(explicit_);
    EXPECT_TRUE(a.training.distributed_optimizer) << strategy;
    ASSERT_EQ(a.ops.size(), b.ops.size()) << strategy;
    for (size_t i = 0; i < a.ops.size(); ++i) {
      EXPECT_EQ(a.ops[i].name, b.ops[i].name) << strategy << " op " << i;
      EXPECT_EQ(a.ops[i].module, b.ops[i].module) << strategy << " op " << i;
      EXPECT_DOUBLE_EQ(a.ops[i].bytes, b.ops[i].bytes) << strategy << " op " << i << " " << a.ops[i].name;
    }
  }
}

TEST(ShardedDataParallel, OptimGradsReduceScattersEachUnitInEveryMicrobatch) {
  // Units: the 2 layers, the embedding, and the final norm with the output layer: 4
  // reduce-scatters per micro-batch over the dp = 4 ranks, of the unit's fp32 gradients:
  // layer 4 x 983,552 = 3,934,208 bytes; in all 4 x 2,491,648 = 9,966,592 bytes.
  ShardSection shard = sharded(layout(4, "optim_grads"));
  auto scatters = fsdp_collectives(shard, "reduce_scatter");
  ASSERT_EQ(scatters.size(), 4u);
  std::map<std::string, double> by_module;
  for (const ShardOp* op : scatters) {
    EXPECT_EQ(op->scope, OpScope::microbatch);
    EXPECT_EQ(op->group, CommGroup::dp);
    EXPECT_EQ(op->group_size, 4);
    by_module[op->module.str()] = op->message_bytes;
  }
  EXPECT_DOUBLE_EQ(message_bytes(scatters), kGradBytes * local_params(1));
  EXPECT_DOUBLE_EQ(message_bytes(scatters), 9966592);
  EXPECT_DOUBLE_EQ(by_module["decoder.layers.0.fsdp_grads"], kGradBytes * layer_params(1));
  EXPECT_DOUBLE_EQ(by_module["decoder.layers.1.fsdp_grads"], 3934208);
  // The two units outside the layers, whatever their ops' modules are called.
  by_module.erase("decoder.layers.0.fsdp_grads");
  by_module.erase("decoder.layers.1.fsdp_grads");
  ASSERT_EQ(by_module.size(), 2u);
  std::vector<double> outside;
  for (const auto& [module, bytes] : by_module) outside.push_back(bytes);
  std::sort(outside.begin(), outside.end());
  EXPECT_DOUBLE_EQ(outside[0], kGradBytes * embedding_params(1));     // 1,048,576
  EXPECT_DOUBLE_EQ(outside[1], kGradBytes * after_layers_params(1));  // 1,049,600
  // No weights gathered per micro-batch, no bucketed reduction per step; the distributed
  // optimizer's gather after Adam stays: 2 x 2,491,648 bytes.
  EXPECT_TRUE(fsdp_collectives(shard, "all_gather").empty());
  EXPECT_TRUE(step_collectives(shard, "reduce_scatter").empty());
  EXPECT_TRUE(step_collectives(shard, "all_reduce").empty());
  auto gathers = step_collectives(shard, "all_gather");
  ASSERT_EQ(gathers.size(), 1u);
  EXPECT_EQ(gathers[0]->module, "distributed_optimizer_params.bucket_0");
  EXPECT_DOUBLE_EQ(gathers[0]->message_bytes, kWeightBytes * local_params(1));
  // Adam updates a quarter of the parameters; the zeroed gradient buffer is a quarter too.
  EXPECT_DOUBLE_EQ(op_named(shard, "optimizer::adam").bytes, local_params(1) / 4 * 30);
  EXPECT_DOUBLE_EQ(op_named(shard, "ddp::zero_grad_buffer").bytes, local_params(1) / 4 * kGradBytes);
}

TEST(ShardedDataParallel, AUnitIsReducedRightAfterItsLastGradientIsWritten) {
  ShardSection shard = sharded(layout(4, "optim_grads"));
  for (int64_t layer : {0, 1}) {
    const std::string module = "decoder.layers." + std::to_string(layer) + ".fsdp_grads";
    auto scatter = ops_where(shard, [&](const ShardOp& op) { return op.module == module; });
    ASSERT_EQ(scatter.size(), 1u) << module;
    // Every backward op of the layer writing a gradient runs before it and is waited for.
    int64_t last_writer = -1;
    for (const ShardOp& op : shard.ops)
      if (op.layer == layer && op.scope == OpScope::microbatch && !is_fsdp(op) && writes_role(shard, op, "grad")) {
        EXPECT_LT(op.id, scatter[0]->id) << op.name;
        EXPECT_TRUE(depends_transitively(shard, scatter[0]->id, op.id)) << op.name;
        last_writer = op.id;
      }
    ASSERT_GE(last_writer, 0);
    EXPECT_EQ(shard.ops[scatter[0]->id - 1].id, last_writer) << module << " is not issued right after it";
    EXPECT_EQ(scatter[0]->stream, Stream::dp);
  }
}

TEST(ShardedDataParallel, OptimGradsGroupSpansTheContextParallelRanks) {
  // tp 2 with SP, cp 2, dp 2: the data-parallel group holds dp x cp = 4 ranks, each with the
  // tp-2 shard of the model: 4 x 1,246,464 bytes reduced per micro-batch, 4 x 492,032 per layer.
  ShardSection shard = sharded(layout(2, "optim_grads", 2, 2));
  EXPECT_DOUBLE_EQ(shard.params_local, local_params(2));
  auto scatters = fsdp_collectives(shard, "reduce_scatter");
  ASSERT_EQ(scatters.size(), 4u);
  for (const ShardOp* op : scatters) {
    EXPECT_EQ(op->group, CommGroup::dp);
    EXPECT_EQ(op->group_size, 4);
  }
  EXPECT_DOUBLE_EQ(message_bytes(scatters), kGradBytes * local_params(2));
  EXPECT_DOUBLE_EQ(message_bytes(ops_where(shard, [](const ShardOp& op) {
                     return op.module == "decoder.layers.1.fsdp_grads";
                   })),
                   kGradBytes * layer_params(2));
}

TEST(ShardedDataParallel, OptimGradsParamsGathersEachUnitBeforeItsForwardAndItsBackward) {
  // Forward: the 16-bit weights of each of the 4 units (2 layers, the embedding, the final
  // norm with the output layer), 2 x 2,491,648 = 4,983,296 bytes, gathered over the 4 ranks.
  // Backward: again, but for the embedding, whose backward (a scatter-add of the output
  // gradient into the table's rows) reads no weight: 3 gathers of 2 x (2,491,648 - 262,144)
  // = 4,459,008 bytes. 9,442,304 bytes per micro-batch in all.
  ShardSection shard = sharded(layout(4, "optim_grads_params"));
  auto forward = fsdp_collectives(shard, "all_gather", "forward");
  auto backward = fsdp_collectives(shard, "all_gather", "backward");
  EXPECT_EQ(forward.size(), 4u);
  EXPECT_EQ(backward.size(), 3u);
  for (const auto* ops : {&forward, &backward})
    for (const ShardOp* op : *ops) {
      EXPECT_EQ(op->scope, OpScope::microbatch);
      EXPECT_EQ(op->group, CommGroup::dp);
      EXPECT_EQ(op->group_size, 4);
      EXPECT_EQ(op->stream, Stream::dp);
    }
  EXPECT_DOUBLE_EQ(message_bytes(forward), kWeightBytes * local_params(1));
  EXPECT_DOUBLE_EQ(message_bytes(backward), kWeightBytes * (local_params(1) - embedding_params(1)));
  EXPECT_DOUBLE_EQ(message_bytes(fsdp_collectives(shard, "all_gather")), 9442304);
  auto layer_gather = [&](int64_t layer, const std::string& pass) {
    auto found = ops_where(shard, [&](const ShardOp& op) {
      return op.module == "decoder.layers." + std::to_string(layer) + ".fsdp_params" && to_string(op.pass) == pass;
    });
    EXPECT_EQ(found.size(), 1u) << layer << " " << pass;
    return found.empty() ? nullptr : found[0];
  };
  for (int64_t layer : {0, 1})
    for (const char* pass : {"forward", "backward"}) {
      const ShardOp* gather = layer_gather(layer, pass);
      ASSERT_NE(gather, nullptr);
      EXPECT_DOUBLE_EQ(gather->message_bytes, kWeightBytes * layer_params(1));  // 1,967,104 bytes
    }
  // The gradients are reduced as under optim_grads, and nothing is gathered after Adam.
  EXPECT_DOUBLE_EQ(message_bytes(fsdp_collectives(shard, "reduce_scatter")), kGradBytes * local_params(1));
  EXPECT_TRUE(step_collectives(shard, "all_gather").empty());
  EXPECT_TRUE(step_collectives(shard, "reduce_scatter").empty());
  EXPECT_DOUBLE_EQ(op_named(shard, "optimizer::adam").bytes, local_params(1) / 4 * 30);
}

TEST(ShardedDataParallel, ALayersOpsWaitForItsGather) {
  // Without recomputation and with full recomputation (whose recomputed forward runs in the
  // backward pass, after the backward gather).
  for (const char* recompute : {"none", "full"}) {
    ShardOptions options = layout(4, "optim_grads_params");
    options.training.recompute = recompute;
    ShardSection shard = sharded(options);
    for (int64_t layer : {0, 1}) {
      const std::string module = "decoder.layers." + std::to_string(layer) + ".fsdp_params";
      auto gather = [&](const std::string& pass) {
        return ops_where(shard, [&](const ShardOp& op) { return op.module == module && to_string(op.pass) == pass; }).at(0);
      };
      const ShardOp* forward = gather("forward");
      const ShardOp* backward = gather("backward");
      // The backward gathers the whole layer, as the forward (FSDP gathers a unit's weights).
      EXPECT_DOUBLE_EQ(backward->message_bytes, kWeightBytes * layer_params(1));
      EXPECT_DOUBLE_EQ(forward->message_bytes, kWeightBytes * layer_params(1));
      int64_t forward_ops = 0, weight_readers = 0;
      for (const ShardOp& op : shard.ops) {
        if (op.layer != layer || op.scope != OpScope::microbatch || is_fsdp(op)) continue;
        if (op.pass == OpPass::forward) {
          // Every forward op of the layer: the weights' readers directly, the rest through them.
          EXPECT_TRUE(depends_transitively(shard, op.id, forward->id)) << recompute << ": " << op.name;
          ++forward_ops;
        } else if (reads_role(shard, op, "param")) {
          // Each backward op reading a weight (data gradients, recomputed forward) waits for
          // the backward gather.
          EXPECT_TRUE(depends_transitively(shard, op.id, backward->id)) << recompute << ": " << op.name;
          ++weight_readers;
        }
      }
      EXPECT_GT(forward_ops, 10) << "layer " << layer;
      // Data gradients of QKV, projection, fc1, fc2 and the two norms' backward at least.
      EXPECT_GE(weight_readers, 6) << "layer " << layer;
    }
  }
}

TEST(ShardedDataParallel, WeightsAreGatheredOneUnitAhead) {
  // Forward order of the units: embedding, layer 0, layer 1, final norm and output layer.
  // A unit's gather is issued when the unit before it starts: layer 1's with layer 0's first
  // op, on the dp stream, so that layer 0's compute does not wait for it. In backward the
  // order is reversed: layer 0's gather goes out when layer 1's backward starts.
  ShardSection shard = sharded(layout(4, "optim_grads_params"));
  auto gather = [&](int64_t layer, const std::string& pass) {
    return ops_where(shard, [&](const ShardOp& op) {
             return op.module == "decoder.layers." + std::to_string(layer) + ".fsdp_params" && to_string(op.pass) == pass;
           }).at(0);
  };
  auto first_weight_reader = [&](int64_t layer, const std::string& pass) -> const ShardOp* {
    for (const ShardOp& op : shard.ops)
      if (op.layer == layer && to_string(op.pass) == pass && !is_fsdp(op) && reads_role(shard, op, "param")) return &op;
    return nullptr;
  };
  for (const char* pass : {"forward", "backward"}) {
    const int64_t earlier = std::string(pass) == "forward" ? 0 : 1, later = 1 - earlier;
    const ShardOp* starts = first_weight_reader(earlier, pass);
    ASSERT_NE(starts, nullptr);
    const ShardOp* prefetch = gather(later, pass);
    EXPECT_LT(prefetch->id, starts->id) << pass;
    EXPECT_GT(prefetch->id, gather(earlier, pass)->id) << pass;
    EXPECT_EQ(prefetch->stream, Stream::dp);
    EXPECT_FALSE(depends_transitively(shard, starts->id, prefetch->id)) << pass;
    EXPECT_TRUE(depends_transitively(shard, starts->id, gather(earlier, pass)->id)) << pass;
  }
}

TEST(ShardedDataParallel, EachPipelineStageShardsItsOwnUnits) {
  // pp 2, dp 2: stage 0 holds the embedding and layer 0, 262,144 + 983,552 = 1,245,696
  // parameters; stage 1 layer 1, the final norm and the output layer, 983,552 + 262,400 =
  // 1,245,952. Each reduces its own units' gradients over its 2 data-parallel ranks.
  ShardOptions options = layout(2, "optim_grads");
  options.parallelism.pp = 2;
  options.training.global_batch = 8;
  ShardSection shard = sharded(options);
  ASSERT_EQ(shard.stage_params_local.size(), 2u);
  EXPECT_DOUBLE_EQ(shard.stage_params_local[0], embedding_params(1) + layer_params(1));
  EXPECT_DOUBLE_EQ(shard.stage_params_local[1], layer_params(1) + after_layers_params(1));
  double reduced[2] = {0, 0};
  for (const ShardOp* op : fsdp_collectives(shard, "reduce_scatter")) {
    EXPECT_EQ(op->group_size, 2);
    reduced[op->stage] += op->message_bytes;
  }
  EXPECT_DOUBLE_EQ(reduced[0], kGradBytes * 1245696);
  EXPECT_DOUBLE_EQ(reduced[1], kGradBytes * 1245952);
  for (const ShardOp& op : shard.ops)
    if (op.module == "decoder.layers.1.fsdp_grads") {
      EXPECT_EQ(op.stage, 1);
    }
  // Each stage's gradients and Adam's states are halves of its own.
  Graph graph;
  graph.shard = shard;
  account_memory(graph);
  EXPECT_EQ(graph.mem->peak_pp_stage, graph.mem->pp_stage_memory_gb[0] >= graph.mem->pp_stage_memory_gb[1] ? 0 : 1);
  const double heaviest = shard.stage_params_local[graph.mem->peak_pp_stage];
  EXPECT_DOUBLE_EQ(graph.mem->grad_bytes, kGradBytes * heaviest / 2);
  EXPECT_DOUBLE_EQ(graph.mem->optimizer_state_bytes, kOptimizerBytes * heaviest / 2);
}

TEST(ShardedDataParallel, TrainingStateIsShardedOverTheDataParallelRanks) {
  // P = 2,491,648 parameters, dp 4 (or dp 2 x cp 2): fp32 gradients 4P = 9,966,592 bytes
  // whole, P = 2,491,648 sharded; Adam's states 12P = 29,899,776 whole, 3P = 7,474,944
  // sharded; a quarter of the weights kept under optim_grads_params.
  const double P = local_params(1);
  for (auto [dp, cp] : {std::pair<int64_t, int64_t>{4, 1}, {2, 2}}) {
    // As the shard stage passes them: the strategy implies the distributed optimizer.
    auto states = [&](const std::string& strategy, bool distributed_optimizer = false) {
      ShardOptions options = layout(dp, strategy, 1, cp);
      options.training.distributed_optimizer = distributed_optimizer;
      normalize_sharding(options.training);
      return training_state_bytes(P, options.parallelism, options.training);
    };
    TrainingStateBytes ddp = states("no_shard");
    EXPECT_DOUBLE_EQ(ddp.grad_bytes, kGradBytes * P);
    EXPECT_DOUBLE_EQ(ddp.optimizer_state_bytes, kOptimizerBytes * P);
    EXPECT_DOUBLE_EQ(ddp.weight_share, 1);
    for (TrainingStateBytes optim : {states("optim"), states("no_shard", true)}) {
      EXPECT_DOUBLE_EQ(optim.grad_bytes, kGradBytes * P);
      EXPECT_DOUBLE_EQ(optim.optimizer_state_bytes, 7474944);
      EXPECT_DOUBLE_EQ(optim.weight_share, 1);
    }
    TrainingStateBytes grads = states("optim_grads");
    EXPECT_DOUBLE_EQ(grads.grad_bytes, 2491648);
    EXPECT_DOUBLE_EQ(grads.optimizer_state_bytes, kOptimizerBytes * P / 4);
    EXPECT_DOUBLE_EQ(grads.weight_share, 1);
    TrainingStateBytes params = states("optim_grads_params");
    EXPECT_DOUBLE_EQ(params.grad_bytes, kGradBytes * P / 4);
    EXPECT_DOUBLE_EQ(params.optimizer_state_bytes, kOptimizerBytes * P / 4);
    EXPECT_DOUBLE_EQ(params.weight_share, 0.25);
    EXPECT_FALSE(params.fp32_weight_shard_bytes.has_value());
  }
  // FSDP2 holds the fp32 shards as the master weights: 4 bytes of weights (twice the 16-bit
  // ones) and Adam's two moments, 8, on each of the P/4 parameters: 16P/4 with the gradients.
  ShardOptions fsdp2 = layout(4, "optim_grads_params", 1, 1);
  fsdp2.training.fsdp_implementation = FsdpImplementation::fsdp2;
  normalize_sharding(fsdp2.training);
  TrainingStateBytes torchtitan = training_state_bytes(P, fsdp2.parallelism, fsdp2.training);
  EXPECT_DOUBLE_EQ(torchtitan.fp32_weight_shard_bytes.value_or(0), 4 * P / 4);
  EXPECT_DOUBLE_EQ(torchtitan.optimizer_state_bytes, 8 * P / 4);
  EXPECT_DOUBLE_EQ(torchtitan.grad_bytes, 4 * P / 4);
  // A bf16 reduction is cast back to the fp32 shard (FSDP2's foreach_reduce): still 4 bytes a
  // gradient, read by Adam in place (no fp32 copy).
  fsdp2.training.grad_reduce_in_bf16 = true;
  TrainingStateBytes bf16_reduced = training_state_bytes(P, fsdp2.parallelism, fsdp2.training);
  EXPECT_DOUBLE_EQ(bf16_reduced.grad_bytes, 4 * P / 4);
  EXPECT_DOUBLE_EQ(bf16_reduced.fp32_grad_copy_bytes, 0);
  // --grad-reduce-in-bf16: 2 bytes per main gradient, 2P = 4,983,296 whole and P/2 = 1,245,824
  // sharded; Adam's fp32 states unchanged.
  ShardOptions bf16 = layout(4, "no_shard", 1, 1);
  bf16.training.grad_reduce_in_bf16 = true;
  EXPECT_DOUBLE_EQ(training_state_bytes(P, bf16.parallelism, bf16.training).grad_bytes, 4983296);
  bf16.training.distributed_optimizer = true;
  EXPECT_DOUBLE_EQ(training_state_bytes(P, bf16.parallelism, bf16.training).optimizer_state_bytes, 7474944);
  bf16 = layout(4, "optim_grads", 1, 1);
  bf16.training.grad_reduce_in_bf16 = true;
  normalize_sharding(bf16.training);
  EXPECT_DOUBLE_EQ(training_state_bytes(P, bf16.parallelism, bf16.training).grad_bytes, 1245824);
  // Adam's state sharded over dp 4: fp32 master weights as remainders 2 + 4 + 4 = 10 bytes,
  // 10P/4 = 6,229,120; bf16 moments and the weights as master weights 2 + 2 = 4, P = 2,491,648.
  ShardOptions adam = layout(4, "optim", 1, 1);
  normalize_sharding(adam.training);
  adam.training.store_param_remainders = true;
  EXPECT_DOUBLE_EQ(training_state_bytes(P, adam.parallelism, adam.training).optimizer_state_bytes, 6229120);
  adam.training.store_param_remainders = false;
  adam.training.optimizer_state_dtype = OptimizerStateDtype::bf16;
  EXPECT_DOUBLE_EQ(training_state_bytes(P, adam.parallelism, adam.training).optimizer_state_bytes, 2491648);
}

TEST(ShardedDataParallel, MemoryOfTheSimulatedGraph) {
  // account_memory on the sharded graph, dp 4: the weights 2P = 4,983,296 bytes (a quarter,
  // 1,245,824, under optim_grads_params), the gradients and Adam's states as above.
  const double P = local_params(1);
  auto memory = [&](const std::string& strategy) {
    Graph graph;
    graph.shard = sharded(layout(4, strategy));
    account_memory(graph);
    return *graph.mem;
  };
  MemSection ddp = memory("no_shard"), optim = memory("optim"), grads = memory("optim_grads"),
             params = memory("optim_grads_params");
  EXPECT_DOUBLE_EQ(ddp.param_bytes, kWeightBytes * P);
  EXPECT_DOUBLE_EQ(ddp.grad_bytes, kGradBytes * P);
  EXPECT_DOUBLE_EQ(ddp.optimizer_state_bytes, kOptimizerBytes * P);
  EXPECT_DOUBLE_EQ(optim.param_bytes, kWeightBytes * P);
  EXPECT_DOUBLE_EQ(optim.grad_bytes, kGradBytes * P);
  EXPECT_DOUBLE_EQ(optim.optimizer_state_bytes, kOptimizerBytes * P / 4);
  EXPECT_DOUBLE_EQ(grads.param_bytes, kWeightBytes * P);
  EXPECT_DOUBLE_EQ(grads.grad_bytes, kGradBytes * P / 4);
  EXPECT_DOUBLE_EQ(grads.optimizer_state_bytes, kOptimizerBytes * P / 4);
  EXPECT_DOUBLE_EQ(params.param_bytes, 1245824);
  EXPECT_DOUBLE_EQ(params.grad_bytes, kGradBytes * P / 4);
  EXPECT_DOUBLE_EQ(params.optimizer_state_bytes, kOptimizerBytes * P / 4);
  // The training state: 18P = 44,849,664 bytes (DDP), 2P + 4P + 3P = 9P (optim), 2P + P + 3P
  // = 6P (optim_grads), P/2 + P + 3P = 4.5P (optim_grads_params); the peak adds the live
  // activations and temporaries.
  auto state = [](const MemSection& mem) { return mem.param_bytes + mem.grad_bytes + mem.optimizer_state_bytes; };
  EXPECT_DOUBLE_EQ(state(ddp), 44849664);
  EXPECT_DOUBLE_EQ(state(optim), 9 * P);
  EXPECT_DOUBLE_EQ(state(grads), 6 * P);
  EXPECT_DOUBLE_EQ(state(params), 4.5 * P);
  for (const MemSection* mem : {&ddp, &optim, &grads, &params})
    EXPECT_NEAR(mem->peak_memory_gb * 1e9, state(*mem) + mem->activation_bytes + mem->temporary_bytes, 1e-3);
  // The unreduced gradients of a unit are transient (temporary bytes): more of them than
  // under the bucketed reduction.
  EXPECT_GT(grads.temporary_bytes, optim.temporary_bytes);
  EXPECT_LT(grads.peak_memory_gb, optim.peak_memory_gb);
  // optim_grads_params peaks where optim_grads does, in layer 1's backward, with two layers'
  // weights whole on top (layer 1's, gathered for its backward, and layer 0's, prefetched):
  // 2 x 2 x 983,552 = 3,934,208 bytes. That is more than the 1.5P = 3,737,472 bytes of
  // weights it keeps sharded in a model of 2 layers: its peak is higher by 196,736 bytes.
  EXPECT_DOUBLE_EQ(params.activation_bytes, grads.activation_bytes);
  EXPECT_DOUBLE_EQ(params.temporary_bytes - grads.temporary_bytes, 2 * kWeightBytes * layer_params(1));
  EXPECT_NEAR((params.peak_memory_gb - grads.peak_memory_gb) * 1e9, 196736, 1e-3);
}

TEST(ShardedDataParallel, FullShardingPaysOffWithMoreLayers) {
  // 4 layers, P = 4,458,752: the weights kept sharded save 1.5P = 6,688,128 bytes, the two
  // layers whole at a time still cost 3,934,208: the peak is 2,753,920 bytes lower.
  const double P = local_params(1, 4);
  auto memory = [&](const std::string& strategy) {
    Graph graph;
    const ModelConfig model = tiny_llama(4);
    graph.shard = shard_trace(model, trace_of(model), layout(4, strategy));
    account_memory(graph);
    return *graph.mem;
  };
  MemSection grads = memory("optim_grads"), params = memory("optim_grads_params");
  EXPECT_DOUBLE_EQ(params.param_bytes, kWeightBytes * P / 4);
  EXPECT_DOUBLE_EQ(params.temporary_bytes - grads.temporary_bytes, 2 * kWeightBytes * layer_params(1));
  EXPECT_NEAR((grads.peak_memory_gb - params.peak_memory_gb) * 1e9, 1.5 * P - 2 * kWeightBytes * layer_params(1),
              1e-3);
  EXPECT_NEAR((grads.peak_memory_gb - params.peak_memory_gb) * 1e9, 2753920, 1e-3);
}

// MoE, tp 1, dp 8, ep 4: expert-data-parallel size tp x cp x dp / (ep x etp) = 8 / 4 = 2. Per
// layer a rank holds 8 / 4 = 2 experts of fc1 [2m, h] and fc2 [h, m]: 2 x (65,536 + 32,768)
// = 196,608 expert parameters; the dense ones of a layer are the norms, QKV, the projection
// and the router [8, h]: 512 + 131,072 + 65,536 + 2,048 = 199,168.
constexpr double kExpertLayerParams = (experts / 4) * (2 * m * h + h * m);
constexpr double kDenseMoeLayerParams = 2 * h + (a + 2 * g) * d * h + a * d * h + experts * h;
static_assert(kExpertLayerParams == 196608);
static_assert(kDenseMoeLayerParams == 199168);

ShardOptions moe_layout(const std::string& strategy) {
  ShardOptions options = layout(8, strategy);
  options.parallelism.ep = 4;
  options.parallelism.etp = 1;
  return options;
}

TEST(ShardedDataParallel, ExpertGradientsGoToTheExpertDataParallelGroup) {
  ShardSection shard = sharded(moe_layout("optim_grads"), tiny_moe());
  // 262,144 + 2 x (199,168 + 196,608) + 256 + 262,144 = 1,316,096 parameters on a rank.
  EXPECT_DOUBLE_EQ(shard.params_local, embedding_params(1) + L * (kDenseMoeLayerParams + kExpertLayerParams) +
                                           after_layers_params(1));
  EXPECT_DOUBLE_EQ(shard.stage_expert_params_local.at(0), L * kExpertLayerParams);
  for (int64_t layer : {0, 1}) {
    const std::string prefix = "decoder.layers." + std::to_string(layer);
    auto expert = ops_where(shard, [&](const ShardOp& op) { return op.module == prefix + ".fsdp_expert_grads"; });
    auto dense = ops_where(shard, [&](const ShardOp& op) { return op.module == prefix + ".fsdp_grads"; });
    ASSERT_EQ(expert.size(), 1u);
    ASSERT_EQ(dense.size(), 1u);
    EXPECT_EQ(expert[0]->collective, Collective::reduce_scatter);
    EXPECT_EQ(expert[0]->group, CommGroup::edp);
    EXPECT_EQ(expert[0]->group_size, 2);
    EXPECT_DOUBLE_EQ(expert[0]->message_bytes, kGradBytes * kExpertLayerParams);  // 786,432
    EXPECT_EQ(dense[0]->group, CommGroup::dp);
    EXPECT_EQ(dense[0]->group_size, 8);
    EXPECT_DOUBLE_EQ(dense[0]->message_bytes, kGradBytes * kDenseMoeLayerParams);  // 796,672
  }
  // Memory: the dense gradients over 8 ranks, the experts' over 2.
  const double P = shard.params_local, E = shard.stage_expert_params_local[0];
  TrainingStateBytes states = training_state_bytes(P, shard.parallelism, shard.training, E);
  EXPECT_DOUBLE_EQ(states.grad_bytes, kGradBytes * ((P - E) / 8 + E / 2));
  EXPECT_DOUBLE_EQ(states.optimizer_state_bytes, kOptimizerBytes * ((P - E) / 8 + E / 2));
  // optim_grads_params gathers the experts' weights over the 2 expert-DP ranks too.
  ShardSection full = sharded(moe_layout("optim_grads_params"), tiny_moe());
  auto gathers = ops_where(full, [](const ShardOp& op) {
    return op.module == "decoder.layers.0.fsdp_expert_params" && op.pass == OpPass::forward;
  });
  ASSERT_EQ(gathers.size(), 1u);
  EXPECT_EQ(gathers[0]->group, CommGroup::edp);
  EXPECT_EQ(gathers[0]->group_size, 2);
  EXPECT_DOUBLE_EQ(gathers[0]->message_bytes, kWeightBytes * kExpertLayerParams);
}

std::string usage_error_of(const ShardOptions& options, const ModelConfig& model) {
  try {
    sharded(options, model);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "no UsageError";
}

TEST(ShardedDataParallel, CombinationsNotSimulatedAreUsageErrors) {
  ShardOptions zb = layout(2, "optim_grads");
  zb.parallelism.pp = 2;
  zb.pipeline_schedule = ScheduleKind::zb_h1;
  zb.training.global_batch = 8;
  EXPECT_EQ(usage_error_of(zb, tiny_llama()),
            "data_parallel_sharding_strategy=optim_grads with the zb-h1 schedule is not simulated yet (its weight "
            "pass splits a unit's backward)");
  zb.training.data_parallel_sharding = DataParallelSharding::optim_grads_params;
  EXPECT_THROW(sharded(zb), UsageError);
  zb.training.data_parallel_sharding = DataParallelSharding::optim;  // the distributed optimizer alone runs
  EXPECT_EQ(usage_error_of(zb, tiny_llama()), "no UsageError");

  ShardOptions overlap = layout(4, "optim_grads");
  overlap.parallelism.ep = 4;
  overlap.parallelism.etp = 1;
  overlap.training.overlap_moe_expert_parallel_comm = true;
  EXPECT_EQ(usage_error_of(overlap, tiny_moe()),
            "data_parallel_sharding_strategy=optim_grads with --overlap-moe-expert-parallel-comm is not simulated "
            "yet");
  overlap.training.data_parallel_sharding = DataParallelSharding::optim;
  EXPECT_EQ(usage_error_of(overlap, tiny_moe()), "no UsageError");
}

// Hybrid sharding: dp 4 as 2 replicas of 2-rank shard groups (tp 2, so the dp stride is 2 in
// the rank order tp-cp-ep-dp-pp: ranks 0, 2, 4, 6 hold the data-parallel copies of rank 0).
TEST(ShardedDataParallel, HybridShardingReduceScattersInAReplicaThenAllReducesAcrossReplicas) {
  ShardOptions options = layout(4, "optim_grads_params", 2);
  options.parallelism.dp_replicate = 2;
  const ShardSection shard = sharded(options);
  // Per micro-batch each unit's 4-byte gradients are reduce-scattered over the 2 ranks of the
  // shard group (the whole unit, 4 x 1,246,464 bytes in all at tp 2), then the half each rank
  // holds is all-reduced over the 2 replicas: 4 x 1,246,464 / 2 = 2,492,928 bytes.
  const auto scatters = fsdp_collectives(shard, "reduce_scatter");
  const auto across = ops_where(shard, [](const ShardOp& op) { return op.group == CommGroup::dpr; });
  ASSERT_EQ(scatters.size(), 4u);
  ASSERT_EQ(across.size(), 4u);
  for (const ShardOp* op : scatters) EXPECT_EQ(op->group_size, 2);
  for (const ShardOp* op : across) {
    EXPECT_EQ(op->collective, Collective::all_reduce);
    EXPECT_EQ(op->group_size, 2);
    EXPECT_EQ(op->stream, Stream::dpr);
  }
  EXPECT_DOUBLE_EQ(message_bytes(scatters), kGradBytes * local_params(2));
  EXPECT_DOUBLE_EQ(message_bytes(across), 2492928);
  // The weights are gathered within the shard group: 2 bytes of every parameter forward.
  for (const ShardOp* op : fsdp_collectives(shard, "all_gather")) EXPECT_EQ(op->group_size, 2);
  EXPECT_DOUBLE_EQ(message_bytes(fsdp_collectives(shard, "all_gather", "forward")), kWeightBytes * local_params(2));
  // The shard group is a replica's consecutive dp ranks, the replicas' group one rank of each.
  EXPECT_EQ(collective_ranks(*scatters[0], options.parallelism), (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(collective_ranks(*across[0], options.parallelism), (std::vector<int64_t>{0, 4}));
  // The state is sharded over the 2 ranks of a replica: 12 bytes of Adam per parameter / 2.
  normalize_sharding(options.training);
  const TrainingStateBytes states = training_state_bytes(local_params(2), options.parallelism, options.training);
  EXPECT_DOUBLE_EQ(states.optimizer_state_bytes, kOptimizerBytes * local_params(2) / 2);
  EXPECT_DOUBLE_EQ(states.weight_share, 0.5);
  // What hybrid sharding needs.
  ShardOptions bad = options;
  bad.parallelism.dp_replicate = 3;
  EXPECT_EQ(usage_error_of(bad, tiny_llama()), "dp_replicate=3 does not divide dp=4");
  bad.parallelism.dp_replicate = 4;
  EXPECT_EQ(usage_error_of(bad, tiny_llama()),
            "dp_replicate=4 leaves shard groups of one rank: that is data parallelism without sharding (no_shard)");
  bad = options;
  bad.training.data_parallel_sharding = DataParallelSharding::optim;
  EXPECT_EQ(usage_error_of(bad, tiny_llama()),
            "dp_replicate=2 (hybrid sharding) needs --data-parallel-sharding-strategy optim_grads or optim_grads_params");
  EXPECT_EQ(usage_error_of(options, tiny_moe()),
            "dp_replicate=2 (hybrid sharding) with mixtures of experts is not simulated yet");
}

// FSDP2 as torchtitan runs it: the root unit (word embeddings; final norm and output layer)
// and, without pipelining, the last decoder layer stay whole from forward to backward
// (torchtitan's apply_fsdp), so their backward gathers nothing and reads what the forward
// gathered.
TEST(ShardedDataParallel, Fsdp2KeepsTheRootUnitAndTheLastLayerWhole) {
  ShardOptions options = layout(4, "optim_grads_params");
  options.training.fsdp_implementation = FsdpImplementation::fsdp2;
  const ShardSection shard = sharded(options);
  // Backward: the first of the two layers only (Megatron-FSDP's schedule gathers the second
  // layer, the output layer and the final norm again, 3 gathers; the embedding's backward reads
  // no weight).
  const auto backward = fsdp_collectives(shard, "all_gather", "backward");
  ASSERT_EQ(backward.size(), 1u);
  EXPECT_EQ(backward[0]->module, "decoder.layers.0.fsdp_params");
  EXPECT_DOUBLE_EQ(message_bytes(backward), kWeightBytes * layer_params(1));
  EXPECT_EQ(fsdp_collectives(sharded(layout(4, "optim_grads_params")), "all_gather", "backward").size(), 3u);
  // The output layer's data gradient waits for the forward's gather of it.
  const auto forward_output = ops_where(shard, [](const ShardOp& op) {
    return op.module == "decoder.final_layernorm.fsdp_params" && op.pass == OpPass::forward;
  });
  ASSERT_EQ(forward_output.size(), 1u);
  for (const ShardOp& op : shard.ops)
    if (op.module == "output_layer" && op.name == "syssim::linear_dgrad") {
      EXPECT_TRUE(depends_transitively(shard, op.id, forward_output[0]->id));
    }
  // The gradients are reduce-scattered as before: 4 bytes of every parameter in each
  // micro-batch's ops.
  EXPECT_DOUBLE_EQ(message_bytes(fsdp_collectives(shard, "reduce_scatter")), kGradBytes * local_params(1));


  ShardOptions unsharded = layout(4, "optim");
  unsharded.training.fsdp_implementation = FsdpImplementation::fsdp2;
  EXPECT_EQ(usage_error_of(unsharded, tiny_llama()),
            "fsdp_implementation=fsdp2 needs --data-parallel-sharding-strategy optim_grads or optim_grads_params");

  TrainingConfig training = options.training;
  training.global_batch = 8;
  const nlohmann::json j = to_json(training);
  EXPECT_EQ(j.at("fsdp_implementation"), "fsdp2");
  EXPECT_EQ(training_from_json(j, "training").fsdp_implementation, FsdpImplementation::fsdp2);
  nlohmann::json unknown = j;
  unknown["fsdp_implementation"] = "fsdp1";
  EXPECT_THROW(training_from_json(unknown, "training"), DataError);
}

// Under PyTorch's pipelining FSDP2 gathers every unit once a step and keeps it whole across
// the micro-batches, and reduce-scatters the accumulated gradients once, after the stage's
// last backward (torch/distributed/pipelining/stage.py, backward_maybe_with_nosync).
TEST(ShardedDataParallel, Fsdp2UnderPipelinesGathersAndReducesOnceAStep) {
  ShardOptions options = layout(4, "optim_grads_params");
  options.training.fsdp_implementation = FsdpImplementation::fsdp2;
  options.parallelism.pp = 2;
  options.training.global_batch = 16;  // 4 micro-batches, 2 in flight on the first stage
  const ShardSection shard = sharded(options);
  // No collective in the micro-batches: 4 gathers at the step's start (the embedding and layer
  // 0 on the first stage, layer 1 and the output unit on the second), 2 bytes of every
  // parameter, and 4 reductions at its end, 4 bytes of every parameter.
  const auto gathers = fsdp_collectives(shard, "all_gather"), reduces = fsdp_collectives(shard, "reduce_scatter");
  ASSERT_EQ(gathers.size(), 4u);
  ASSERT_EQ(reduces.size(), 4u);
  for (const ShardOp* op : gathers) EXPECT_EQ(op->scope, OpScope::step_start);
  for (const ShardOp* op : reduces) EXPECT_EQ(op->scope, OpScope::step);
  EXPECT_DOUBLE_EQ(message_bytes(gathers), kWeightBytes * local_params(1));
  EXPECT_DOUBLE_EQ(message_bytes(reduces), kGradBytes * local_params(1));
  // Each reduction waits for its stage's last backward op.
  for (const ShardOp* reduce : reduces) {
    int64_t last = -1;
    for (const ShardOp& op : shard.ops)
      if (op.scope == OpScope::microbatch && op.stage == reduce->stage && op.pass != OpPass::forward) last = op.id;
    EXPECT_TRUE(depends_transitively(shard, reduce->id, last)) << reduce->module;
  }
  // Memory of the first stage: the 16-bit weights of its P = 262,144 + 983,552 = 1,245,696
  // parameters are whole over the step, counted once however many micro-batches are in flight:
  // 2P, exactly what FSDP2's sharding of its fp32 weights saves against optim_grads (2P weights
  // and 12P/4 of Adam against 4P/4 and 8P/4), so the two peak alike; each keeps the stage's
  // gradients whole, accumulated, until the step's reduction.
  auto stage0_peak = [&](const std::string& strategy) {
    ShardOptions o = options;
    o.training.data_parallel_sharding = *parse_data_parallel_sharding(strategy);
    Graph graph;
    graph.shard = sharded(o);
    account_memory(graph);
    return graph.mem->pp_stage_memory_gb[0];
  };
  EXPECT_NEAR(stage0_peak("optim_grads_params"), stage0_peak("optim_grads"), 1e-12);
}

TEST(ShardedDataParallel, Float8WeightsAndBf16GradientsShrinkTheUnitsCollectives) {
  // torchao's float8 all-gather (torchtitan's float8.enable_fsdp_float8_all_gather, tensorwise
  // scaling) is FSDP2 with fp8 parameters: a layer gathers its linear weights at one byte per
  // element, (a + 2g) d h + a d h + 2 f h + f h = 983,040 bytes, and an fp32 scale per weight
  // tensor (the QKV linear's q, k and v, the projection, fc1, fc2: 6 x 4 bytes), and its two
  // norms in bf16, 2 x 2h = 1,024 bytes.
  ShardOptions options = layout(4, "optim_grads_params");
  options.training.fsdp_implementation = FsdpImplementation::fsdp2;
  options.training.dtype = "fp8";
  options.training.fp8_recipe = "current";
  options.training.fp8_param_gather = true;
  const ShardSection fp8 = sharded(options);
  const auto layer_gathers = ops_where(fp8, [](const ShardOp& op) {
    return op.module == "decoder.layers.0.fsdp_params" && op.pass == OpPass::forward;
  });
  ASSERT_EQ(layer_gathers.size(), 1u);
  const double linear_elements = (a + 2 * g) * d * h + a * d * h + 2 * f * h + f * h;
  EXPECT_DOUBLE_EQ(linear_elements, 983040);
  EXPECT_DOUBLE_EQ(layer_gathers[0]->message_bytes, linear_elements + 6 * 4 + 2 * 2 * h);
  // FSDP1's PURE policy (and FSDP2's reduce_dtype bf16): the reduce-scatters move 2 bytes per
  // parameter instead of fp32's 4, 2 x 2,491,648 bytes per micro-batch.
  ShardOptions pure = layout(4, "optim_grads_params");
  pure.training.grad_reduce_in_bf16 = true;
  EXPECT_DOUBLE_EQ(message_bytes(fsdp_collectives(sharded(pure), "reduce_scatter")), 2 * local_params(1));
}

TEST(ShardedDataParallel, StrategyNamesAndAliases) {
  using S = DataParallelSharding;
  const std::map<std::string, S> names = {{"no_shard", S::no_shard},
                                          {"optim", S::optim},
                                          {"optim_grads", S::optim_grads},
                                          {"optim_grads_params", S::optim_grads_params},
                                          {"zero1", S::optim},
                                          {"zero2", S::optim_grads},
                                          {"zero3", S::optim_grads_params},
                                          {"shard_grad_op", S::optim_grads},
                                          {"full_shard", S::optim_grads_params}};
  for (const auto& [name, sharding] : names) {
    ASSERT_TRUE(parse_data_parallel_sharding(name).has_value()) << name;
    EXPECT_EQ(*parse_data_parallel_sharding(name), sharding) << name;
  }
  for (const char* unknown : {"", "zero4", "ZERO3", "hybrid_shard", "optim-grads"})
    EXPECT_FALSE(parse_data_parallel_sharding(unknown).has_value()) << unknown;
  EXPECT_STREQ(to_string(S::optim_grads_params), "optim_grads_params");
  TrainingConfig t;
  t.data_parallel_sharding = S::optim_grads;
  EXPECT_TRUE(t.shards_gradients());
  EXPECT_FALSE(t.shards_weights());
  t.data_parallel_sharding = S::optim;
  EXPECT_FALSE(t.shards_gradients());
  normalize_sharding(t);
  EXPECT_TRUE(t.distributed_optimizer);
  TrainingConfig distributed;
  distributed.distributed_optimizer = true;
  normalize_sharding(distributed);
  EXPECT_EQ(distributed.data_parallel_sharding, S::optim);
}

TEST(ShardedDataParallel, TrainingConfigRoundTripsThroughJson) {
  TrainingConfig t;
  t.distributed_optimizer = true;
  t.data_parallel_sharding = DataParallelSharding::optim_grads_params;
  nlohmann::json j = to_json(t);
  EXPECT_EQ(j.at("data_parallel_sharding_strategy"), "optim_grads_params");
  EXPECT_EQ(j.at("distributed_optimizer"), true);
  TrainingConfig back = training_from_json(j, "/shard/training");
  EXPECT_EQ(back.data_parallel_sharding, DataParallelSharding::optim_grads_params);
  EXPECT_TRUE(back.distributed_optimizer);
  EXPECT_EQ(to_json(back), j);
  // The distributed optimizer alone is optim, written as before 1.6 (no key).
  TrainingConfig optim;
  optim.distributed_optimizer = true;
  nlohmann::json written = to_json(optim);
  EXPECT_FALSE(written.contains("data_parallel_sharding_strategy"));
  EXPECT_EQ(training_from_json(written, "/shard/training").data_parallel_sharding, DataParallelSharding::optim);
  EXPECT_EQ(training_from_json(to_json(TrainingConfig{}), "/t").data_parallel_sharding, DataParallelSharding::no_shard);
  // The shard section records the strategy simulated.
  ShardSection shard = sharded(layout(4, "zero3"));
  EXPECT_EQ(to_json(shard.training).at("data_parallel_sharding_strategy"), "optim_grads_params");
}

// Plumbing: the optimizer's state keys and the allocator's fragmentation (1.15) are written when
// set and read back; an unknown dtype is bad data naming the key and the value.
TEST(ShardedDataParallel, OptimizerStateKeysRoundTripThroughJson) {
  TrainingConfig t;
  EXPECT_FALSE(to_json(t).contains("optimizer_state_dtype"));
  EXPECT_FALSE(to_json(t).contains("store_param_remainders"));
  t.store_param_remainders = true;
  EXPECT_TRUE(training_from_json(to_json(t), "/t").store_param_remainders);
  t.store_param_remainders = false;
  t.optimizer_state_dtype = OptimizerStateDtype::fp16;
  nlohmann::json j = to_json(t);
  EXPECT_EQ(j.at("optimizer_state_dtype"), "fp16");
  EXPECT_EQ(training_from_json(j, "/t").optimizer_state_dtype, OptimizerStateDtype::fp16);
  t.allocator_fragmentation = 0.08;
  EXPECT_EQ(training_from_json(to_json(t), "/t").allocator_fragmentation, 0.08);
  j["optimizer_state_dtype"] = "fp8";
  try {
    training_from_json(j, "/shard/training");
    ADD_FAILURE() << "no DataError";
  } catch (const DataError& e) {
    EXPECT_STREQ(e.what(), "graph: /shard/training/optimizer_state_dtype: expected fp32, bf16 or fp16, got \"fp8\"");
  }
}

TEST(ShardedDataParallel, JsonStrategyNamesAreCheckedAndImplyTheDistributedOptimizer) {
  TrainingConfig t;
  t.distributed_optimizer = true;
  t.data_parallel_sharding = DataParallelSharding::optim_grads;
  nlohmann::json j = to_json(t);
  auto error_of = [](const nlohmann::json& json) -> std::string {
    try {
      training_from_json(json, "/shard/training");
    } catch (const DataError& e) {
      return e.what();
    }
    return "no DataError";
  };
  EXPECT_EQ(error_of(j), "no DataError");
  // The strategy with distributed_optimizer false (what --data-parallel-sharding-strategy
  // alone sets, and what a sweep's --set writes) reads as the strategy, which implies the
  // distributed optimizer.
  nlohmann::json off = j;
  off["distributed_optimizer"] = false;
  TrainingConfig read = training_from_json(off, "/shard/training");
  EXPECT_EQ(read.data_parallel_sharding, DataParallelSharding::optim_grads);
  EXPECT_TRUE(read.distributed_optimizer);
  TrainingConfig flag_only;
  flag_only.data_parallel_sharding = DataParallelSharding::optim_grads_params;
  EXPECT_EQ(training_from_json(to_json(flag_only), "/t").data_parallel_sharding,
            DataParallelSharding::optim_grads_params);
  // Only the canonical names beyond the distributed optimizer are written, and read.
  for (const char* name : {"zero2", "full_shard", "shard_grad_op", "optim", "no_shard", "sharded"}) {
    nlohmann::json other = j;
    other["data_parallel_sharding_strategy"] = name;
    EXPECT_EQ(error_of(other).rfind("/shard/training/data_parallel_sharding_strategy: expected optim_grads or "
                                    "optim_grads_params",
                                    0),
              0u)
        << name << ": " << error_of(other);
    EXPECT_NE(error_of(other).find(std::string("'") + name + "'"), std::string::npos) << name;
  }
  nlohmann::json number = j;
  number["data_parallel_sharding_strategy"] = 3;
  EXPECT_THROW(training_from_json(number, "/shard/training"), DataError);
}

}  // namespace
}  // namespace syssim
