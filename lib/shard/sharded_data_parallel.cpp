// Sharded data parallelism (docs/parallelism.md "Sharded data parallelism"): Megatron-FSDP's
// optim_grads (ZeRO-2) and optim_grads_params (ZeRO-3). Each decoder layer is a unit, and the
// weights outside the layers of one virtual stage (embedding; final norm and output layer) one
// more. In every micro-batch a unit's gradients are reduce-scattered as soon as its backward has
// written them; under optim_grads_params its weights are all-gathered before its forward and
// again before its backward (freed after each), one unit ahead of the compute. FSDP2 under
// PyTorch's pipelining instead gathers each unit once a step and keeps it whole across the
// micro-batches, and reduce-scatters the accumulated gradients once, after the stage's last
// backward.
#include <algorithm>
#include <map>
#include <tuple>

#include "common/error.hpp"
#include "shard/passes.hpp"

namespace syssim {
namespace {

// Forward ops run before the backward ones (recomputed forward ops among those).
bool backward_side(const ShardOp& op) { return op.pass != OpPass::forward || op.recompute; }

// A unit's ops of one side on one pipeline rank's virtual stage: a decoder layer's, or those
// outside the layers before them (kBeforeLayers: the embedding in forward) or after them
// (kAfterLayers: final norm, output layer and loss in forward).
using UnitKey = std::tuple<int64_t, int64_t, bool, int64_t>;  // stage, chunk, backward side, layer
constexpr int64_t kBeforeLayers = -1;
constexpr int64_t kAfterLayers = -2;

// The weights and gradients of one unit that one data-parallel group shards: the dense
// parameters' over dp x cp ranks, the experts' over the expert-data-parallel ranks.
struct ShardedPart {
  std::vector<int64_t> weights;
  std::vector<int64_t> grads;
  double weight_bytes = 0;
  double grad_params = 0;
};

struct Unit {
  std::vector<int64_t> ops;       // old ids, in order: those reading weights or writing gradients
  int64_t last_grad_writer = -1;  // its reduce-scatters follow this op; -1: it has no gradients
  bool weight_pass_grads = false;  // a weight-pass op writes some of its gradients
  std::string module;              // its first op's: places the unit's collectives on its stage
  ShardedPart part[2];            // [0] dense, [1] experts
};

class ShardedDataParallel {
 public:
  ShardedDataParallel(const ShardContext& context, ShardSection& shard)
      : context_(context), shard_(shard), rewriter_(shard) {}

  void run() {
    find_units();
    plan_issue_points();
    emit();
  }

 private:
  struct Group {
    CommGroup group;
    int64_t ranks;
  };
  Group group(int part) const {
    return part == 0 ? Group{CommGroup::dp, context_.options.parallelism.dp_shard_group()}
                     : Group{CommGroup::edp, context_.options.parallelism.expert_dp()};
  }

  // The unit of a microbatch op, in op order.
  UnitKey unit_of(const ShardOp& op) {
    const std::tuple<int64_t, int64_t, bool> side{op.stage, op.chunk, backward_side(op)};
    if (op.layer) {
      past_layers_[side] = true;
      return {op.stage, op.chunk, backward_side(op), *op.layer};
    }
    return {op.stage, op.chunk, backward_side(op), past_layers_[side] ? kAfterLayers : kBeforeLayers};
  }

  // Units of the microbatch ops, and their weights and gradients.
  void find_units() {
    const std::vector<ShardOp>& ops = rewriter_.old_ops();
    for (const ShardOp& op : ops) {
      if (op.scope != OpScope::microbatch) continue;
      op_unit_[op.id] = unit_of(op);
      bool uses = false;
      for (int64_t b : op.reads) uses |= is_weight(shard_.buffers[b]);
      for (int64_t b : op.writes) uses |= shard_.buffers[b].role == TensorRole::grad;
      if (!uses) continue;
      auto [it, added] = units_.try_emplace(op_unit_.at(op.id));
      if (added) {
        order_.push_back(it->first);
        it->second.module = op.module.str();
      }
      Unit& unit = it->second;
      unit.ops.push_back(op.id);
      for (int64_t b : op.reads)
        if (is_weight(shard_.buffers[b])) add_weight(unit, b);
      for (int64_t b : op.writes)
        if (shard_.buffers[b].role == TensorRole::grad) {
          add_grad(unit, b);
          unit.last_grad_writer = op.id;
          unit.weight_pass_grads |= op.pass == OpPass::weight;
        }
    }
  }

  // A weight's part: a quantized copy's is its weight's (shard/fp8.cpp names the weight).
  int part_of(int64_t buffer) {
    if (shard_.buffers[buffer].role != TensorRole::quantized_weight) return context_.is_expert_tensor(buffer);
    if (expert_weight_named_.empty())
      for (const ShardBuffer& b : shard_.buffers)
        if (b.role == TensorRole::param) expert_weight_named_[b.param] = context_.is_expert_tensor(b.id);
    auto found = expert_weight_named_.find(shard_.buffers[buffer].param);
    return found != expert_weight_named_.end() && found->second;
  }

  // The 16-bit weights (or fp8 parameters) are gathered; their quantized copies are made from
  // them on the rank.
  void add_weight(Unit& unit, int64_t buffer) {
    ShardedPart& part = unit.part[part_of(buffer)];
    if (std::find(part.weights.begin(), part.weights.end(), buffer) != part.weights.end()) return;
    part.weights.push_back(buffer);
    if (shard_.buffers[buffer].role == TensorRole::param) part.weight_bytes += shard_.buffers[buffer].bytes;
  }

  void add_grad(Unit& unit, int64_t buffer) {
    ShardedPart& part = unit.part[part_of(buffer)];
    if (std::find(part.grads.begin(), part.grads.end(), buffer) != part.grads.end()) return;
    part.grads.push_back(buffer);
    part.grad_params += shard_.buffers[buffer].bytes / grad_element_bytes_;
  }

  // Under optim_grads_params, unit i of a virtual stage's side gathers its weights when the
  // unit before it starts (the first unit: when it starts itself), after the unit two before
  // it has finished: two units' weights at most are whole at a time.
  void plan_issue_points() {
    if (!context_.options.training.shards_weights()) return;
    if (once_a_step()) {  // every unit gathered at the step's start, before its first forward
      for (const UnitKey& key : order_)
        if (!forward_twin_kept(key)) gathers_before_[units_.at(key).ops.front()].push_back(key);
      return;
    }
    std::map<std::tuple<int64_t, int64_t, bool>, std::vector<UnitKey>> sequences;
    for (const UnitKey& key : order_) sequences[{std::get<0>(key), std::get<1>(key), std::get<2>(key)}].push_back(key);
    for (auto& [side, keys] : sequences) {
      std::sort(keys.begin(), keys.end(), [&](const UnitKey& a, const UnitKey& b) {
        return units_.at(a).ops.front() < units_.at(b).ops.front();
      });
      for (size_t i = 0; i < keys.size(); ++i) {
        if (forward_twin_kept(keys[i])) continue;  // gathers nothing, but its ops issue the next unit's
        const int64_t issue_at = units_.at(keys[i == 0 ? 0 : i - 1]).ops.front();
        gathers_before_[issue_at].push_back(keys[i]);
        if (i < 2) continue;
        const std::vector<int64_t>& before = units_.at(keys[i - 2]).ops;  // its last op issued by then
        auto last = std::lower_bound(before.begin(), before.end(), issue_at);
        if (last != before.begin()) gather_waits_for_[keys[i]] = *std::prev(last);
      }
    }
  }

  bool once_a_step() const { return fsdp_units_once_a_step(context_.options); }

  // FSDP2 keeps the root unit's weights (embedding, final norm, output layer: torchtitan's
  // model-level fully_shard, reshard_after_forward False) and, without pipelining, the last
  // decoder layer's (torchtitan's apply_fsdp: reshard_after_forward = layer_id < len(layers) - 1)
  // whole from forward to backward, and every unit's once a step: the backward reads what the
  // forward gathered. The unit of the same weights on the forward side.
  std::optional<UnitKey> forward_twin(const UnitKey& key) const {
    const auto [stage, chunk, backward, layer] = key;
    if (!backward) return std::nullopt;
    const int64_t twin = layer >= 0 ? layer : layer == kBeforeLayers ? kAfterLayers : kBeforeLayers;
    UnitKey found{stage, chunk, false, twin};
    if (!units_.count(found)) return std::nullopt;
    return found;
  }
  bool forward_twin_kept(const UnitKey& key) const {
    const int64_t layer = std::get<3>(key);
    return context_.options.training.fsdp_implementation == FsdpImplementation::fsdp2 && forward_twin(key) &&
           (layer < 0 || once_a_step() || layer == context_.model.num_layers - 1);
  }

  void emit() {
    std::map<int64_t, std::vector<UnitKey>> reduces_after;  // old op id -> units reduced after it
    const std::map<std::pair<int64_t, int64_t>, int64_t> last_backward =
        once_a_step() ? last_backward_ops() : std::map<std::pair<int64_t, int64_t>, int64_t>{};
    for (const UnitKey& key : order_)
      if (const int64_t writer = units_.at(key).last_grad_writer; writer >= 0)
        reduces_after[once_a_step() ? last_backward.at({std::get<0>(key), std::get<1>(key)}) : writer].push_back(key);
    // Per unit and part: the whole weights gathered, and the whole gradients before their
    // reduction (their memory: syssim-mem counts these transient buffers).
    const std::vector<ShardOp>& old = rewriter_.old_ops();
    for (const UnitKey& key : order_) {
      Unit& unit = units_.at(key);
      for (int part = 0; part < 2; ++part) {
        if (group(part).ranks == 1) continue;
        if (context_.options.training.shards_weights() && !unit.part[part].weights.empty() && !forward_twin_kept(key))
          gathered_[{key, part}] = rewriter_.emitter().add_buffer(gathered_bytes(key, part), TensorRole::comm);
        if (unit.part[part].grad_params > 0)
          unreduced_[{key, part}] =
              rewriter_.emitter().add_buffer(unit.part[part].grad_params * reduce_bytes_per_param_, TensorRole::comm);
      }
    }
    for (const UnitKey& key : order_)
      if (forward_twin_kept(key))
        for (int part = 0; part < 2; ++part) {
          auto kept = gathered_.find({*forward_twin(key), part});
          if (kept != gathered_.end()) gathered_[{key, part}] = kept->second;
        }
    const size_t count = old.size();
    for (size_t id = 0; id < count; ++id) {
      auto gathers = gathers_before_.find(static_cast<int64_t>(id));
      if (gathers != gathers_before_.end())
        for (const UnitKey& key : gathers->second) emit_gathers(key, old[id]);
      ShardOp op = rewriter_.take(static_cast<int64_t>(id));
      if (op.scope == OpScope::microbatch) attach_unit_buffers(op);
      const ShardOp anchor = op;
      rewriter_.keep(static_cast<int64_t>(id), std::move(op));
      auto reduces = reduces_after.find(static_cast<int64_t>(id));
      if (reduces != reduces_after.end())
        for (const UnitKey& key : reduces->second) emit_reduces(key, anchor);
    }
  }

  // By pipeline rank and virtual stage, its last backward op: after it, once a step, FSDP2's
  // post-backward reduces every unit of the stage.
  std::map<std::pair<int64_t, int64_t>, int64_t> last_backward_ops() const {
    std::map<std::pair<int64_t, int64_t>, int64_t> last;
    for (const ShardOp& op : rewriter_.old_ops())
      if (op.scope == OpScope::microbatch && backward_side(op)) last[{op.stage, op.chunk}] = op.id;
    return last;
  }

  // A unit's op reads the gathered weights of the parts whose weights it reads, and writes
  // the whole gradients of the parts whose gradients it writes. FSDP2 reshards a unit it kept
  // whole only after the unit's backward, so every backward op of such a unit holds its
  // weights, read or not (the embedding's backward reads none).
  void attach_unit_buffers(ShardOp& op) {
    auto found = op_unit_.find(op.id);
    if (found == op_unit_.end() || !units_.count(found->second)) return;
    const UnitKey& key = found->second;
    const bool kept_until_resharded = forward_twin_kept(key);
    auto any_of = [](const IdList& buffers, const std::vector<int64_t>& among) {
      return std::any_of(buffers.begin(), buffers.end(),
                         [&](int64_t b) { return std::find(among.begin(), among.end(), b) != among.end(); });
    };
    std::vector<int64_t> reads, writes;
    for (int part = 0; part < 2; ++part) {
      const ShardedPart& p = units_.at(key).part[part];
      auto gathered = gathered_.find({key, part});
      if (gathered != gathered_.end() && (kept_until_resharded || any_of(op.reads, p.weights)))
        reads.push_back(gathered->second);
      auto unreduced = unreduced_.find({key, part});
      if (unreduced != unreduced_.end() && any_of(op.writes, p.grads)) writes.push_back(unreduced->second);
    }
    op.reads.insert(op.reads.end(), reads.begin(), reads.end());
    op.writes.insert(op.writes.end(), writes.begin(), writes.end());
  }

  // A layer is gathered whole before its backward too (its biases included, which backward
  // does not read), as FSDP gathers a unit's parameters.
  double gathered_bytes(const UnitKey& key, int part) const {
    const ShardedPart& own = units_.at(key).part[part];
    const std::optional<UnitKey> forward = forward_twin(key);
    if (std::get<3>(key) < 0 || !forward) return own.weight_bytes;
    double bytes = own.weight_bytes;
    for (int64_t w : units_.at(*forward).part[part].weights)
      if (shard_.buffers[w].role == TensorRole::param && std::find(own.weights.begin(), own.weights.end(), w) == own.weights.end())
        bytes += shard_.buffers[w].bytes;
    return bytes;
  }

  void emit_gathers(const UnitKey& key, const ShardOp& issuer) {
    for (int part = 0; part < 2; ++part) {
      auto gathered = gathered_.find({key, part});
      if (gathered == gathered_.end()) continue;
      ShardOp c = make_collective(context_, Collective::all_gather, group(part).group, shard_.buffers[gathered->second].bytes,
                                  std::get<2>(key) ? OpPhase::bwd : OpPhase::fwd,
                                  once_a_step() ? OpScope::step_start : OpScope::microbatch);
      place_with(issuer, c);
      c.recompute = false;
      c.pass = std::get<2>(key) ? OpPass::backward : OpPass::forward;
      c.layer = std::get<3>(key) < 0 ? std::nullopt : std::optional<int64_t>(std::get<3>(key));
      c.module = unit_module(key, part, "params");
      c.writes = {gathered->second};
      // Once a step, it reads the shards: the pipeline pass keeps it on the rank holding them.
      if (once_a_step())
        for (int64_t w : units_.at(key).part[part].weights)
          if (shard_.buffers[w].role == TensorRole::param) c.reads.push_back(w);
      std::vector<int64_t> deps;
      auto waits = gather_waits_for_.find(key);
      if (waits != gather_waits_for_.end()) deps.push_back(rewriter_.new_id(waits->second));
      rewriter_.add(c, deps);
    }
  }

  // After `anchor`: the unit's last gradient writer, or once a step the stage's last backward
  // op, which the reduction then waits for.
  void emit_reduces(const UnitKey& key, const ShardOp& anchor) {
    for (int part = 0; part < 2; ++part) {
      auto unreduced = unreduced_.find({key, part});
      if (unreduced == unreduced_.end()) continue;
      const ShardedPart& p = units_.at(key).part[part];
      ShardOp c = make_collective(context_, Collective::reduce_scatter, group(part).group,
                                  p.grad_params * reduce_bytes_per_param_, OpPhase::bwd,
                                  once_a_step() ? OpScope::step : OpScope::microbatch);
      place_with(anchor, c);
      c.recompute = false;
      // After the weight-gradient ops (which zero-bubble schedules run apart from backward).
      c.pass = once_a_step()                         ? OpPass::step
               : units_.at(key).weight_pass_grads ? OpPass::weight
                                                   : OpPass::backward;
      c.layer = std::get<3>(key) < 0 ? std::nullopt : std::optional<int64_t>(std::get<3>(key));
      c.module = unit_module(key, part, "grads");
      c.reads = p.grads;
      c.reads.push_back(unreduced->second);
      c.writes = p.grads;
      std::vector<int64_t> deps;
      if (once_a_step()) {
        // FSDP2 reshards the unit as it reduces it: the whole weights live until then.
        if (auto gathered = gathered_.find({key, part}); gathered != gathered_.end()) c.reads.push_back(gathered->second);
        deps.push_back(rewriter_.new_id(anchor.id));
      }
      rewriter_.add(c, deps);
      if (part == 0) reduce_across_replicas(c);
    }
  }

  // Hybrid sharding: each replica's shard group reduce-scatters the unit's gradients, then the
  // replicas all-reduce the shard each rank holds (PyTorch FSDP's HYBRID_SHARD and FSDP2's 2-D
  // mesh, Megatron's distributed-optimizer instances), on their own communicator.
  void reduce_across_replicas(const ShardOp& scatter) {
    const int64_t replicas = context_.options.parallelism.dp_replicate;
    if (replicas == 1) return;
    ShardOp c = make_collective(context_, Collective::all_reduce, CommGroup::dpr,
                                scatter.message_bytes / static_cast<double>(scatter.group_size), OpPhase::bwd,
                                scatter.scope);
    place_with(scatter, c);
    c.recompute = false;
    c.pass = scatter.pass;
    c.module = scatter.module;
    c.reads = c.writes = scatter.writes;
    rewriter_.add(c);
  }

  // A layer's collectives are named after it; the others after the unit's first op, whose
  // module also says which pipeline stage holds them (embedding: the first).
  std::string unit_module(const UnitKey& key, int part, const char* what) const {
    const int64_t layer = std::get<3>(key);
    const std::string unit = layer >= 0 ? "decoder.layers." + std::to_string(layer) : units_.at(key).module;
    return unit + (part ? ".fsdp_expert_" : ".fsdp_") + what;
  }

  const ShardContext& context_;
  ShardSection& shard_;
  OpRewriter rewriter_;
  // Gradient buffers hold one micro-batch's gradients in the 16-bit dtype.
  const double grad_element_bytes_ = dtype_size(high_precision_dtype(context_.options.training));
  // Gradients are reduced as the main gradients, as the buckets of data_parallel.cpp.
  const double reduce_bytes_per_param_ = context_.options.training.main_grad_bytes();
  std::map<Symbol, bool> expert_weight_named_;          // weight name -> an expert's
  std::map<std::tuple<int64_t, int64_t, bool>, bool> past_layers_;  // by side: a layer op seen
  std::map<int64_t, UnitKey> op_unit_;                    // old microbatch op id -> its unit
  std::map<UnitKey, Unit> units_;
  std::vector<UnitKey> order_;                            // units by first op
  std::map<int64_t, std::vector<UnitKey>> gathers_before_;  // old op id -> units gathered before it
  std::map<UnitKey, int64_t> gather_waits_for_;           // unit -> old op id its gather waits for
  std::map<std::pair<UnitKey, int>, int64_t> gathered_;   // (unit, part) -> whole weights buffer
  std::map<std::pair<UnitKey, int>, int64_t> unreduced_;  // (unit, part) -> whole gradients buffer
};

}  // namespace

// PyTorch's pipelining runs FSDP2 modules with reshard_after_backward and gradient sync off
// but after the last micro-batch's backward (torch/distributed/pipelining/stage.py,
// backward_maybe_with_nosync), and torchtitan turns reshard_after_forward off under it: a unit
// is gathered once a step and its accumulated gradients reduced once.
bool fsdp_units_once_a_step(const ShardOptions& options) {
  return options.training.fsdp_implementation == FsdpImplementation::fsdp2 && options.parallelism.pp > 1;
}

void check_sharded_data_parallel(const ModelConfig& model, const ShardOptions& options, ScheduleKind pipeline_schedule) {
  const TrainingConfig& t = options.training;
  const ParallelismConfig& p = options.parallelism;
  if (p.dp_replicate > 1) {
    if (p.dp % p.dp_replicate != 0)
      throw UsageError("dp_replicate=" + std::to_string(p.dp_replicate) + " does not divide dp=" + std::to_string(p.dp));
    if (!t.shards_gradients())
      throw UsageError("dp_replicate=" + std::to_string(p.dp_replicate) +
                       " (hybrid sharding) needs --data-parallel-sharding-strategy optim_grads or optim_grads_params");
    if (p.dp_shard_group() == 1)
      throw UsageError("dp_replicate=" + std::to_string(p.dp_replicate) +
                       " leaves shard groups of one rank: that is data parallelism without sharding (no_shard)");
    if (model.is_moe())
      throw UsageError("dp_replicate=" + std::to_string(p.dp_replicate) +
                       " (hybrid sharding) with mixtures of experts is not simulated yet");
  }
  if (!t.shards_gradients()) {
    if (t.fsdp_implementation != FsdpImplementation::megatron)
      throw UsageError(std::string("fsdp_implementation=") + to_string(t.fsdp_implementation) +
                       " needs --data-parallel-sharding-strategy optim_grads or optim_grads_params");
    return;
  }
  const std::string strategy = to_string(t.data_parallel_sharding);
  if (t.fsdp_implementation == FsdpImplementation::fsdp2) {
    // FSDP2's ZeRO-2 (reshard_after_forward=False) gathers the weights in every micro-batch's
    // forward and keeps them to its backward, a schedule of neither Megatron-FSDP's nor the
    // pipelined once-a-step one syssim simulates.
    if (!t.shards_weights() && p.pp == 1)
      throw UsageError("fsdp_implementation=fsdp2 with data_parallel_sharding_strategy=" + strategy +
                       " (reshard_after_forward=False) is not simulated without pipeline stages; give optim_grads_params");
    if (t.store_param_remainders)
      throw UsageError("store_param_remainders is Megatron-LM's; fsdp_implementation=fsdp2 keeps the fp32 shards as the "
                       "master weights");
  }
  if (pipeline_schedule == ScheduleKind::zb_h1)
    throw UsageError("data_parallel_sharding_strategy=" + strategy +
                     " with the zb-h1 schedule is not simulated yet (its weight pass splits a unit's backward)");
  if (t.overlap_moe_expert_parallel_comm)
    throw UsageError("data_parallel_sharding_strategy=" + strategy +
                     " with --overlap-moe-expert-parallel-comm is not simulated yet");
}

void apply_sharded_data_parallel(const ShardContext& context, ShardSection& shard) {
  if (!context.options.training.shards_gradients()) return;
  ShardedDataParallel(context, shard).run();
}

}  // namespace syssim
