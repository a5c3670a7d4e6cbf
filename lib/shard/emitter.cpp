#include "shard/emitter.hpp"

#include <set>

#include "common/error.hpp"

namespace syssim {

OpEmitter::OpEmitter(ShardSection& shard) : shard_(shard), last_writer_(shard.buffers.size(), -1) {}

int64_t OpEmitter::emit(ShardOp op, const std::vector<int64_t>& extra_deps) {
  op.id = static_cast<int64_t>(shard_.ops.size());
  std::set<int64_t> deps(extra_deps.begin(), extra_deps.end());
  for (int64_t b : op.reads)
    if (last_writer_[b] >= 0) deps.insert(last_writer_[b]);
  op.deps.assign(deps.begin(), deps.end());
  for (int64_t b : op.writes) {
    ShardBuffer& buffer = shard_.buffers[b];
    if (!buffer.producer && buffer.role != "param" && buffer.role != "grad") buffer.producer = op.id;
    last_writer_[b] = op.id;
  }
  shard_.ops.push_back(std::move(op));
  return shard_.ops.back().id;
}

int64_t OpEmitter::add_buffer(double bytes, const std::string& role) {
  int64_t id = static_cast<int64_t>(shard_.buffers.size());
  shard_.buffers.push_back(ShardBuffer{id, bytes, role, "", std::nullopt});
  last_writer_.push_back(-1);
  return id;
}

std::vector<int64_t> OpEmitter::writers_of(const std::vector<int64_t>& buffers) const {
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

OpRewriter::OpRewriter(ShardSection& shard) : old_ops_(take_ops(shard)), emitter_(shard) {
  std::vector<int64_t> last_writer(shard.buffers.size(), -1);
  for (const ShardOp& op : old_ops_) {
    std::set<int64_t> data;
    for (int64_t b : op.reads)
      if (last_writer[b] >= 0) data.insert(last_writer[b]);
    std::vector<int64_t> control;
    for (int64_t d : op.deps)
      if (!data.count(d)) control.push_back(d);
    old_control_deps_.push_back(control);
    for (int64_t b : op.writes) last_writer[b] = op.id;
  }
}

int64_t OpRewriter::keep(int64_t old_id, ShardOp op) {
  std::vector<int64_t> extra;
  for (int64_t d : old_control_deps_[old_id]) extra.push_back(new_id(d));
  int64_t id = emitter_.emit(std::move(op), extra);
  new_ids_[old_id] = id;
  return id;
}

int64_t OpRewriter::new_id(int64_t old_id) const {
  auto it = new_ids_.find(old_id);
  if (it == new_ids_.end())
    throw DataError("/shard/ops/" + std::to_string(old_id) + ": a later op depends on it, but it was not kept");
  return it->second;
}

}  // namespace syssim
