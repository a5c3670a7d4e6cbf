#include "sim/sim.hpp"

#include <algorithm>
#include <array>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/topological_sort.hpp>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <queue>
#include <tuple>

#include "sim/units.hpp"

namespace syssim {
namespace {

constexpr size_t kTopOps = 10;
using sim_units::kBytesPerUsPerGBps;
using sim_units::kMsPerUs;
// A flow with less than this share of its bytes left is done (floating-point drift of the
// remaining-bytes bookkeeping).
constexpr double kDoneFraction = 1e-9;

// One run of a shard op: once per micro-batch for microbatch-scope ops, once per step otherwise.
// 32-bit fields: a step has at most a few million instances, and the instance arrays are most
// of the simulator's memory.
struct Instance {
  int32_t op = 0;
  int32_t microbatch = -1;  // -1 for step_start and step ops
  uint32_t queue = 0;       // index of its (rank, stream) queue
  uint32_t unfinished_deps = 0;
  int32_t flow = -1;  // its Flow once it starts, when its cost has phases; -1: it lasts its cost time_us
  int32_t run = -1;   // its SlotRun; -1 for step_start and step ops
  double duration_us = 0;  // simulated: its cost time_us, or finish - start with phases
  double start_us = 0;
  double finish_us = 0;
};

// The phases of one instance whose cost has phases, and the flow of the current one.
struct Flow {
  size_t instance = 0;
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
  std::vector<size_t> active;  // Flow indices, in the order they started
  double updated_us = 0;       // remaining bytes and busy times are up to this time
};

// An in-order stream of one pipeline rank, like a CUDA stream: one instance at a time, in
// issue order.
struct StreamQueue {
  int64_t rank = 0;
  Symbol stream;
  std::vector<uint32_t> instances;  // issue order
  size_t head = 0;                // next instance to start
  bool busy = false;
};

// The instances of one schedule slot of one rank: t.instances[first, first + count). Those on
// the rank's local queues (queues whose flows share no link with another queue's flows) can
// be replayed from one simulation of the slot's kind (docs/syssim-sim.md, "Replayed slots").
struct SlotRun {
  uint32_t first = 0;
  uint32_t count = 0;
  uint32_t first_local = UINT32_MAX;  // its first instance on a local queue; UINT32_MAX: none
  int32_t kind = 0;                   // index into Timeline::kinds
};

// What every run of one kind of slot (rank, chunk, pass, op list) does on the local queues
// when it starts at time 0 on idle queues with its outside deps done: times relative to its
// start, by position in the run. Simulated once, at the kind's first replay.
struct SlotKind {
  uint32_t example = 0;  // a SlotRun of this kind
  bool simulated = false;
  bool replayable = false;
  std::vector<char> local;            // by position: on a local queue
  std::vector<uint32_t> inside_deps;  // by position: deps on the run's own local instances
  std::vector<double> start_us, finish_us, duration_us;
  // By local queue the run uses: the queue, its first and last position, its instance count.
  struct QueueUse {
    uint32_t queue = 0;
    uint32_t first = 0;
    uint32_t last = 0;
    uint32_t count = 0;
  };
  std::vector<QueueUse> queues;
  std::vector<LinkState> links;  // traffic of one run on the rank's links
};

struct Timeline {
  std::vector<Instance> instances;
  // The instances waiting for instance i: dependents[dependents_begin[i] .. dependents_begin[i + 1]).
  std::vector<uint32_t> dependents_begin;
  std::vector<uint32_t> dependents;
  std::vector<StreamQueue> queues;
  const CostSection* cost = nullptr;  // its ops' phases
  std::vector<Flow> flows;            // made as instances with phases start
  std::vector<RankNetwork> networks;  // by pipeline rank; empty when the cost has no links
  std::vector<SlotRun> runs;
  std::vector<SlotKind> kinds;
  std::vector<char> local_queue;  // by queue
};

std::string op_path(int64_t id) { return "/shard/ops/" + std::to_string(id); }

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

// By queue: whether it is local, no link its flows use carrying another queue's flows of the
// same rank. `queue_of` is the queue of each op (UINT32_MAX for ops no rank runs).
std::vector<char> local_queues(const ShardSection& shard, const CostSection& cost, const std::vector<uint32_t>& queue_of,
                               const std::vector<StreamQueue>& queues) {
  std::vector<std::vector<char>> links_of(queues.size(), std::vector<char>(cost.links.size(), 0));
  for (const ShardOp& op : shard.ops)
    if (queue_of[op.id] != UINT32_MAX)
      for (const Phase& phase : cost.ops[op.id].phases)
        for (int64_t l : phase.links) links_of[queue_of[op.id]][l] = 1;
  std::vector<char> local(queues.size(), 1);
  for (size_t a = 0; a < queues.size(); ++a)
    for (size_t b = 0; b < queues.size(); ++b)
      if (a != b && queues[a].rank == queues[b].rank)
        for (size_t l = 0; l < cost.links.size(); ++l)
          if (links_of[a][l] && links_of[b][l]) local[a] = 0;
  return local;
}

// Calls visit(op, microbatch, slot) for every op instance of a rank's program, in issue order:
// its step_start ops, the ops of each slot, its step ops (slot and micro-batch -1 for the ops
// that run once).
template <typename Visit>
void for_each_issued(const RankProgram& program, Visit visit) {
  for (int64_t op : program.step_start_ops) visit(op, int64_t{-1}, int64_t{-1});
  for (size_t slot = 0; slot < program.slots.size(); ++slot)
    for (int64_t op : program.kind_ops[program.slots[slot].kind])
      visit(op, program.slots[slot].microbatch, static_cast<int64_t>(slot));
  for (int64_t op : program.step_ops) visit(op, int64_t{-1}, int64_t{-1});
}

// The deps of each op (CSR), in two lists. A dep on an op of the same slot kind (a microbatch
// op in the same op list of the same rank) is, in every run of that slot, the instance at a
// fixed offset from the op's: `in_slot` holds those offsets, less those of deps issued earlier
// on the op's own queue, which stream order keeps already. `other` holds the rest, by op id,
// to be found per instance.
struct OpDeps {
  std::vector<uint32_t> in_slot_begin, other_begin;
  std::vector<int32_t> in_slot;
  std::vector<uint32_t> other;
};

OpDeps deps_by_slot(const ShardSection& shard, const std::vector<RankProgram>& programs,
                    const std::vector<uint32_t>& queue_of) {
  constexpr uint32_t kNone = UINT32_MAX;
  const size_t ops = shard.ops.size();
  // By op: its op list and position there; kNone for ops in none, in several, or also run
  // once per step.
  std::vector<uint32_t> list_of(ops, kNone), position_of(ops, kNone);
  std::vector<char> listed(ops, 0);
  uint32_t lists = 0;
  for (const RankProgram& program : programs) {
    for (const std::vector<int64_t>* once : {&program.step_start_ops, &program.step_ops})
      for (int64_t op : *once) {
        if (listed[static_cast<size_t>(op)]) position_of[static_cast<size_t>(op)] = kNone;
        listed[static_cast<size_t>(op)] = 1;
      }
    for (const std::vector<int64_t>& list : program.kind_ops) {
      for (size_t p = 0; p < list.size(); ++p) {
        const auto op = static_cast<size_t>(list[p]);
        if (listed[op]) {
          position_of[op] = kNone;
          continue;
        }
        listed[op] = 1;
        list_of[op] = lists;
        position_of[op] = static_cast<uint32_t>(p);
      }
      ++lists;
    }
  }
  OpDeps deps;
  deps.in_slot_begin.assign(ops + 1, 0);
  deps.other_begin.assign(ops + 1, 0);
  for (const ShardOp& op : shard.ops) {
    const auto o = static_cast<size_t>(op.id);
    for (int64_t dep : op.deps) {
      const auto d = static_cast<size_t>(dep);
      if (position_of[o] == kNone || position_of[d] == kNone || list_of[d] != list_of[o]) {
        deps.other.push_back(static_cast<uint32_t>(d));
        continue;
      }
      const int64_t offset = static_cast<int64_t>(position_of[d]) - static_cast<int64_t>(position_of[o]);
      if (offset < 0 && queue_of[d] == queue_of[o]) continue;
      deps.in_slot.push_back(static_cast<int32_t>(offset));
    }
    deps.in_slot_begin[o + 1] = static_cast<uint32_t>(deps.in_slot.size());
    deps.other_begin[o + 1] = static_cast<uint32_t>(deps.other.size());
  }
  return deps;
}

// Expands the step of every pipeline rank in the issue order of its schedule. A dep of a
// microbatch op means its instance in the same micro-batch; a dep of a step op on a
// microbatch op, its instance in the last micro-batch; a dep on a step_start or step op,
// its single instance. What instances of one op share (queue, deps) is worked out once per
// op: a step has tens of ops per instance.
Timeline expand_step(const ShardSection& shard, const CostSection& cost, const PipelineSchedule& schedule,
                     int64_t num_microbatches) {
  Timeline t;
  t.cost = &cost;
  const size_t ops = shard.ops.size();
  const auto microbatches = static_cast<size_t>(num_microbatches);
  std::vector<RankProgram> programs = rank_programs(shard, schedule, num_microbatches);
  size_t instances = 0;
  for (const RankProgram& program : programs) {
    instances += program.step_start_ops.size() + program.step_ops.size();
    for (const RankProgram::Slot& slot : program.slots) instances += program.kind_ops[slot.kind].size();
  }
  if (instances >= std::numeric_limits<int32_t>::max() || ops >= std::numeric_limits<int32_t>::max())
    throw DataError("/shard: " + std::to_string(instances) + " op instances in one step; the simulator takes fewer than 2^31");

  // By op: its queue and whether it runs once per step.
  constexpr uint32_t kNone = UINT32_MAX;
  std::vector<uint32_t> queue_of(ops, kNone);
  std::vector<char> once(ops);
  std::vector<double> time_us(ops);  // packed: read once per instance
  for (const ShardOp& op : shard.ops) {
    time_us[op.id] = cost.ops[op.id].time_us;
    once[op.id] = op.scope != "microbatch";
  }
  // The queues, made in issue order (an op first runs in the first slot of its kind), and
  // their lengths, counted per op list rather than per instance.
  std::vector<size_t> queue_length;
  for (int64_t rank = 0; rank < shard.parallelism.pp; ++rank) {
    const RankProgram& program = programs[rank];
    std::vector<std::pair<Symbol, uint32_t>> queue_of_stream;  // the rank's queues (a few)
    auto add = [&](const std::vector<int64_t>& list, size_t times) {
      for (int64_t op_id : list) {
        uint32_t& queue = queue_of[op_id];
        if (queue == kNone) {
          const Symbol stream = shard.ops[op_id].stream;
          auto it = std::find_if(queue_of_stream.begin(), queue_of_stream.end(),
                                 [&](const auto& entry) { return entry.first == stream; });
          if (it == queue_of_stream.end()) {
            it = queue_of_stream.emplace(queue_of_stream.end(), stream, static_cast<uint32_t>(t.queues.size()));
            t.queues.push_back(StreamQueue{rank, stream, {}, 0, false}), queue_length.push_back(0);
          }
          queue = it->second;
        }
        queue_length[queue] += times;
      }
    };
    add(program.step_start_ops, 1);
    std::vector<size_t> slots_of_kind(program.kind_ops.size(), 0);
    for (const RankProgram::Slot& slot : program.slots)
      if (slots_of_kind[slot.kind]++ == 0) add(program.kind_ops[slot.kind], 0);  // queues in issue order
    for (size_t kind = 0; kind < program.kind_ops.size(); ++kind) add(program.kind_ops[kind], slots_of_kind[kind]);
    add(program.step_ops, 1);
  }
  for (size_t q = 0; q < t.queues.size(); ++q) t.queues[q].instances.reserve(queue_length[q]);

  t.local_queue = local_queues(shard, cost, queue_of, t.queues);
  const OpDeps op_deps = deps_by_slot(shard, programs, queue_of);

  // The instance of op o in micro-batch m (m = 0 for ops that run once): instance_of[o * M + m].
  std::vector<uint32_t> instance_of(ops * microbatches, kNone);
  t.instances.reserve(instances);
  for (int64_t rank = 0; rank < shard.parallelism.pp; ++rank) {
    const RankProgram& program = programs[rank];
    std::vector<int32_t> kind_of(program.kind_ops.size(), -1);  // the program's kinds among t.kinds
    int64_t last_slot = -1;
    for_each_issued(program, [&](int64_t op_id, int64_t microbatch, int64_t slot) {
      const auto op = static_cast<size_t>(op_id);
      const auto index = static_cast<uint32_t>(t.instances.size());
      const uint32_t queue = queue_of[op];
      t.queues[queue].instances.push_back(index);
      instance_of[op * microbatches + static_cast<size_t>(std::max<int64_t>(microbatch, 0))] = index;
      Instance instance{static_cast<int32_t>(op), static_cast<int32_t>(microbatch), queue};
      instance.duration_us = time_us[op];
      if (slot >= 0) {
        if (slot != last_slot) {
          const size_t kind = program.slots[slot].kind;
          if (kind_of[kind] < 0) {
            kind_of[kind] = static_cast<int32_t>(t.kinds.size());
            t.kinds.emplace_back();
            t.kinds.back().example = static_cast<uint32_t>(t.runs.size());
          }
          const auto count = static_cast<uint32_t>(program.kind_ops[kind].size());
          t.runs.push_back(SlotRun{index, count, UINT32_MAX, kind_of[kind]});
          last_slot = slot;
        }
        SlotRun& run = t.runs.back();
        if (t.local_queue[queue] && run.first_local == UINT32_MAX) run.first_local = index;
        instance.run = static_cast<int32_t>(t.runs.size() - 1);
      }
      t.instances.push_back(instance);
    });
  }
  programs.clear();
  if (!cost.links.empty()) {
    RankNetwork network;
    for (const Link& link : cost.links) network.links.push_back(LinkState{link.bandwidth_GBps * kBytesPerUsPerGBps});
    t.networks.assign(shard.parallelism.pp, network);
  }
  auto dep_instance = [&](const Instance& instance, uint32_t dep) {
    size_t microbatch = once[dep]                 ? 0
                        : instance.microbatch < 0 ? microbatches - 1
                                                  : static_cast<size_t>(instance.microbatch);
    uint32_t index = instance_of[static_cast<size_t>(dep) * microbatches + microbatch];
    if (index == kNone)
      throw DataError(op_path(instance.op) + "/deps: op " + std::to_string(dep) + " runs in no slot of the schedule");
    return index;
  };
  // A dep on an earlier instance of the same queue is kept by stream order already (it
  // finishes before the queue moves on), so it is left out: most deps are such. The kept
  // ones are collected in instance order, then laid out by dep: one allocation for all.
  std::vector<std::pair<uint32_t, uint32_t>> edges;  // dep, dependent
  edges.reserve(t.instances.size());
  t.dependents_begin.assign(t.instances.size() + 1, 0);
  for (size_t index = 0; index < t.instances.size(); ++index) {
    Instance& instance = t.instances[index];
    instance.unfinished_deps = 0;
    auto wait_for = [&](uint32_t dep) {
      edges.emplace_back(dep, static_cast<uint32_t>(index));
      ++t.dependents_begin[dep + 1];
      ++instance.unfinished_deps;
    };
    const auto op = static_cast<size_t>(instance.op);
    for (uint32_t d = op_deps.in_slot_begin[op]; d < op_deps.in_slot_begin[op + 1]; ++d)
      wait_for(static_cast<uint32_t>(static_cast<int64_t>(index) + op_deps.in_slot[d]));
    for (uint32_t d = op_deps.other_begin[op]; d < op_deps.other_begin[op + 1]; ++d) {
      const uint32_t dep_op = op_deps.other[d], dep = dep_instance(instance, dep_op);
      if (dep < index && queue_of[dep_op] == instance.queue) continue;
      wait_for(dep);
    }
  }
  for (size_t i = 0; i < t.instances.size(); ++i) t.dependents_begin[i + 1] += t.dependents_begin[i];
  t.dependents.resize(t.dependents_begin.back());
  std::vector<uint32_t> filled(t.dependents_begin.begin(), t.dependents_begin.end() - 1);
  for (const auto& [dep, dependent] : edges) t.dependents[filled[dep]++] = dependent;
  return t;
}

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
class EventLoop {
 public:
  EventLoop(Timeline& t, bool replay_slots) : t_(t), replay_slots_(replay_slots) {}

  int64_t replayed() const { return replayed_; }

  void run() {
    for (size_t q = 0; q < t_.queues.size(); ++q) try_start(q, 0.0);
    while (!events_.empty()) {
      Event event = events_.top();
      events_.pop();
      switch (event.kind) {
        case Kind::kFinish: finish(event.instance, event.time_us); break;
        case Kind::kLatencyEnd: start_flow(event.instance, event.time_us); break;
        case Kind::kFlowEnd:
          if (t_.flows[t_.instances[event.instance].flow].version == event.version) end_flow(event.instance, event.time_us);
          break;
        case Kind::kReplayedFinish: finish_replayed(event.instance, event.time_us); break;
      }
    }
    for (const StreamQueue& queue : t_.queues)
      if (queue.head < queue.instances.size()) {
        int64_t op = t_.instances[queue.instances[queue.head]].op;
        throw DataError(op_path(op) + ": never starts on stream \"" + queue.stream + "\" of pipeline rank " +
                        std::to_string(queue.rank) + ": its deps wait, directly or through stream order, for ops issued after it");
      }
  }

 private:
  enum class Kind : uint8_t { kFinish, kLatencyEnd, kFlowEnd, kReplayedFinish };
  struct Event {  // 32 bytes: the heap moves them on every push and pop
    double time_us;
    uint64_t sequence;
    uint32_t instance;  // fewer than 2^31 (expand_step)
    uint32_t version;   // kFlowEnd: the flow's version when it was made
    Kind kind;
  };
  struct Later {
    bool operator()(const Event& a, const Event& b) const {
      return std::tie(a.time_us, a.sequence) > std::tie(b.time_us, b.sequence);
    }
  };

  void push(double time_us, size_t instance, Kind kind, uint32_t version = 0) {
    events_.push(Event{time_us, sequence_++, static_cast<uint32_t>(instance), version, kind});
  }

  void try_start(size_t queue_index, double now_us) {
    StreamQueue& queue = t_.queues[queue_index];
    if (queue.busy || queue.head == queue.instances.size()) return;
    size_t index = queue.instances[queue.head];
    Instance& instance = t_.instances[index];
    if (instance.unfinished_deps > 0) return;
    if (replay_slots_ && instance.run >= 0 && t_.runs[instance.run].first_local == index && replay(instance.run, now_us))
      return;
    queue.busy = true;
    instance.start_us = now_us;
    const std::vector<Phase>& phases = t_.cost->ops[instance.op].phases;
    if (phases.empty()) {
      instance.finish_us = now_us + instance.duration_us;
      push(instance.finish_us, index, Kind::kFinish);
    } else {
      instance.flow = static_cast<int32_t>(t_.flows.size());
      t_.flows.push_back(Flow{index, queue.rank, &phases});
      begin_phase(index, now_us);
    }
  }

  void finish(size_t index, double now_us) {
    Instance& finished = t_.instances[index];
    if (finished.flow >= 0) finished.finish_us = now_us, finished.duration_us = now_us - finished.start_us;
    StreamQueue& queue = t_.queues[finished.queue];
    queue.busy = false;
    ++queue.head;
    const uint32_t* first = t_.dependents.data() + t_.dependents_begin[index];
    const uint32_t* last = t_.dependents.data() + t_.dependents_begin[index + 1];
    for (const uint32_t* dependent = first; dependent != last; ++dependent) --t_.instances[*dependent].unfinished_deps;
    try_start(finished.queue, now_us);
    for (const uint32_t* dependent = first; dependent != last; ++dependent) try_start(t_.instances[*dependent].queue, now_us);
  }

  // Replays run `r`, whose first local instance can start now, from its kind's simulation
  // when that is exact: its deps from outside are all done, and every local queue it uses is
  // idle with the run's instances next. Its local instances then run as they did alone,
  // shifted to now, since no other flow shares their links (docs/syssim-sim.md).
  bool replay(int32_t r, double now_us) {
    const SlotRun& run = t_.runs[r];
    SlotKind& kind = t_.kinds[run.kind];
    if (!kind.simulated) simulate_alone(kind);
    if (!kind.replayable) return false;
    for (uint32_t p = 0; p < run.count; ++p)
      if (kind.local[p] && t_.instances[run.first + p].unfinished_deps != kind.inside_deps[p]) return false;
    for (const SlotKind::QueueUse& use : kind.queues) {
      const StreamQueue& queue = t_.queues[use.queue];
      if (queue.busy || queue.head >= queue.instances.size() || queue.instances[queue.head] != run.first + use.first)
        return false;
    }
    for (uint32_t p = 0; p < run.count; ++p) {
      if (!kind.local[p]) continue;
      const auto index = static_cast<uint32_t>(run.first + p);
      Instance& instance = t_.instances[index];
      instance.start_us = now_us + kind.start_us[p];
      instance.finish_us = now_us + kind.finish_us[p];
      instance.duration_us = kind.duration_us[p];
      ++replayed_;
      if (ends_queue_use(kind, p) || waited_for_outside(run, kind, index)) push(instance.finish_us, index, Kind::kReplayedFinish);
    }
    for (const SlotKind::QueueUse& use : kind.queues) t_.queues[use.queue].busy = true;
    if (!t_.networks.empty()) {
      RankNetwork& network = t_.networks[t_.queues[t_.instances[run.first_local].queue].rank];
      for (size_t l = 0; l < network.links.size(); ++l) {
        network.links[l].bytes += kind.links[l].bytes;
        network.links[l].busy_us += kind.links[l].busy_us;
        network.links[l].max_flows = std::max(network.links[l].max_flows, kind.links[l].max_flows);
      }
    }
    return true;
  }

  static bool ends_queue_use(const SlotKind& kind, uint32_t position) {
    return std::any_of(kind.queues.begin(), kind.queues.end(),
                       [&](const SlotKind::QueueUse& use) { return use.last == position; });
  }

  // Whether instance `d` is outside the replayed part of `run`.
  static bool outside(const SlotRun& run, const SlotKind& kind, uint32_t d) {
    return d < run.first || d >= run.first + run.count || !kind.local[d - run.first];
  }

  bool waited_for_outside(const SlotRun& run, const SlotKind& kind, uint32_t index) const {
    return std::any_of(t_.dependents.begin() + t_.dependents_begin[index], t_.dependents.begin() + t_.dependents_begin[index + 1],
                       [&](uint32_t d) { return outside(run, kind, d); });
  }

  // A replayed instance finishes: as finish() does, for the queue it frees (when it is the
  // run's last on its queue) and for its dependents outside the run.
  void finish_replayed(size_t index, double now_us) {
    const Instance& finished = t_.instances[index];
    const SlotRun& run = t_.runs[finished.run];
    const SlotKind& kind = t_.kinds[run.kind];
    const auto position = static_cast<uint32_t>(index - run.first);
    bool frees_queue = false;
    for (const SlotKind::QueueUse& use : kind.queues)
      if (use.last == position) {
        StreamQueue& queue = t_.queues[use.queue];
        queue.head += use.count;
        queue.busy = false;
        frees_queue = true;
      }
    const uint32_t* first = t_.dependents.data() + t_.dependents_begin[index];
    const uint32_t* last = t_.dependents.data() + t_.dependents_begin[index + 1];
    for (const uint32_t* dependent = first; dependent != last; ++dependent)
      if (outside(run, kind, *dependent)) --t_.instances[*dependent].unfinished_deps;
    if (frees_queue) try_start(finished.queue, now_us);
    for (const uint32_t* dependent = first; dependent != last; ++dependent)
      if (outside(run, kind, *dependent)) try_start(t_.instances[*dependent].queue, now_us);
  }

  // Simulates the kind's example run alone: its local instances on idle queues from time 0,
  // deps from outside taken as done, the rank's links otherwise idle. A run that cannot
  // complete alone (an inside instance waits for an outside one in between) is never replayed.
  void simulate_alone(SlotKind& kind) {
    kind.simulated = true;
    const SlotRun& run = t_.runs[kind.example];
    Timeline alone;
    alone.cost = t_.cost;
    std::vector<uint32_t> alone_of(run.count, UINT32_MAX), position_of;
    std::map<uint32_t, uint32_t> alone_queue;  // by queue of t_
    kind.local.assign(run.count, 0);
    kind.inside_deps.assign(run.count, 0);
    for (uint32_t p = 0; p < run.count; ++p) {
      const uint32_t index = run.first + p;
      const Instance& instance = t_.instances[index];
      if (!t_.local_queue[instance.queue]) continue;
      kind.local[p] = 1;
      alone_of[p] = static_cast<uint32_t>(alone.instances.size());
      position_of.push_back(p);
      auto [it, added] = alone_queue.emplace(instance.queue, static_cast<uint32_t>(alone.queues.size()));
      if (added) {
        // Rank 0 of the one network `alone` has: the rank's links, idle.
        alone.queues.push_back(StreamQueue{0, t_.queues[instance.queue].stream, {}, 0, false});
        kind.queues.push_back(SlotKind::QueueUse{instance.queue, p, p, 0});
      }
      alone.queues[it->second].instances.push_back(alone_of[p]);
      kind.queues[it->second].last = p;
      ++kind.queues[it->second].count;
      Instance copy{instance.op, instance.microbatch, it->second};
      copy.duration_us = instance.duration_us;
      alone.instances.push_back(copy);
    }
    alone.dependents_begin.assign(alone.instances.size() + 1, 0);
    for (uint32_t a = 0; a < alone.instances.size(); ++a) {
      const uint32_t index = run.first + position_of[a];
      for (uint32_t k = t_.dependents_begin[index]; k < t_.dependents_begin[index + 1]; ++k) {
        const uint32_t d = t_.dependents[k];
        if (outside(run, kind, d)) continue;
        alone.dependents.push_back(alone_of[d - run.first]);
        ++alone.instances[alone_of[d - run.first]].unfinished_deps;
        ++kind.inside_deps[d - run.first];
      }
      alone.dependents_begin[a + 1] = static_cast<uint32_t>(alone.dependents.size());
    }
    if (!t_.networks.empty()) {
      RankNetwork idle;
      for (const LinkState& link : t_.networks.front().links) idle.links.push_back(LinkState{link.capacity});
      alone.networks.push_back(idle);
    }
    try {
      EventLoop(alone, false).run();
    } catch (const DataError&) {
      return;
    }
    kind.start_us.assign(run.count, 0);
    kind.finish_us.assign(run.count, 0);
    kind.duration_us.assign(run.count, 0);
    for (uint32_t a = 0; a < alone.instances.size(); ++a) {
      const Instance& instance = alone.instances[a];
      kind.start_us[position_of[a]] = instance.start_us;
      kind.finish_us[position_of[a]] = instance.finish_us;
      kind.duration_us[position_of[a]] = instance.duration_us;
    }
    if (!alone.networks.empty()) kind.links = alone.networks.front().links;
    kind.replayable = !alone.instances.empty();
  }

  // The phase's latency first, through an event even when it is 0, so that a chain of empty
  // phases and instances does not recurse.
  void begin_phase(size_t index, double now_us) {
    const Flow& flow = t_.flows[t_.instances[index].flow];
    push(now_us + (*flow.phases)[flow.phase].latency_us, index, Kind::kLatencyEnd);
  }

  void next_phase(size_t index, double now_us) {
    Flow& flow = t_.flows[t_.instances[index].flow];
    if (++flow.phase < flow.phases->size()) {
      begin_phase(index, now_us);
    } else {
      finish(index, now_us);
    }
  }

  void start_flow(size_t index, double now_us) {
    size_t f = t_.instances[index].flow;
    Flow& flow = t_.flows[f];
    const Phase& phase = (*flow.phases)[flow.phase];
    if (phase.bytes <= 0) return next_phase(index, now_us);
    RankNetwork& network = t_.networks[flow.rank];
    advance(network, now_us);
    flow.remaining_bytes = phase.bytes;
    flow.cap = phase.bandwidth_GBps * kBytesPerUsPerGBps;
    flow.rate = 0;
    network.active.push_back(f);
    for (size_t k = 0; k < phase.links.size(); ++k) {
      LinkState& link = network.links[phase.links[k]];
      link.max_flows = std::max(link.max_flows, ++link.flows);
      link.bytes += phase.loads[k] * phase.bytes;
    }
    share(network, now_us);
  }

  void end_flow(size_t index, double now_us) {
    size_t f = t_.instances[index].flow;
    Flow& flow = t_.flows[f];
    RankNetwork& network = t_.networks[flow.rank];
    advance(network, now_us);
    flow.remaining_bytes = 0;
    network.active.erase(std::find(network.active.begin(), network.active.end(), f));
    for (int64_t l : (*flow.phases)[flow.phase].links) --network.links[l].flows;
    share(network, now_us);
    next_phase(index, now_us);
  }

  // Moves the network's flows and busy times on to now_us at their current rates.
  void advance(RankNetwork& network, double now_us) {
    double elapsed_us = now_us - network.updated_us;
    network.updated_us = now_us;
    if (elapsed_us <= 0) return;
    for (size_t f : network.active) {
      Flow& flow = t_.flows[f];
      flow.remaining_bytes = std::max(0.0, flow.remaining_bytes - flow.rate * elapsed_us);
    }
    for (LinkState& link : network.links)
      if (link.flows > 0) link.busy_us += elapsed_us;
  }

  // New max-min rates for the network's flows; a flow whose rate changes gets a new finish event.
  void share(RankNetwork& network, double now_us) {
    fill_rates(network, t_.flows);
    for (size_t f : network.active) {
      Flow& flow = t_.flows[f];
      if (flow.next_rate == flow.rate) continue;
      flow.rate = flow.next_rate;
      ++flow.version;
      const double bytes = (*flow.phases)[flow.phase].bytes;
      double finish_us = flow.remaining_bytes <= kDoneFraction * bytes ? now_us : now_us + flow.remaining_bytes / flow.rate;
      push(finish_us, flow.instance, Kind::kFlowEnd, flow.version);
    }
  }

  Timeline& t_;
  const bool replay_slots_;
  int64_t replayed_ = 0;
  std::priority_queue<Event, std::vector<Event>, Later> events_;
  uint64_t sequence_ = 0;
};

using Interval = std::pair<double, double>;  // start, finish (us)

// Intervals from several lists, each in time order, merged into one list in time order.
std::vector<Interval> merge_sorted(const std::vector<std::vector<Interval>>& lists) {
  std::vector<Interval> all;
  for (const std::vector<Interval>& list : lists) {
    const auto middle = static_cast<std::ptrdiff_t>(all.size());
    all.insert(all.end(), list.begin(), list.end());
    std::inplace_merge(all.begin(), all.begin() + middle, all.end());
  }
  return all;
}

// The union of intervals in time order, as disjoint intervals in time order.
std::vector<Interval> union_of(const std::vector<Interval>& intervals) {
  std::vector<Interval> merged;
  for (const Interval& interval : intervals) {
    if (!merged.empty() && interval.first <= merged.back().second)
      merged.back().second = std::max(merged.back().second, interval.second);
    else
      merged.push_back(interval);
  }
  return merged;
}

// Wall time, up to `until_us`, covered by `counted` but not by `busy` (both disjoint and in
// time order, as union_of returns them).
double uncovered_us(const std::vector<Interval>& counted, const std::vector<Interval>& busy, double until_us) {
  double total_us = 0;
  size_t b = 0;
  for (const auto& [start, finish] : counted) {
    double from = start, to = std::min(finish, until_us);
    while (b < busy.size() && busy[b].second <= from) ++b;
    for (size_t k = b; k < busy.size() && busy[k].first < to && from < to; ++k) {
      if (busy[k].first > from) total_us += busy[k].first - from;
      from = std::max(from, busy[k].second);
    }
    if (from < to) total_us += to - from;
  }
  return total_us;
}

// Wall time, up to `until_us`, during which none of the intervals (in time order) runs.
double idle_us(const std::vector<Interval>& intervals, double until_us) {
  double idle = 0, covered_until = 0;
  for (const auto& [start, finish] : intervals) {
    if (start >= until_us) break;
    if (start > covered_until) idle += start - covered_until;
    covered_until = std::max(covered_until, finish);
  }
  return idle + std::max(0.0, until_us - covered_until);
}

TimedOp timed(const ShardOp& op, double time_us) {
  return TimedOp{std::to_string(op.id) + "_" + op.name, time_us * kMsPerUs};
}

// What a simulated step adds up to, before the report's ratios and rankings: every total
// grows by the same amount with each steady-state period of micro-batches, so the totals of
// a long step follow from those of shorter ones (extrapolated below).
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

StepTotals totals_of(const ShardSection& shard, const CostSection& cost, const Timeline& t) {
  StepTotals totals;
  totals.finish_us.assign(shard.parallelism.pp, 0.0);
  std::vector<double> flops(shard.ops.size());  // by op, packed: read once per instance
  for (const ShardOp& op : shard.ops) flops[op.id] = op.flops;
  for (const Instance& instance : t.instances) {
    double& finish = totals.finish_us[t.queues[instance.queue].rank];
    finish = std::max(finish, instance.finish_us);
    totals.flops += flops[instance.op];
    if (instance.microbatch >= 0) totals.pipeline_end_us = std::max(totals.pipeline_end_us, instance.finish_us);
  }
  totals.binding = binding_rank(totals.finish_us);
  const double step_us = totals.finish_us[totals.binding];
  if (!t.networks.empty()) totals.links = t.networks[totals.binding].links;

  totals.duration_us.assign(shard.ops.size(), 0.0);
  totals.standalone_us.assign(shard.ops.size(), 0.0);
  totals.ran.assign(shard.ops.size(), 0);
  // The rank's instances as intervals, by queue: a queue runs its instances one at a time, in
  // order, so each list is in time order already and merging lists sorts them.
  std::vector<std::vector<Interval>> ran, compute;
  std::map<std::string, std::vector<std::vector<Interval>>> collectives_of;  // by group; "" for all
  for (const StreamQueue& queue : t.queues) {
    if (queue.rank != totals.binding) continue;
    std::vector<Interval>& intervals = ran.emplace_back();
    // The queue's collectives, all and by group (a queue has few groups: a list, not a map).
    std::vector<Interval> all_collectives;
    std::vector<std::pair<Symbol, std::vector<Interval>>> collectives;
    for (uint32_t index : queue.instances) {
      const Instance& i = t.instances[index];
      totals.duration_us[i.op] += i.duration_us;
      totals.standalone_us[i.op] += cost.ops[i.op].time_us;
      totals.ran[i.op] = 1;
      const ShardOp& op = shard.ops[i.op];
      intervals.emplace_back(i.start_us, i.finish_us);
      if (op.kind != "collective") continue;
      all_collectives.push_back(intervals.back());
      auto group = std::find_if(collectives.begin(), collectives.end(), [&](const auto& g) { return g.first == op.group; });
      if (group == collectives.end()) group = collectives.insert(collectives.end(), {op.group, {}});
      group->second.push_back(intervals.back());
    }
    if (queue.stream == "compute") compute.push_back(intervals);
    if (!all_collectives.empty()) collectives_of[""].push_back(std::move(all_collectives));
    for (auto& [group, list] : collectives) collectives_of[group].push_back(std::move(list));
  }
  const std::vector<Interval> computing = union_of(merge_sorted(compute));
  totals.exposed_us[""] = 0;
  for (const auto& [group, lists] : collectives_of)
    totals.exposed_us[group] = uncovered_us(union_of(merge_sorted(lists)), computing, step_us);
  if (totals.pipeline_end_us > 0) totals.idle_us = idle_us(merge_sorted(ran), totals.pipeline_end_us);
  return totals;
}

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

// Totals of a step `periods` steady-state periods longer than c, from the steps b and c, one
// period apart: c + periods * (c - b). nullopt where the binding rank, the ops that ran or the
// most flows on a link differ between them, or where the binding rank would change.
std::optional<StepTotals> extend(const StepTotals& b, const StepTotals& c, double periods) {
  // The same ops on the same binding rank: the same collective groups too (exposed_us's keys).
  if (b.binding != c.binding || b.ran != c.ran) return std::nullopt;
  auto linear = [&](double before, double after) { return after + periods * (after - before); };
  StepTotals m = c;
  for (size_t r = 0; r < c.finish_us.size(); ++r) m.finish_us[r] = linear(b.finish_us[r], c.finish_us[r]);
  m.flops = linear(b.flops, c.flops);
  for (size_t op = 0; op < c.duration_us.size(); ++op) {
    m.duration_us[op] = linear(b.duration_us[op], c.duration_us[op]);
    m.standalone_us[op] = linear(b.standalone_us[op], c.standalone_us[op]);
  }
  for (size_t l = 0; l < c.links.size(); ++l) {
    if (b.links[l].max_flows != c.links[l].max_flows) return std::nullopt;
    m.links[l].busy_us = linear(b.links[l].busy_us, c.links[l].busy_us);
    m.links[l].bytes = linear(b.links[l].bytes, c.links[l].bytes);
  }
  for (auto& [group, us] : m.exposed_us) us = linear(b.exposed_us.at(group), us);
  m.idle_us = linear(b.idle_us, c.idle_us);
  m.pipeline_end_us = linear(b.pipeline_end_us, c.pipeline_end_us);
  if (binding_rank(m.finish_us) != m.binding) return std::nullopt;
  return m;
}

constexpr double kSettled = 1e-9;  // relative to the step: equal up to rounding

// Whether every micro-batch in [first, last) of a step ran again `period` micro-batches
// later as an exact copy, every instance of every rank shifted by one common time (up to
// rounding): the step is in a steady state over that stretch. Ranks of unequal speed that
// nothing couples (GPipe's forward phase) drift instead, and a pipeline still settling, or
// settled into a cycle of several micro-batches, shifts them by different times.
bool repeats_shifted(const Timeline& t, size_t ops, int64_t first, int64_t last, int64_t period) {
  constexpr uint32_t kNone = UINT32_MAX;
  const auto span = static_cast<size_t>(last + period - first);
  std::vector<uint32_t> instance_of(ops * span, kNone);  // by (micro-batch - first) * ops + op
  double step_us = 0;
  for (size_t i = 0; i < t.instances.size(); ++i) {
    const Instance& instance = t.instances[i];
    step_us = std::max(step_us, instance.finish_us);
    const int64_t offset = instance.microbatch - first;
    if (offset >= 0 && static_cast<size_t>(offset) < span)
      instance_of[static_cast<size_t>(offset) * ops + static_cast<size_t>(instance.op)] = static_cast<uint32_t>(i);
  }
  const size_t later = ops * static_cast<size_t>(period);  // from an entry, the same op `period` micro-batches later
  std::optional<double> shift_us;
  for (size_t e = 0; e + later < instance_of.size(); ++e) {
    const uint32_t before = instance_of[e], after = instance_of[e + later];
    if ((before == kNone) != (after == kNone)) return false;
    if (before == kNone) continue;
    const Instance &x = t.instances[before], &y = t.instances[after];
    if (!shift_us) shift_us = y.start_us - x.start_us;
    if (std::abs(y.start_us - x.start_us - *shift_us) > kSettled * step_us ||
        std::abs(y.finish_us - x.finish_us - *shift_us) > kSettled * step_us)
      return false;
  }
  return shift_us.has_value();
}

struct Extrapolated {
  StepTotals totals;
  SimStats stats;
};

// A step of many micro-batches, from two shorter steps of the same schedule (docs/syssim-sim.md,
// "Extrapolated micro-batches"): w pp + k and w pp + 2k micro-batches, k the schedule's period
// (pp micro-batches for the interleaved schedule, else 1), w = 3 and then 4 for 1f1b, which
// mostly settles a pipeline's length after its warm-up, 4 for the others. nullopt where that
// would not save work, where the shard section's schedule is not the named schedule's, or
// where no longer short step settled into a steady state: micro-batches (w - 2) pp to
// (w - 1) pp do not repeat micro-batch after micro-batch (period after period).
std::optional<Extrapolated> extrapolate_microbatches(const ShardSection& shard, const CostSection& cost, bool replay) {
  const int64_t pp = shard.parallelism.pp, vpp = shard.parallelism.vpp.value_or(1), m = shard.num_microbatches;
  const std::string& name = shard.pipeline_schedule;
  if (name != "1f1b" && name != "interleaved" && name != "gpipe" && name != "zb-h1") return std::nullopt;
  const int64_t period = name == "interleaved" ? pp : 1;
  // From short steps of warm pp + k and warm pp + 2k micro-batches, where the longer settled.
  auto extrapolate_from = [&](int64_t warm) -> std::optional<Extrapolated> {
    const std::array<int64_t, 2> counts = {warm * pp + period, warm * pp + 2 * period};
    std::array<StepTotals, 2> totals;
    Extrapolated extrapolated;
    // The longer first: when it shows no steady state, the shorter is not needed.
    for (size_t i = counts.size(); i-- > 0;) {
      Timeline timeline = expand_step(shard, cost, make_schedule(name, pp, vpp, counts[i]), counts[i]);
      EventLoop loop(timeline, replay);
      loop.run();
      // The longer's stretch of pp micro-batches past the warm-up and its settling, clear of
      // the cool-down, must repeat period after period.
      if (i + 1 == counts.size() && !repeats_shifted(timeline, shard.ops.size(), (warm - 2) * pp, (warm - 1) * pp, period))
        return std::nullopt;
      totals[i] = totals_of(shard, cost, timeline);
      extrapolated.stats.instances += static_cast<int64_t>(timeline.instances.size());
      extrapolated.stats.replayed += loop.replayed();
    }
    std::optional<StepTotals> extended = extend(totals[0], totals[1], static_cast<double>((m - counts[1]) / period));
    if (!extended) return std::nullopt;
    extrapolated.totals = std::move(*extended);
    extrapolated.stats.extrapolated = true;
    return extrapolated;
  };
  bool schedule_checked = false;
  for (int64_t warm : name == "1f1b" ? std::vector<int64_t>{3, 4} : std::vector<int64_t>{4}) {
    const int64_t longer = warm * pp + 2 * period, shorter = longer - period;
    if (m <= shorter + longer || (m - longer) % period != 0) return std::nullopt;  // nothing to save
    if (!schedule_checked &&
        ((name == "interleaved") != (vpp > 1) || shard.schedule != make_schedule(name, pp, vpp, m)))
      return std::nullopt;
    schedule_checked = true;
    if (std::optional<Extrapolated> extrapolated = extrapolate_from(warm)) return extrapolated;
  }
  return std::nullopt;
}

// Every instance's rank, stream and times, in the order expand_step made them.
std::vector<TimelineEntry> timeline_entries(const Timeline& t) {
  std::vector<TimelineEntry> entries;
  entries.reserve(t.instances.size());
  for (const Instance& instance : t.instances) {
    const StreamQueue& queue = t.queues[instance.queue];
    entries.push_back(TimelineEntry{queue.rank, queue.stream, instance.op, instance.microbatch,
                                    instance.start_us * kMsPerUs, instance.finish_us * kMsPerUs});
  }
  return entries;
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
  if (!options.record_timeline && options.extrapolate_microbatches)
    if (std::optional<Extrapolated> extrapolated = extrapolate_microbatches(shard, cost, options.replay_slots)) {
      g.sim = sim_section(shard, cost, extrapolated->totals);
      return extrapolated->stats;
    }
  Timeline timeline = expand_step(shard, cost, shard.schedule, shard.num_microbatches);
  EventLoop loop(timeline, options.replay_slots);
  loop.run();
  g.sim = sim_section(shard, cost, totals_of(shard, cost, timeline));
  if (options.record_timeline) g.sim->timeline = timeline_entries(timeline);
  return SimStats{static_cast<int64_t>(timeline.instances.size()), loop.replayed(), false};
}

}  // namespace syssim
