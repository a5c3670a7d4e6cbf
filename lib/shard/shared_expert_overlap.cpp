// --moe-shared-expert-overlap: Megatron-Core's overlap of the shared experts with the
// alltoall token dispatcher (SharedExpertMLP on its own CUDA stream, driven by
// MoEAlltoAllTokenDispatcher). Without it the shared experts run before the router, and the
// compute stream idles while the dispatch and combine all-to-alls are in flight. With it the
// forward runs the shared experts' fc1 and activation while the dispatch all-to-all is in
// flight and their fc2 while the combine all-to-all is; the backward, in reverse order, runs
// fc2's gradients beside its first all-to-all and the rest beside its last. Here those ops
// move on the compute stream to right after the all-to-all they hide behind, ahead of the
// ops that wait for it.
#include <algorithm>
#include <map>
#include <tuple>

#include "shard/passes.hpp"

namespace syssim {
namespace {

// The MoE layer ("decoder.layers.3.mlp") of a shared expert's op, empty for other ops.
std::string_view layer_of_shared_op(const ShardOp& op) {
  return std::string_view(op.module.str()).substr(0, op.module.module_path().shared_expert_layer_length);
}

// The MoE layer of a token dispatcher's all-to-all, empty for other ops.
std::string_view layer_of_all_to_all(const ShardOp& op) {
  if (op.collective != Collective::all_to_all) return {};
  return std::string_view(op.module.str()).substr(0, op.module.module_path().token_dispatcher_layer_length);
}

// Whether an op runs beside the last all-to-all of its pass (the combine in the forward, the
// gradients' return in the backward) rather than the first.
bool beside_last_all_to_all(const ShardOp& op) { return op.module.module_path().shared_expert_fc2 == (op.phase == OpPhase::fwd); }

bool shares_a_buffer(const IdList& a, const IdList& b) {
  for (int64_t x : a)
    for (int64_t y : b)
      if (x == y) return true;
  return false;
}

class SharedExpertOverlap {
 public:
  explicit SharedExpertOverlap(ShardSection& shard) : rewriter_(shard) {}

  void run() {
    find_all_to_alls();
    plan_moves();
    emit();
  }

 private:
  using LayerPass = std::pair<std::string, OpPhase>;  // MoE layer, phase

  const std::vector<ShardOp>& ops() const { return rewriter_.old_ops(); }

  void find_all_to_alls() {
    for (const ShardOp& op : ops()) {
      const std::string_view layer = layer_of_all_to_all(op);
      if (layer.empty() || op.scope != OpScope::microbatch) continue;
      auto [it, first] = all_to_alls_.try_emplace(LayerPass{std::string(layer), op.phase}, op.id, op.id);
      if (!first) it->second.second = op.id;
    }
  }

  // Each shared expert's op moves after its all-to-all unless an op it would pass over reads
  // or writes what it does (the backward's sum of the input gradients of both branches, for
  // one): those stay where they are, and so may others that depend on them, until none changes.
  void plan_moves() {
    anchor_of_.assign(ops().size(), -1);
    for (const ShardOp& op : ops()) {
      const std::string_view layer = layer_of_shared_op(op);
      if (layer.empty() || op.scope != OpScope::microbatch || op.recompute) continue;
      auto it = all_to_alls_.find(LayerPass{std::string(layer), op.phase});
      if (it != all_to_alls_.end()) anchor_of_[op.id] = beside_last_all_to_all(op) ? it->second.second : it->second.first;
    }
    for (bool changed = true; changed;) {
      changed = false;
      for (const ShardOp& op : ops())
        if (anchor_of_[op.id] >= 0 && !movable(op)) anchor_of_[op.id] = -1, changed = true;
    }
    for (const ShardOp& op : ops())
      if (anchor_of_[op.id] >= 0) after_[anchor_of_[op.id]].push_back(op.id);
  }

  // Where an op ends up: in place, or after its all-to-all in their old order.
  std::tuple<int64_t, bool, int64_t> place(int64_t id) const {
    return anchor_of_[id] >= 0 ? std::tuple{anchor_of_[id], true, id} : std::tuple{id, false, id};
  }

  // Moving `op` to right after its all-to-all keeps what every op reads: none of the ops it
  // passes over (but those moving past it in their order) writes what it reads or writes, reads
  // what it writes, or depends on it (or it on them) by a dep that reads do not explain.
  bool movable(const ShardOp& op) const {
    const int64_t anchor = anchor_of_[op.id];
    const bool later = anchor > op.id;
    const int64_t from = later ? op.id + 1 : anchor + 1, to = later ? anchor : op.id - 1;
    for (int64_t i = from; i <= to; ++i) {
      if ((i < op.id) == (place(i) < place(op.id))) continue;  // stays on the same side of it
      const ShardOp& other = ops()[i];
      if (shares_a_buffer(other.writes, op.reads) || shares_a_buffer(other.writes, op.writes) ||
          shares_a_buffer(other.reads, op.writes))
        return false;
      const auto& before = rewriter_.control_deps(later ? i : op.id);
      if (std::find(before.begin(), before.end(), later ? op.id : i) != before.end()) return false;
    }
    return true;
  }

  void emit() {
    for (int64_t id = 0; id < static_cast<int64_t>(anchor_of_.size()); ++id) {
      if (anchor_of_[id] >= 0) continue;
      rewriter_.keep(id);
      auto it = after_.find(id);
      if (it == after_.end()) continue;
      for (int64_t shared : it->second) rewriter_.keep(shared);
    }
  }

  OpRewriter rewriter_;
  std::map<LayerPass, std::pair<int64_t, int64_t>> all_to_alls_;  // first and last, by layer and phase
  std::vector<int64_t> anchor_of_;                               // by old id: the all-to-all it moves after, or -1
  std::map<int64_t, std::vector<int64_t>> after_;                // by all-to-all: the ops moved after it, in order
};

}  // namespace

void overlap_shared_experts(const ShardContext& context, ShardSection& shard) {
  if (!context.options.training.moe_shared_expert_overlap) return;
  SharedExpertOverlap(shard).run();
}

}  // namespace syssim
