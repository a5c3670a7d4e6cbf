// What a simulated step adds up to as its instances run (docs/syssim-sim.md, "Totals as the
// step runs"): the event loop's observer, and the sweep of each rank's streams over time that
// gives exposed communication and idle time.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "common/units.hpp"
#include "sim/event_loop.hpp"

namespace syssim::sim_detail {

inline TimedOp timed(const ShardOp& op, double time_us) {
  return TimedOp{std::to_string(op.id) + "_" + op.name, time_us * kMsPerUs};
}

// What a simulated step adds up to, before the report's ratios and rankings.
struct StepTotals {
  std::vector<double> finish_us;  // by pipeline rank: its last instance's finish
  double flops = 0;               // all ranks' instances
  int64_t binding = 0;            // binding_rank(finish_us, idle_by_rank_us, pipeline_end_us)
  // The binding rank's, by op: summed durations, summed standalone cost times, whether it ran.
  std::vector<double> duration_us, standalone_us;
  std::vector<char> ran;
  std::vector<LinkState> links;            // the binding rank's; empty without links
  std::map<std::string, double> exposed_us;  // collectives while compute idles, by group; "" for all
  double idle_us = 0;          // none of the binding rank's streams runs, until pipeline_end_us
  double pipeline_end_us = 0;  // the last micro-batch op's finish, any rank
  std::vector<double> host_busy_us;  // by pipeline rank: its host's time issuing ops
};

// The rank that sets the pipeline's pace: the least idle until the last micro-batch op ends
// (`span_us`), so the busiest, whose work the others wait for; then the one ending last, then
// the first. Idle times a billionth of the span apart are equal: alike stages differ by
// rounding. With one rank, or no micro-batch op, the rank ending last.
inline int64_t binding_rank(const std::vector<double>& finish_us, const std::vector<double>& idle_us, double span_us) {
  const double least_idle_us = *std::min_element(idle_us.begin(), idle_us.end());
  int64_t binding = -1;
  for (size_t r = 0; r < finish_us.size(); ++r)
    if (idle_us[r] <= least_idle_us + 1e-9 * span_us && (binding < 0 || finish_us[r] > finish_us[binding]))
      binding = static_cast<int64_t>(r);
  return binding;
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
        // This slot's boundaries up to the next of another (or a held finish, first at a tie),
        // which stays next as these are taken in.
        double next_us = until_us;
        for (const Boundary& h : held_)
          if (h.delta != 0) next_us = std::min(next_us, h.time_us);
        for (const Ahead& a : ahead_)
          if (&a != ahead) next_us = std::min(next_us, a.time_us());
        do {
          Boundary boundary = (*ahead->boundaries)[ahead->next];
          boundary.time_us = ahead->time_us();
          apply(boundary);
        } while (++ahead->next < ahead->boundaries->size() && ahead->time_us() < next_us);
        if (ahead->next == ahead->boundaries->size()) ahead_.erase(ahead_.begin() + (ahead - ahead_.data()));
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
        group_of_(shard.ops.size(), -1), replay_boundaries_(plan.kinds.size()), replays_(plan.kinds.size()) {
    for (size_t rank = 0; rank < plan.slots.size(); ++rank)
      coverage_.emplace_back(plan.first_queue[rank + 1] - plan.first_queue[rank]);
    for (uint32_t q = 0; q < plan.queues.size(); ++q) {
      const int64_t rank = plan.queues[q].rank;
      queues_[q] = QueueInfo{&coverage_[rank], q - plan.first_queue[rank], plan.queues[q].stream == Stream::compute};
    }
    for (const ShardOp& op : shard.ops)  // check_ops refused stages the schedule does not have
      if (op.kind == OpKind::collective) group_of_[op.id] = coverage_[op.stage].group_index(to_string(op.group));
    totals_.finish_us.assign(plan.slots.size(), 0.0);
    totals_.host_busy_us.assign(plan.slots.size(), 0.0);
    op_sums_.resize(shard.ops.size());
    ran_.assign(shard.ops.size(), 0);
  }

  void replayed(int64_t rank, uint32_t slot, uint32_t kind, const KindReplay& replay, double now_us) {
    const Plan::Kind& slot_kind = plan_.kinds[kind];
    const int32_t microbatch = plan_.slots[rank][slot].microbatch;
    if (keep_timeline_)
      for (uint32_t e : replay.local_entries) {
        const Entry& entry = slot_kind.entries[e];
        record(rank, entry.queue, slot, microbatch, entry, e, now_us + replay.start_us[e], now_us + replay.finish_us[e]);
      }
    // Every replay of a kind adds the same to the sums: counted here, added all at once where
    // the sums are read (add_replays), instead of instance by instance.
    Replays& replays = replays_[kind];
    if (replays.count++ == 0) replays.replay = &replay, kinds_replayed_.push_back(kind);
    // The latest of the instances' finishes, now + each: now + the latest, as rounding keeps order.
    if (!replay.local_entries.empty()) reached(rank, microbatch, now_us + replay.last_finish_us);
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

  // A host's run of issues: its busy time, and each issue in the timeline.
  void issued(const RanInstance& run, const Plan::Kind& kind, const std::vector<uint32_t>& on_queue, uint32_t pos,
              const std::vector<double>& issued_us) {
    totals_.host_busy_us[run.rank] += run.duration_us;
    if (!keep_timeline_) return;
    double start_us = run.start_us;
    for (size_t i = 0; i < issued_us.size(); ++i) {
      const uint32_t e = on_queue[pos + i];
      record(run.rank, run.queue, run.slot, run.microbatch, kind.entries[e], e, start_us, issued_us[i]);
      start_us = issued_us[i];
    }
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

  // Op instances run, the replayed ones included (read after totals()).
  int64_t instances() const { return instances_; }

  // What the recorder holds at a time, for EventLoop's steady-state jumps.
  struct Snapshot {
    std::vector<double> finish_us, host_busy_us;
    double flops = 0, pipeline_end_us = 0;
    std::vector<OpSums> op_sums;
    std::vector<Coverage::State> coverage;
  };
  void snapshot(Snapshot& snapshot) {
    add_replays();
    snapshot.finish_us = totals_.finish_us;
    snapshot.host_busy_us = totals_.host_busy_us;
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
    add_replays();
    const auto times = static_cast<double>(periods);
    for (double& finish_us : totals_.finish_us) finish_us += shift_us;
    totals_.pipeline_end_us += shift_us;
    totals_.flops += times * (b.flops - a.flops);
    for (size_t r = 0; r < totals_.host_busy_us.size(); ++r)
      totals_.host_busy_us[r] += times * (b.host_busy_us[r] - a.host_busy_us[r]);
    for (size_t op = 0; op < op_sums_.size(); ++op) {
      op_sums_[op].duration_us += times * (b.op_sums[op].duration_us - a.op_sums[op].duration_us);
      op_sums_[op].standalone_us += times * (b.op_sums[op].standalone_us - a.op_sums[op].standalone_us);
    }
    for (size_t r = 0; r < coverage_.size(); ++r) coverage_[r].jump(a.coverage[r], b.coverage[r], periods, shift_us);
  }

  // The totals, once the step is over: by op and links, those of the binding rank.
  StepTotals totals(const std::vector<RankNetwork>& networks) {
    add_replays();
    StepTotals totals = totals_;
    std::vector<double> idle_by_rank_us(coverage_.size(), 0.0);
    for (size_t r = 0; r < coverage_.size(); ++r) {
      coverage_[r].close();
      if (totals.pipeline_end_us > 0) idle_by_rank_us[r] = coverage_[r].idle_us(totals.pipeline_end_us);
    }
    totals.binding = binding_rank(totals.finish_us, idle_by_rank_us, totals.pipeline_end_us);
    totals.idle_us = idle_by_rank_us[totals.binding];
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
    const Coverage& coverage = coverage_[totals.binding];
    totals.exposed_us[""] = coverage.exposed_us();
    for (const Coverage::Group& group : coverage.groups()) totals.exposed_us[group.name] = group.exposed_us;
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
  // An instance's share of the totals, and its timeline entry (hosts' issues: issued()).
  void add(int64_t rank, uint32_t queue, uint32_t slot, int32_t microbatch, const Entry& entry, uint32_t entry_index,
           double start_us, double finish_us, double duration_us) {
    if (keep_timeline_) record(rank, queue, slot, microbatch, entry, entry_index, start_us, finish_us);
    reached(rank, microbatch, finish_us);
    count(entry, duration_us);
  }
  void record(int64_t rank, uint32_t queue, uint32_t slot, int32_t microbatch, const Entry& entry, uint32_t entry_index,
              double start_us, double finish_us) {
    timeline_.push_back({{rank, slot, entry_index}, TimelineEntry{rank, plan_.queues[queue].stream, entry.op, microbatch,
                                                                  start_us * kMsPerUs, finish_us * kMsPerUs}});
  }
  // An instance of the rank's (of micro-batch `microbatch`; -1: a step op) finishes at finish_us.
  void reached(int64_t rank, int32_t microbatch, double finish_us) {
    double& finish = totals_.finish_us[rank];
    finish = std::max(finish, finish_us);
    if (microbatch >= 0) totals_.pipeline_end_us = std::max(totals_.pipeline_end_us, finish_us);
  }
  // `times` instances of `entry` (not the host's) ran for duration_us each: their share of the sums.
  void count(const Entry& entry, double duration_us, int64_t times = 1) {
    const auto n = static_cast<double>(times);
    totals_.flops += n * entry.flops;
    OpSums& sums = op_sums_[entry.op];
    sums.duration_us += n * duration_us;
    sums.standalone_us += n * entry.time_us;
    ran_[entry.op] = 1;
    instances_ += times;
  }
  // The replays counted since the sums were last read, added to them kind by kind.
  void add_replays() {
    for (uint32_t kind : kinds_replayed_) {
      Replays& replays = replays_[kind];
      for (uint32_t e : replays.replay->local_entries)
        count(plan_.kinds[kind].entries[e], replays.replay->duration_us[e], replays.count);
      replays.count = 0;
    }
    kinds_replayed_.clear();
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
  struct Replays {  // of one kind, not yet in the sums
    int64_t count = 0;
    const KindReplay* replay = nullptr;
  };
  std::vector<Replays> replays_;           // by kind
  std::vector<uint32_t> kinds_replayed_;  // the kinds with a count
  StepTotals totals_;  // but for the sums by op, kept for all ranks until the binding one is known
  std::vector<OpSums> op_sums_;  // by op
  std::vector<char> ran_;        // by op: an instance ran
  int64_t instances_ = 0;
  std::vector<std::pair<std::tuple<int64_t, uint32_t, uint32_t>, TimelineEntry>> timeline_;  // by (rank, slot, entry)
};

}  // namespace syssim::sim_detail
