#include "shard/emitter.hpp"

#include <algorithm>

#include "common/error.hpp"

namespace syssim {

OpEmitter::OpEmitter(ShardSection& shard) : shard_(shard), last_writer_(shard.buffers.size(), -1) {}

int64_t OpEmitter::emit(ShardOp op, const int64_t* extra_begin, const int64_t* extra_end) {
  op.id = static_cast<int64_t>(shard_.ops.size());
  op.deps.assign(extra_begin, extra_end);
  for (int64_t b : op.reads)
    if (last_writer_[b] >= 0) op.deps.push_back(last_writer_[b]);
  sort_unique(op.deps);
  for (int64_t b : op.writes) {
    ShardBuffer& buffer = shard_.buffers[b];
    if (!buffer.producer && buffer.role != TensorRole::param && buffer.role != TensorRole::grad) buffer.producer = op.id;
    last_writer_[b] = op.id;
  }
  shard_.ops.push_back(std::move(op));
  return shard_.ops.back().id;
}

int64_t OpEmitter::add_buffer(double bytes, TensorRole role) {
  int64_t id = static_cast<int64_t>(shard_.buffers.size());
  shard_.buffers.push_back(ShardBuffer{id, bytes, role, "", std::nullopt});
  last_writer_.push_back(-1);
  return id;
}

std::vector<int64_t> OpEmitter::writers_of(const IdList& buffers) const {
  std::vector<int64_t> writers;
  for (int64_t b : buffers)
    if (last_writer_[b] >= 0) writers.push_back(last_writer_[b]);
  return writers;
}

namespace {

std::vector<ShardOp> take_ops(ShardSection& shard) {
  std::vector<ShardOp> ops = std::move(shard.ops);
  shard.ops.clear();
  for (auto& b : shard.buffers) b.producer.reset();
  return ops;
}

}  // namespace

std::vector<IdList> control_deps(const std::vector<ShardOp>& ops, size_t buffers) {
  std::vector<IdList> control(ops.size());
  std::vector<int64_t> last_writer(buffers, -1);
  for (const ShardOp& op : ops) {
    for (int64_t d : op.deps)
      if (std::none_of(op.reads.begin(), op.reads.end(), [&](int64_t b) { return last_writer[b] == d; }))
        control[op.id].push_back(d);
    for (int64_t b : op.writes) last_writer[b] = op.id;
  }
  return control;
}

OpRewriter::OpRewriter(ShardSection& shard)
    : old_ops_(take_ops(shard)),
      old_control_deps_(syssim::control_deps(old_ops_, shard.buffers.size())),
      new_ids_(old_ops_.size(), -1),
      emitter_(shard) {
  // Most passes keep every op and add some: one allocation for most.
  shard.ops.reserve(old_ops_.size() + old_ops_.size() / 4);
}

int64_t OpRewriter::keep(int64_t old_id, ShardOp op) {
  IdList extra;
  for (int64_t d : old_control_deps_[old_id]) extra.push_back(new_id(d));
  int64_t id = emitter_.emit(std::move(op), extra);
  new_ids_[old_id] = id;
  return id;
}

ShardOp OpRewriter::take(int64_t old_id) {
  ShardOp& old = old_ops_[old_id];
  ShardOp op = std::move(old);
  old.writes = op.writes;
  return op;
}

void OpRewriter::keep_all() {
  for (ShardOp& op : old_ops_) keep(op.id, std::move(op));
  old_ops_.clear();
}

int64_t OpRewriter::new_id(int64_t old_id) const {
  if (old_id < 0 || old_id >= static_cast<int64_t>(new_ids_.size()) || new_ids_[old_id] < 0)
    throw DataError("/shard/ops/" + std::to_string(old_id) + ": a later op depends on it, but it was not kept");
  return new_ids_[old_id];
}

}  // namespace syssim
