#include "report/critical_path.hpp"

#include <algorithm>
#include <boost/graph/adjacency_list.hpp>
#include <cmath>
#include <map>
#include <numeric>
#include <tuple>
#include <unordered_map>

#include "report/pictures.hpp"

namespace syssim {
namespace {

// Why an instance waited for another; the order breaks ties between equally late ones.
// `posted`: a pipeline receive posted after its rank's slot before (receives_after_previous_slot).
enum class Wait : uint8_t { dep, stream_order, posted, host };

// The timeline's instances, each with edges from what it waited for.
using WaitGraph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS, boost::no_property, Wait>;

class PathFinder {
 public:
  PathFinder(const ShardSection& shard, const std::vector<TimelineEntry>& timeline)
      : shard_(shard), timeline_(timeline), graph_(timeline.size()) {}

  CriticalPath run() {
    index_instances();
    add_stream_order();
    add_deps_and_issues();
    add_receive_posting();
    CriticalPath path;
    path.entries = walk_back(path.waiting_ms);
    attribute(path);
    return path;
  }

 private:
  // An op's instance of a micro-batch (-1: a step op's), on the device or its host.
  using Key = std::tuple<int64_t, int64_t, bool>;
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return std::hash<int64_t>()(std::get<0>(k) * 1000003 + std::get<1>(k)) * 2 + std::get<2>(k);
    }
  };

  void index_instances() {
    for (size_t i = 0; i < timeline_.size(); ++i) {
      const TimelineEntry& e = timeline_[i];
      instance_.emplace(Key{e.op, e.microbatch, e.host()}, i);
      if (!e.host()) instances_of_op_[e.op].push_back(i);
    }
  }

  // Each stream of each rank runs its instances one after another, in start order.
  void add_stream_order() {
    std::vector<size_t> order(timeline_.size());
    std::iota(order.begin(), order.end(), size_t{0});
    auto queue_then_start = [&](size_t a, size_t b) {
      const TimelineEntry &x = timeline_[a], &y = timeline_[b];
      return std::tuple(x.rank, x.stream, x.start_ms, a) < std::tuple(y.rank, y.stream, y.start_ms, b);
    };
    std::sort(order.begin(), order.end(), queue_then_start);
    for (size_t k = 1; k < order.size(); ++k) {
      const TimelineEntry &before = timeline_[order[k - 1]], &entry = timeline_[order[k]];
      if (before.rank == entry.rank && before.stream == entry.stream)
        boost::add_edge(order[k - 1], order[k], Wait::stream_order, graph_);
    }
  }

  void add_deps_and_issues() {
    for (size_t i = 0; i < timeline_.size(); ++i) {
      const TimelineEntry& e = timeline_[i];
      const ShardOp& op = shard_.ops[e.op];
      if (e.host()) {
        if (op.host_waits_for) add_wait(find({*op.host_waits_for, e.microbatch, false}), i, Wait::host);
        continue;
      }
      add_wait(find({e.op, e.microbatch, true}), i, Wait::host);
      for (int64_t dep : op.deps) {
        if (e.microbatch >= 0 || shard_.ops[dep].scope != OpScope::microbatch) {
          add_wait(find({dep, shard_.ops[dep].scope == OpScope::microbatch ? e.microbatch : -1, false}), i, Wait::dep);
          continue;
        }
        // A step op waits for every micro-batch's instance of its dep: the last to end.
        const std::vector<size_t>& instances = instances_of_op_[dep];
        auto last = std::max_element(instances.begin(), instances.end(),
                                     [&](size_t a, size_t b) { return timeline_[a].end_ms < timeline_[b].end_ms; });
        if (last != instances.end()) add_wait(*last, i, Wait::dep);
      }
    }
  }

  // Where a pipeline receive is posted only once its rank's compute stream has finished the
  // slots before its own, it waits for the last of those compute instances to end.
  void add_receive_posting() {
    if (!receives_after_previous_slot(shard_)) return;
    const std::vector<RankProgram> programs = rank_programs(shard_);
    // By rank: each micro-batch op's kind, and each (kind, micro-batch)'s place in the schedule.
    std::vector<std::unordered_map<int64_t, size_t>> kind_of_op(programs.size());
    std::vector<std::map<std::pair<size_t, int64_t>, size_t>> place(programs.size());
    for (size_t r = 0; r < programs.size(); ++r) {
      for (size_t kind = 0; kind < programs[r].kind_ops.size(); ++kind)
        for (int64_t op : programs[r].kind_ops[kind]) kind_of_op[r][op] = kind;
      for (size_t k = 0; k < programs[r].slots.size(); ++k)
        place[r][{programs[r].slots[k].kind, programs[r].slots[k].microbatch}] = k;
    }
    auto slot_of = [&](const TimelineEntry& e) -> std::optional<size_t> {
      const size_t r = static_cast<size_t>(e.rank);
      auto kind = kind_of_op[r].find(e.op);
      if (e.microbatch < 0 || kind == kind_of_op[r].end()) return std::nullopt;
      auto at = place[r].find({kind->second, e.microbatch});
      return at == place[r].end() ? std::nullopt : std::optional(at->second);
    };
    // By rank and slot: its compute instance that ends last.
    std::vector<std::vector<std::optional<size_t>>> last_compute(programs.size());
    for (size_t r = 0; r < programs.size(); ++r) last_compute[r].resize(programs[r].slots.size());
    for (size_t i = 0; i < timeline_.size(); ++i) {
      const TimelineEntry& e = timeline_[i];
      if (e.stream != Stream::compute) continue;
      if (const std::optional<size_t> slot = slot_of(e)) {
        std::optional<size_t>& last = last_compute[static_cast<size_t>(e.rank)][*slot];
        if (!last || e.end_ms > timeline_[*last].end_ms) last = i;
      }
    }
    for (size_t i = 0; i < timeline_.size(); ++i) {
      const TimelineEntry& e = timeline_[i];
      if (e.stream != Stream::pp) continue;
      const std::optional<size_t> slot = slot_of(e);
      if (!slot) continue;
      const std::vector<std::optional<size_t>>& of_rank = last_compute[static_cast<size_t>(e.rank)];
      for (size_t k = *slot; k-- > 0;)
        if (of_rank[k]) {
          add_wait(of_rank[k], i, Wait::posted);
          break;
        }
    }
  }

  std::optional<size_t> find(const Key& key) const {
    auto it = instance_.find(key);
    return it == instance_.end() ? std::nullopt : std::optional(it->second);
  }
  void add_wait(std::optional<size_t> from, size_t to, Wait why) {
    if (from && *from != to) boost::add_edge(*from, to, why, graph_);
  }

  // From the instance that ends last (the first of them in the timeline) back to one that
  // waited for nothing; each step to the latest of its waits that ended before it started.
  std::vector<size_t> walk_back(double& waiting_ms) const {
    std::vector<size_t> path;
    if (timeline_.empty()) return path;
    size_t at = 0;
    for (size_t i = 1; i < timeline_.size(); ++i)
      if (timeline_[i].end_ms > timeline_[at].end_ms) at = i;
    std::vector<char> visited(timeline_.size(), 0);
    while (true) {
      path.push_back(at);
      visited[at] = 1;
      const double start = timeline_[at].start_ms;
      const double tolerance = 1e-9 * std::max(1.0, std::abs(start));  // rounding of the times
      std::optional<size_t> before;
      Wait before_why = Wait::dep;
      for (auto [edge, end] = boost::in_edges(at, graph_); edge != end; ++edge) {
        const size_t from = boost::source(*edge, graph_);
        const Wait why = graph_[*edge];
        const double from_end = timeline_[from].end_ms;
        if (visited[from] || from_end > start + tolerance) continue;
        if (!before || from_end > timeline_[*before].end_ms ||
            (from_end == timeline_[*before].end_ms && std::tuple(why, from) < std::tuple(before_why, *before))) {
          before = from;
          before_why = why;
        }
      }
      const double waited_until = before ? std::min(timeline_[*before].end_ms, start) : 0.0;
      waiting_ms += std::max(0.0, start - waited_until);
      if (!before) break;
      at = *before;
    }
    std::reverse(path.begin(), path.end());
    return path;
  }

  void attribute(CriticalPath& path) const {
    path.pp_rank_ms.assign(static_cast<size_t>(std::max<int64_t>(shard_.parallelism.pp, 1)), 0.0);
    std::map<std::string, double> modules;
    for (size_t i : path.entries) {
      const TimelineEntry& e = timeline_[i];
      const ShardOp& op = shard_.ops[e.op];
      const double ms = e.end_ms - e.start_ms;
      if (e.host())
        path.host_ms += ms;
      else if (op.kind == OpKind::collective)
        path.communication_ms[to_string(op.group)] += ms;
      else
        path.compute_ms[to_string(op.kind)] += ms;
      path.pp_rank_ms[static_cast<size_t>(e.rank)] += ms;
      if (!e.host()) modules[op_label(op, true)] += ms;
    }
    for (const auto& [label, time_ms] : modules) path.modules_ms.push_back({label, time_ms});
    std::stable_sort(path.modules_ms.begin(), path.modules_ms.end(),
                     [](const TimedOp& a, const TimedOp& b) { return a.time_ms > b.time_ms; });
  }

  const ShardSection& shard_;
  const std::vector<TimelineEntry>& timeline_;
  WaitGraph graph_;
  std::unordered_map<Key, size_t, KeyHash> instance_;
  std::unordered_map<int64_t, std::vector<size_t>> instances_of_op_;
};

}  // namespace

double CriticalPath::length_ms() const {
  double total = host_ms + waiting_ms;
  for (const auto& [kind, ms] : compute_ms) total += ms;
  for (const auto& [group, ms] : communication_ms) total += ms;
  return total;
}

CriticalPath critical_path(const Graph& g) {
  const std::vector<TimelineEntry>& timeline = need_timeline(g);
  return PathFinder(*g.shard, timeline).run();
}

}  // namespace syssim
