// Activation offloading (Megatron-Core's --cpu-offloading with --cpu-offloading-num-layers N,
// activations only), as Transformer Engine's offload handler runs it (cpu_offload.py,
// AsyncDoubleBufferGroupOffloadHandler): the tensors the first N decoder layers save for
// backward are copied to host memory on a device-to-host stream, spread over the forward
// pass, and copied back on a host-to-device stream, one window ahead of the backward pass
// that reads them. docs/memory.md "Activation offloading".
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "shard/passes.hpp"

namespace syssim {
namespace {

// The layer at whose forward end offload `group` of `groups` must be complete, and at whose
// backward start it is copied back: the handler spreads the N windows evenly over the L
// layers (layer_window_map), the last one ending at the last layer.
int64_t window_end(int64_t group, int64_t groups, int64_t layers) {
  const int64_t remainder = layers % groups;
  const int64_t end = (layers / groups) * (group + 1) - 1;
  return end + (group < remainder ? group + 1 : remainder);
}

class Offloader {
 public:
  Offloader(const ShardContext& context, ShardSection& shard)
      : shard_(shard), rewriter_(shard), groups_(shard.training.cpu_offloading_num_layers),
        layers_(context.model.num_layers), dtype_(high_precision_dtype(context.options.training)) {}

  void run() {
    find_saved_buffers();
    offload_of_.assign(groups_, -1);
    next_reload_ = groups_ - 1;
    const std::vector<ShardOp>& ops = rewriter_.old_ops();
    for (size_t id = 0; id < ops.size(); ++id) {
      const std::vector<int64_t> waits = copies_to_wait_for(ops[id]);
      start_copies_back(ops[id]);
      const int64_t new_id = keep(static_cast<int64_t>(id), waits);
      start_copy_to_host(ops, id, new_id);
    }
  }

 private:
  // The forward pass past a window's last layer waits for that window's copy to finish.
  std::vector<int64_t> copies_to_wait_for(const ShardOp& op) {
    std::vector<int64_t> waits;
    if (!is_microbatch_forward(op)) return waits;
    while (waited_ < next_offload_ && past_layer(op, window_end(waited_, groups_, layers_)))
      waits.push_back(offload_of_[waited_++]);
    return waits;
  }

  // A window's copy back starts when the backward pass reaches the window's last layer.
  void start_copies_back(const ShardOp& op) {
    while (next_reload_ >= 0 && is_microbatch_backward(op) && op.layer &&
           *op.layer <= window_end(next_reload_, groups_, layers_))
      reload(next_reload_--, last_compute_);
  }

  // Keeps op `id`, its backward reads on the copies back, waiting for `waits` too.
  int64_t keep(int64_t id, const std::vector<int64_t>& waits) {
    ShardOp kept = rewriter_.take(id);
    if (is_microbatch_backward(kept))
      for (int64_t& b : kept.reads)
        if (auto fresh = reloaded_.find(b); fresh != reloaded_.end()) b = fresh->second;
    const bool compute = kept.stream == Stream::compute;
    const int64_t new_id = rewriter_.keep(id, std::move(kept));
    IdList& deps = rewriter_.emitter().shard().ops[new_id].deps;
    deps.insert(deps.end(), waits.begin(), waits.end());
    sort_unique(deps);
    if (compute) last_compute_ = new_id;
    return new_id;
  }

  // Group 0's copy starts after layer 0's forward; group g's after window g - 1 ends, by when
  // layer g's forward is done too.
  void start_copy_to_host(const std::vector<ShardOp>& ops, size_t id, int64_t new_id) {
    if (next_offload_ == groups_ || !is_microbatch_forward(ops[id])) return;
    const int64_t after_layer = next_offload_ == 0 ? 0 : window_end(next_offload_ - 1, groups_, layers_);
    if (!ends_forward_of(ops, id, after_layer)) return;
    offload_of_[next_offload_] = offload(next_offload_, new_id);
    ++next_offload_;
  }

  static bool is_microbatch_forward(const ShardOp& op) {
    return op.scope == OpScope::microbatch && op.phase == OpPhase::fwd && !op.recompute;
  }
  static bool is_microbatch_backward(const ShardOp& op) {
    return op.scope == OpScope::microbatch && (op.phase == OpPhase::bwd || op.recompute);
  }
  // An op after every op of decoder layer `layer` in the forward pass.
  static bool past_layer(const ShardOp& op, int64_t layer) { return !op.layer || *op.layer > layer; }
  // Whether op `id` is the last forward op of decoder layer `layer`.
  static bool ends_forward_of(const std::vector<ShardOp>& ops, size_t id, int64_t layer) {
    if (!ops[id].layer || *ops[id].layer != layer) return false;
    for (size_t next = id + 1; next < ops.size(); ++next)
      if (is_microbatch_forward(ops[next])) return !ops[next].layer || *ops[next].layer != layer;
    return true;
  }

  // The buffers each offloaded layer saves for backward: written in the forward pass, read by
  // that layer's backward ops (and by no other layer's), neither weights nor gradients.
  void find_saved_buffers() {
    const std::vector<ShardOp>& ops = rewriter_.old_ops();
    std::vector<char> forward_written(shard_.buffers.size(), 0);
    std::vector<int64_t> reader_layer(shard_.buffers.size(), -1);  // -2: read by several layers
    for (const ShardOp& op : ops) {
      if (is_microbatch_forward(op))
        for (int64_t b : op.writes) forward_written[b] = 1;
      if (!is_microbatch_backward(op)) continue;
      for (int64_t b : op.reads) {
        const int64_t layer = op.layer.value_or(-2);
        reader_layer[b] = reader_layer[b] == -1 || reader_layer[b] == layer ? layer : -2;
      }
    }
    saved_.assign(groups_, {});
    for (size_t b = 0; b < shard_.buffers.size(); ++b)
      if (forward_written[b] && reader_layer[b] >= 0 && reader_layer[b] < groups_ && is_transient(shard_.buffers[b]))
        saved_[reader_layer[b]].push_back(static_cast<int64_t>(b));
  }

  int64_t offload(int64_t group, int64_t after) {
    ShardOp copy = host_copy(group, Stream::d2h, OpPhase::fwd);
    copy.reads = saved_[group];
    return rewriter_.add(std::move(copy), {after});
  }

  void reload(int64_t group, int64_t after) {
    ShardOp copy = host_copy(group, Stream::h2d, OpPhase::bwd);
    for (int64_t b : saved_[group]) {
      const int64_t fresh = rewriter_.emitter().add_buffer(shard_.buffers[b].bytes, shard_.buffers[b].role);
      reloaded_[b] = fresh;
      copy.writes.push_back(fresh);
    }
    rewriter_.add(std::move(copy), after >= 0 ? std::vector<int64_t>{after} : std::vector<int64_t>{});
  }

  ShardOp host_copy(int64_t group, Stream stream, OpPhase phase) const {
    ShardOp copy;
    copy.name = phase == OpPhase::fwd ? "offload::activations_to_host" : "offload::activations_to_device";
    copy.kind = OpKind::host_copy;
    copy.phase = phase;
    copy.pass = phase == OpPhase::fwd ? OpPass::forward : OpPass::backward;
    copy.scope = OpScope::microbatch;
    copy.layer = group;
    copy.module = "decoder.layers." + std::to_string(group);
    copy.stream = stream;
    copy.dtype = dtype_;
    for (int64_t b : saved_[group]) copy.bytes += shard_.buffers[b].bytes;
    return copy;
  }

  ShardSection& shard_;
  OpRewriter rewriter_;
  int64_t groups_;
  int64_t layers_;
  std::string dtype_;  // of the copied activations
  std::vector<std::vector<int64_t>> saved_;  // by offloaded layer: its saved buffers
  std::map<int64_t, int64_t> reloaded_;      // saved buffer -> its copy back on the device
  std::vector<int64_t> offload_of_;          // by group: its copy to the host (new id)
  int64_t next_offload_ = 0;                 // the group whose copy to the host is issued next
  int64_t waited_ = 0;                       // the group whose copy the forward pass waits for next
  int64_t next_reload_ = -1;                 // the group whose copy back is issued next
  int64_t last_compute_ = -1;                // the last compute-stream op kept (new id)
};

}  // namespace

void check_activation_offloading(const ModelConfig& model, const ShardOptions& options) {
  const int64_t layers = options.training.cpu_offloading_num_layers;
  if (layers == 0) return;
  // Megatron-Core's TransformerConfig refuses the same.
  if (layers < 0 || layers >= model.num_layers)
    throw UsageError("cpu_offloading_num_layers=" + std::to_string(layers) + ": CPU offloading can be done only for 1 to " +
                     std::to_string(model.num_layers - 1) + " layers (num_layers - 1)");
  if (options.parallelism.pp > 1)
    throw UsageError("cpu_offloading_num_layers=" + std::to_string(layers) +
                     " needs pp=1: Megatron-Core has no pipeline parallelism with CPU offloading");
  if (options.training.recompute != "none")
    throw UsageError("cpu_offloading_num_layers=" + std::to_string(layers) +
                     " needs recompute=none: Megatron-Core's CPU offloading does not work with activation recomputation");
}

void apply_activation_offloading(const ShardContext& context, ShardSection& shard) {
  if (shard.training.cpu_offloading_num_layers == 0) return;
  Offloader(context, shard).run();
}

}  // namespace syssim
