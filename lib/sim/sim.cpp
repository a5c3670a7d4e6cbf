#include "sim/sim.hpp"

#include <algorithm>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/topological_sort.hpp>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <tuple>
#include <utility>

#include "common/units.hpp"

namespace syssim {
namespace {

constexpr size_t kTopOps = 10;
// A flow with less than this share of its bytes left is done (floating-point drift of the
// remaining-bytes bookkeeping).
constexpr double kDoneFraction = 1e-9;
// Times equal up to rounding, relative to the time they are read at (EventLoop::repeats).
constexpr double kSettled = 1e-9;

// The phases of the instance running on one queue whose cost has phases, and the flow of the
// current one. One per queue, indexed like the queues: a queue runs one instance at a time.
struct Flow {
  int64_t rank = 0;
  const std::vector<Phase>* phases = nullptr;
  size_t phase = 0;           // the current one
  double remaining_bytes = 0;
  double cap = 0;             // bytes/us: the phase's bandwidth_GBps
  double rate = 0;            // bytes/us, while on its links
  uint32_t version = 0;       // bumped on every rate change: older finish events are stale
  double next_rate = 0;       // water-filling scratch
  bool frozen = false;        // water-filling scratch
};

// One cost link of one pipeline rank.
struct LinkState {
  double capacity = 0;  // bytes/us
  int64_t flows = 0;    // on it now
  int64_t max_flows = 0;
  double busy_us = 0;   // wall time with at least one flow on it
  double bytes = 0;     // moved on it: load times bytes, summed over flows
  double spare = 0;        // water-filling scratch: capacity left
  int64_t unfrozen = 0;    // water-filling scratch: flows not yet given a rate
  double weight = 0;       // water-filling scratch: their summed loads on the link
  bool saturated = false;  // water-filling scratch
};

// The links of one pipeline rank and its flows on them.
struct RankNetwork {
  std::vector<LinkState> links;
  std::vector<size_t> active;  // Flow indices (queues), in the order they started
  double updated_us = 0;       // remaining bytes and busy times are up to this time
};

std::string op_path(int64_t id) { return "/shard/ops/" + std::to_string(id); }

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
};

// A dep of an entry that stream order does not keep already: the instance at queue_pos `at`
// on queue `queue` of the slot that runs kind `kind` for the micro-batch; with kind kSameSlot,
// of the waiting instance's own slot; with kind kSeveral, op `at`'s instance wherever the
// micro-batch runs it (Plan::place_of), for an op that several kinds list.
constexpr uint32_t kSameSlot = kNone - 1;
constexpr uint32_t kSeveral = kNone;
struct Dep {
  uint32_t queue = kNone;
  uint32_t at = 0;
  uint32_t kind = kSeveral;
};

// A step laid out for the event loop: the queues of every pipeline rank, each rank's slots in
// issue order (its step_start ops and its step ops as one slot each, first and last), the op
// list of each kind of slot, and where each op runs.
struct Plan {
  struct Queue {
    int64_t rank = 0;
    Symbol stream;
    std::vector<uint64_t> before;  // by slot of its rank, and one past the last: its instances in earlier slots
    // The combined 1F1B schedule (docs/syssim-sim.md): a stream's backward-pass instances get
    // a queue of their own, its twin, which never runs while the other does.
    bool backward_side = false;
    uint32_t twin = kNone;
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
    if (dep.kind == kSameSlot) return queues[dep.queue].before[slot] + dep.at;
    if (microbatch < 0) microbatch = static_cast<int32_t>(microbatches - 1);
    if (dep.kind != kSeveral) {
      const uint32_t running = slot_running(dep.kind, microbatch);
      if (running != kNone) return queues[dep.queue].before[running] + dep.at;
    } else {
      for (uint32_t h = homes_begin[dep.at]; h < homes_begin[dep.at + 1]; ++h) {
        const uint32_t running = slot_running(homes[h].kind, microbatch);
        if (running != kNone) return queues[dep.queue].before[running] + homes[h].queue_pos;
      }
    }
    const uint32_t op = dep.kind == kSeveral ? dep.at : kinds[dep.kind].entries[entry_in(dep.kind, dep.queue, dep.at)].op;
    throw DataError(op_path(op) + ": runs in no slot of the schedule for micro-batch " + std::to_string(microbatch) +
                    ", which an op waits for");
  }
};

// Refuses deps on ops that do not exist, deps that run against the scopes' order (a
// microbatch op waiting for a step op, a step_start op for anything but step_start ops),
// ops of pipeline ranks the schedule does not have, and cycles.
void check_ops(const ShardSection& shard) {
  const int64_t ranks = static_cast<int64_t>(shard.schedule.size());
  if (ranks != shard.parallelism.pp)
    throw DataError("/shard/schedule: " + std::to_string(ranks) + " slot lists for pp=" +
                    std::to_string(shard.parallelism.pp) + " pipeline ranks");
  bool deps_before = true;  // every dep an earlier op: no cycle, without sorting
  for (const ShardOp& op : shard.ops) {
    if (op.stage < 0 || op.stage >= ranks)
      throw DataError(op_path(op.id) + "/stage: pipeline rank " + std::to_string(op.stage) + " does not exist (pp=" +
                      std::to_string(ranks) + ")");
    for (int64_t dep : op.deps) {
      if (dep < 0 || dep >= static_cast<int64_t>(shard.ops.size()))
        throw DataError(op_path(op.id) + "/deps: op " + std::to_string(dep) + " does not exist");
      const Symbol dep_scope = shard.ops[dep].scope;
      if (op.scope == "microbatch" && dep_scope == "step")
        throw DataError(op_path(op.id) + "/deps: microbatch op depends on step op " + std::to_string(dep));
      if (op.scope == "step_start" && dep_scope != "step_start")
        throw DataError(op_path(op.id) + "/deps: step_start op depends on " + dep_scope + " op " + std::to_string(dep));
      deps_before = deps_before && dep < op.id;
    }
  }
  if (deps_before) return;
  using DependencyGraph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS>;
  DependencyGraph graph(shard.ops.size());
  for (const ShardOp& op : shard.ops)
    for (int64_t dep : op.deps) boost::add_edge(dep, op.id, graph);
  std::vector<DependencyGraph::vertex_descriptor> order;
  try {
    boost::topological_sort(graph, std::back_inserter(order));
  } catch (const boost::not_a_dag&) {
    throw DataError("/shard/ops: the deps form a cycle; ops must form a directed acyclic graph");
  }
}

// Fills each entry's dependents range: the queues of the entries whose deps name it, each
// once, in the order of those entries. A dep that stream order keeps has no entry here: the
// finishing instance's own queue is tried anyway.
void link_dependents(Plan& plan) {
  std::vector<uint32_t> first_entry(plan.kinds.size() + 1, 0);  // global entry index of each kind's first
  for (size_t k = 0; k < plan.kinds.size(); ++k)
    first_entry[k + 1] = first_entry[k] + static_cast<uint32_t>(plan.kinds[k].entries.size());
  auto global = [&](uint32_t queue, uint32_t kind, uint32_t queue_pos) {
    return first_entry[kind] + plan.entry_in(kind, queue, queue_pos);
  };
  // (target, waiting queue) pairs, in the order of the waiting entries; then laid out by target.
  std::vector<std::pair<uint32_t, uint32_t>> waits;
  waits.reserve(plan.deps.size());
  for (uint32_t k = 0; k < plan.kinds.size(); ++k)
    for (const Entry& entry : plan.kinds[k].entries)
      for (uint32_t d = entry.deps_begin; d < entry.deps_end; ++d) {
        const Dep& dep = plan.deps[d];
        if (dep.kind != kSeveral) {
          waits.emplace_back(global(dep.queue, dep.kind == kSameSlot ? k : dep.kind, dep.at), entry.queue);
          continue;
        }
        for (uint32_t h = plan.homes_begin[dep.at]; h < plan.homes_begin[dep.at + 1]; ++h)
          waits.emplace_back(global(dep.queue, plan.homes[h].kind, plan.homes[h].queue_pos), entry.queue);
      }
  std::vector<uint32_t> begin(first_entry.back() + 1, 0);
  for (const auto& wait : waits) ++begin[wait.first + 1];
  for (size_t e = 0; e + 1 < begin.size(); ++e) begin[e + 1] += begin[e];
  std::vector<uint32_t> queues(waits.size()), filled(begin.begin(), begin.end() - 1);
  for (const auto& [target, queue] : waits) queues[filled[target]++] = queue;
  plan.dependent_queues.clear();
  plan.dependent_queues.reserve(waits.size());
  for (uint32_t k = 0; k < plan.kinds.size(); ++k)
    for (uint32_t e = 0; e < plan.kinds[k].entries.size(); ++e) {
      Entry& entry = plan.kinds[k].entries[e];
      const uint32_t g = first_entry[k] + e;
      entry.dependents_begin = static_cast<uint32_t>(plan.dependent_queues.size());
      for (uint32_t w = begin[g]; w < begin[g + 1]; ++w)
        if (std::find(plan.dependent_queues.begin() + entry.dependents_begin, plan.dependent_queues.end(), queues[w]) ==
            plan.dependent_queues.end())
          plan.dependent_queues.push_back(queues[w]);
      entry.dependents_end = static_cast<uint32_t>(plan.dependent_queues.size());
    }
}

// By queue: whether it is local, no link its flows use carrying another queue's flows of the
// same rank.
std::vector<char> local_queues(const Plan& plan) {
  const size_t links = plan.cost->links.size();
  std::vector<std::vector<char>> links_of(plan.queues.size(), std::vector<char>(links, 0));
  for (const Plan::Kind& kind : plan.kinds)
    for (const Entry& entry : kind.entries)
      if (entry.phases)
        for (const Phase& phase : *entry.phases)
          for (int64_t l : phase.links) links_of[entry.queue][l] = 1;
  std::vector<char> local(plan.queues.size(), 1);
  for (size_t a = 0; a < plan.queues.size(); ++a)
    for (size_t b = 0; b < plan.queues.size(); ++b)
      if (a != b && plan.queues[a].rank == plan.queues[b].rank)
        for (size_t l = 0; l < links; ++l)
          if (links_of[a][l] && links_of[b][l]) local[a] = 0;
  return local;
}

// Lays out the step of `programs` (one per pipeline rank, for `microbatches` micro-batches).
// A rank's queues are made in issue order (an op first runs in the first slot of its kind).
// A dep of a microbatch op means its instance in the same micro-batch; a dep of a step op on
// a microbatch op, its instance in the last micro-batch; a dep on a step_start or step op,
// its single instance.
Plan make_plan(const ShardSection& shard, const CostSection& cost, const std::vector<RankProgram>& programs,
               int64_t microbatches) {
  const size_t ops = shard.ops.size();
  if (ops >= kNone) throw DataError("/shard/ops: " + std::to_string(ops) + " ops; the simulator takes fewer than 2^32");
  Plan plan;
  plan.cost = &cost;
  plan.microbatches = microbatches;
  plan.combined = shard.training.overlap_moe_expert_parallel_comm;
  std::vector<uint32_t> queue_of(ops, kNone);
  plan.waited_across_slots.assign(ops, 0);
  std::vector<uint32_t> entry_in_kind(ops, kNone);  // scratch: an op's entry in the kind being laid out
  for (int64_t rank = 0; rank < static_cast<int64_t>(programs.size()); ++rank) {
    const RankProgram& program = programs[rank];
    const auto base = static_cast<uint32_t>(plan.kinds.size());
    std::vector<const std::vector<int64_t>*> lists{&program.step_start_ops};
    for (const std::vector<int64_t>& list : program.kind_ops) lists.push_back(&list);
    lists.push_back(&program.step_ops);
    std::vector<Plan::Slot>& slots = plan.slots.emplace_back();
    slots.push_back({base, -1});
    for (const RankProgram::Slot& slot : program.slots)
      slots.push_back({static_cast<uint32_t>(base + 1 + slot.kind), static_cast<int32_t>(slot.microbatch)});
    slots.push_back({static_cast<uint32_t>(base + lists.size() - 1), -1});

    // The rank's queues, in issue order: one per stream, two in the combined schedule.
    const auto first_queue = static_cast<uint32_t>(plan.queues.size());
    plan.first_queue.push_back(first_queue);
    std::vector<char> seen(lists.size(), 0);
    for (const Plan::Slot& slot : slots) {
      const uint32_t list = slot.kind - base;
      if (seen[list]) continue;
      seen[list] = 1;
      const bool backward_side =
          plan.combined && list > 0 && list + 1 < lists.size() && program.backward_kind[list - 1];
      for (int64_t op : *lists[list]) {
        if (queue_of[op] != kNone) continue;
        const Symbol stream = shard.ops[op].stream;
        uint32_t q = first_queue;
        while (q < plan.queues.size() &&
               (plan.queues[q].stream != stream || plan.queues[q].backward_side != backward_side))
          ++q;
        if (q == plan.queues.size()) plan.queues.push_back(Plan::Queue{rank, stream, {}, backward_side});
        queue_of[op] = q;
      }
    }
    for (uint32_t a = first_queue; a < plan.queues.size(); ++a)
      for (uint32_t b = first_queue; b < plan.queues.size(); ++b)
        if (plan.queues[a].stream == plan.queues[b].stream && plan.queues[a].backward_side != plan.queues[b].backward_side)
          plan.queues[a].twin = b;
    const size_t rank_queues = plan.queues.size() - first_queue;

    // Each kind's entries, deps and slots.
    for (size_t l = 0; l < lists.size(); ++l) {
      Plan::Kind& kind = plan.kinds.emplace_back();
      kind.once = l == 0 || l + 1 == lists.size();
      kind.on_queue.resize(rank_queues);
      const std::vector<int64_t>& list = *lists[l];
      kind.entries.reserve(list.size());
      for (size_t p = 0; p < list.size(); ++p) {
        const auto op = static_cast<uint32_t>(list[p]);
        const uint32_t queue = queue_of[op];
        std::vector<uint32_t>& on_queue = kind.on_queue[queue - first_queue];
        Entry& entry = kind.entries.emplace_back(Entry{op, queue, static_cast<uint32_t>(on_queue.size())});
        entry.time_us = cost.ops[op].time_us;
        entry.flops = shard.ops[op].flops;
        if (!cost.ops[op].phases.empty()) entry.phases = &cost.ops[op].phases;
        on_queue.push_back(static_cast<uint32_t>(p));
        entry_in_kind[op] = static_cast<uint32_t>(p);
      }
      for (size_t p = 0; p < kind.entries.size(); ++p) {
        Entry& entry = kind.entries[p];
        entry.deps_begin = static_cast<uint32_t>(plan.deps.size());
        for (int64_t dep : shard.ops[entry.op].deps) {
          const uint32_t in_kind = entry_in_kind[dep];
          if (in_kind == kNone) {
            plan.deps.push_back(Dep{kNone, static_cast<uint32_t>(dep), kSeveral});  // resolved below
            plan.waited_across_slots[dep] = 1;
            continue;
          }
          const Entry& target = kind.entries[in_kind];
          if (target.queue == entry.queue && in_kind < p) continue;  // stream order keeps it
          plan.deps.push_back(Dep{target.queue, target.queue_pos, kSameSlot});
        }
        entry.deps_end = static_cast<uint32_t>(plan.deps.size());
      }
      for (int64_t op : list) entry_in_kind[op] = kNone;
      kind.slot_of.assign(kind.once ? 1 : static_cast<size_t>(microbatches), kNone);
    }
    for (uint32_t s = 0; s < slots.size(); ++s) {
      Plan::Kind& kind = plan.kinds[slots[s].kind];
      kind.slot_of[kind.once ? 0 : static_cast<size_t>(slots[s].microbatch)] = s;  // rank_programs checked the range
    }
    for (uint32_t q = first_queue; q < plan.queues.size(); ++q) {
      std::vector<uint64_t>& before = plan.queues[q].before;
      before.assign(slots.size() + 1, 0);
      for (size_t s = 0; s < slots.size(); ++s)
        before[s + 1] = before[s] + plan.kinds[slots[s].kind].on_queue[q - first_queue].size();
    }
  }
  plan.first_queue.push_back(static_cast<uint32_t>(plan.queues.size()));

  plan.homes_begin.assign(ops + 1, 0);
  for (const Plan::Kind& kind : plan.kinds)
    for (const Entry& entry : kind.entries) ++plan.homes_begin[entry.op + 1];
  for (size_t op = 0; op < ops; ++op) plan.homes_begin[op + 1] += plan.homes_begin[op];
  plan.homes.resize(plan.homes_begin.back());
  std::vector<uint32_t> filled(plan.homes_begin.begin(), plan.homes_begin.end() - 1);
  for (uint32_t k = 0; k < plan.kinds.size(); ++k)
    for (const Entry& entry : plan.kinds[k].entries) plan.homes[filled[entry.op]++] = Plan::Home{k, entry.queue_pos};
  // A dep across slots on an op that one kind lists names its place there; one that stream
  // order keeps (on the waiting instance's queue, issued before it in every micro-batch) is
  // dropped, as within a slot.
  std::map<std::pair<uint32_t, uint32_t>, bool> issued_before;  // by (dep's kind, waiting kind)
  auto always_before = [&](uint32_t dep_kind, uint32_t kind) {
    auto [it, added] = issued_before.emplace(std::make_pair(dep_kind, kind), true);
    if (!added) return it->second;
    const Plan::Kind& waiting = plan.kinds[kind];
    for (size_t m = waiting.once ? microbatches - 1 : 0; m < static_cast<size_t>(microbatches); ++m) {
      const uint32_t slot = waiting.once ? waiting.slot_of[0] : waiting.slot_of[m];
      if (slot == kNone) continue;
      const uint32_t dep_slot = plan.slot_running(dep_kind, static_cast<int32_t>(m));
      if (dep_slot == kNone || dep_slot >= slot) return it->second = false;
    }
    return it->second;
  };
  std::vector<Dep> deps;
  for (uint32_t k = 0; k < plan.kinds.size(); ++k)
    for (Entry& entry : plan.kinds[k].entries) {
      const auto begin = static_cast<uint32_t>(deps.size());
      for (uint32_t d = entry.deps_begin; d < entry.deps_end; ++d) {
        Dep dep = plan.deps[d];
        if (dep.kind == kSeveral) {
          const uint32_t op = dep.at;
          dep.queue = queue_of[op];
          if (plan.homes_begin[op + 1] - plan.homes_begin[op] == 1) {
            const Plan::Home& home = plan.homes[plan.homes_begin[op]];
            dep = Dep{dep.queue, home.queue_pos, home.kind};
            if (dep.queue == entry.queue && always_before(dep.kind, k)) continue;
          }
        }
        deps.push_back(dep);
      }
      entry.deps_begin = begin;
      entry.deps_end = static_cast<uint32_t>(deps.size());
    }
  plan.deps = std::move(deps);
  link_dependents(plan);
  plan.local_queue = local_queues(plan);
  return plan;
}

// An op instance as it ran: the entry of its rank's slot `slot` on `queue`.
struct RanInstance {
  uint32_t queue = 0;
  int64_t rank = 0;
  uint32_t slot = 0;
  int32_t microbatch = -1;
  const Entry* entry = nullptr;
  uint32_t entry_index = 0;  // among its kind's entries
  double start_us = 0, finish_us = 0, duration_us = 0;
};

// The event loop reports each instance to its observer as it runs (a type parameter: these
// calls are per instance):
//   started(queue, entry, now_us): the instance of `entry` starts on `queue` now;
//   ran(instance): it finishes now;
//   replayed(rank, slot, kind, replay, now_us): rank slot `slot` (of kind `kind`) is replayed
//     from `replay` from now on: its local instances run at now plus the replay's times.

// What every replay of one kind of slot does on its rank's local queues when it starts at
// time 0 on idle queues with its deps from outside done (docs/syssim-sim.md, "Replayed
// slots"): times relative to its start, by entry. Worked out at the kind's first replay.
struct KindReplay {
  bool prepared = false;   // the fields up to `queues`
  bool simulated = false;  // the rest
  bool replayable = false;
  uint32_t first_local = kNone;  // its first entry on a local queue
  std::vector<char> local;            // by entry: on a local queue
  std::vector<char> ends_queue_use;   // by entry: its queue's last local entry of the kind
  std::vector<char> waited_outside;   // by entry: an instance outside the replayed part may wait for it
  std::vector<uint32_t> queues;       // the local queues it uses
  std::vector<double> start_us, finish_us, duration_us;
  std::vector<LinkState> links;  // traffic of one replay on the rank's links
};

// The observer of a slot simulated alone: each instance's times, by entry.
struct AloneTimes {
  static constexpr bool kMayJump = false;  // a slot alone has no micro-batches to jump over
  struct Snapshot {};
  explicit AloneTimes(size_t entries) : start_us(entries), finish_us(entries), duration_us(entries) {}
  void started(uint32_t, const Entry&, double) {}
  void ran(const RanInstance& i) {
    start_us[i.entry_index] = i.start_us, finish_us[i.entry_index] = i.finish_us, duration_us[i.entry_index] = i.duration_us;
  }
  void replayed(int64_t, uint32_t, uint32_t, const KindReplay&, double) {}  // it replays nothing
  std::vector<double> start_us, finish_us, duration_us;
};

// Max-min fair rates by progressive filling: all flows not yet given a rate grow together; a
// flow at rate r puts loads[k] * r on its link k; it stops growing at its cap, or when one of
// its links is full. Sets next_rate of the network's active flows.
void fill_rates(RankNetwork& network, std::vector<Flow>& flows) {
  for (LinkState& link : network.links) link.spare = link.capacity, link.unfrozen = 0, link.weight = 0;
  for (size_t f : network.active) {
    flows[f].frozen = false;
    const Phase& phase = (*flows[f].phases)[flows[f].phase];
    for (size_t k = 0; k < phase.links.size(); ++k) {
      LinkState& link = network.links[phase.links[k]];
      ++link.unfrozen;
      link.weight += phase.loads[k];
    }
  }
  // The rate at which a link fills up when all its flows still growing run at that rate.
  auto link_share = [](const LinkState& link) { return std::max(0.0, link.spare) / link.weight; };
  // Relative slack, so that links and caps equal up to rounding freeze in the same round.
  constexpr double kSameLevel = 1 + 1e-12;
  for (size_t left = network.active.size(); left > 0;) {
    double level = std::numeric_limits<double>::infinity();
    for (size_t f : network.active)
      if (!flows[f].frozen) level = std::min(level, flows[f].cap);
    for (const LinkState& link : network.links)
      if (link.unfrozen > 0) level = std::min(level, link_share(link));
    for (LinkState& link : network.links) link.saturated = link.unfrozen > 0 && link_share(link) <= level * kSameLevel;
    for (size_t f : network.active) {
      Flow& flow = flows[f];
      if (flow.frozen) continue;
      const Phase& phase = (*flow.phases)[flow.phase];
      bool bound = flow.cap <= level * kSameLevel || std::any_of(phase.links.begin(), phase.links.end(), [&](int64_t l) {
                     return network.links[l].saturated;
                   });
      if (!bound) continue;
      flow.frozen = true;
      flow.next_rate = std::min(flow.cap, level);
      for (size_t k = 0; k < phase.links.size(); ++k) {
        LinkState& link = network.links[phase.links[k]];
        link.spare -= phase.loads[k] * flow.next_rate;
        link.weight -= phase.loads[k];
        --link.unfrozen;
      }
      --left;
    }
  }
}

// The event loop: an instance starts when it heads its stream queue, the stream is idle and
// its deps have finished. An instance without phases then lasts its standalone time; one with
// phases runs each phase's latency, then its flow over the rank's links, sharing them with the
// rank's other flows (docs/syssim-sim.md, "Network flows"). Events are ordered by time, then
// by the order they were made.
//
// Given a Lookout, the loop also looks for a steady state (docs/syssim-sim.md, "Extrapolated
// micro-batches"): each time rank 0 starts the marker slot (its first micro-batch slot's
// kind) of a micro-batch, it compares its whole state with the ones it had there up to
// `longest_period` micro-batches before. Where one is the same up to a shift in time and in
// the ranks' slots, and the schedule ahead repeats likewise, it moves its state on by as many
// whole periods as the schedule allows, adds as many periods' growth to the totals, and
// simulates the rest.
struct Lookout {
  int32_t until = 0;           // the last micro-batch whose marker is compared; 0: none
  int32_t longest_period = 0;  // micro-batches
};

template <typename Observer>
class EventLoop {
 public:
  EventLoop(const Plan& plan, Observer& observer, bool replay_slots, Lookout lookout = {})
      // Slots of the combined schedule overlap each other: none runs as it did alone.
      : plan_(plan), observer_(observer), replay_slots_(replay_slots && !plan.combined), lookout_(lookout),
        queues_(plan.queues.size()), flows_(plan.queues.size()), replays_(replay_slots_ ? plan.kinds.size() : 0) {
    if (!plan.cost->links.empty()) {
      RankNetwork network;
      for (const Link& link : plan.cost->links) network.links.push_back(LinkState{link.bandwidth_GBps * kBytesPerUsPerGBps});
      networks_.assign(plan.slots.size(), network);
    }
    if constexpr (Observer::kMayJump)
      if (lookout.until > 0 && lookout.longest_period > 0 && plan.slots.front().size() > 2 &&
          !plan.kinds[plan.slots.front()[1].kind].entries.empty())
        prepare_jumps();
  }

  int64_t replayed() const { return replayed_; }
  // Micro-batches of each rank jumped over, not simulated.
  int64_t skipped() const { return skipped_; }
  const std::vector<RankNetwork>& networks() const { return networks_; }

  void run() {
    for (uint32_t q = 0; q < queues_.size(); ++q) settle(q);
    for (uint32_t q = 0; q < queues_.size(); ++q) try_start(q, 0.0);
    if (marker_ >= 0) at_marker(0.0);
    while (!events_.empty()) {
      std::pop_heap(events_.begin(), events_.end(), Later{});
      const Event event = events_.back();
      events_.pop_back();
      switch (event.kind) {
        case Kind::kFinish: finish(event.queue, event.time_us); break;
        case Kind::kLatencyEnd: start_flow(event.queue, event.time_us); break;
        case Kind::kFlowEnd:
          if (flows_[event.queue].version == event.tag) end_flow(event.queue, event.time_us);
          break;
        case Kind::kReplayedFinish: finish_replayed(event.queue, event.tag, event.time_us); break;
      }
      if (marker_ >= 0) at_marker(event.time_us);
    }
    for (uint32_t q = 0; q < queues_.size(); ++q)
      if (!done(q)) {
        throw DataError(op_path(queues_[q].head->op) + ": never starts on stream \"" +
                        plan_.queues[q].stream + "\" of pipeline rank " + std::to_string(plan_.queues[q].rank) +
                        ": its deps wait, directly or through stream order, for ops issued after it");
      }
  }

 private:
  enum class Kind : uint8_t { kFinish, kLatencyEnd, kFlowEnd, kReplayedFinish };
  struct Event {  // 32 bytes: the heap moves them on every push and pop
    double time_us;
    uint64_t sequence;
    uint32_t queue;
    uint32_t tag;  // kFlowEnd: the flow's version when it was made; kReplayedFinish: the entry
    Kind kind;
  };
  struct Later {
    bool operator()(const Event& a, const Event& b) const {
      return std::tie(a.time_us, a.sequence) > std::tie(b.time_us, b.sequence);
    }
  };
  // A queue's cursor: its next instance is the slot's entry (*on_queue)[pos], kept at hand as
  // `head` (null when the queue has run all its instances).
  struct QueueState {
    uint32_t slot = 0;
    uint32_t pos = 0;
    const Entry* head = nullptr;
    uint32_t head_index = 0;  // its index among its kind's entries
    const std::vector<uint32_t>* on_queue = nullptr;  // the slot's entries on the queue
    uint32_t kind = 0;        // of the slot
    int32_t microbatch = -1;  // of the slot
    uint64_t finished = 0;  // its first `finished` instances in issue order have finished
    bool busy = false;
    bool flowing = false;  // the running instance has phases
    double start_us = 0;   // of the running instance, or of the replay the queue runs
  };
  // The loop's state at a marker, between two events.
  struct Snapshot {
    int32_t microbatch = -1;  // the marker's; -1: none taken
    double now_us = 0;
    std::vector<QueueState> queues;
    std::vector<Flow> flows;
    std::vector<RankNetwork> networks;
    std::vector<Event> events;  // those still to act
    bool events_ordered = false;  // in the order they will be taken
    typename Observer::Snapshot observed;
  };

  void push(double time_us, uint32_t queue, Kind kind, uint32_t tag = 0) {
    push_event(Event{time_us, sequence_++, queue, tag, kind});
  }
  void push_event(const Event& event) {
    events_.push_back(event);
    std::push_heap(events_.begin(), events_.end(), Later{});
  }

  bool done(uint32_t queue) const { return queues_[queue].head == nullptr; }

  // Moves the cursor on by one instance.
  void step(uint32_t queue) {
    QueueState& state = queues_[queue];
    if (++state.pos < state.on_queue->size()) {
      const uint32_t e = (*state.on_queue)[state.pos];
      state.head += static_cast<std::ptrdiff_t>(e) - static_cast<std::ptrdiff_t>(state.head_index);
      state.head_index = e;
      return;
    }
    settle(queue);
  }

  // Moves the cursor past the slots with no instance on the queue, and takes its next entry.
  void settle(uint32_t queue) {
    QueueState& state = queues_[queue];
    const int64_t rank = plan_.queues[queue].rank;
    const std::vector<Plan::Slot>& slots = plan_.slots[rank];
    for (; state.slot < slots.size(); ++state.slot, state.pos = 0) {
      const Plan::Kind& kind = plan_.kinds[slots[state.slot].kind];
      const std::vector<uint32_t>& on_queue = kind.on_queue[queue - plan_.first_queue[rank]];
      if (state.pos < on_queue.size()) {
        state.on_queue = &on_queue;
        state.kind = slots[state.slot].kind;
        state.microbatch = slots[state.slot].microbatch;
        state.head_index = on_queue[state.pos];
        state.head = &kind.entries[state.head_index];
        return;
      }
    }
    state.head = nullptr;
  }

  // Whether the instance `dep` names, for an instance of rank slot `slot` and micro-batch
  // `microbatch` (-1: the last micro-batch's), has finished.
  bool finished(const Dep& dep, uint32_t slot, int32_t microbatch) const {
    return queues_[dep.queue].finished > plan_.place_of(dep, slot, microbatch);
  }

  // In the combined 1F1B schedule (docs/syssim-sim.md, "The combined 1F1B schedule"): a
  // stream runs one side at a time, and a slot starts once the other side has finished the
  // slots two and more before it, so that each forward pairs with the backward after it.
  bool combined_allows(uint32_t queue) const {
    const Plan::Queue& q = plan_.queues[queue];
    if (q.twin != kNone && queues_[q.twin].busy) return false;
    const QueueState& state = queues_[queue];
    if (plan_.kinds[state.kind].once || state.slot < 2) return true;
    for (uint32_t o = plan_.first_queue[q.rank]; o < plan_.first_queue[q.rank + 1]; ++o)
      if (plan_.queues[o].backward_side != q.backward_side &&
          queues_[o].finished < plan_.queues[o].before[state.slot - 1])
        return false;
    return true;
  }

  void try_start(uint32_t queue, double now_us) {
    QueueState& state = queues_[queue];
    if (state.busy || done(queue)) return;
    if (plan_.combined && !combined_allows(queue)) return;
    const Entry& entry = *state.head;
    for (uint32_t d = entry.deps_begin; d < entry.deps_end; ++d)
      if (!finished(plan_.deps[d], state.slot, state.microbatch)) return;
    if constexpr (Observer::kMayJump)
      if (queue == marker_queue_ && state.kind == marker_kind_ && state.pos == 0) marker_ = state.microbatch;
    const int64_t rank = plan_.queues[queue].rank;
    if (replay_slots_ && !plan_.kinds[state.kind].once && state.head_index == prepared(state.kind).first_local &&
        replay(rank, state.slot, now_us))
      return;
    state.busy = true;
    state.start_us = now_us;
    observer_.started(queue, entry, now_us);
    state.flowing = entry.phases != nullptr;
    if (!state.flowing) {
      push(now_us + entry.time_us, queue, Kind::kFinish);
      return;
    }
    Flow& flow = flows_[queue];
    flow.rank = rank;
    flow.phases = entry.phases;
    flow.phase = 0;
    begin_phase(queue, now_us);
  }

  void finish(uint32_t queue, double now_us) {
    QueueState& state = queues_[queue];
    const Entry& entry = *state.head;
    // Without phases it lasts its cost exactly: now is start + time_us.
    const double duration_us = state.flowing ? now_us - state.start_us : entry.time_us;
    observer_.ran(RanInstance{queue, plan_.queues[queue].rank, state.slot, state.microbatch, &entry, state.head_index,
                              state.start_us, now_us, duration_us});
    state.busy = false;
    ++state.finished;
    step(queue);
    try_start(queue, now_us);
    for (uint32_t d = entry.dependents_begin; d < entry.dependents_end; ++d) try_start(plan_.dependent_queues[d], now_us);
    // The twin is free now, and the other side's slots may have come in reach.
    if (plan_.combined) {
      const int64_t rank = plan_.queues[queue].rank;
      for (uint32_t q = plan_.first_queue[rank]; q < plan_.first_queue[rank + 1]; ++q) try_start(q, now_us);
    }
  }

  // The kind's entries that a replay covers and how they wait, worked out once.
  KindReplay& prepared(uint32_t k) {
    KindReplay& r = replays_[k];
    if (r.prepared) return r;
    r.prepared = true;
    const Plan::Kind& kind = plan_.kinds[k];
    const size_t entries = kind.entries.size();
    r.local.assign(entries, 0);
    r.ends_queue_use.assign(entries, 0);
    r.waited_outside.assign(entries, 0);
    for (uint32_t e = 0; e < entries; ++e) {
      const Entry& entry = kind.entries[e];
      if (!plan_.local_queue[entry.queue]) {
        // A non-local instance of the slot waiting for a local one waits from outside the replay.
        for (uint32_t d = entry.deps_begin; d < entry.deps_end; ++d) {
          const Dep& dep = plan_.deps[d];
          if (dep.kind == kSameSlot && plan_.local_queue[dep.queue])
            r.waited_outside[plan_.entry_in(k, dep.queue, dep.at)] = 1;
        }
        continue;
      }
      r.local[e] = 1;
      if (r.first_local == kNone) r.first_local = e;
      r.waited_outside[e] |= plan_.waited_across_slots[entry.op];
      if (std::find(r.queues.begin(), r.queues.end(), entry.queue) == r.queues.end()) r.queues.push_back(entry.queue);
    }
    for (uint32_t queue : r.queues) {
      r.ends_queue_use[kind.on_queue[queue - plan_.first_queue[plan_.queues[queue].rank]].back()] = 1;
    }
    return r;
  }

  // Replays rank slot `s`, whose first local instance can start now, from its kind's
  // simulation when that is exact: its deps from outside are all done, and every local queue
  // it uses is idle with the slot's instances next. Its local instances then run as they did
  // alone, shifted to now, since no other flow shares their links (docs/syssim-sim.md).
  bool replay(int64_t rank, uint32_t s, double now_us) {
    const Plan::Slot& slot = plan_.slots[rank][s];
    const Plan::Kind& kind = plan_.kinds[slot.kind];
    KindReplay& r = replays_[slot.kind];
    if (!r.simulated) simulate_alone(slot, r);
    if (!r.replayable) return false;
    for (uint32_t e = 0; e < kind.entries.size(); ++e) {
      if (!r.local[e]) continue;
      const Entry& entry = kind.entries[e];
      for (uint32_t d = entry.deps_begin; d < entry.deps_end; ++d) {
        const Dep& dep = plan_.deps[d];
        if (dep.kind == kSameSlot && plan_.local_queue[dep.queue]) continue;  // inside the replay
        if (!finished(dep, s, slot.microbatch)) return false;
      }
    }
    for (uint32_t queue : r.queues) {
      const QueueState& state = queues_[queue];
      if (state.busy || state.slot != s || state.pos != 0) return false;
    }
    observer_.replayed(rank, s, slot.kind, r, now_us);
    for (uint32_t e = 0; e < kind.entries.size(); ++e) {
      if (!r.local[e]) continue;
      ++replayed_;
      if (r.ends_queue_use[e] || r.waited_outside[e])
        push(now_us + r.finish_us[e], kind.entries[e].queue, Kind::kReplayedFinish, e);
    }
    for (uint32_t queue : r.queues) queues_[queue].busy = true, queues_[queue].start_us = now_us;
    if (!networks_.empty()) {
      RankNetwork& network = networks_[rank];
      for (size_t l = 0; l < network.links.size(); ++l) {
        network.links[l].bytes += r.links[l].bytes;
        network.links[l].busy_us += r.links[l].busy_us;
        network.links[l].max_flows = std::max(network.links[l].max_flows, r.links[l].max_flows);
      }
    }
    return true;
  }

  // A replayed instance finishes: its queue has finished up to it, and is free again when it
  // is the slot's last there; the queues waiting for it are tried.
  void finish_replayed(uint32_t queue, uint32_t e, double now_us) {
    QueueState& state = queues_[queue];
    const uint32_t kind_index = state.kind;
    const Entry& entry = plan_.kinds[kind_index].entries[e];
    state.finished = std::max(state.finished, plan_.queues[queue].before[state.slot] + entry.queue_pos + 1);
    const bool frees_queue = replays_[kind_index].ends_queue_use[e];
    if (frees_queue) {
      state.busy = false;
      state.pos = static_cast<uint32_t>(state.on_queue->size());  // the cursor is still at the slot
      settle(queue);
      try_start(queue, now_us);
    }
    for (uint32_t d = entry.dependents_begin; d < entry.dependents_end; ++d) try_start(plan_.dependent_queues[d], now_us);
  }

  // Simulates `slot`'s local instances alone: on idle queues from time 0, deps from outside
  // taken as done, the rank's links otherwise idle. A kind whose part cannot complete alone
  // (an inside instance waits for an outside one in between) is never replayed.
  void simulate_alone(const Plan::Slot& slot, KindReplay& r) {
    r.simulated = true;
    const Plan::Kind& kind = plan_.kinds[slot.kind];
    Plan alone;
    alone.cost = plan_.cost;
    alone.first_queue = {0, static_cast<uint32_t>(r.queues.size())};
    alone.slots = {{Plan::Slot{0, slot.microbatch}}};
    auto alone_queue = [&](uint32_t queue) {
      return static_cast<uint32_t>(std::find(r.queues.begin(), r.queues.end(), queue) - r.queues.begin());
    };
    Plan::Kind& part = alone.kinds.emplace_back();
    part.on_queue.resize(r.queues.size());
    std::vector<uint32_t> entry_of;  // by entry of `part`: the kind's
    for (uint32_t e = 0; e < kind.entries.size(); ++e) {
      if (!r.local[e]) continue;
      const Entry& entry = kind.entries[e];
      Entry copy = entry;
      copy.queue = alone_queue(entry.queue);
      copy.deps_begin = static_cast<uint32_t>(alone.deps.size());
      for (uint32_t d = entry.deps_begin; d < entry.deps_end; ++d) {
        const Dep& dep = plan_.deps[d];
        if (dep.kind == kSameSlot && plan_.local_queue[dep.queue])
          alone.deps.push_back(Dep{alone_queue(dep.queue), dep.at, kSameSlot});
      }
      copy.deps_end = static_cast<uint32_t>(alone.deps.size());
      part.on_queue[copy.queue].push_back(static_cast<uint32_t>(part.entries.size()));
      part.entries.push_back(copy);
      entry_of.push_back(e);
    }
    for (uint32_t q = 0; q < r.queues.size(); ++q)
      alone.queues.push_back(Plan::Queue{0, plan_.queues[r.queues[q]].stream, {0, part.on_queue[q].size()}});
    link_dependents(alone);  // its deps are all inside the slot: no homes, and it replays nothing

    AloneTimes times(part.entries.size());
    EventLoop<AloneTimes> loop(alone, times, false);
    try {
      loop.run();
    } catch (const DataError&) {
      return;
    }
    r.start_us.assign(kind.entries.size(), 0);
    r.finish_us.assign(kind.entries.size(), 0);
    r.duration_us.assign(kind.entries.size(), 0);
    for (size_t a = 0; a < entry_of.size(); ++a) {
      r.start_us[entry_of[a]] = times.start_us[a];
      r.finish_us[entry_of[a]] = times.finish_us[a];
      r.duration_us[entry_of[a]] = times.duration_us[a];
    }
    if (!loop.networks().empty()) r.links = loop.networks().front().links;
    r.replayable = !entry_of.empty();
  }

  // The phase's latency first, through an event even when it is 0, so that a chain of empty
  // phases and instances does not recurse.
  void begin_phase(uint32_t queue, double now_us) {
    const Flow& flow = flows_[queue];
    push(now_us + (*flow.phases)[flow.phase].latency_us, queue, Kind::kLatencyEnd);
  }

  void next_phase(uint32_t queue, double now_us) {
    Flow& flow = flows_[queue];
    if (++flow.phase < flow.phases->size()) {
      begin_phase(queue, now_us);
    } else {
      finish(queue, now_us);
    }
  }

  void start_flow(uint32_t queue, double now_us) {
    Flow& flow = flows_[queue];
    const Phase& phase = (*flow.phases)[flow.phase];
    if (phase.bytes <= 0) return next_phase(queue, now_us);
    RankNetwork& network = networks_[flow.rank];
    advance(network, now_us);
    flow.remaining_bytes = phase.bytes;
    flow.cap = phase.bandwidth_GBps * kBytesPerUsPerGBps;
    flow.rate = 0;
    network.active.push_back(queue);
    for (size_t k = 0; k < phase.links.size(); ++k) {
      LinkState& link = network.links[phase.links[k]];
      link.max_flows = std::max(link.max_flows, ++link.flows);
      link.bytes += phase.loads[k] * phase.bytes;
    }
    share(network, now_us);
  }

  void end_flow(uint32_t queue, double now_us) {
    Flow& flow = flows_[queue];
    RankNetwork& network = networks_[flow.rank];
    advance(network, now_us);
    flow.remaining_bytes = 0;
    network.active.erase(std::find(network.active.begin(), network.active.end(), queue));
    for (int64_t l : (*flow.phases)[flow.phase].links) --network.links[l].flows;
    share(network, now_us);
    next_phase(queue, now_us);
  }

  // Moves the network's flows and busy times on to now_us at their current rates.
  void advance(RankNetwork& network, double now_us) {
    double elapsed_us = now_us - network.updated_us;
    network.updated_us = now_us;
    if (elapsed_us <= 0) return;
    for (size_t f : network.active) {
      Flow& flow = flows_[f];
      flow.remaining_bytes = std::max(0.0, flow.remaining_bytes - flow.rate * elapsed_us);
    }
    for (LinkState& link : network.links)
      if (link.flows > 0) link.busy_us += elapsed_us;
  }

  // New max-min rates for the network's flows; a flow whose rate changes gets a new finish event.
  void share(RankNetwork& network, double now_us) {
    fill_rates(network, flows_);
    for (size_t f : network.active) {
      Flow& flow = flows_[f];
      if (flow.next_rate == flow.rate) continue;
      flow.rate = flow.next_rate;
      ++flow.version;
      const double bytes = (*flow.phases)[flow.phase].bytes;
      double finish_us = flow.remaining_bytes <= kDoneFraction * bytes ? now_us : now_us + flow.remaining_bytes / flow.rate;
      push(finish_us, static_cast<uint32_t>(f), Kind::kFlowEnd, flow.version);  // a flow's index is its queue's
    }
  }

  // The marker (rank 0's queue of its first micro-batch slot's first op, and that slot's kind)
  // and each slot's micro-batch bounds.
  void prepare_jumps() {
    marker_kind_ = plan_.slots.front()[1].kind;
    marker_queue_ = plan_.kinds[marker_kind_].entries.front().queue;
    jumping_ = true;
    snapshots_.resize(static_cast<size_t>(std::min(lookout_.until, lookout_.longest_period)) + 1);
    for (const std::vector<Plan::Slot>& slots : plan_.slots) {
      std::vector<int32_t>& least = least_from_.emplace_back(slots.size() + 1, std::numeric_limits<int32_t>::max());
      std::vector<int32_t>& greatest = greatest_to_.emplace_back(slots.size(), -1);
      for (size_t s = slots.size(); s-- > 0;)
        least[s] = slots[s].microbatch < 0 ? least[s + 1] : std::min(least[s + 1], slots[s].microbatch);
      for (size_t s = 0; s < slots.size(); ++s)
        greatest[s] = std::max(s > 0 ? greatest[s - 1] : -1, slots[s].microbatch);
    }
  }

  // A marker slot started in the event just taken (or before the first): the state now is
  // compared with those of the markers of the micro-batches before, the nearest first; on the
  // first that it repeats, the loop jumps where the schedule lets it, once.
  void at_marker(double now_us) {
    if constexpr (Observer::kMayJump) {
      const int32_t microbatch = std::exchange(marker_, -1);
      if (!jumping_) return;
      if (microbatch > lookout_.until) {
        jumping_ = false;
        snapshots_ = {};
        return;
      }
      Snapshot& now = snapshots_[static_cast<size_t>(microbatch) % snapshots_.size()];
      take(now, microbatch, now_us);
      std::vector<int64_t> slot_shift;
      for (int32_t period = 1; period <= std::min(lookout_.longest_period, microbatch); ++period) {
        Snapshot& before = snapshots_[static_cast<size_t>(microbatch - period) % snapshots_.size()];
        if (before.microbatch != microbatch - period || !repeats(before, now, period, slot_shift)) continue;
        if (const int64_t periods = periods_ahead(before, now, period, slot_shift); periods > 0) {
          jump(before, now, period, periods, slot_shift);
          jumping_ = false;
          snapshots_ = {};
        }
        return;
      }
    }
  }

  void take(Snapshot& snapshot, int32_t microbatch, double now_us) {
    snapshot.microbatch = microbatch;
    snapshot.now_us = now_us;
    snapshot.queues = queues_;
    snapshot.flows = flows_;
    snapshot.networks = networks_;
    snapshot.events.clear();
    for (const Event& event : events_)
      if (event.kind != Kind::kFlowEnd || flows_[event.queue].version == event.tag) snapshot.events.push_back(event);
    snapshot.events_ordered = false;
    observer_.snapshot(snapshot.observed);
  }

  // The snapshot's events in the order they will be taken; sorted only for the comparisons
  // that get that far.
  static const std::vector<Event>& ordered_events(Snapshot& snapshot) {
    if (!snapshot.events_ordered)
      std::sort(snapshot.events.begin(), snapshot.events.end(),
                [](const Event& a, const Event& b) { return Later{}(b, a); });
    snapshot.events_ordered = true;
    return snapshot.events;
  }

  // Whether the loop is in the same state at `b` as at `a`, `period` micro-batches earlier, up
  // to rounding: every queue at the same place of the same kind of slot `period` micro-batches
  // on (one shift of slots per rank, into slot_shift) or at the same step_start or step slot,
  // with as many of its instances finished past that place, as busy since as long; the same
  // flows on the same links with the same bytes left at the same rates; the same events to
  // come, as long from now; and the observer's state the same.
  bool repeats(Snapshot& a, Snapshot& b, int32_t period, std::vector<int64_t>& slot_shift) const {
    const double tolerance_us = kSettled * b.now_us;
    auto same_time = [&](double at_a, double at_b) {
      return std::abs((at_b - b.now_us) - (at_a - a.now_us)) <= tolerance_us;
    };
    slot_shift.assign(plan_.slots.size(), -1);
    for (uint32_t q = 0; q < queues_.size(); ++q) {
      const QueueState &x = a.queues[q], &y = b.queues[q];
      if (x.head == nullptr || y.head == nullptr) {
        if (x.head != y.head) return false;
        continue;
      }
      if (x.pos != y.pos || x.busy != y.busy || x.flowing != y.flowing) return false;
      const std::vector<uint64_t>& before = plan_.queues[q].before;
      if (x.finished - before[x.slot] != y.finished - before[y.slot]) return false;
      if (plan_.kinds[x.kind].once || plan_.kinds[y.kind].once) {
        if (x.slot != y.slot) return false;
      } else {
        if (x.kind != y.kind || y.microbatch != x.microbatch + period || y.slot <= x.slot) return false;
        int64_t& shift = slot_shift[plan_.queues[q].rank];
        if (shift < 0) shift = y.slot - x.slot;
        if (shift != y.slot - x.slot) return false;
      }
      if (x.busy && !same_time(x.start_us, y.start_us)) return false;
      if (x.flowing) {
        const Flow &f = a.flows[q], &g = b.flows[q];
        if (f.phase != g.phase) return false;
      }
    }
    // Every rank in its micro-batches.
    if (std::find(slot_shift.begin(), slot_shift.end(), -1) != slot_shift.end()) return false;
    for (size_t r = 0; r < b.networks.size(); ++r) {
      const RankNetwork &x = a.networks[r], &y = b.networks[r];
      if (x.active != y.active || (!x.active.empty() && !same_time(x.updated_us, y.updated_us))) return false;
      for (size_t l = 0; l < x.links.size(); ++l)
        if (x.links[l].flows != y.links[l].flows) return false;
      for (size_t f : x.active) {
        const Flow &u = a.flows[f], &v = b.flows[f];
        const double bytes = (*u.phases)[u.phase].bytes;
        if (std::abs(u.remaining_bytes - v.remaining_bytes) > kSettled * bytes ||
            std::abs(u.rate - v.rate) > kSettled * u.rate)
          return false;
      }
    }
    if (a.events.size() != b.events.size()) return false;
    const std::vector<Event>& a_events = ordered_events(a);
    const std::vector<Event>& b_events = ordered_events(b);
    for (size_t e = 0; e < a_events.size(); ++e) {
      const Event &x = a_events[e], &y = b_events[e];
      if (x.kind != y.kind || x.queue != y.queue || (x.kind == Kind::kReplayedFinish && x.tag != y.tag) ||
          !same_time(x.time_us, y.time_us))
        return false;
    }
    return observer_.repeats(a.observed, a.now_us, b.observed, b.now_us, tolerance_us);
  }

  // How many periods the loop can jump from `b`. The instances that run from `a` to `b` and
  // their deps (of their own micro-batch) belong to micro-batches from `least` (the least any
  // queue has left at `a`) to `greatest` (the greatest any queue has reached at `b`). In every
  // period jumped over and in the one after it, each of them must run `period` micro-batches
  // later in the same kind of slot, the rank's slot shift later; or, where it had finished on
  // its rank before every queue of the rank reached `a`, so must its counterpart by `b`.
  int64_t periods_ahead(const Snapshot& a, const Snapshot& b, int32_t period,
                        const std::vector<int64_t>& slot_shift) const {
    int64_t least = std::numeric_limits<int64_t>::max(), greatest = -1;
    std::vector<uint32_t> reached(plan_.slots.size(), kNone);  // by rank: the least slot of its queues at `a`
    for (uint32_t q = 0; q < queues_.size(); ++q) {
      const QueueState &x = a.queues[q], &y = b.queues[q];
      if (x.head == nullptr || plan_.kinds[x.kind].once) continue;
      const int64_t rank = plan_.queues[q].rank;
      least = std::min<int64_t>(least, least_from_[rank][x.slot]);
      greatest = std::max<int64_t>(greatest, greatest_to_[rank][y.slot]);
      reached[rank] = std::min(reached[rank], x.slot);
    }
    int64_t end = least;  // micro-batches [least, end) repeat `period` later
    for (; end + period < plan_.microbatches; ++end) {
      bool repeated = true;
      for (size_t rank = 0; rank < plan_.slots.size() && repeated; ++rank)
        for (uint32_t k = plan_.slots[rank].front().kind + 1; k < plan_.slots[rank].back().kind && repeated; ++k) {
          const std::vector<uint32_t>& slot_of = plan_.kinds[k].slot_of;
          const uint32_t x = slot_of[end], y = slot_of[end + period];
          if (x == kNone || y == kNone)
            repeated = x == y;
          else
            repeated = x < reached[rank] ? y < reached[rank] + slot_shift[rank] : y == x + slot_shift[rank];
        }
      if (!repeated) break;
    }
    return end > greatest ? (end - 1 - greatest) / period + 1 : 0;
  }

  // Moves the loop's state at `b` (now) on by `periods` periods of (b - a): each queue in its
  // micro-batches that many slot shifts on, every time that many periods later, and the
  // totals grown by as many times the growth from a to b.
  void jump(const Snapshot& a, const Snapshot& b, int32_t period, int64_t periods,
            const std::vector<int64_t>& slot_shift) {
    const double shift_us = static_cast<double>(periods) * (b.now_us - a.now_us);
    const auto times = static_cast<double>(periods);
    for (uint32_t q = 0; q < queues_.size(); ++q) {
      QueueState& state = queues_[q];
      if (state.head == nullptr || plan_.kinds[state.kind].once) continue;
      const std::vector<uint64_t>& before = plan_.queues[q].before;
      const auto slot = static_cast<uint32_t>(state.slot + periods * slot_shift[plan_.queues[q].rank]);
      state.finished += before[slot] - before[state.slot];
      const Plan::Slot& target = plan_.slots[plan_.queues[q].rank][slot];
      const Plan::Kind& kind = plan_.kinds[target.kind];
      state.slot = slot;
      state.kind = target.kind;
      state.microbatch = target.microbatch;
      state.on_queue = &kind.on_queue[q - plan_.first_queue[plan_.queues[q].rank]];
      state.head_index = (*state.on_queue)[state.pos];
      state.head = &kind.entries[state.head_index];
      if (state.busy) state.start_us += shift_us;
    }
    for (size_t r = 0; r < networks_.size(); ++r) {
      RankNetwork& network = networks_[r];
      network.updated_us += shift_us;
      for (size_t l = 0; l < network.links.size(); ++l) {
        const LinkState &x = a.networks[r].links[l], &y = b.networks[r].links[l];
        network.links[l].busy_us += times * (y.busy_us - x.busy_us);
        network.links[l].bytes += times * (y.bytes - x.bytes);
      }
    }
    // The heap rebuilt, since rounding can make times equal that were not (then they go by
    // sequence); by pushing, as make_heap here would keep the loop's pop from being inlined.
    std::vector<Event> events;
    events.swap(events_);
    for (Event& event : events) {
      event.time_us += shift_us;
      push_event(event);
    }
    observer_.jump(a.observed, b.observed, periods, shift_us);
    skipped_ += periods * period;
  }

  const Plan& plan_;
  Observer& observer_;
  const bool replay_slots_;
  const Lookout lookout_;
  std::vector<QueueState> queues_;
  std::vector<Flow> flows_;  // by queue
  std::vector<KindReplay> replays_;  // by kind
  std::vector<RankNetwork> networks_;  // by pipeline rank; empty when the cost has no links
  int64_t replayed_ = 0;
  std::vector<Event> events_;  // a heap (Later)
  uint64_t sequence_ = 0;

  // Steady-state jumps (docs/syssim-sim.md, "Extrapolated micro-batches").
  uint32_t marker_queue_ = kNone, marker_kind_ = kNone;
  int32_t marker_ = -1;  // a marker slot of this micro-batch starts in the current event
  bool jumping_ = false;  // still looking for a steady state
  std::vector<Snapshot> snapshots_;  // by marker micro-batch, modulo their number
  // By rank and slot: the least micro-batch of the slot and the slots after it, the greatest
  // of the slot and the slots before it (-1 for the step_start and step slots).
  std::vector<std::vector<int32_t>> least_from_, greatest_to_;
  int64_t skipped_ = 0;
};

TimedOp timed(const ShardOp& op, double time_us) {
  return TimedOp{std::to_string(op.id) + "_" + op.name, time_us * kMsPerUs};
}

// What a simulated step adds up to, before the report's ratios and rankings.
struct StepTotals {
  std::vector<double> finish_us;  // by pipeline rank: its last instance's finish
  double flops = 0;               // all ranks' instances
  int64_t binding = 0;            // binding_rank(finish_us)
  // The binding rank's, by op: summed durations, summed standalone cost times, whether it ran.
  std::vector<double> duration_us, standalone_us;
  std::vector<char> ran;
  std::vector<LinkState> links;            // the binding rank's; empty without links
  std::map<std::string, double> exposed_us;  // collectives while compute idles, by group; "" for all
  double idle_us = 0;          // none of the binding rank's streams runs, until pipeline_end_us
  double pipeline_end_us = 0;  // the last micro-batch op's finish, any rank
};

// The rank finishing last, the first of equals.
int64_t binding_rank(const std::vector<double>& finish_us) {
  return std::max_element(finish_us.begin(), finish_us.end()) - finish_us.begin();
}

using Interval = std::pair<double, double>;  // start, finish (us)

// One rank's streams swept over time as its instances run: the stretches when none of them
// runs, and how long collectives (all, and by group) run while no compute stream does. The
// event loop reports instances at or after its current time, so what lies before that is
// final; only replayed slots lie ahead, each a list of boundaries in time order. A queue's
// finish is held until its next start: where that follows at once with the same group,
// nothing changed, and most instances cost no sweeping at all.
class Coverage {
 public:
  explicit Coverage(size_t queues) : held_(queues) {}

  struct Group {
    Symbol name;
    int64_t running = 0;
    double exposed_us = 0;
  };
  // An instance starts (delta +1) or finishes (-1), on a compute stream or not, a collective
  // of group `group` (an index into groups()) or not (-1).
  struct Boundary {
    double time_us;
    int32_t delta;
    bool compute;
    int32_t group;
  };
  struct Ahead {  // a replayed slot's boundaries not yet taken in
    const std::vector<Boundary>* boundaries;
    size_t next;
    double offset_us;
    double time_us() const { return offset_us + (*boundaries)[next].time_us; }
  };

  // The index among groups() of collective group `name`, added if new.
  int32_t group_index(Symbol name) {
    auto it = std::find_if(groups_.begin(), groups_.end(), [&](const Group& g) { return g.name == name; });
    if (it == groups_.end()) it = groups_.insert(groups_.end(), Group{name});
    return static_cast<int32_t>(it - groups_.begin());
  }
  // An instance on the rank's queue `queue` (a compute stream or not), a collective of group
  // `group` or not (-1), starts or finishes now.
  void start(double now_us, size_t queue, bool compute, int32_t group) {
    Boundary& held = held_[queue];
    if (held.delta != 0 && held.time_us == now_us && held.group == group) {
      held.delta = 0;  // the queue runs on
      return;
    }
    take_in_before(now_us);
    if (held.delta != 0) apply(held), held.delta = 0;
    apply(Boundary{now_us, 1, compute, group});
  }
  void finish(double now_us, size_t queue, bool compute, int32_t group) {
    held_[queue] = Boundary{now_us, -1, compute, group};
  }
  // A replayed slot's boundaries, in time order, relative to now (kept by the caller until
  // close()).
  void ahead(double now_us, const std::vector<Boundary>& boundaries) {
    take_in_before(now_us);  // else a rank that only replays would pile up its slots here
    if (!boundaries.empty()) ahead_.push_back(Ahead{&boundaries, 0, now_us});
  }
  // Takes in all that is held and ahead: the step is over.
  void close() { take_in_before(std::numeric_limits<double>::infinity()); }

  // What the sweep holds at a time, for EventLoop's steady-state jumps: its counts, and its
  // times relative to then.
  struct State {
    int64_t running = 0, computing = 0, collectives = 0;
    double last_us = 0, exposed_us = 0, idle_us = 0;
    std::vector<Group> groups;
    std::vector<Boundary> held;
    std::vector<Ahead> ahead;
  };
  void snapshot(State& state) const {
    state.running = running_, state.computing = computing_, state.collectives = collectives_;
    state.last_us = last_us_, state.exposed_us = exposed_us_, state.idle_us = idle_total_us_;
    state.groups = groups_;
    state.held = held_;
    state.ahead = ahead_;
  }
  // Whether the sweep stands at `b` (at time b_us) as it stood at `a` (at a_us), up to the shift.
  static bool repeats(const State& a, double a_us, const State& b, double b_us, double tolerance_us) {
    auto same_time = [&](double at_a, double at_b) { return std::abs((at_b - b_us) - (at_a - a_us)) <= tolerance_us; };
    if (a.running != b.running || a.computing != b.computing || a.collectives != b.collectives ||
        !same_time(a.last_us, b.last_us) || a.groups.size() != b.groups.size() || a.ahead.size() != b.ahead.size())
      return false;
    for (size_t g = 0; g < a.groups.size(); ++g)
      if (a.groups[g].running != b.groups[g].running) return false;
    for (size_t q = 0; q < a.held.size(); ++q) {
      const Boundary &x = a.held[q], &y = b.held[q];
      if (x.delta != y.delta) return false;
      if (x.delta != 0 && (x.compute != y.compute || x.group != y.group || !same_time(x.time_us, y.time_us)))
        return false;
    }
    for (size_t i = 0; i < a.ahead.size(); ++i) {
      const Ahead &x = a.ahead[i], &y = b.ahead[i];
      if (x.boundaries != y.boundaries || x.next != y.next || !same_time(x.offset_us, y.offset_us)) return false;
    }
    return true;
  }
  // Moves the sweep on from `b` (now) by `periods` periods of (b - a), `shift_us` in all.
  void jump(const State& a, const State& b, int64_t periods, double shift_us) {
    const auto times = static_cast<double>(periods);
    exposed_us_ += times * (b.exposed_us - a.exposed_us);
    for (size_t g = 0; g < groups_.size(); ++g)
      groups_[g].exposed_us += times * (b.groups[g].exposed_us - a.groups[g].exposed_us);
    const double idle_us = times * (b.idle_us - a.idle_us);
    idle_total_us_ += idle_us;
    skipped_idle_us_ += idle_us;
    last_us_ += shift_us;
    for (Boundary& held : held_)
      if (held.delta != 0) held.time_us += shift_us;
    for (Ahead& ahead : ahead_) ahead.offset_us += shift_us;
  }

  const std::vector<Group>& groups() const { return groups_; }
  double exposed_us() const { return exposed_us_; }
  // Wall time up to `until_us` during which none of the rank's streams runs.
  double idle_us(double until_us) const {
    double idle = skipped_idle_us_ + std::max(0.0, until_us - last_us_);
    for (const auto& [from, to] : gaps_)
      if (from < until_us) idle += std::min(to, until_us) - from;
    return idle;
  }

 private:

  // Takes in the held finishes and the boundaries ahead before `until_us`, earliest first (a
  // rank has a few queues, and a replayed slot or two ahead at a time).
  void take_in_before(double until_us) {
    for (;;) {
      double earliest_us = until_us;
      Boundary* held = nullptr;
      Ahead* ahead = nullptr;
      for (Boundary& h : held_)
        if (h.delta != 0 && h.time_us < earliest_us) earliest_us = h.time_us, held = &h;
      for (Ahead& a : ahead_)
        if (a.time_us() < earliest_us) earliest_us = a.time_us(), ahead = &a, held = nullptr;
      if (held) {
        apply(*held);
        held->delta = 0;
      } else if (ahead) {
        Boundary boundary = (*ahead->boundaries)[ahead->next];
        boundary.time_us = earliest_us;
        apply(boundary);
        if (++ahead->next == ahead->boundaries->size()) ahead_.erase(ahead_.begin() + (ahead - ahead_.data()));
      } else {
        return;
      }
    }
  }
  // The stretch since the last boundary, as things ran over it; then the boundary.
  void apply(const Boundary& boundary) {
    const double length = boundary.time_us - last_us_;
    if (length > 0) {
      if (running_ == 0) {
        if (!gaps_.empty() && gaps_.back().second == last_us_)
          gaps_.back().second = boundary.time_us;
        else
          gaps_.emplace_back(last_us_, boundary.time_us);
        idle_total_us_ += length;
      } else if (computing_ == 0 && collectives_ > 0) {
        exposed_us_ += length;
        for (Group& group : groups_)
          if (group.running > 0) group.exposed_us += length;
      }
      last_us_ = boundary.time_us;
    }
    running_ += boundary.delta;
    if (boundary.compute) computing_ += boundary.delta;
    if (boundary.group >= 0) collectives_ += boundary.delta, groups_[boundary.group].running += boundary.delta;
  }

  std::vector<Group> groups_;
  int64_t running_ = 0, computing_ = 0, collectives_ = 0;
  double last_us_ = 0;
  double exposed_us_ = 0;
  std::vector<Interval> gaps_;  // none runs: disjoint, in time order
  double idle_total_us_ = 0;    // their lengths, and those jumped over
  double skipped_idle_us_ = 0;  // jumped over: before the pipeline's end
  std::vector<Boundary> held_;  // by queue of the rank: its last finish, not taken in yet (delta -1)
  std::vector<Ahead> ahead_;
};

// Adds up a step as its instances run (StepTotals); optionally also keeps every instance's times
// (the timeline).
class StepRecorder {
  struct OpSums {  // over its instances
    double duration_us = 0;
    double standalone_us = 0;
  };

 public:
  static constexpr bool kMayJump = true;
  StepRecorder(const ShardSection& shard, const Plan& plan, bool timeline)
      : shard_(shard), plan_(plan), keep_timeline_(timeline), queues_(plan.queues.size()),
        group_of_(shard.ops.size(), -1), replay_boundaries_(plan.kinds.size()) {
    for (size_t rank = 0; rank < plan.slots.size(); ++rank)
      coverage_.emplace_back(plan.first_queue[rank + 1] - plan.first_queue[rank]);
    for (uint32_t q = 0; q < plan.queues.size(); ++q) {
      const int64_t rank = plan.queues[q].rank;
      queues_[q] = QueueInfo{&coverage_[rank], q - plan.first_queue[rank], plan.queues[q].stream == "compute"};
    }
    for (const ShardOp& op : shard.ops)  // check_ops refused stages the schedule does not have
      if (op.kind == "collective") group_of_[op.id] = coverage_[op.stage].group_index(op.group);
    totals_.finish_us.assign(plan.slots.size(), 0.0);
    op_sums_.resize(shard.ops.size());
    ran_.assign(shard.ops.size(), 0);
  }

  void replayed(int64_t rank, uint32_t slot, uint32_t kind, const KindReplay& replay, double now_us) {
    const Plan::Kind& slot_kind = plan_.kinds[kind];
    const int32_t microbatch = plan_.slots[rank][slot].microbatch;
    for (uint32_t e = 0; e < slot_kind.entries.size(); ++e)
      if (replay.local[e])
        add(rank, slot_kind.entries[e].queue, slot, microbatch, slot_kind.entries[e], e, now_us + replay.start_us[e],
            now_us + replay.finish_us[e], replay.duration_us[e]);
    std::vector<Coverage::Boundary>& boundaries = replay_boundaries_[kind];
    if (boundaries.empty()) {
      // By local queue, its instances as intervals, those that follow at once with the same
      // group merged: the sweep sees no change between them.
      for (uint32_t queue : replay.queues) {
        const bool compute = queues_[queue].compute;
        std::optional<Coverage::Boundary> open;  // the current interval's start; its finish in `finish_us`
        double finish_us = 0;
        for (uint32_t e : slot_kind.on_queue[queue - plan_.first_queue[rank]]) {
          const int32_t group = group_of_[slot_kind.entries[e].op];
          if (open && (replay.start_us[e] != finish_us || open->group != group)) {
            boundaries.push_back(*open);
            boundaries.push_back({finish_us, -1, compute, open->group});
            open.reset();
          }
          if (!open) open = Coverage::Boundary{replay.start_us[e], 1, compute, group};
          finish_us = replay.finish_us[e];
        }
        if (open) boundaries.push_back(*open), boundaries.push_back({finish_us, -1, compute, open->group});
      }
      std::stable_sort(boundaries.begin(), boundaries.end(),
                       [](const auto& a, const auto& b) { return a.time_us < b.time_us; });
    }
    coverage_[rank].ahead(now_us, boundaries);
  }

  void started(uint32_t queue, const Entry& entry, double now_us) {
    const QueueInfo& info = queues_[queue];
    info.coverage->start(now_us, info.local, info.compute, group_of_[entry.op]);
  }

  void ran(const RanInstance& i) {
    const QueueInfo& info = queues_[i.queue];
    info.coverage->finish(i.finish_us, info.local, info.compute, group_of_[i.entry->op]);
    add(i.rank, i.queue, i.slot, i.microbatch, *i.entry, i.entry_index, i.start_us, i.finish_us, i.duration_us);
  }

  int64_t instances() const { return instances_; }

  // What the recorder holds at a time, for EventLoop's steady-state jumps.
  struct Snapshot {
    std::vector<double> finish_us;
    double flops = 0, pipeline_end_us = 0;
    std::vector<OpSums> op_sums;
    std::vector<Coverage::State> coverage;
  };
  void snapshot(Snapshot& snapshot) const {
    snapshot.finish_us = totals_.finish_us;
    snapshot.flops = totals_.flops, snapshot.pipeline_end_us = totals_.pipeline_end_us;
    snapshot.op_sums = op_sums_;
    snapshot.coverage.resize(coverage_.size());
    for (size_t r = 0; r < coverage_.size(); ++r) coverage_[r].snapshot(snapshot.coverage[r]);
  }
  // Whether every rank's last finish, the pipeline's and each rank's sweep stand at `b` (at
  // b_us) as at `a` (at a_us), up to the shift.
  static bool repeats(const Snapshot& a, double a_us, const Snapshot& b, double b_us, double tolerance_us) {
    auto same_time = [&](double at_a, double at_b) { return std::abs((at_b - b_us) - (at_a - a_us)) <= tolerance_us; };
    for (size_t r = 0; r < a.finish_us.size(); ++r)
      if (!same_time(a.finish_us[r], b.finish_us[r])) return false;
    if (!same_time(a.pipeline_end_us, b.pipeline_end_us)) return false;
    for (size_t r = 0; r < a.coverage.size(); ++r)
      if (!Coverage::repeats(a.coverage[r], a_us, b.coverage[r], b_us, tolerance_us)) return false;
    return true;
  }
  // Moves the totals on from `b` (now) by `periods` periods of (b - a), `shift_us` in all.
  void jump(const Snapshot& a, const Snapshot& b, int64_t periods, double shift_us) {
    const auto times = static_cast<double>(periods);
    for (double& finish_us : totals_.finish_us) finish_us += shift_us;
    totals_.pipeline_end_us += shift_us;
    totals_.flops += times * (b.flops - a.flops);
    for (size_t op = 0; op < op_sums_.size(); ++op) {
      op_sums_[op].duration_us += times * (b.op_sums[op].duration_us - a.op_sums[op].duration_us);
      op_sums_[op].standalone_us += times * (b.op_sums[op].standalone_us - a.op_sums[op].standalone_us);
    }
    for (size_t r = 0; r < coverage_.size(); ++r) coverage_[r].jump(a.coverage[r], b.coverage[r], periods, shift_us);
  }

  // The totals, once the step is over: by op and links, those of the binding rank.
  StepTotals totals(const std::vector<RankNetwork>& networks) {
    StepTotals totals = totals_;
    totals.binding = binding_rank(totals.finish_us);
    totals.duration_us.assign(shard_.ops.size(), 0.0);
    totals.standalone_us.assign(shard_.ops.size(), 0.0);
    totals.ran.assign(shard_.ops.size(), 0);
    for (const ShardOp& op : shard_.ops)
      if (op.stage == totals.binding) {
        totals.duration_us[op.id] = op_sums_[op.id].duration_us;
        totals.standalone_us[op.id] = op_sums_[op.id].standalone_us;
        totals.ran[op.id] = ran_[op.id];
      }
    if (!networks.empty()) totals.links = networks[totals.binding].links;
    Coverage& coverage = coverage_[totals.binding];
    coverage.close();
    totals.exposed_us[""] = coverage.exposed_us();
    for (const Coverage::Group& group : coverage.groups()) totals.exposed_us[group.name] = group.exposed_us;
    if (totals.pipeline_end_us > 0) totals.idle_us = coverage.idle_us(totals.pipeline_end_us);
    return totals;
  }

  // Every instance's rank, stream and times, in the ranks' issue order.
  std::vector<TimelineEntry> timeline() {
    std::sort(timeline_.begin(), timeline_.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<TimelineEntry> entries;
    entries.reserve(timeline_.size());
    for (auto& [place, entry] : timeline_) entries.push_back(std::move(entry));
    return entries;
  }

 private:
  // An instance's share of the totals, and its timeline entry.
  void add(int64_t rank, uint32_t queue, uint32_t slot, int32_t microbatch, const Entry& entry, uint32_t entry_index,
           double start_us, double finish_us, double duration_us) {
    double& finish = totals_.finish_us[rank];
    finish = std::max(finish, finish_us);
    totals_.flops += entry.flops;
    if (microbatch >= 0) totals_.pipeline_end_us = std::max(totals_.pipeline_end_us, finish_us);
    OpSums& sums = op_sums_[entry.op];
    sums.duration_us += duration_us;
    sums.standalone_us += entry.time_us;
    ran_[entry.op] = 1;
    ++instances_;
    if (keep_timeline_)
      timeline_.push_back({{rank, slot, entry_index},
                           TimelineEntry{rank, plan_.queues[queue].stream, entry.op, microbatch, start_us * kMsPerUs,
                                         finish_us * kMsPerUs}});
  }
  const ShardSection& shard_;
  const Plan& plan_;
  const bool keep_timeline_;
  struct QueueInfo {
    Coverage* coverage = nullptr;  // its rank's
    uint32_t local = 0;            // among its rank's queues
    bool compute = false;          // a compute stream
  };
  std::vector<Coverage> coverage_;  // by pipeline rank
  std::vector<QueueInfo> queues_;
  std::vector<int32_t> group_of_;  // by op: its collective group among its rank's coverage groups; -1: none
  std::vector<std::vector<Coverage::Boundary>> replay_boundaries_;  // by kind: a replay's, relative to its start
  StepTotals totals_;  // but for the sums by op, kept for all ranks until the binding one is known
  std::vector<OpSums> op_sums_;  // by op
  std::vector<char> ran_;        // by op: an instance ran
  int64_t instances_ = 0;
  std::vector<std::pair<std::tuple<int64_t, uint32_t, uint32_t>, TimelineEntry>> timeline_;  // by (rank, slot, entry)
};

// The report of a step from its totals: the step time is the binding rank's finish; its
// phase, kind and collective-group times, longest ops, link loads, exposed communication and
// pipeline bubble (docs/syssim-sim.md).
SimSection sim_section(const ShardSection& shard, const CostSection& cost, const StepTotals& totals) {
  SimSection sim;
  sim.hardware_flops_per_rank = totals.flops / static_cast<double>(shard.parallelism.pp);
  for (double us : totals.finish_us) sim.per_pp_rank_step_time_ms.push_back(us * kMsPerUs);
  sim.binding_pp_stage = totals.binding;
  const double step_us = totals.finish_us[totals.binding];
  sim.step_time_ms = step_us * kMsPerUs;

  double collective_standalone_ms = 0;
  for (const ShardOp& op : shard.ops) {
    if (!totals.ran[op.id]) continue;
    double ms = totals.duration_us[op.id] * kMsPerUs;
    sim.by_op_type_ms[op.kind] += ms;
    if (op.kind == "collective") {
      sim.collective_total_ms += ms;
      sim.collective_by_group_ms[op.group].total_ms += ms;
      collective_standalone_ms += totals.standalone_us[op.id] * kMsPerUs;
    } else if (op.phase == "fwd") {
      sim.forward_ms += ms;
    } else if (op.phase == "bwd") {
      sim.backward_ms += ms;
    } else if (op.phase == "optimizer") {
      sim.optimizer_ms += ms;
    } else {
      throw DataError(op_path(op.id) + "/phase: expected fwd, bwd or optimizer, got \"" + op.phase + "\"");
    }
  }
  if (collective_standalone_ms > 0) sim.collective_slowdown = sim.collective_total_ms / collective_standalone_ms;
  double dominant_ms = -1;
  for (const auto& [kind, ms] : sim.by_op_type_ms)
    if (ms > dominant_ms) dominant_ms = ms, sim.dominant_op_type = kind;

  // The longest ops and the longest collective, by duration summed over instances.
  std::vector<int64_t> ran;
  for (size_t id = 0; id < totals.ran.size(); ++id)
    if (totals.ran[id]) ran.push_back(static_cast<int64_t>(id));
  std::stable_sort(ran.begin(), ran.end(),
                   [&](int64_t a, int64_t b) { return totals.duration_us[a] > totals.duration_us[b]; });
  for (size_t i = 0; i < std::min(kTopOps, ran.size()); ++i)
    sim.top_ops.push_back(timed(shard.ops[ran[i]], totals.duration_us[ran[i]]));
  // By module and role, every layer's op together: where a person would change something.
  std::map<std::string, double> by_label_us;
  for (int64_t id : ran) by_label_us[op_label(shard.ops[id], true)] += totals.duration_us[id];
  std::vector<std::pair<std::string, double>> labels(by_label_us.begin(), by_label_us.end());
  std::stable_sort(labels.begin(), labels.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  for (size_t i = 0; i < std::min(kTopOps, labels.size()); ++i)
    sim.top_modules.push_back(TimedOp{labels[i].first, labels[i].second * kMsPerUs});
  auto longest = std::find_if(ran.begin(), ran.end(), [&](int64_t id) { return shard.ops[id].kind == "collective"; });
  if (longest != ran.end()) sim.longest_collective = timed(shard.ops[*longest], totals.duration_us[*longest]);

  double busiest = 0;
  for (size_t l = 0; l < totals.links.size(); ++l) {
    const Link& link = cost.links[l];
    const LinkState& state = totals.links[l];
    double utilization = step_us > 0 ? state.bytes / (state.capacity * step_us) : 0;
    sim.links.push_back(LinkLoad{link.name, link.level, link.bandwidth_GBps, state.busy_us * kMsPerUs, state.bytes,
                                 utilization, state.max_flows});
    if (utilization > busiest) busiest = utilization, sim.busiest_link = link.name;
  }

  sim.collective_exposed_ms = totals.exposed_us.at("") * kMsPerUs;
  for (auto& [group, times] : sim.collective_by_group_ms) {
    auto exposed = totals.exposed_us.find(group);
    times.exposed_ms = exposed == totals.exposed_us.end() ? 0 : exposed->second * kMsPerUs;
  }
  if (totals.pipeline_end_us > 0) sim.bubble_fraction = totals.idle_us / totals.pipeline_end_us;
  return sim;
}

}  // namespace

SimStats simulate_graph(Graph& g, const SimOptions& options) {
  const ShardSection& shard = need_section(g.shard, "shard", "syssim-shard");
  const CostSection& cost = need_section(g.cost, "cost", "syssim-cost");
  if (cost.ops.size() != shard.ops.size())
    throw DataError("/cost/ops: " + std::to_string(cost.ops.size()) + " ops for " + std::to_string(shard.ops.size()) +
                    " shard ops; rerun syssim-cost on this shard section");
  if (shard.num_microbatches < 1)
    throw DataError("/shard/num_microbatches: expected at least 1, got " + std::to_string(shard.num_microbatches));
  check_ops(shard);
  check_network(cost, "/cost");  // cost_from_json checks this too; a graph built in memory may not be
  const Plan plan = make_plan(shard, cost, rank_programs(shard), shard.num_microbatches);
  StepRecorder recorder(shard, plan, options.record_timeline);
  // A steady state is looked for up to micro-batch 3 pp + k (k: pp for the interleaved
  // schedule, else 1), past a pipeline's warm-up and its settling, with periods of up to a
  // pipeline's micro-batches (pp vpp).
  Lookout lookout;
  if (options.extrapolate_microbatches && !options.record_timeline) {
    const int64_t pp = shard.parallelism.pp, vpp = shard.parallelism.vpp.value_or(1);
    lookout = Lookout{static_cast<int32_t>(3 * pp + (vpp > 1 ? pp : 1)), static_cast<int32_t>(pp * vpp)};
  }
  EventLoop<StepRecorder> loop(plan, recorder, options.replay_slots, lookout);
  loop.run();
  g.sim = sim_section(shard, cost, recorder.totals(loop.networks()));
  if (options.record_timeline) g.sim->timeline = recorder.timeline();
  return SimStats{recorder.instances(), loop.replayed(), loop.skipped() > 0};
}

}  // namespace syssim
