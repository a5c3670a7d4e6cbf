// CUDA graphs (docs/syssim-sim.md, "The host"): the microbatch ops Megatron captures under
// --cuda-graph-scope, which the host then replays a graph at a time instead of issuing.
#include <algorithm>
#include <map>
#include <string>
#include <tuple>

#include "common/error.hpp"
#include "common/text.hpp"
#include "shard/passes.hpp"

namespace syssim {
namespace {

// The part of a decoder layer an op belongs to (LayerPart, from its module path).
LayerPart part_of(const ShardOp& op) { return op.layer ? op.module.module_path().layer_part : LayerPart::other; }

// The scope that captures an op of `part` in a layer with or without experts, given what the
// training captures; nullopt: none. A dispatch op is preprocessing until the dispatch's first
// collective (`dispatched`).
std::optional<CudaGraphScope> scope_of(LayerPart part, bool moe_layer, bool dispatched, const TrainingConfig& t) {
  auto when = [&](CudaGraphScope scope) { return t.captures(scope) ? std::optional(scope) : std::nullopt; };
  switch (part) {
    case LayerPart::attention: return when(CudaGraphScope::attn);
    case LayerPart::pre_mlp_norm:
    case LayerPart::router:
      if (!moe_layer) return when(CudaGraphScope::mlp);
      return t.captures(CudaGraphScope::moe) ? when(CudaGraphScope::moe) : when(CudaGraphScope::moe_router);
    case LayerPart::dispatch:
      if (t.captures(CudaGraphScope::moe)) return CudaGraphScope::moe;
      return dispatched ? std::nullopt : when(CudaGraphScope::moe_preprocess);
    case LayerPart::mlp: return when(moe_layer ? CudaGraphScope::moe : CudaGraphScope::mlp);
    case LayerPart::residual:
    case LayerPart::other: return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace

void check_cuda_graphs(const ModelConfig& model, const ShardOptions& options) {
  const TrainingConfig& t = options.training;
  if (t.cuda_graph_scope.empty()) return;
  const std::string given = "cuda_graph_scope=" + join(names_of(t.cuda_graph_scope), ",");
  auto refuse = [&](const std::string& why) { throw UsageError(given + ": " + why); };
  for (size_t i = 0; i < t.cuda_graph_scope.size(); ++i)
    if (std::count(t.cuda_graph_scope.begin(), t.cuda_graph_scope.begin() + i, t.cuda_graph_scope[i]) > 0)
      refuse(std::string("lists ") + to_string(t.cuda_graph_scope[i]) + " twice; give each scope once");
  if (t.captures(CudaGraphScope::full_iteration) && t.cuda_graph_scope.size() > 1)
    refuse("full_iteration (Megatron's local graph of the whole iteration) takes no other scope");
  for (CudaGraphScope scope : {CudaGraphScope::moe, CudaGraphScope::moe_router, CudaGraphScope::moe_preprocess})
    if (t.captures(scope) && !model.is_moe())
      refuse(std::string(to_string(scope)) + " needs a model with experts; " + model.name + " has none");
  if (t.captures(CudaGraphScope::moe) && t.captures(CudaGraphScope::moe_router))
    refuse("moe and moe_router exclude each other, as in Megatron-Core");
  if (t.captures(CudaGraphScope::moe_preprocess) && !t.captures(CudaGraphScope::moe_router))
    refuse("moe_preprocess needs moe_router, as in Megatron-Core");
  if (model.is_moe() && dispatcher_syncs_host(t) &&
      (t.captures(CudaGraphScope::moe) || t.captures(CudaGraphScope::full_iteration)))
    refuse("a graph cannot hold the token dispatcher's copy of the token counts to the host; dropless routing "
           "graphs moe_router,moe_preprocess, or pads to a capacity (--moe-expert-capacity-factor with "
           "--moe-pad-expert-input-to-capacity)");
  if (t.recompute == "full" && !t.captures(CudaGraphScope::full_iteration))
    refuse("full recompute is only supported with full_iteration graphs, as in Megatron-Core");
  if (t.cpu_offloading_num_layers > 0 && !t.captures(CudaGraphScope::full_iteration))
    refuse("per-layer graphs do not work with CPU offloading, as in Megatron-Core (full_iteration does)");
  const bool every_layer_moe = model.is_moe() && std::count(model.moe_layer_pattern.begin(), model.moe_layer_pattern.end(), 0) == 0;
  if (t.captures(CudaGraphScope::mlp) && every_layer_moe)
    refuse("mlp graphs the dense layers' MLP, and every layer of " + model.name + " has experts (as Megatron-Core refuses)");
  // Megatron-Core: the alltoall dispatcher copies the token counts to the host while it
  // preprocesses when it drops tokens or pads the routing map, unless it pads to capacity.
  if (t.captures(CudaGraphScope::moe_preprocess) && t.moe_token_dispatcher_type == "alltoall" &&
      !t.moe_pad_expert_input_to_capacity && (t.moe_expert_capacity_factor || t.moe_router_padding_for_quantization))
    refuse("moe_preprocess cannot be graphed where the alltoall dispatcher copies token counts to the host while it "
           "preprocesses (a capacity factor without padding to it, or router padding for quantization)");
}

void mark_cuda_graphs(const ShardContext& context, ShardSection& shard) {
  const TrainingConfig& t = context.options.training;
  if (t.cuda_graph_scope.empty()) return;
  const bool whole = t.captures(CudaGraphScope::full_iteration);
  // By layer and pass (phase, recompute): whether its dispatch has reached its first
  // collective, and the scope of its op before (a residual add closes that op's graph).
  std::map<std::tuple<int64_t, int, bool>, std::pair<bool, std::optional<CudaGraphScope>>> passes;
  for (ShardOp& op : shard.ops) {
    if (op.scope != OpScope::microbatch) continue;
    if (whole) {
      op.cuda_graph = CudaGraphScope::full_iteration;
      continue;
    }
    if (!op.layer) continue;
    auto& [dispatched, before] = passes[{*op.layer, static_cast<int>(op.phase), op.recompute}];
    const LayerPart part = part_of(op);
    const bool moe_layer = static_cast<size_t>(*op.layer) < context.model.moe_layer_pattern.size() &&
                           context.model.is_moe_layer(*op.layer);
    // Preprocessing ends at the dispatch's first exchange, or at the experts without one.
    if ((part == LayerPart::dispatch && op.kind == OpKind::collective) || (part == LayerPart::mlp && moe_layer))
      dispatched = true;
    op.cuda_graph = part == LayerPart::residual ? before : scope_of(part, moe_layer, dispatched, t);
    before = op.cuda_graph;
  }
}

}  // namespace syssim
