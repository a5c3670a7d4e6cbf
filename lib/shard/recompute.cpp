// Activation recomputation as Megatron-LM does it (docs/memory.md): the forward ops of each
// recomputed region run again in the backward pass, just before the first backward op that
// needs what they produced, and the backward ops read the recomputed buffers. The forward
// buffers are then dead after the forward pass, which the memory stage sees by itself.
#include <algorithm>
#include <map>
#include <set>

#include "common/error.hpp"
#include "shard/passes.hpp"

namespace syssim {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

// What a checkpoint keeps of the buffers it writes when the forward pass leaves it.
enum class KeptOutputs : uint8_t {
  none,                // Megatron's CheckpointWithoutOutput: its outputs are recomputed too
  read_outside,        // a torch checkpoint: the buffers forward ops outside the region read
  read_outside_layer,  // a layer's checkpoint whose saved ops are not in the region: what forward
                       // ops of other layers (or of none) read, the layer's output
};

// Megatron-LM's --recompute-modules: the module paths each checkpoints (the components of the
// paths lib/trace gives them) and how. mlp is the dense MLP only, moe the whole MoE layer
// (Megatron-Core's TransformerLayer: an MoE layer's mlp is recomputed by moe), moe_act the
// experts' activation, mla_up_proj MLA's up projections with their RoPE as one function.
// layernorm, moe_act and mla_up_proj are Megatron's CheckpointWithoutOutput: their outputs are
// dropped too and recomputed for the backward ops that read them (megatron/training/arguments.py,
// --recompute-modules); the others are torch checkpoints, which keep their outputs.
struct RecomputeModule {
  std::vector<ModuleComponent> components;
  KeptOutputs kept = KeptOutputs::read_outside;
  bool region_per_component = false;  // layernorm: each norm is a checkpoint of its own
};
const std::map<std::string, RecomputeModule> kRecomputeModules = {
    {"core_attn", {{ModuleComponent::core_attention}}},
    {"mlp", {{ModuleComponent::mlp}}},
    {"layernorm", {{ModuleComponent::input_layernorm, ModuleComponent::pre_mlp_layernorm}, KeptOutputs::none, true}},
    {"moe", {{ModuleComponent::mlp}}},
    {"moe_act", {{ModuleComponent::activation_func}, KeptOutputs::none}},
    {"shared_experts", {{ModuleComponent::shared_experts}}},
    {"mla_up_proj",
     {{ModuleComponent::linear_q_up_proj, ModuleComponent::linear_kv_up_proj, ModuleComponent::mla_rope},
      KeptOutputs::none}},
};

// torchtitan's per-op selective checkpointing (selective_ac_option "op"): a policy over every
// op of a layer rather than a module, so it is selected alone.
constexpr const char* kOpLevel = "op";

std::vector<std::string> selected_modules(const TrainingConfig& training) {
  return training.recompute_modules.empty() ? std::vector<std::string>{"core_attn"} : training.recompute_modules;
}

bool is_layer_forward_op(const ShardOp& op) { return op.phase == OpPhase::fwd && op.scope == OpScope::microbatch && op.layer; }

// A set of forward ops run again together (one checkpointed function).
struct Region {
  std::vector<int64_t> ops;        // old ids, in forward order
  KeptOutputs kept = KeptOutputs::read_outside;
  std::set<int64_t> dropped;       // buffers it writes that the backward reads recomputed
  bool recomputed = false;
};

// The region of `key` (made, keeping `kept`, when the key is new) takes op `id`.
template <typename Key>
void add_to_region(std::map<Key, size_t>& region_of, const Key& key, KeptOutputs kept, int64_t id,
                   std::vector<Region>& regions) {
  auto [it, added] = region_of.emplace(key, regions.size());
  if (added) {
    regions.emplace_back();
    regions.back().kept = kept;
  }
  regions[it->second].ops.push_back(id);
}

// Full recompute: per pipeline stage and model chunk, uniform groups consecutive layers in
// checkpoints of n; block checkpoints each of the first n layers and stores the others.
std::vector<Region> full_regions(const std::vector<ShardOp>& ops, const std::string& method, int64_t n) {
  std::map<std::pair<int64_t, int64_t>, std::vector<int64_t>> layers_of_chunk;  // (stage, chunk) -> layers
  for (const ShardOp& op : ops) {
    if (!is_layer_forward_op(op)) continue;
    auto& layers = layers_of_chunk[{op.stage, op.chunk}];
    if (std::find(layers.begin(), layers.end(), *op.layer) == layers.end()) layers.push_back(*op.layer);
  }
  std::map<int64_t, size_t> region_of_layer;
  std::vector<Region> regions;
  for (const auto& [chunk, layers] : layers_of_chunk)
    for (size_t i = 0; i < layers.size(); ++i) {
      if (method == "block" && static_cast<int64_t>(i) >= n) break;
      if (method == "block" || i % n == 0) regions.emplace_back();
      region_of_layer[layers[i]] = regions.size() - 1;
    }
  for (const ShardOp& op : ops)
    if (is_layer_forward_op(op) && region_of_layer.count(*op.layer)) regions[region_of_layer[*op.layer]].ops.push_back(op.id);
  return regions;
}

// Selective recompute: per layer, one region per chosen module.
std::vector<Region> selective_regions(const ModelConfig& model, const std::vector<ShardOp>& ops,
                                      const std::vector<std::string>& modules) {
  std::map<std::pair<int64_t, std::string>, size_t> region_of;  // (layer, module or component) -> region
  std::vector<Region> regions;
  for (const ShardOp& op : ops) {
    if (!is_layer_forward_op(op)) continue;
    const bool moe_layer = model.is_moe_layer(*op.layer);
    for (const std::string& name : modules) {
      const RecomputeModule& module = kRecomputeModules.at(name);
      if ((name == "mlp" && moe_layer) || (name == "moe" && !moe_layer)) continue;
      for (ModuleComponent component : module.components) {
        if (!op.module.module_path().has(component)) continue;
        const std::string region = module.region_per_component ? to_string(component) : name;
        add_to_region(region_of, std::pair{*op.layer, region}, module.kept, op.id, regions);
        break;
      }
    }
  }
  return regions;
}

// Whether torchtitan's op-level policy saves a forward op of a layer (_save_list in
// torchtitan/models/llama3/parallelize_llama.py): the attention, a reduce-scatter, and a matrix
// multiply (aten.mm: a linear, not the experts' grouped GEMMs or attention's batched ones)
// numbered odd in the layer's forward order. `mms` counts the layer's multiplies so far.
bool saved_by_op_level_policy(const ShardOp& op, int64_t& mms) {
  if (op.kind == OpKind::attention) return true;
  if (op.kind == OpKind::collective) return op.collective == Collective::reduce_scatter;
  const NamedOp name = op.name.named_op();
  if (name != NamedOp::linear && name != NamedOp::qkv_linear && name != NamedOp::stacked_linear) return false;
  return ++mms % 2 == 1;
}

// Op-level selective recompute: per layer, one checkpoint of every forward op the policy does
// not save. What the saved ops write stays, as their outputs do in torchtitan's cache.
std::vector<Region> op_level_regions(const std::vector<ShardOp>& ops) {
  std::map<int64_t, size_t> region_of_layer;
  std::map<int64_t, int64_t> mms_of_layer;
  std::vector<Region> regions;
  for (const ShardOp& op : ops) {
    if (is_layer_forward_op(op) && !saved_by_op_level_policy(op, mms_of_layer[*op.layer]))
      add_to_region(region_of_layer, *op.layer, KeptOutputs::read_outside_layer, op.id, regions);
  }
  return regions;
}

class Recomputer {
 public:
  Recomputer(const ShardContext& context, ShardSection& shard) : context_(context), shard_(shard), rewriter_(shard) {}

  void run(std::vector<Region> regions) {
    regions_ = std::move(regions);
    find_dropped_buffers();
    for (const ShardOp& op : rewriter_.old_ops()) {
      if (op.phase == OpPhase::bwd && op.scope == OpScope::microbatch)
        for (size_t r : regions_needed_by(op))
          if (!regions_[r].recomputed) recompute(r);
      // A region's ops are read again when the backward recomputes them: copied; the rest moved.
      ShardOp kept = in_region_[op.id] ? op : rewriter_.take(op.id);
      substitute(kept.reads);
      substitute(kept.writes);
      note_issued(rewriter_.keep(op.id, std::move(kept)), op.stream);
    }
  }

  const std::vector<ShardOp>& old_ops() const { return rewriter_.old_ops(); }

 private:
  // A region drops every buffer it produces except, for a torch checkpoint, its outputs: the
  // buffers a forward op outside the region (or outside its layer) reads (the next layer's
  // input, the attention context the projection keeps).
  void find_dropped_buffers() {
    const auto& ops = rewriter_.old_ops();
    std::vector<int64_t> producer(shard_.buffers.size(), -1);
    for (const ShardOp& op : ops)
      for (int64_t b : op.writes)
        if (producer[b] < 0) producer[b] = op.id;
    std::vector<int64_t> region_of_op(ops.size(), -1);
    in_region_.assign(ops.size(), 0);
    for (size_t r = 0; r < regions_.size(); ++r)
      for (int64_t id : regions_[r].ops) region_of_op[id] = static_cast<int64_t>(r), in_region_[id] = 1;
    dropped_by_.resize(shard_.buffers.size());
    std::vector<std::set<int64_t>> kept(regions_.size());
    for (const ShardOp& op : ops)
      if (op.phase == OpPhase::fwd)
        for (int64_t b : op.reads) {
          if (producer[b] < 0 || region_of_op[producer[b]] < 0) continue;
          const int64_t r = region_of_op[producer[b]];
          const KeptOutputs policy = regions_[r].kept;
          if ((policy == KeptOutputs::read_outside && region_of_op[op.id] != r) ||
              (policy == KeptOutputs::read_outside_layer && op.layer != ops[producer[b]].layer))
            kept[r].insert(b);
        }
    for (size_t r = 0; r < regions_.size(); ++r) {
      Region& region = regions_[r];
      for (int64_t id : region.ops)
        for (int64_t b : ops[id].writes)
          if (producer[b] == id && !kept[r].count(b)) {
            region.dropped.insert(b);
            dropped_by_[b].push_back(r);
          }
      for (int64_t id : region.ops)
        if (ops[id].trace_op) trace_ops_[*ops[id].trace_op] = r;
    }
  }

  // The regions whose forward backward op `op` needs, in order: those that dropped a buffer
  // it reads, and the region of its forward op (Megatron recomputes when the backward
  // reaches it).
  std::vector<size_t> regions_needed_by(const ShardOp& op) const {
    std::vector<size_t> needed;
    for (int64_t b : op.reads)
      if (static_cast<size_t>(b) < dropped_by_.size())
        needed.insert(needed.end(), dropped_by_[b].begin(), dropped_by_[b].end());
    if (op.trace_op)
      if (const auto& fwd_op = context_.trace.ops[*op.trace_op].fwd_op) {
        auto it = trace_ops_.find(*fwd_op);
        if (it != trace_ops_.end()) needed.push_back(it->second);
      }
    std::sort(needed.begin(), needed.end());
    needed.erase(std::unique(needed.begin(), needed.end()), needed.end());
    return needed;
  }

  void recompute(size_t r) {
    Region& region = regions_[r];
    region.recomputed = true;
    const auto& ops = rewriter_.old_ops();
    // A region that reads what another region dropped (mlp after layernorm) needs it first.
    for (int64_t id : region.ops)
      for (int64_t b : ops[id].reads) {
        if (static_cast<size_t>(b) >= dropped_by_.size() || dropped_by_[b].empty()) continue;
        const size_t dropping = dropped_by_[b].back();  // the last region to drop it
        if (dropping != r && !regions_[dropping].recomputed) recompute(dropping);
      }
    // Issued when the backward reaches it: after the compute op before it.
    std::vector<int64_t> launch_after;
    if (last_compute_op_ >= 0) launch_after.push_back(last_compute_op_);
    std::map<int64_t, int64_t> fresh;  // buffer the region writes -> its recomputed copy
    for (int64_t id : region.ops) {
      ShardOp copy = ops[id];
      copy.recompute = true;
      copy.phase = OpPhase::bwd;
      copy.pass = OpPass::backward;
      for (int64_t& b : copy.reads) b = fresh.count(b) ? fresh[b] : current(b);
      for (int64_t& b : copy.writes) {
        if (!fresh.count(b)) {
          const ShardBuffer& original = shard_.buffers[b];
          fresh[b] = rewriter_.emitter().add_buffer(original.bytes, original.role);
        }
        b = fresh[b];
      }
      note_issued(rewriter_.add(copy, launch_after), copy.stream);
    }
    for (int64_t b : region.dropped) recomputed_[b] = fresh.at(b);
  }

  int64_t current(int64_t buffer) const {
    auto it = recomputed_.find(buffer);
    return it == recomputed_.end() ? buffer : it->second;
  }

  void substitute(IdList& buffers) const {
    for (int64_t& b : buffers) b = current(b);
  }

  void note_issued(int64_t id, Stream stream) {
    if (stream == Stream::compute) last_compute_op_ = id;
  }

  const ShardContext& context_;
  ShardSection& shard_;
  OpRewriter rewriter_;
  std::vector<Region> regions_;
  std::vector<std::vector<size_t>> dropped_by_;  // by buffer: the regions that dropped it
  std::vector<char> in_region_;                  // by old op
  std::map<int64_t, size_t> trace_ops_;        // traced forward op -> its region
  std::map<int64_t, int64_t> recomputed_;      // dropped buffer -> the copy later readers use
  int64_t last_compute_op_ = -1;
};

}  // namespace

void check_recompute(const ModelConfig& model, const ShardOptions& options) {
  const TrainingConfig& t = options.training;
  if (!t.known_recompute())
    throw UsageError("recompute=" + t.recompute + ": expected none, selective or full");
  if (t.recompute_method && t.recompute != "full")
    throw UsageError("recompute_method=" + *t.recompute_method + " needs recompute=full");
  if (t.recompute_num_layers && t.recompute != "full")
    throw UsageError("recompute_num_layers=" + str(*t.recompute_num_layers) + " needs recompute=full");
  if (t.recompute_method && *t.recompute_method != "uniform" && *t.recompute_method != "block")
    throw UsageError("recompute_method=" + *t.recompute_method + ": expected uniform or block");
  for (const std::string& name : t.recompute_modules) {
    if (t.recompute != "selective") throw UsageError("recompute_modules=" + name + " needs recompute=selective");
    if (std::count(t.recompute_modules.begin(), t.recompute_modules.end(), name) > 1)
      throw UsageError("recompute_modules lists " + name + " twice; give each module once");
    if (name == kOpLevel) {
      if (t.recompute_modules.size() > 1)
        throw UsageError("recompute_modules=op is a policy over all of a layer's ops; it takes no other module");
      continue;
    }
    if (!kRecomputeModules.count(name))
      throw UsageError("recompute_modules=" + name +
                       ": expected core_attn, mlp, layernorm, moe, moe_act, shared_experts, mla_up_proj or op");
    if ((name == "moe" || name == "moe_act") && !model.is_moe())
      throw UsageError("recompute_modules=" + name + " needs a model with experts; " + model.name + " has none");
    if (name == "shared_experts" && model.moe_shared_expert_intermediate_size == 0)
      throw UsageError("recompute_modules=shared_experts needs shared experts; " + model.name + " has none");
    if (name == "mla_up_proj" && !model.multi_latent_attention)
      throw UsageError("recompute_modules=mla_up_proj needs multi-head latent attention; " + model.name + " has none");
    // Transformer Engine's delayed scaling keeps amax histories the recomputed casts would update twice.
    if ((name == "layernorm" || name == "moe_act") && t.dtype == "fp8" && t.fp8_recipe.value_or("delayed") == "delayed")
      throw UsageError("recompute_modules=" + name + " with fp8 needs a recipe other than delayed scaling, as in "
                       "Megatron-Core (--fp8-recipe current, mxfp8, ...)");
  }
  if (t.recompute_num_layers) {
    int64_t n = *t.recompute_num_layers;
    if (n < 1) throw UsageError("recompute_num_layers=" + str(n) + " must be at least 1");
    // As Megatron-Core, a virtual stage of fewer layers recomputes them all (block) or as one
    // group (uniform); a count that no virtual stage reaches recomputes nothing more, and is a slip.
    const std::vector<int64_t> layout = pipeline_layout(model, options);
    const int64_t most = *std::max_element(layout.begin(), layout.end());
    if (n > most)
      throw DataError("recompute_num_layers=" + str(n) + " exceeds the layers of every virtual pipeline stage (at most " +
                      str(most) + ")");
  }
}

void apply_recompute(const ShardContext& context, ShardSection& shard) {
  TrainingConfig& t = shard.training;
  if (t.recompute == "none") return;
  // The shard section records the settings simulated, defaults resolved.
  if (t.recompute == "selective") t.recompute_modules = selected_modules(t);
  if (t.recompute == "full") {
    t.recompute_method = t.recompute_method.value_or("uniform");
    t.recompute_num_layers = t.recompute_num_layers.value_or(1);
  }
  Recomputer recomputer(context, shard);
  const auto& ops = recomputer.old_ops();
  if (t.recompute == "full")
    recomputer.run(full_regions(ops, *t.recompute_method, *t.recompute_num_layers));
  else if (t.recompute_modules == std::vector<std::string>{kOpLevel})
    recomputer.run(op_level_regions(ops));
  else
    recomputer.run(selective_regions(context.model, ops, t.recompute_modules));
}

}  // namespace syssim
