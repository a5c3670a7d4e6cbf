#include "sim/sim.hpp"

#include <algorithm>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/topological_sort.hpp>
#include <iterator>
#include <map>
#include <queue>
#include <tuple>

namespace syssim {
namespace {

constexpr double kMsPerUs = 1e-3;
constexpr size_t kTopOps = 10;

// One run of a shard op: once per micro-batch for microbatch-scope ops, once per step otherwise.
struct Instance {
  int64_t op = 0;
  size_t queue = 0;  // index of its (rank, stream) queue
  double duration_us = 0;
  std::vector<size_t> dependents;
  size_t unfinished_deps = 0;
  double start_us = 0;
  double finish_us = 0;
};

// An in-order stream of one rank, like a CUDA stream: one instance at a time, in issue order.
struct StreamQueue {
  int64_t rank = 0;
  std::string stream;
  std::vector<size_t> instances;  // issue order
  size_t head = 0;                // next instance to start
  bool busy = false;
};

struct Timeline {
  std::vector<Instance> instances;
  std::vector<StreamQueue> queues;
};

std::string op_path(int64_t id) { return "/shard/ops/" + std::to_string(id); }

// Refuses deps on ops that do not exist, microbatch ops that wait for a step op, and cycles.
void check_deps(const ShardSection& shard) {
  using DependencyGraph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS>;
  DependencyGraph graph(shard.ops.size());
  for (const ShardOp& op : shard.ops)
    for (int64_t dep : op.deps) {
      if (dep < 0 || dep >= static_cast<int64_t>(shard.ops.size()))
        throw DataError(op_path(op.id) + "/deps: op " + std::to_string(dep) + " does not exist");
      if (op.scope == "microbatch" && shard.ops[dep].scope != "microbatch")
        throw DataError(op_path(op.id) + "/deps: microbatch op depends on step op " + std::to_string(dep));
      boost::add_edge(dep, op.id, graph);
    }
  std::vector<DependencyGraph::vertex_descriptor> order;
  try {
    boost::topological_sort(graph, std::back_inserter(order));
  } catch (const boost::not_a_dag&) {
    throw DataError("/shard/ops: the deps form a cycle; ops must form a directed acyclic graph");
  }
}

// Expands the step of one rank: micro-batches back to back in op order, then the step ops.
// Step ops that depend on a microbatch op wait for its instance in the last micro-batch.
Timeline expand_step(const ShardSection& shard, const CostSection& cost, int64_t rank) {
  Timeline t;
  std::map<std::string, size_t> queue_of_stream;
  std::vector<std::vector<size_t>> instances_of(shard.ops.size());
  auto issue = [&](const ShardOp& op) {
    auto [it, added] = queue_of_stream.emplace(op.stream, t.queues.size());
    if (added) t.queues.push_back(StreamQueue{rank, op.stream, {}, 0, false});
    size_t index = t.instances.size();
    t.queues[it->second].instances.push_back(index);
    instances_of[op.id].push_back(index);
    t.instances.push_back(Instance{op.id, it->second, cost.ops[op.id].time_us, {}, op.deps.size(), 0, 0});
  };
  for (int64_t m = 0; m < shard.num_microbatches; ++m)
    for (const ShardOp& op : shard.ops)
      if (op.scope == "microbatch") issue(op);
  for (const ShardOp& op : shard.ops)
    if (op.scope == "step") issue(op);

  for (const ShardOp& op : shard.ops)
    for (size_t m = 0; m < instances_of[op.id].size(); ++m)
      for (int64_t dep : op.deps) {
        const std::vector<size_t>& dep_instances = instances_of[dep];
        size_t dep_index = op.scope == "microbatch" ? dep_instances[m] : dep_instances.back();
        t.instances[dep_index].dependents.push_back(instances_of[op.id][m]);
      }
  return t;
}

// Runs the event loop: an instance starts when it heads its stream queue, the stream is idle
// and its deps have finished. Events are ordered by time, then by the order they were made.
void run(Timeline& t) {
  struct Finish {
    double time_us;
    uint64_t sequence;
    size_t instance;
  };
  auto later = [](const Finish& a, const Finish& b) {
    return std::tie(a.time_us, a.sequence) > std::tie(b.time_us, b.sequence);
  };
  std::priority_queue<Finish, std::vector<Finish>, decltype(later)> events(later);
  uint64_t sequence = 0;
  auto try_start = [&](size_t queue_index, double now_us) {
    StreamQueue& queue = t.queues[queue_index];
    if (queue.busy || queue.head == queue.instances.size()) return;
    size_t index = queue.instances[queue.head];
    Instance& instance = t.instances[index];
    if (instance.unfinished_deps > 0) return;
    queue.busy = true;
    instance.start_us = now_us;
    instance.finish_us = now_us + instance.duration_us;
    events.push(Finish{instance.finish_us, sequence++, index});
  };

  for (size_t q = 0; q < t.queues.size(); ++q) try_start(q, 0.0);
  while (!events.empty()) {
    Finish event = events.top();
    events.pop();
    const Instance& finished = t.instances[event.instance];
    StreamQueue& queue = t.queues[finished.queue];
    queue.busy = false;
    ++queue.head;
    for (size_t dependent : finished.dependents) --t.instances[dependent].unfinished_deps;
    try_start(finished.queue, event.time_us);
    for (size_t dependent : finished.dependents) try_start(t.instances[dependent].queue, event.time_us);
  }
  for (const StreamQueue& queue : t.queues)
    if (queue.head < queue.instances.size()) {
      int64_t op = t.instances[queue.instances[queue.head]].op;
      throw DataError(op_path(op) + ": never starts on stream \"" + queue.stream +
                      "\": its deps wait, directly or through stream order, for ops issued after it");
    }
}

// Wall time of one rank during which a collective runs while its compute stream is idle.
double exposed_collective_us(const ShardSection& shard, const Timeline& t, int64_t rank) {
  struct Edge {
    double time_us;
    int collectives;  // +1 when one starts, -1 when one finishes
    int compute;
  };
  std::vector<Edge> edges;
  for (const Instance& instance : t.instances) {
    const StreamQueue& queue = t.queues[instance.queue];
    int collective = shard.ops[instance.op].kind == "collective";
    int compute = queue.stream == "compute";
    if (queue.rank != rank || (!collective && !compute)) continue;
    edges.push_back(Edge{instance.start_us, collective, compute});
    edges.push_back(Edge{instance.finish_us, -collective, -compute});
  }
  std::sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) { return a.time_us < b.time_us; });
  int collectives = 0, compute = 0;
  double exposed_us = 0, previous_us = 0;
  for (const Edge& edge : edges) {
    if (collectives > 0 && compute == 0) exposed_us += edge.time_us - previous_us;
    collectives += edge.collectives;
    compute += edge.compute;
    previous_us = edge.time_us;
  }
  return exposed_us;
}

TimedOp timed(const ShardOp& op, double time_us) {
  return TimedOp{std::to_string(op.id) + "_" + op.name, time_us * kMsPerUs};
}

// The finish time of each rank's last op: its streams run in order, so their last instances.
std::vector<double> finish_us_per_rank(const Timeline& t) {
  std::vector<double> finish_us;
  for (const StreamQueue& queue : t.queues) {
    if (finish_us.size() <= static_cast<size_t>(queue.rank)) finish_us.resize(queue.rank + 1, 0.0);
    if (!queue.instances.empty())
      finish_us[queue.rank] = std::max(finish_us[queue.rank], t.instances[queue.instances.back()].finish_us);
  }
  return finish_us;
}

// Phase and kind totals over all instances.
void add_durations(const ShardSection& shard, const Timeline& t, SimSection& sim) {
  for (const Instance& instance : t.instances) {
    const ShardOp& op = shard.ops[instance.op];
    double ms = instance.duration_us * kMsPerUs;
    sim.by_op_type_ms[op.kind] += ms;
    sim.hardware_flops_per_rank += op.flops;
    if (op.kind == "collective")
      sim.collective_total_ms += ms;
    else if (op.phase == "fwd")
      sim.forward_ms += ms;
    else if (op.phase == "bwd")
      sim.backward_ms += ms;
    else if (op.phase == "optimizer")
      sim.optimizer_ms += ms;
    else
      throw DataError(op_path(op.id) + "/phase: expected fwd, bwd or optimizer, got \"" + op.phase + "\"");
  }
  double dominant_ms = -1;
  for (const auto& [kind, ms] : sim.by_op_type_ms)
    if (ms > dominant_ms) dominant_ms = ms, sim.dominant_op_type = kind;
}

// The longest ops and the longest collective, by duration summed over their instances.
void find_longest_ops(const ShardSection& shard, const Timeline& t, SimSection& sim) {
  std::vector<double> op_time_us(shard.ops.size(), 0.0);
  for (const Instance& instance : t.instances) op_time_us[instance.op] += instance.duration_us;
  std::vector<int64_t> by_time(shard.ops.size());
  for (size_t i = 0; i < by_time.size(); ++i) by_time[i] = static_cast<int64_t>(i);
  std::stable_sort(by_time.begin(), by_time.end(), [&](int64_t a, int64_t b) { return op_time_us[a] > op_time_us[b]; });
  for (size_t i = 0; i < std::min(kTopOps, by_time.size()); ++i)
    sim.top_ops.push_back(timed(shard.ops[by_time[i]], op_time_us[by_time[i]]));
  auto longest = std::find_if(by_time.begin(), by_time.end(),
                              [&](int64_t id) { return shard.ops[id].kind == "collective"; });
  if (longest != by_time.end()) sim.longest_collective = timed(shard.ops[*longest], op_time_us[*longest]);
}

SimSection summarize(const ShardSection& shard, const Timeline& t) {
  SimSection sim;
  add_durations(shard, t, sim);
  find_longest_ops(shard, t, sim);
  std::vector<double> finish_us = finish_us_per_rank(t);
  for (double us : finish_us) sim.per_pp_rank_step_time_ms.push_back(us * kMsPerUs);
  auto binding = std::max_element(finish_us.begin(), finish_us.end());
  if (binding != finish_us.end()) {
    sim.binding_pp_stage = binding - finish_us.begin();
    sim.step_time_ms = *binding * kMsPerUs;
    sim.collective_exposed_ms = exposed_collective_us(shard, t, sim.binding_pp_stage) * kMsPerUs;
  }
  return sim;
}

}  // namespace

void simulate_graph(Graph& g) {
  const ShardSection& shard = need_section(g.shard, "shard", "syssim-shard");
  const CostSection& cost = need_section(g.cost, "cost", "syssim-cost");
  if (cost.ops.size() != shard.ops.size())
    throw DataError("/cost/ops: " + std::to_string(cost.ops.size()) + " ops for " + std::to_string(shard.ops.size()) +
                    " shard ops; rerun syssim-cost on this shard section");
  if (shard.num_microbatches < 1)
    throw DataError("/shard/num_microbatches: expected at least 1, got " + std::to_string(shard.num_microbatches));
  check_deps(shard);
  Timeline timeline = expand_step(shard, cost, 0);  // one pipeline stage: rank 0 only
  run(timeline);
  g.sim = summarize(shard, timeline);
}

}  // namespace syssim
