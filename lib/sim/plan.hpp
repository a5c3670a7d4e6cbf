// The step laid out for the event loop (docs/syssim-sim.md): every pipeline rank's stream
// queues, its slots in issue order, each kind of slot's op list, and where every dep points.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "common/graph.hpp"

namespace syssim::sim_detail {

// "/shard/ops/<id>", the path of an op in errors.
std::string op_path(int64_t id);

// Whether the step's ops cost the host time or make it wait (docs/syssim-sim.md, "The host").
bool host_simulated(const ShardSection& shard, const CostSection& cost);

// The simulator keeps no list of a step's op instances: each stream queue walks its rank's
// issue order with a cursor (a slot of the rank and a place among that slot's ops on the
// queue), and a dep is done once its queue has finished past the dep's place in that queue's
// issue order. Its memory follows the graph and the schedule's slot lists, not ops x
// micro-batches (docs/syssim-sim.md, "Memory").
constexpr uint32_t kNone = UINT32_MAX;

// One op of a slot kind's op list, with what all its instances share.
struct Entry {
  uint32_t op = 0;         // shard op id
  uint32_t queue = 0;      // Plan::queues
  uint32_t queue_pos = 0;  // its place among the kind's entries on its queue
  uint32_t deps_begin = 0, deps_end = 0;              // Plan::deps
  uint32_t dependents_begin = 0, dependents_end = 0;  // Plan::dependent_queues: the queues of its dependents
  // The op's cost and FLOPs, packed here: read at every instance.
  double time_us = 0;
  double flops = 0;
  const std::vector<Phase>* phases = nullptr;  // null without phases
  bool host = false;  // the host issuing the op (docs/syssim-sim.md, "The host"), not the op itself
  // A collective over many channels, whose kernels slow the compute beside them; not a
  // point-to-point transfer, which runs on a few (docs/syssim-sim.md, "Compute beside communication").
  bool slows_compute = false;
};

// Which slot holds the instance a dep waits for: the waiting instance's own slot, the slot
// that runs a given kind for the micro-batch, or, for an op that several kinds list, wherever
// the micro-batch runs it. One word, as the event loop reads it at every instance.
class DepSlot {
 public:
  static DepSlot same_slot() { return DepSlot(kSameSlot); }
  static DepSlot of_kind(uint32_t kind) { return DepSlot(kind); }
  static DepSlot several() { return DepSlot(kSeveral); }
  bool is_same_slot() const { return value_ == kSameSlot; }
  bool is_several() const { return value_ == kSeveral; }
  uint32_t kind() const { return value_; }  // only of an of_kind slot

 private:
  static constexpr uint32_t kSameSlot = kNone - 1, kSeveral = kNone;  // no kind has these numbers
  explicit DepSlot(uint32_t value) : value_(value) {}
  uint32_t value_;
};

// A dep of an entry that stream order does not keep already: the instance at queue_pos `at`
// on queue `queue` of its `slot`; for a `several` slot, `at` is the op's id and place_of finds
// its instance.
struct Dep {
  uint32_t queue = kNone;
  uint32_t at = 0;
  DepSlot slot = DepSlot::several();
};

// A step laid out for the event loop: the queues of every pipeline rank, each rank's slots in
// issue order (its step_start ops and its step ops as one slot each, first and last), the op
// list of each kind of slot, and where each op runs.
struct Plan {
  struct Queue {
    int64_t rank = 0;
    Stream stream = Stream::compute;
    std::vector<uint64_t> before;  // by slot of its rank, and one past the last: its instances in earlier slots
    // The combined 1F1B schedule (docs/syssim-sim.md): a stream's backward-pass instances get
    // a queue of their own, its twin, which never runs while the other does.
    bool backward_side = false;
    uint32_t twin = kNone;
    // The rank's host thread: its instances issue the rank's ops in order.
    bool host() const { return stream == Stream::host; }
    // The host issues at most one slot ahead of the rank's compute stream (docs/syssim-sim.md,
    // "The host"): on the host, that compute queue; on the compute queue, the host's.
    uint32_t paced_by = kNone;
    uint32_t paces = kNone;
    // Where receives_after_previous_slot, a slot's pipeline receive is posted once the rank's
    // GPU has run the slot before it (docs/parallelism.md, "Between stages"): on the pp queue,
    // the rank's compute queue; on the compute queue, that pp queue.
    uint32_t receives_after = kNone;
    uint32_t gates_receives = kNone;
  };
  struct Kind {
    bool once = false;  // the step_start or step ops: one slot, micro-batch -1
    std::vector<Entry> entries;
    std::vector<std::vector<uint32_t>> on_queue;  // by queue of the rank (queue - first_queue[rank]): entries, in order
    std::vector<uint32_t> slot_of;                // by micro-batch (once: [0]): the rank's slot running it; kNone: none
  };
  struct Slot {
    uint32_t kind = 0;
    int32_t microbatch = -1;
  };
  struct Home {  // a kind listing an op, and the op's queue_pos there
    uint32_t kind = 0;
    uint32_t queue_pos = 0;
  };
  const CostSection* cost = nullptr;
  int64_t microbatches = 0;
  bool combined = false;                 // overlap_moe_expert_parallel_comm: the combined 1F1B schedule
  std::vector<Queue> queues;             // a rank's are consecutive
  std::vector<uint32_t> first_queue;     // by rank, and one past the last rank
  std::vector<std::vector<Slot>> slots;  // by rank
  std::vector<Kind> kinds;
  std::vector<Dep> deps;
  std::vector<uint32_t> dependent_queues;
  // By op, for deps outside a slot: the kinds listing it (a weight op is listed by its weight
  // slots' kind and by the backward slots' kind that runs the weight ops where a micro-batch
  // has no weight slot), whether such a dep names it.
  std::vector<uint32_t> homes_begin;
  std::vector<Home> homes;
  std::vector<char> waited_across_slots;
  std::vector<char> local_queue;  // by queue: no link its flows use carries another queue's flows of its rank

  // The entry of kind `kind` at `queue_pos` on `queue`.
  uint32_t entry_in(uint32_t kind, uint32_t queue, uint32_t queue_pos) const {
    return kinds[kind].on_queue[queue - first_queue[queues[queue].rank]][queue_pos];
  }
  // The rank slot running kind `kind` for micro-batch `microbatch` (ignored for ops that run
  // once); kNone: none.
  uint32_t slot_running(uint32_t kind, int32_t microbatch) const {
    const Kind& k = kinds[kind];
    return k.once ? k.slot_of[0] : k.slot_of[static_cast<size_t>(microbatch)];
  }
  // The place in its queue's issue order of the instance `dep` names, for an instance of rank
  // slot `slot` and micro-batch `microbatch` (the last micro-batch for a step op's dep).
  uint64_t place_of(const Dep& dep, uint32_t slot, int32_t microbatch) const {
    if (dep.slot.is_same_slot()) return queues[dep.queue].before[slot] + dep.at;  // the common case, inlined
    return place_in_other_slot(dep, microbatch);
  }
  // place_of for a dep whose instance is in another slot than the waiting one's.
  uint64_t place_in_other_slot(const Dep& dep, int32_t microbatch) const {
    const InSlot in = slot_of(dep, kNone, microbatch);
    if (in.slot != kNone) return queues[dep.queue].before[in.slot] + in.queue_pos;
    const uint32_t op = dep.slot.is_several()
                            ? dep.at
                            : kinds[dep.slot.kind()].entries[entry_in(dep.slot.kind(), dep.queue, dep.at)].op;
    throw DataError(op_path(op) + ": runs in no slot of the schedule for micro-batch " + std::to_string(microbatch) +
                    ", which an op waits for");
  }
  // The instance `dep` names, for an instance of rank slot `slot` and micro-batch `microbatch`,
  // as the slot of its rank running it and its place among that slot's entries on dep.queue;
  // slot kNone: no slot runs it. Inlined, as place_in_other_slot asks it at many instances.
  struct InSlot {
    uint32_t slot = kNone;
    uint32_t queue_pos = 0;
  };
  [[gnu::always_inline]] InSlot slot_of(const Dep& dep, uint32_t slot, int32_t microbatch) const {
    if (dep.slot.is_same_slot()) return {slot, dep.at};
    if (microbatch < 0) microbatch = static_cast<int32_t>(microbatches - 1);
    if (!dep.slot.is_several()) return {slot_running(dep.slot.kind(), microbatch), dep.at};
    for (uint32_t h = homes_begin[dep.at]; h < homes_begin[dep.at + 1]; ++h)
      if (const uint32_t running = slot_running(homes[h].kind, microbatch); running != kNone)
        return {running, homes[h].queue_pos};
    return {};
  }
};

// Refuses deps on ops that do not exist, deps that run against the scopes' order (a
// microbatch op waiting for a step op, a step_start op for anything but step_start ops),
// ops of pipeline ranks the schedule does not have, and cycles.
void check_ops(const ShardSection& shard);


// Fills each entry's dependents range: the queues of the entries whose deps name it, each
// once, in the order of those entries. A dep that stream order keeps has no entry here: the
// finishing instance's own queue is tried anyway.
void link_dependents(Plan& plan);


// Lays out the step of `programs` (one per pipeline rank, for `microbatches` micro-batches).
// A rank's queues are made in issue order (an op first runs in the first slot of its kind).
// A dep of a microbatch op means its instance in the same micro-batch; a dep of a step op on
// a microbatch op, its instance in the last micro-batch; a dep on a step_start or step op,
// its single instance.
Plan make_plan(const ShardSection& shard, const CostSection& cost, const std::vector<RankProgram>& programs,
               int64_t microbatches);

}  // namespace syssim::sim_detail
