// The event loop of the simulator (docs/syssim-sim.md): op instances started on their stream
// queues as their deps finish, network phases as flows over the rank's links, replayed slots
// and the jump over steady-state micro-batches; it reports each instance to an observer.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "common/units.hpp"
#include "sim/flows.hpp"
#include "sim/plan.hpp"

namespace syssim::sim_detail {

// A flow with less than this share of its bytes left is done (floating-point drift of the
// remaining-bytes bookkeeping).
constexpr double kDoneFraction = 1e-9;
// Times equal up to rounding, relative to the time they are read at (EventLoop::repeats).
constexpr double kSettled = 1e-9;
// The instances of one queue a replay looks at before it gives up (EventLoop::alone_beside_communication).
constexpr uint32_t kMostLookedAt = 64;
// The links from queue to queue of a rank that a replay follows to find what an instance waits
// for (EventLoop::waits_for_compute_from).
constexpr uint32_t kDepsFollowed = 2;
// When an instance that has not started is done (EventLoop::done_at).
constexpr double kNever = std::numeric_limits<double>::infinity();

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
//     from `replay` from now on: its local instances run at now plus the replay's times;
//   issued(run, kind, on_queue, pos, issued_us): a host issues the entries on_queue[pos...] of
//     `kind` one after the other from run.start_us, each ending at its issued_us (`run` holds
//     the rank, slot and the run's start, finish and length; no entry).

// What every replay of one kind of slot does on its rank's local queues when it starts at
// time 0 on idle queues with its deps from outside done (docs/syssim-sim.md, "Replayed
// slots"): times relative to its start, by entry. Worked out at the kind's first replay.
struct KindReplay {
  bool prepared = false;   // the fields up to `queues`
  bool simulated = false;  // the rest
  bool replayable = false;
  uint32_t first_local = kNone;  // its first entry on a local queue
  std::vector<char> ends_queue_use;   // by entry: its queue's last local entry of the kind
  std::vector<char> waited_outside;   // by entry: an instance outside the replayed part may wait for it
  std::vector<uint32_t> queues;       // the local queues it uses
  // The deps from outside it waits for (Plan::deps): on each queue, of those in the same slot
  // only the one furthest along, since a queue finishes in order; every other.
  std::vector<uint32_t> outside_deps;
  bool communicates = false;          // a local entry slows compute
  std::vector<double> queue_end_us;   // by queue of `queues`: when its last instance finishes
  double compute_end_us = 0;          // when its last instance on a slowed queue finishes
  std::vector<double> start_us, finish_us, duration_us;
  double last_finish_us = 0;          // the latest of queue_end_us
  std::vector<uint32_t> local_entries;  // the entries on local queues, in order
  // Of those, the ones whose replayed instances take events (EventLoop::replay), in order.
  std::vector<uint32_t> evented_entries;
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
  // Its slots have no host: local queues only.
  void issued(const RanInstance&, const Plan::Kind&, const std::vector<uint32_t>&, uint32_t, const std::vector<double>&) {}
  std::vector<double> start_us, finish_us, duration_us;
};

// The event loop: an instance starts when it heads its stream queue, the stream is idle and
// its deps have finished. An instance without phases then lasts its standalone time, on the
// compute stream longer while a collective runs on its rank (docs/syssim-sim.md, "Compute
// beside communication"); one with phases runs each phase's latency, then its flow
// over the rank's links, sharing them with the rank's other flows (docs/syssim-sim.md,
// "Network flows"). Events are ordered by time, then by the order they were made.
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
        queues_(plan.queues.size()), flows_(plan.queues.size()), replays_(replay_slots_ ? plan.kinds.size() : 0),
        issue_runs_(plan.queues.size()), host_runs_(plan.kinds.size()), wake_us_(plan.queues.size(), kNever) {
    prepare_slowdown();
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
      if (!live(event)) continue;  // made before a rate change: nothing else happened at it
      switch (event.kind) {
        case Kind::kFinish: finish(event.queue, event.time_us); break;
        case Kind::kLatencyEnd: start_flow(event.queue, event.time_us); break;
        case Kind::kFlowEnd: end_flow(event.queue, event.time_us); break;
        case Kind::kReplayedFinish: finish_replayed(event.queue, event.tag, event.time_us); break;
        case Kind::kReplayedCommStart: communicate(plan_.queues[event.queue].rank, +1, event.time_us); break;
        case Kind::kReplayedCommEnd: communicate(plan_.queues[event.queue].rank, -1, event.time_us); break;
        case Kind::kIssued: issued(event.queue, event.time_us); break;
        case Kind::kWake: try_start(event.queue, event.time_us); break;
      }
      if (marker_ >= 0) at_marker(event.time_us);
    }
    for (uint32_t q = 0; q < queues_.size(); ++q)
      if (!done(q)) {
        throw DataError(op_path(queues_[q].head->op) + ": never starts on stream \"" +
                        to_string(plan_.queues[q].stream) + "\" of pipeline rank " + std::to_string(plan_.queues[q].rank) +
                        ": its deps wait, directly or through stream order, for ops issued after it");
      }
  }

 private:
  // kReplayedCommStart and kReplayedCommEnd: a replayed instance that slows compute starts or
  // ends; kIssued: a host's run of issues ends; kWake: a queue's head may start, its issue done.
  enum class Kind : uint8_t {
    kFinish, kLatencyEnd, kFlowEnd, kReplayedFinish, kReplayedCommStart, kReplayedCommEnd, kIssued, kWake
  };
  struct Event {  // 32 bytes: the heap moves them on every push and pop
    double time_us;
    uint64_t sequence;
    uint32_t queue;
    // kFinish: the queue's version when it was made; kFlowEnd: the flow's; the kReplayed
    // kinds: the entry
    uint32_t tag;
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
    // The head's first `deps_done` deps are done (they stay done), as found for the head at
    // `deps_slot` and `deps_head`: a head waiting for many deps checks each done one once.
    uint32_t deps_done = 0, deps_slot = kNone;
    const Entry* deps_head = nullptr;
    bool busy = false;
    bool replaying = false;  // busy with a replay
    bool flowing = false;  // the running instance has phases
    double start_us = 0;   // of the running instance, or of the replay the queue runs
    // A slowed queue's running instance without phases (not replayed, EventLoop::timed): its
    // standalone time still to run as of `work_updated_us`, at `rate` (1: full speed);
    // `version` is bumped at every start and rate change, and older finish events are stale.
    double work_left_us = 0, work_updated_us = 0, rate = 1;
    uint32_t version = 0;
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

  // Whether `state`, of `queue`, runs an instance whose progress the slowdown sets.
  bool timed(uint32_t queue, const QueueState& state) const {
    return slowed_[queue] && state.busy && !state.flowing && !state.replaying;
  }

  // Whether an event still acts: a finish or flow end made before a rate change does not.
  bool live(const Event& event) const {
    if (event.kind == Kind::kFinish) return queues_[event.queue].version == event.tag;
    if (event.kind == Kind::kFlowEnd) return flows_[event.queue].version == event.tag;
    return true;
  }

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

  // When the instance `dep` names, for an instance of rank slot `slot` and micro-batch
  // `microbatch` (-1: the last micro-batch's), is done: -kNever once its queue has finished
  // it, its issue's end when a host's run of issues holds it (issue), else kNever.
  double done_at(const Dep& dep, uint32_t slot, int32_t microbatch) const {
    const QueueState& state = queues_[dep.queue];
    const uint64_t place = plan_.place_of(dep, slot, microbatch);
    if (state.finished > place) return -kNever;
    if (!state.busy || !plan_.queues[dep.queue].host()) return kNever;
    const std::vector<double>& issued_us = issue_runs_[dep.queue];
    return place - state.finished < issued_us.size() ? issued_us[place - state.finished] : kNever;
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

  // The host issues a slot's ops once the compute stream has reached the slot before.
  bool host_allows(uint32_t queue) const {
    const uint32_t pacer = plan_.queues[queue].paced_by;
    return pacer == kNone || done(pacer) || queues_[queue].slot <= queues_[pacer].slot + 1;
  }
  // A pipeline receive is posted once the rank's compute stream has finished the slots before
  // it. A step op on the pp stream (the gradient norm's all-reduce) is no receive.
  bool receive_posted(uint32_t queue) const {
    const uint32_t compute = plan_.queues[queue].receives_after;
    if (compute == kNone || done(compute)) return true;
    const QueueState& state = queues_[queue];
    return plan_.kinds[state.kind].once || queues_[compute].finished >= plan_.queues[compute].before[state.slot];
  }
  // A compute queue's cursor moved: its host may be free to go on; at the start of a slot (or
  // done), its pipeline receive may be posted.
  void pace(uint32_t queue, double now_us) {
    if (const uint32_t host = plan_.queues[queue].paces; host != kNone) try_start(host, now_us);
    if (const uint32_t pp = plan_.queues[queue].gates_receives; pp != kNone && (done(queue) || queues_[queue].pos == 0))
      try_start(pp, now_us);
  }

  void try_start(uint32_t queue, double now_us) {
    QueueState& state = queues_[queue];
    if (state.busy || done(queue)) return;
    if (plan_.combined && !combined_allows(queue)) return;
    if (!host_allows(queue) || !receive_posted(queue)) return;
    const Entry& entry = *state.head;
    if (state.deps_head != state.head || state.deps_slot != state.slot)
      state.deps_head = state.head, state.deps_slot = state.slot, state.deps_done = 0;
    for (; entry.deps_begin + state.deps_done < entry.deps_end; ++state.deps_done)
      if (const double done_us = done_at(plan_.deps[entry.deps_begin + state.deps_done], state.slot, state.microbatch);
          done_us > now_us) {
        if (done_us < kNever) wake(queue, done_us);
        return;
      }
    if constexpr (Observer::kMayJump)
      if (queue == marker_queue_ && state.kind == marker_kind_ && state.pos == 0) marker_ = state.microbatch;
    const int64_t rank = plan_.queues[queue].rank;
    if (replay_slots_ && !plan_.kinds[state.kind].once && state.head_index == prepared(state.kind).first_local &&
        replay(rank, state.slot, now_us))
      return;
    if (plan_.queues[queue].host()) return issue(queue, now_us);
    state.busy = true;
    state.start_us = now_us;
    observer_.started(queue, entry, now_us);
    if (slowing_ && entry.slows_compute) communicate(rank, +1, now_us);
    state.flowing = entry.phases != nullptr;
    if (!state.flowing) {
      if (!slowed_[queue]) return push(now_us + entry.time_us, queue, Kind::kFinish);
      state.work_left_us = entry.time_us;
      state.work_updated_us = now_us;
      state.rate = rate_of(rank);
      push(now_us + entry.time_us / state.rate, queue, Kind::kFinish, ++state.version);
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
    // Without phases and never slowed it lasts its cost exactly: now is start + time_us.
    const double duration_us = state.flowing || slowed_[queue] ? now_us - state.start_us : entry.time_us;
    const int64_t rank = plan_.queues[queue].rank;
    observer_.ran(RanInstance{queue, rank, state.slot, state.microbatch, &entry, state.head_index, state.start_us,
                              now_us, duration_us});
    if (slowing_ && entry.slows_compute) communicate(rank, -1, now_us);
    state.busy = false;
    ++state.finished;
    step(queue);
    try_start(queue, now_us);
    pace(queue, now_us);
    for (uint32_t d = entry.dependents_begin; d < entry.dependents_end; ++d) try_start(plan_.dependent_queues[d], now_us);
    // The twin is free now, and the other side's slots may have come in reach.
    if (plan_.combined) {
      for (uint32_t q = plan_.first_queue[rank]; q < plan_.first_queue[rank + 1]; ++q) try_start(q, now_us);
    }
  }

  // The host issues its head and the ops after it in its slot back to back, up to the next
  // that waits for the GPU (docs/syssim-sim.md, "The host"). Their issue times are known now:
  // the run takes one event, and a queue whose head waits for an issue still to come is woken
  // then (done_at), where a host's every issue would take an event.
  void issue(uint32_t queue, double now_us) {
    QueueState& state = queues_[queue];
    const Plan::Kind& kind = plan_.kinds[state.kind];
    const std::vector<uint32_t>& on_queue = *state.on_queue;
    const HostRun& run = host_run(state);
    std::vector<double>& issued_us = issue_runs_[queue];
    issued_us.clear();
    double finish_us = now_us;
    for (uint32_t pos = state.pos; pos < state.pos + run.count; ++pos) {
      finish_us += kind.entries[on_queue[pos]].time_us;  // as an instance's finish event would be, one after the other
      issued_us.push_back(finish_us);
    }
    observer_.issued(RanInstance{queue, plan_.queues[queue].rank, state.slot, state.microbatch, nullptr, 0, now_us,
                                 finish_us, finish_us - now_us},
                     kind, on_queue, state.pos, issued_us);
    state.busy = true;
    state.start_us = now_us;
    push(finish_us, queue, Kind::kIssued);
    // The queues whose ops these issue may wait for them: each is tried once, as nothing
    // finishes between the tries to change the answer.
    for (uint32_t dependent : run.dependents) try_start(dependent, now_us);
  }

  // A host's run of issues from its cursor's place: its ops up to the next that waits for the
  // GPU, and the queues of their dependents, each once, in the order of the ops naming them.
  // The same for every slot of a kind: worked out at the kind's first run from that place.
  struct HostRun {
    uint32_t count = 0;  // 0: not worked out yet
    std::vector<uint32_t> dependents;
  };
  const HostRun& host_run(const QueueState& state) {
    std::vector<HostRun>& runs = host_runs_[state.kind];
    if (runs.empty()) runs.resize(state.on_queue->size());
    HostRun& run = runs[state.pos];
    if (run.count > 0) return run;
    const Plan::Kind& kind = plan_.kinds[state.kind];
    const std::vector<uint32_t>& on_queue = *state.on_queue;
    for (uint32_t pos = state.pos; pos < on_queue.size(); ++pos) {
      const Entry& entry = kind.entries[on_queue[pos]];
      if (pos > state.pos && entry.deps_begin < entry.deps_end) break;
      ++run.count;
      for (uint32_t d = entry.dependents_begin; d < entry.dependents_end; ++d)
        if (std::find(run.dependents.begin(), run.dependents.end(), plan_.dependent_queues[d]) == run.dependents.end())
          run.dependents.push_back(plan_.dependent_queues[d]);
    }
    return run;
  }

  // A host's run of issues ends: it goes on to its next.
  void issued(uint32_t queue, double now_us) {
    QueueState& state = queues_[queue];
    const auto count = static_cast<uint32_t>(issue_runs_[queue].size());
    state.busy = false;
    state.finished += count;
    state.pos += count - 1;
    step(queue);
    try_start(queue, now_us);
  }

  // `queue` is tried again at `at_us`, once however often its head finds the same issue to come.
  void wake(uint32_t queue, double at_us) {
    if (wake_us_[queue] == at_us) return;
    wake_us_[queue] = at_us;
    push(at_us, queue, Kind::kWake);
  }

  // The kind's entries that a replay covers and how they wait, worked out once.
  KindReplay& prepared(uint32_t k) {
    KindReplay& r = replays_[k];
    if (!r.prepared) prepare(k, r);
    return r;
  }
  void prepare(uint32_t k, KindReplay& r) {
    r.prepared = true;
    const Plan::Kind& kind = plan_.kinds[k];
    const size_t entries = kind.entries.size();
    r.ends_queue_use.assign(entries, 0);
    r.waited_outside.assign(entries, 0);
    for (uint32_t e = 0; e < entries; ++e) {
      const Entry& entry = kind.entries[e];
      if (!plan_.local_queue[entry.queue]) {
        // A non-local instance of the slot waiting for a local one waits from outside the replay.
        for (uint32_t d = entry.deps_begin; d < entry.deps_end; ++d) {
          const Dep& dep = plan_.deps[d];
          if (dep.slot.is_same_slot() && plan_.local_queue[dep.queue])
            r.waited_outside[plan_.entry_in(k, dep.queue, dep.at)] = 1;
        }
        continue;
      }
      r.local_entries.push_back(e);
      r.communicates |= entry.slows_compute;
      if (r.first_local == kNone) r.first_local = e;
      r.waited_outside[e] |= plan_.waited_across_slots[entry.op];
      if (std::find(r.queues.begin(), r.queues.end(), entry.queue) == r.queues.end()) r.queues.push_back(entry.queue);
      for (uint32_t d = entry.deps_begin; d < entry.deps_end; ++d) {
        const Dep& dep = plan_.deps[d];
        if (dep.slot.is_same_slot() && plan_.local_queue[dep.queue]) continue;  // inside the replay
        auto same_queue = std::find_if(r.outside_deps.begin(), r.outside_deps.end(), [&](uint32_t o) {
          return dep.slot.is_same_slot() && plan_.deps[o].slot.is_same_slot() && plan_.deps[o].queue == dep.queue;
        });
        if (same_queue == r.outside_deps.end())
          r.outside_deps.push_back(d);
        else if (plan_.deps[*same_queue].at < dep.at)
          *same_queue = d;
      }
    }
    for (uint32_t queue : r.queues) {
      r.ends_queue_use[kind.on_queue[queue - plan_.first_queue[plan_.queues[queue].rank]].back()] = 1;
    }
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
    for (uint32_t d : r.outside_deps)
      if (done_at(plan_.deps[d], s, slot.microbatch) > now_us) return false;
    for (uint32_t queue : r.queues) {
      const QueueState& state = queues_[queue];
      if (state.busy || state.slot != s || state.pos != 0) return false;
    }
    if (slowing_ && !alone_beside_communication(rank, s, r)) return false;
    observer_.replayed(rank, s, slot.kind, r, now_us);
    replayed_ += static_cast<int64_t>(r.local_entries.size());
    for (uint32_t e : r.evented_entries) {
      const Entry& entry = kind.entries[e];
      if (r.ends_queue_use[e] || r.waited_outside[e]) push(now_us + r.finish_us[e], entry.queue, Kind::kReplayedFinish, e);
      if (slows_after_compute(r, entry, e)) {
        push(now_us + r.start_us[e], entry.queue, Kind::kReplayedCommStart, e);
        push(now_us + r.finish_us[e], entry.queue, Kind::kReplayedCommEnd, e);
      }
    }
    for (uint32_t queue : r.queues) {
      QueueState& state = queues_[queue];
      state.busy = state.replaying = true;
      state.start_us = now_us;
    }
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

  // Whether replayed entry `e` is a collective still running when the replay's compute is
  // done: it slows the compute after it.
  bool slows_after_compute(const KindReplay& r, const Entry& entry, uint32_t e) const {
    return slowing_ && entry.slows_compute && r.finish_us[e] > r.compute_end_us;
  }

  // Under the slowdown of compute beside communication, a replay runs as its slot did alone
  // only when nothing outside it changes the speed of its compute: no instance outside it that
  // slows compute can start before the replay's compute ends. On each queue of the rank, the
  // first such instance after the replay's (or, off the replay, from the one running) must
  // wait for a compute instance after the replay's, or an instance before it on the queue
  // must. A replay without compute must have nothing that slows compute, or the rank's
  // compute must be done.
  bool alone_beside_communication(int64_t rank, uint32_t s, const KindReplay& r) {
    const uint32_t begin = plan_.first_queue[rank], end = plan_.first_queue[rank + 1];
    const uint32_t compute = compute_queue_[rank];
    if (compute == kNone) return true;
    const auto replay_index = [&](uint32_t q) {
      return static_cast<size_t>(std::find(r.queues.begin(), r.queues.end(), q) - r.queues.begin());
    };
    if (replay_index(compute) == r.queues.size()) return done(compute) || !r.communicates;
    const uint64_t after_replay = plan_.queues[compute].before[s + 1];
    const std::vector<Plan::Slot>& slots = plan_.slots[rank];
    auto waits_after_replay = [&](const QueuePlace& at) {
      return waits_for_compute_from(rank, at, after_replay, kDepsFollowed);
    };
    for (uint32_t q = begin; q < end; ++q) {
      if (!communicates_[q] || done(q)) continue;
      QueuePlace from{q, s + 1, 0};  // the first instance to look at
      if (const size_t i = replay_index(q); i < r.queues.size()) {
        if (r.queue_end_us[i] >= r.compute_end_us) continue;  // busy with the replay until its compute ends
      } else {
        from.slot = queues_[q].slot, from.pos = queues_[q].pos;
        if (queues_[q].busy && (queues_[q].replaying || queues_[q].head->slows_compute)) return false;
        from.pos += queues_[q].busy;
      }
      const QueuePlace slowing = first_slowing(rank, from);
      if (slowing.slot == slots.size() || waits_after_replay(slowing)) continue;
      bool waits = false;
      for (uint32_t looked = 0; !waits && next_place(rank, from) && from < slowing; ++from.pos)
        if (++looked > kMostLookedAt) return false;
        else waits = waits_after_replay(from);
      if (!waits) return false;
    }
    return true;
  }

  // An instance of a queue in its rank's issue order: the slot and the place among the slot's
  // entries on the queue.
  struct QueuePlace {
    uint32_t queue = 0, slot = 0, pos = 0;
    bool operator<(const QueuePlace& o) const { return std::tie(slot, pos) < std::tie(o.slot, o.pos); }
  };
  // Whether the instance at `at` waits for an instance at place `from` or later of its rank's
  // compute queue: directly, or through an instance of another of the rank's queues that it
  // waits for and that waits so, up to `depth` such links (the embedding group's all-reduce
  // waits for the data-parallel one, which waits for the last backward's weight gradients).
  bool waits_for_compute_from(int64_t rank, const QueuePlace& at, uint64_t from, uint32_t depth) const {
    const uint32_t compute = compute_queue_[rank];
    const int32_t microbatch = plan_.slots[rank][at.slot].microbatch;
    const Entry& entry = entry_at(rank, at);
    for (uint32_t d = entry.deps_begin; d < entry.deps_end; ++d) {
      const Dep& dep = plan_.deps[d];
      if (dep.queue == compute) {
        if (plan_.place_of(dep, at.slot, microbatch) >= from) return true;
      } else if (depth > 0 && plan_.queues[dep.queue].rank == rank) {
        const Plan::InSlot in = plan_.slot_of(dep, at.slot, microbatch);
        if (in.slot != kNone && waits_for_compute_from(rank, QueuePlace{dep.queue, in.slot, in.queue_pos}, from, depth - 1))
          return true;
      }
    }
    return false;
  }
  const Entry& entry_at(int64_t rank, const QueuePlace& at) const {
    const Plan::Kind& kind = plan_.kinds[plan_.slots[rank][at.slot].kind];
    return kind.entries[kind.on_queue[at.queue - plan_.first_queue[rank]][at.pos]];
  }
  // Moves `at` to the first instance at or after it; false when there is none.
  bool next_place(int64_t rank, QueuePlace& at) const {
    const std::vector<Plan::Slot>& slots = plan_.slots[rank];
    for (; at.slot < slots.size(); ++at.slot, at.pos = 0)
      if (at.pos < plan_.kinds[slots[at.slot].kind].on_queue[at.queue - plan_.first_queue[rank]].size()) return true;
    return false;
  }
  // The first instance at or after `from` that slows compute (slot: the rank's slot count
  // when none). Replays ask in issue order: the last answer is kept, and holds for every
  // place from the one it was asked for up to it.
  QueuePlace first_slowing(int64_t rank, QueuePlace from) {
    auto& [asked, answer] = slowing_asked_[from.queue];
    if (!(from < asked) && !(answer < from)) return answer;
    asked = from;
    const size_t slots = plan_.slots[rank].size();
    for (; next_place(rank, from); ++from.pos) {
      const std::vector<uint32_t>& first = first_slowing_pos_[plan_.slots[rank][from.slot].kind];
      const uint32_t in_kind = first[from.queue - plan_.first_queue[rank]];
      if (in_kind == kNone) {
        from.pos = kNone - 1;  // on to the next slot
        continue;
      }
      from.pos = std::max(from.pos, in_kind);
      if (entry_at(rank, from).slows_compute) return answer = from;
    }
    return answer = QueuePlace{from.queue, static_cast<uint32_t>(slots), 0};
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
      state.busy = state.replaying = false;
      state.pos = static_cast<uint32_t>(state.on_queue->size());  // the cursor is still at the slot
      settle(queue);
      try_start(queue, now_us);
      pace(queue, now_us);
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
    for (uint32_t e : r.local_entries) {
      const Entry& entry = kind.entries[e];
      Entry copy = entry;
      copy.queue = alone_queue(entry.queue);
      copy.deps_begin = static_cast<uint32_t>(alone.deps.size());
      for (uint32_t d = entry.deps_begin; d < entry.deps_end; ++d) {
        const Dep& dep = plan_.deps[d];
        if (dep.slot.is_same_slot() && plan_.local_queue[dep.queue])
          alone.deps.push_back(Dep{alone_queue(dep.queue), dep.at, DepSlot::same_slot()});
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
    r.queue_end_us.assign(r.queues.size(), 0);
    for (size_t a = 0; a < entry_of.size(); ++a) {
      const uint32_t q = part.entries[a].queue;
      r.queue_end_us[q] = std::max(r.queue_end_us[q], times.finish_us[a]);
      if (slowed_[r.queues[q]]) r.compute_end_us = std::max(r.compute_end_us, times.finish_us[a]);
    }
    if (!loop.networks().empty()) r.links = loop.networks().front().links;
    if (!r.queue_end_us.empty()) r.last_finish_us = *std::max_element(r.queue_end_us.begin(), r.queue_end_us.end());
    for (uint32_t e : r.local_entries)
      if (r.ends_queue_use[e] || r.waited_outside[e] || slows_after_compute(r, kind.entries[e], e))
        r.evented_entries.push_back(e);
    r.replayable = !entry_of.empty();
  }

  // Compute beside communication (docs/syssim-sim.md): the rank's compute queues slow down
  // by the hardware's factor while an instance of the rank that slows compute runs.
  void prepare_slowdown() {
    const double slowdown = plan_.cost->hardware.compute_slowdown_under_communication;
    slowing_ = slowdown > 0;
    slowed_rate_ = 1 / (1 + slowdown);
    slowed_.assign(plan_.queues.size(), 0);
    communicates_.assign(plan_.queues.size(), 0);
    communicating_.assign(plan_.slots.size(), 0);
    compute_queue_.assign(plan_.slots.size(), kNone);
    if (!slowing_) return;
    for (uint32_t q = 0; q < plan_.queues.size(); ++q)
      if (plan_.queues[q].stream == Stream::compute)
        slowed_[q] = 1, compute_queue_[plan_.queues[q].rank] = q;
    first_slowing_pos_.resize(plan_.kinds.size());
    for (size_t k = 0; k < plan_.kinds.size(); ++k) {
      const Plan::Kind& kind = plan_.kinds[k];
      first_slowing_pos_[k].assign(kind.on_queue.size(), kNone);
      for (size_t q = 0; q < kind.on_queue.size(); ++q)
        for (uint32_t pos = 0; pos < kind.on_queue[q].size(); ++pos)
          if (const Entry& entry = kind.entries[kind.on_queue[q][pos]]; entry.slows_compute) {
            communicates_[entry.queue] = 1;
            if (first_slowing_pos_[k][q] == kNone) first_slowing_pos_[k][q] = pos;
          }
    }
    for (uint32_t q = 0; q < plan_.queues.size(); ++q)  // nothing asked yet: past every place
      slowing_asked_.push_back({QueuePlace{q, kNone, kNone}, QueuePlace{q, kNone, kNone}});
  }

  double rate_of(int64_t rank) const { return communicating_[rank] > 0 ? slowed_rate_ : 1.0; }

  // `change` (+1, -1) instances that slow compute run on the rank from now: where that starts
  // or ends its communication, its running compute instances go on at the other rate.
  void communicate(int64_t rank, int32_t change, double now_us) {
    const bool was = communicating_[rank] > 0;
    communicating_[rank] += change;
    if (was == (communicating_[rank] > 0)) return;
    const double rate = rate_of(rank);
    for (uint32_t q = plan_.first_queue[rank]; q < plan_.first_queue[rank + 1]; ++q) {
      QueueState& state = queues_[q];
      if (!timed(q, state)) continue;
      state.work_left_us = std::max(0.0, state.work_left_us - (now_us - state.work_updated_us) * state.rate);
      state.work_updated_us = now_us;
      state.rate = rate;
      push(now_us + state.work_left_us / rate, q, Kind::kFinish, ++state.version);
    }
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
      if (live(event)) snapshot.events.push_back(event);
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
      if (x.pos != y.pos || x.busy != y.busy || x.replaying != y.replaying || x.flowing != y.flowing ||
          (timed(q, x) && x.rate != y.rate))
        return false;
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
      const bool tagged_by_entry = x.kind != Kind::kFinish && x.kind != Kind::kFlowEnd;
      if (x.kind != y.kind || x.queue != y.queue || (tagged_by_entry && x.tag != y.tag) ||
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
      if (state.busy) state.start_us += shift_us, state.work_updated_us += shift_us;
      if (state.busy && plan_.queues[q].host())
        for (double& issued_us : issue_runs_[q]) issued_us += shift_us;
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
  // Compute beside communication: whether the hardware slows it, its rate then, by queue
  // whether it is a compute queue and whether it runs instances that slow compute, by rank
  // those instances running now.
  bool slowing_ = false;
  double slowed_rate_ = 1;
  std::vector<char> slowed_, communicates_;
  std::vector<int32_t> communicating_;
  std::vector<uint32_t> compute_queue_;  // by rank: its slowed queue (the last, where twins); kNone: none
  // By kind and queue of its rank: the place of the first entry that slows compute (kNone:
  // none); by queue, the last first_slowing asked and its answer.
  std::vector<std::vector<uint32_t>> first_slowing_pos_;
  std::vector<std::pair<QueuePlace, QueuePlace>> slowing_asked_;
  std::vector<Event> events_;  // a heap (Later)
  uint64_t sequence_ = 0;
  // By host queue: when each issue of its current run ends (issue); by queue: the time of its
  // last wake (a wake shifted by a jump may come twice, which only tries the queue again).
  std::vector<std::vector<double>> issue_runs_;
  std::vector<std::vector<HostRun>> host_runs_;  // by kind, by place on its host queue
  std::vector<double> wake_us_;

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

}  // namespace syssim::sim_detail
