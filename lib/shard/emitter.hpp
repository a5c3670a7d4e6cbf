// Building the op list of a shard section. Ops refer to each other by id (= index), so
// passes that insert ops rebuild the list through an emitter, which assigns ids and derives
// each op's data dependencies from the buffers it reads (the last op that wrote them).
#pragma once
#include <algorithm>
#include <vector>

#include "shard/section.hpp"

namespace syssim {

// Sorts ids and drops repeats.
template <typename Ids>
void sort_unique(Ids& ids) {
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
}

// Per op: its deps that its reads do not explain (the last writer of a buffer it reads).
std::vector<IdList> control_deps(const std::vector<ShardOp>& ops, size_t buffers);

class OpEmitter {
 public:
  // Emits into `shard.ops`, which must be empty; buffers already in `shard` are kept.
  explicit OpEmitter(ShardSection& shard);

  // Appends `op`; its deps become the last writers of what it reads plus `extra_deps`.
  int64_t emit(ShardOp op, const std::vector<int64_t>& extra_deps = {}) {
    return emit(std::move(op), extra_deps.data(), extra_deps.data() + extra_deps.size());
  }
  int64_t emit(ShardOp op, const IdList& extra_deps) { return emit(std::move(op), extra_deps.begin(), extra_deps.end()); }
  int64_t add_buffer(double bytes, TensorRole role);
  // The ops that last wrote these buffers (those not written yet are skipped).
  std::vector<int64_t> writers_of(const IdList& buffers) const;
  ShardSection& shard() { return shard_; }

 private:
  int64_t emit(ShardOp op, const int64_t* extra_begin, const int64_t* extra_end);

  ShardSection& shard_;
  std::vector<int64_t> last_writer_;  // per buffer
};

// Rebuilds an existing op list: ops are re-emitted in a new order or with ops inserted
// between them; each kept op keeps its non-data deps (those its reads do not explain),
// renumbered.
class OpRewriter {
 public:
  explicit OpRewriter(ShardSection& shard);  // takes the ops out of `shard`

  const std::vector<ShardOp>& old_ops() const { return old_ops_; }
  // An old op's deps that its reads do not explain (old ids).
  const IdList& control_deps(int64_t old_id) const { return old_control_deps_[old_id]; }
  // Re-emits old op `old_id`, possibly modified (e.g. reads substituted); returns its new id.
  int64_t keep(int64_t old_id, ShardOp op);
  int64_t keep(int64_t old_id) { return keep(old_id, old_ops_[old_id]); }
  // Old op `old_id` moved out of old_ops(), to be kept modified without a copy. What stays
  // there is all but its deps, reads and kernel shape: a pass may still ask what it wrote.
  ShardOp take(int64_t old_id);
  // Keeps every old op in order, moved out of old_ops() (left empty): for a pass that only
  // adds ops around them and reads the old ops no more.
  void keep_all();
  // Emits a new op; `extra_deps` are new ids.
  int64_t add(ShardOp op, const std::vector<int64_t>& extra_deps = {}) { return emitter_.emit(std::move(op), extra_deps); }
  // The new id of an old op that was kept (DataError if it was dropped or not kept yet).
  int64_t new_id(int64_t old_id) const;
  OpEmitter& emitter() { return emitter_; }

 private:
  std::vector<ShardOp> old_ops_;
  std::vector<IdList> old_control_deps_;  // deps not explained by reads
  std::vector<int64_t> new_ids_;  // by old id; -1 until kept
  OpEmitter emitter_;
};

}  // namespace syssim
