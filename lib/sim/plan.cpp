#include "sim/plan.hpp"

#include <algorithm>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/topological_sort.hpp>
#include <iterator>
#include <map>
#include <utility>

namespace syssim::sim_detail {
namespace {


// By queue: whether it is local, no link its flows use carrying another queue's flows of the
// same rank. A host is not: its instances of a slot run ahead of the slot, not with it.
std::vector<char> local_queues(const Plan& plan) {
  const size_t links = plan.cost->links.size();
  std::vector<std::vector<char>> links_of(plan.queues.size(), std::vector<char>(links, 0));
  for (const Plan::Kind& kind : plan.kinds)
    for (const Entry& entry : kind.entries)
      if (entry.phases)
        for (const Phase& phase : *entry.phases)
          for (int64_t l : phase.links) links_of[entry.queue][l] = 1;
  std::vector<char> local(plan.queues.size());
  for (size_t q = 0; q < plan.queues.size(); ++q) local[q] = !plan.queues[q].host();
  for (size_t a = 0; a < plan.queues.size(); ++a)
    for (size_t b = 0; b < plan.queues.size(); ++b)
      if (a != b && plan.queues[a].rank == plan.queues[b].rank)
        for (size_t l = 0; l < links; ++l)
          if (links_of[a][l] && links_of[b][l]) local[a] = 0;
  return local;
}


// What every step of make_plan reads.
struct PlanBuilder {
  const ShardSection& shard;
  const CostSection& cost;
  bool simulate_host;
};

// By op: its queue (kNone until placed) and, while its kind is laid out, its entry there.
struct PlanScratch {
  std::vector<uint32_t> queue_of;
  std::vector<uint32_t> entry_in_kind;
};

// A rank's op lists in the order its kinds are numbered: the step_start ops, one list per slot
// kind, the step ops.
std::vector<const std::vector<int64_t>*> kind_lists(const RankProgram& program) {
  std::vector<const std::vector<int64_t>*> lists{&program.step_start_ops};
  for (const std::vector<int64_t>& list : program.kind_ops) lists.push_back(&list);
  lists.push_back(&program.step_ops);
  return lists;
}

// The rank's slots over its kinds (numbered from `base`): the step_start kind, the program's
// slots, the step kind.
std::vector<Plan::Slot> rank_slots(const RankProgram& program, uint32_t base, size_t lists) {
  std::vector<Plan::Slot> slots{{base, -1}};
  for (const RankProgram::Slot& slot : program.slots)
    slots.push_back({static_cast<uint32_t>(base + 1 + slot.kind), static_cast<int32_t>(slot.microbatch)});
  slots.push_back({static_cast<uint32_t>(base + lists - 1), -1});
  return slots;
}

// The rank's queues, in issue order: one per stream (two in the combined schedule, for the
// forward and the backward side), then the host thread that issues every op of the rank in
// order when it is simulated. Places each op of `lists` on its queue; returns the host queue
// (kNone without one).
uint32_t add_rank_queues(Plan& plan, const PlanBuilder& builder, int64_t rank, const RankProgram& program,
                         const std::vector<const std::vector<int64_t>*>& lists, uint32_t base,
                         std::vector<uint32_t>& queue_of) {
  const uint32_t first_queue = plan.first_queue.back();
  std::vector<char> seen(lists.size(), 0);
  for (const Plan::Slot& slot : plan.slots.back()) {
    const uint32_t list = slot.kind - base;
    if (seen[list]) continue;
    seen[list] = 1;
    const bool backward_side = plan.combined && list > 0 && list + 1 < lists.size() && program.backward_kind[list - 1];
    for (int64_t op : *lists[list]) {
      if (queue_of[op] != kNone) continue;
      const Stream stream = builder.shard.ops[op].stream;
      uint32_t q = first_queue;
      while (q < plan.queues.size() &&
             (plan.queues[q].stream != stream || plan.queues[q].backward_side != backward_side))
        ++q;
      if (q == plan.queues.size()) plan.queues.push_back(Plan::Queue{rank, stream, {}, backward_side});
      queue_of[op] = q;
    }
  }
  // The first queue of a stream (its only one outside the combined schedule, which has no
  // host and posts its receives ahead).
  auto queue_of_stream = [&](Stream stream) {
    for (uint32_t q = first_queue; q < plan.queues.size(); ++q)
      if (plan.queues[q].stream == stream) return q;
    return kNone;
  };
  const uint32_t compute = queue_of_stream(Stream::compute);
  const uint32_t host_queue = builder.simulate_host ? static_cast<uint32_t>(plan.queues.size()) : kNone;
  if (builder.simulate_host) {
    plan.queues.push_back(Plan::Queue{rank, Stream::host, {}, false});
    if (compute != kNone) plan.queues[compute].paces = host_queue, plan.queues[host_queue].paced_by = compute;
  }
  if (const uint32_t pp = queue_of_stream(Stream::pp);
      compute != kNone && pp != kNone && receives_after_previous_slot(builder.shard))
    plan.queues[pp].receives_after = compute, plan.queues[compute].gates_receives = pp;
  for (uint32_t a = first_queue; a < plan.queues.size(); ++a)
    for (uint32_t b = first_queue; b < plan.queues.size(); ++b)
      if (plan.queues[a].stream == plan.queues[b].stream && plan.queues[a].backward_side != plan.queues[b].backward_side)
        plan.queues[a].twin = b;
  return host_queue;
}

// One kind of the rank being laid out: an entry per op of `list` on its queue (and, when the
// host issues the kind, the host's issue of each after them, in the same order), then each
// entry's deps: on an entry of the same slot unless stream order keeps it, or on an op of
// another kind, resolved by resolve_deps_across_slots.
void add_kind(Plan& plan, const PlanBuilder& builder, const std::vector<int64_t>& list, bool once, uint32_t host_queue,
              PlanScratch& scratch) {
  const uint32_t first_queue = plan.first_queue.back();
  Plan::Kind& kind = plan.kinds.emplace_back();
  kind.once = once;
  kind.on_queue.resize(plan.queues.size() - first_queue);
  // The host issues the micro-batches' ops; the step_start and step ops (bucket collectives
  // issued from hooks, the optimizer's multi-tensor kernels) run without it.
  const bool issued = host_queue != kNone && !kind.once;
  kind.entries.reserve(issued ? 2 * list.size() : list.size());
  for (size_t p = 0; p < list.size(); ++p) {
    const auto op = static_cast<uint32_t>(list[p]);
    const uint32_t queue = scratch.queue_of[op];
    std::vector<uint32_t>& on_queue = kind.on_queue[queue - first_queue];
    Entry& entry = kind.entries.emplace_back(Entry{op, queue, static_cast<uint32_t>(on_queue.size())});
    entry.time_us = builder.cost.ops[op].time_us;
    entry.flops = builder.shard.ops[op].flops;
    if (!builder.cost.ops[op].phases.empty()) entry.phases = &builder.cost.ops[op].phases;
    const ShardOp& shard_op = builder.shard.ops[op];
    entry.slows_compute = shard_op.kind == OpKind::collective && shard_op.collective != Collective::send_recv;
    on_queue.push_back(static_cast<uint32_t>(p));
    scratch.entry_in_kind[op] = static_cast<uint32_t>(p);
  }
  if (issued) {
    std::vector<uint32_t>& on_queue = kind.on_queue[host_queue - first_queue];
    for (size_t p = 0; p < list.size(); ++p) {
      const auto op = static_cast<uint32_t>(list[p]);
      Entry& issue = kind.entries.emplace_back(Entry{op, host_queue, static_cast<uint32_t>(on_queue.size())});
      issue.time_us = builder.cost.ops[op].host_us;
      issue.host = true;
      on_queue.push_back(static_cast<uint32_t>(list.size() + p));
    }
  }
  // A dep on op `dep` of the slot's instance `p`, unless stream order keeps it.
  auto add_dep = [&](size_t p, int64_t dep) {
    const uint32_t in_kind = scratch.entry_in_kind[dep];
    if (in_kind == kNone) {
      plan.deps.push_back(Dep{kNone, static_cast<uint32_t>(dep), DepSlot::several()});  // resolved across slots
      plan.waited_across_slots[dep] = 1;
      return;
    }
    const Entry& target = kind.entries[in_kind];
    if (target.queue == kind.entries[p].queue && in_kind < p) return;  // stream order keeps it
    plan.deps.push_back(Dep{target.queue, target.queue_pos, DepSlot::same_slot()});
  };
  for (size_t p = 0; p < kind.entries.size(); ++p) {
    Entry& entry = kind.entries[p];
    entry.deps_begin = static_cast<uint32_t>(plan.deps.size());
    if (entry.host) {
      if (const std::optional<int64_t> waited = builder.shard.ops[entry.op].host_waits_for) add_dep(p, *waited);
    } else {
      if (issued) {
        const Entry& issue = kind.entries[list.size() + p];
        plan.deps.push_back(Dep{issue.queue, issue.queue_pos, DepSlot::same_slot()});
      }
      for (int64_t dep : builder.shard.ops[entry.op].deps) add_dep(p, dep);
    }
    entry.deps_end = static_cast<uint32_t>(plan.deps.size());
  }
  for (int64_t op : list) scratch.entry_in_kind[op] = kNone;
  kind.slot_of.assign(kind.once ? 1 : static_cast<size_t>(plan.microbatches), kNone);
}

// The last rank's slot of each kind instance, and per queue the entries of the slots before
// each slot.
void index_rank_slots(Plan& plan) {
  const std::vector<Plan::Slot>& slots = plan.slots.back();
  for (uint32_t s = 0; s < slots.size(); ++s) {
    Plan::Kind& kind = plan.kinds[slots[s].kind];
    kind.slot_of[kind.once ? 0 : static_cast<size_t>(slots[s].microbatch)] = s;  // rank_programs checked the range
  }
  const uint32_t first_queue = plan.first_queue.back();
  for (uint32_t q = first_queue; q < plan.queues.size(); ++q) {
    std::vector<uint64_t>& before = plan.queues[q].before;
    before.assign(slots.size() + 1, 0);
    for (size_t s = 0; s < slots.size(); ++s)
      before[s + 1] = before[s] + plan.kinds[slots[s].kind].on_queue[q - first_queue].size();
  }
}

// One rank: its slots, queues and kinds.
void add_rank(Plan& plan, const PlanBuilder& builder, int64_t rank, const RankProgram& program, PlanScratch& scratch) {
  const auto base = static_cast<uint32_t>(plan.kinds.size());
  const std::vector<const std::vector<int64_t>*> lists = kind_lists(program);
  plan.slots.push_back(rank_slots(program, base, lists.size()));
  plan.first_queue.push_back(static_cast<uint32_t>(plan.queues.size()));
  const uint32_t host_queue = add_rank_queues(plan, builder, rank, program, lists, base, scratch.queue_of);
  for (size_t l = 0; l < lists.size(); ++l)
    add_kind(plan, builder, *lists[l], l == 0 || l + 1 == lists.size(), host_queue, scratch);
  index_rank_slots(plan);
}

// Where each op is listed: the kinds listing it (its homes) and its queue_pos there.
void place_homes(Plan& plan, size_t ops) {
  plan.homes_begin.assign(ops + 1, 0);
  for (const Plan::Kind& kind : plan.kinds)
    for (const Entry& entry : kind.entries)
      if (!entry.host) ++plan.homes_begin[entry.op + 1];
  for (size_t op = 0; op < ops; ++op) plan.homes_begin[op + 1] += plan.homes_begin[op];
  plan.homes.resize(plan.homes_begin.back());
  std::vector<uint32_t> filled(plan.homes_begin.begin(), plan.homes_begin.end() - 1);
  for (uint32_t k = 0; k < plan.kinds.size(); ++k)
    for (const Entry& entry : plan.kinds[k].entries)
      if (!entry.host) plan.homes[filled[entry.op]++] = Plan::Home{k, entry.queue_pos};
}

// A dep across slots on an op that one kind lists names its place there; one that stream
// order keeps (on the waiting instance's queue, issued before it in every micro-batch) is
// dropped, as within a slot.
void resolve_deps_across_slots(Plan& plan, const std::vector<uint32_t>& queue_of) {
  const auto microbatches = static_cast<size_t>(plan.microbatches);
  std::map<std::pair<uint32_t, uint32_t>, bool> issued_before;  // by (dep's kind, waiting kind)
  auto always_before = [&](uint32_t dep_kind, uint32_t kind) {
    auto [it, added] = issued_before.emplace(std::make_pair(dep_kind, kind), true);
    if (!added) return it->second;
    const Plan::Kind& waiting = plan.kinds[kind];
    for (size_t m = waiting.once ? microbatches - 1 : 0; m < microbatches; ++m) {
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
        if (dep.slot.is_several()) {
          const uint32_t op = dep.at;
          dep.queue = queue_of[op];
          if (plan.homes_begin[op + 1] - plan.homes_begin[op] == 1) {
            const Plan::Home& home = plan.homes[plan.homes_begin[op]];
            dep = Dep{dep.queue, home.queue_pos, DepSlot::of_kind(home.kind)};
            if (dep.queue == entry.queue && always_before(home.kind, k)) continue;
          }
        }
        deps.push_back(dep);
      }
      entry.deps_begin = begin;
      entry.deps_end = static_cast<uint32_t>(deps.size());
    }
  plan.deps = std::move(deps);
}

}  // namespace

std::string op_path(int64_t id) { return "/shard/ops/" + std::to_string(id); }

bool host_simulated(const ShardSection& shard, const CostSection& cost) {
  return std::any_of(cost.ops.begin(), cost.ops.end(), [](const OpCost& op) { return op.host_us > 0; }) ||
         std::any_of(shard.ops.begin(), shard.ops.end(), [](const ShardOp& op) { return op.host_waits_for.has_value(); });
}

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
      const OpScope dep_scope = shard.ops[dep].scope;
      if (op.scope == OpScope::microbatch && dep_scope == OpScope::step)
        throw DataError(op_path(op.id) + "/deps: microbatch op depends on step op " + std::to_string(dep));
      if (op.scope == OpScope::step_start && dep_scope != OpScope::step_start)
        throw DataError(op_path(op.id) + "/deps: step_start op depends on " + to_string(dep_scope) + " op " + std::to_string(dep));
      deps_before = deps_before && dep < op.id;
    }
    // The host issues in op order: it can wait only for an op it issued before, on its rank.
    if (const std::optional<int64_t> waited = op.host_waits_for;
        waited && (*waited < 0 || *waited >= op.id || shard.ops[*waited].stage != op.stage))
      throw DataError(op_path(op.id) + "/host_waits_for: " + std::to_string(*waited) +
                      " is not an earlier op of pipeline rank " + std::to_string(op.stage));
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
        if (!dep.slot.is_several()) {
          waits.emplace_back(global(dep.queue, dep.slot.is_same_slot() ? k : dep.slot.kind(), dep.at), entry.queue);
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

Plan make_plan(const ShardSection& shard, const CostSection& cost, const std::vector<RankProgram>& programs,
               int64_t microbatches) {
  const size_t ops = shard.ops.size();
  if (ops >= kNone) throw DataError("/shard/ops: " + std::to_string(ops) + " ops; the simulator takes fewer than 2^32");
  Plan plan;
  plan.cost = &cost;
  plan.microbatches = microbatches;
  plan.combined = shard.training.overlap_moe_expert_parallel_comm;
  // The combined schedule interleaves the issue of a forward and a backward, which one
  // thread issuing slot after slot would not: its host is not simulated.
  const PlanBuilder builder{shard, cost, !plan.combined && host_simulated(shard, cost)};
  PlanScratch scratch{std::vector<uint32_t>(ops, kNone), std::vector<uint32_t>(ops, kNone)};
  plan.waited_across_slots.assign(ops, 0);
  for (int64_t rank = 0; rank < static_cast<int64_t>(programs.size()); ++rank)
    add_rank(plan, builder, rank, programs[rank], scratch);
  plan.first_queue.push_back(static_cast<uint32_t>(plan.queues.size()));
  place_homes(plan, ops);
  resolve_deps_across_slots(plan, scratch.queue_of);
  link_dependents(plan);
  plan.local_queue = local_queues(plan);
  return plan;
}

}  // namespace syssim::sim_detail
