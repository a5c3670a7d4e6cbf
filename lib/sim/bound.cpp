// A lower bound on the simulated step (docs/syssim-sim.md, "A lower bound on the step"):
// the simulation relaxed so that it can only end earlier, solved slot by slot instead of op
// instance by op instance.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "common/error.hpp"
#include "common/units.hpp"
#include "sim/plan.hpp"
#include "sim/sim.hpp"

namespace syssim {
namespace {

constexpr double kUnreached = -std::numeric_limits<double>::infinity();

// The least time an op instance can last: its cost time, or, with phases, each phase's
// latency plus its bytes at the rate its flow gets alone (its cap, or its most loaded link's
// share); other flows on its links only slow it.
double shortest_duration_us(const OpCost& cost, const std::vector<Link>& links) {
  if (cost.phases.empty()) return cost.time_us;
  double us = 0;
  for (const Phase& phase : cost.phases) {
    us += phase.latency_us;
    if (phase.bytes <= 0) continue;
    double rate = phase.bandwidth_GBps * kBytesPerUsPerGBps;
    for (size_t k = 0; k < phase.links.size(); ++k)
      if (phase.loads[k] > 0)
        rate = std::min(rate, links[phase.links[k]].bandwidth_GBps * kBytesPerUsPerGBps / phase.loads[k]);
    us += phase.bytes / rate;
  }
  return us;
}

// The longest any link of a pipeline rank takes to carry all the bytes its flows put on it
// over the step (every instance's phases, each byte times its load on the link) at its full
// capacity: the simulator shares a link among its flows without ever giving them more than
// its capacity (sim/flows.hpp), so no step is shorter. Rates fill a link to its capacity up
// to a relative 1e-12 (fill_rates): the time is taken 1e-9 short of it.
double busiest_link_us(const ShardSection& shard, const CostSection& cost) {
  const auto ranks = static_cast<size_t>(shard.parallelism.pp), links = cost.links.size();
  std::vector<double> bytes(ranks * links, 0.0);  // by rank, then link
  for (const ShardOp& op : shard.ops) {
    if (op.stage < 0 || static_cast<size_t>(op.stage) >= ranks) continue;
    const double instances = op.scope == OpScope::microbatch ? static_cast<double>(shard.num_microbatches) : 1.0;
    for (const Phase& phase : cost.ops[op.id].phases)
      for (size_t k = 0; k < phase.links.size(); ++k)
        bytes[static_cast<size_t>(op.stage) * links + static_cast<size_t>(phase.links[k])] +=
            instances * phase.bytes * phase.loads[k];
  }
  double us = 0;
  for (size_t i = 0; i < bytes.size(); ++i)
    us = std::max(us, bytes[i] / (cost.links[i % links].bandwidth_GBps * kBytesPerUsPerGBps));
  constexpr double kRateSlack = 1e-9;
  return us / (1 + kRateSlack);
}

// Every op's shortest duration, by op id.
std::vector<double> shortest_durations_us(const ShardSection& shard, const CostSection& cost) {
  std::vector<double> duration_us(shard.ops.size());
  for (size_t i = 0; i < shard.ops.size(); ++i) duration_us[i] = shortest_duration_us(cost.ops[i], cost.links);
  return duration_us;
}

// Longest paths to the finish of each op of a list a rank issues in order (a slot kind, or
// its step_start or step ops), from three sources: `start`, when the rank's compute stream
// is free of the ops issued before the list (its compute ops run in order after it, and
// with `receives_after_start` its pipeline receives start after it); the
// finish of each microbatch op of another rank that an op depends on (an input; for the
// step ops, of any rank); and time 0, for its other deps (relaxed to have finished at any
// time). Other streams' order is dropped: a relaxation, so the paths are never longer than
// the simulated times.
struct ListPaths {
  std::vector<double> from_start, from_zero;
  std::vector<int64_t> inputs;                  // the microbatch ops outside the list it waits for
  std::vector<std::vector<double>> from_input;  // by input
  int64_t last_compute = -1;                    // position; -1: none

  // The latest finish of the op at `position` given the sources' times.
  double finish(size_t position, double start, const std::vector<double>& input_finish) const {
    double latest = std::max(start + from_start[position], from_zero[position]);
    for (size_t j = 0; j < inputs.size(); ++j) latest = std::max(latest, input_finish[j] + from_input[j][position]);
    return latest;
  }
};

ListPaths list_paths(const ShardSection& shard, const std::vector<int64_t>& ops, int64_t rank,
                     const std::vector<double>& duration_us, bool own_rank_inputs = false,
                     bool receives_after_start = false) {
  const size_t n = ops.size();
  std::vector<std::pair<int64_t, size_t>> position_of(n);  // (op id, position), by id
  for (size_t p = 0; p < n; ++p) position_of[p] = {ops[p], p};
  std::sort(position_of.begin(), position_of.end());
  // Edges inside the list (deps, and the compute stream's order) and the sources of each op,
  // op after op: the preds of position p are preds[pred_begin[p], pred_begin[p + 1]), its
  // inputs likewise.
  std::vector<size_t> pred_begin(n + 1), preds, input_begin(n + 1), inputs_of;
  std::vector<char> after_start(n, 0), after_zero(n, 0);
  ListPaths paths;
  int64_t previous_compute = -1;
  for (size_t p = 0; p < n; ++p) {
    pred_begin[p] = preds.size();
    input_begin[p] = inputs_of.size();
    const ShardOp& op = shard.ops[ops[p]];
    if (op.stream == Stream::compute) {
      if (previous_compute < 0) after_start[p] = 1;
      else preds.push_back(static_cast<size_t>(previous_compute));
      previous_compute = static_cast<int64_t>(p);
    } else if (receives_after_start && op.stream == Stream::pp) {
      after_start[p] = 1;
    }
    if (op.deps.empty()) after_zero[p] = 1;
    for (int64_t dep : op.deps) {
      auto inside = std::lower_bound(position_of.begin(), position_of.end(), std::pair<int64_t, size_t>{dep, 0});
      if (inside != position_of.end() && inside->first == dep) {
        preds.push_back(inside->second);
      } else if ((own_rank_inputs || shard.ops[dep].stage != rank) && shard.ops[dep].scope == OpScope::microbatch) {
        auto known = std::find(paths.inputs.begin(), paths.inputs.end(), dep);
        inputs_of.push_back(static_cast<size_t>(known - paths.inputs.begin()));
        if (known == paths.inputs.end()) paths.inputs.push_back(dep);
      } else {
        after_zero[p] = 1;
      }
    }
  }
  pred_begin[n] = preds.size();
  input_begin[n] = inputs_of.size();
  paths.last_compute = previous_compute;
  // Ops in an order that puts every pred first (Kahn's algorithm over the list's edges).
  std::vector<size_t> successor_begin(n + 1, 0), successors(preds.size()), waiting(n, 0), order;
  for (size_t q : preds) ++successor_begin[q + 1];
  for (size_t p = 0; p < n; ++p) successor_begin[p + 1] += successor_begin[p];
  {
    std::vector<size_t> filled(successor_begin.begin(), successor_begin.end() - 1);
    for (size_t p = 0; p < n; ++p)
      for (size_t e = pred_begin[p]; e < pred_begin[p + 1]; ++e) successors[filled[preds[e]]++] = p, ++waiting[p];
  }
  order.reserve(n);
  for (size_t p = 0; p < n; ++p)
    if (waiting[p] == 0) order.push_back(p);
  for (size_t k = 0; k < order.size(); ++k)
    for (size_t e = successor_begin[order[k]]; e < successor_begin[order[k] + 1]; ++e)
      if (--waiting[successors[e]] == 0) order.push_back(successors[e]);
  if (order.size() != n)
    throw DataError("/shard/ops/" + std::to_string(ops.front()) + ": the ops of one slot of pipeline rank " +
                    std::to_string(rank) + " wait for each other through their deps and the compute stream's order");
  auto longest = [&](auto is_source) {
    std::vector<double> finish(n, kUnreached);
    for (size_t p : order) {
      double start = is_source(p) ? 0.0 : kUnreached;
      for (size_t e = pred_begin[p]; e < pred_begin[p + 1]; ++e) start = std::max(start, finish[preds[e]]);
      if (start != kUnreached) finish[p] = start + duration_us[ops[p]];
    }
    return finish;
  };
  paths.from_start = longest([&](size_t p) { return after_start[p] != 0; });
  paths.from_zero = longest([&](size_t p) { return after_zero[p] != 0; });
  for (size_t j = 0; j < paths.inputs.size(); ++j)
    paths.from_input.push_back(longest([&](size_t p) {
      const size_t *first = inputs_of.data() + input_begin[p], *last = inputs_of.data() + input_begin[p + 1];
      return std::find(first, last, j) != last;
    }));
  return paths;
}

// The compute stream's free time after a list, from its free time before: its last compute
// op's finish, or unchanged without compute ops.
double compute_free_after(const ListPaths& paths, double start, const std::vector<double>& input_finish) {
  return paths.last_compute < 0 ? start : paths.finish(static_cast<size_t>(paths.last_compute), start, input_finish);
}

// The latest finish of a list, and at least `start`.
double list_finish(const ListPaths& paths, double start, const std::vector<double>& input_finish) {
  double finish = start;
  for (size_t p = 0; p < paths.from_start.size(); ++p) finish = std::max(finish, paths.finish(p, start, input_finish));
  return finish;
}

}  // namespace

std::vector<std::vector<double>> part_spans_ms(const ShardSection& shard, const CostSection& cost, int64_t stage,
                                               const std::vector<size_t>& part_of, size_t parts) {
  const std::vector<double> duration_us = shortest_durations_us(shard, cost);
  const RankProgram program = rank_program(shard, stage);
  std::vector<std::vector<double>> spans;
  for (const std::vector<int64_t>& ops : program.kind_ops) {
    std::vector<std::vector<int64_t>> ops_of(parts);
    std::vector<double> compute_us(parts, 0);
    // Whether each part's compute ops follow each other on the compute stream.
    bool contiguous = true;
    std::vector<char> left(parts, 0);
    size_t current = parts;
    for (int64_t id : ops) {
      const size_t part = part_of.at(id);
      ops_of.at(part).push_back(id);
      if (shard.ops[id].stream != Stream::compute) continue;
      compute_us[part] += duration_us[id];
      if (part == current) continue;
      if (left[part]) contiguous = false;
      if (current < parts) left[current] = 1;
      current = part;
    }
    std::vector<double>& kind = spans.emplace_back(parts, 0);
    for (size_t part = 0; part < parts; ++part) {
      double us = compute_us[part];
      if (contiguous && us > 0) {
        const ListPaths paths = list_paths(shard, ops_of[part], stage, duration_us);
        us = paths.from_start[static_cast<size_t>(paths.last_compute)];
      }
      kind[part] = us * kMsPerUs;
    }
  }
  return spans;
}

double step_time_lower_bound_ms(const ShardSection& shard, const CostSection& cost) {
  const int64_t ranks = shard.parallelism.pp;
  const auto microbatches = static_cast<size_t>(shard.num_microbatches);
  const std::vector<double> duration_us = shortest_durations_us(shard, cost);

  struct RankState {
    RankProgram program;
    std::vector<ListPaths> kinds;
    // By kind: the positions of its ops other lists depend on, and their index in `exported`.
    std::vector<std::vector<std::pair<size_t, size_t>>> outputs;
    ListPaths step;  // its step ops
    size_t next_slot = 0;
    double compute_free_us = 0;
    std::vector<double> compute_end_us;  // by slot: when the compute stream is free of it
    double step_start_end_us = 0;
  };
  // When a slot's compute can start: after the previous slot's; in the combined 1F1B schedule
  // (docs/syssim-sim.md), where a slot overlaps the one before it on the other side, after the
  // slot two before (the schedule's window) and the previous one only on its own side.
  const bool combined = shard.training.overlap_moe_expert_parallel_comm;
  const bool receives_after_start = receives_after_previous_slot(shard);
  auto compute_start_us = [combined](const RankState& state, size_t slot) {
    if (!combined) return state.compute_free_us;
    const std::vector<RankProgram::Slot>& slots = state.program.slots;
    const std::vector<bool>& backward = state.program.backward_kind;
    double start = slot >= 2 ? state.compute_end_us[slot - 2] : state.step_start_end_us;
    if (slot >= 1 && backward[slots[slot - 1].kind] == backward[slots[slot].kind])
      start = std::max(start, state.compute_end_us[slot - 1]);
    return start;
  };
  std::vector<RankState> states(static_cast<size_t>(ranks));
  // The latest finish of each op an op of another list depends on, by micro-batch (NaN until
  // known); export_of[op] is its index here, or -1.
  std::vector<std::vector<double>> exported;
  std::vector<int64_t> export_of(shard.ops.size(), -1);
  auto export_inputs = [&](const ListPaths& paths) {
    for (int64_t input : paths.inputs)
      if (export_of[input] < 0) {
        export_of[input] = static_cast<int64_t>(exported.size());
        exported.emplace_back(microbatches, std::numeric_limits<double>::quiet_NaN());
      }
  };
  std::vector<RankProgram> programs = rank_programs(shard);
  for (int64_t rank = 0; rank < ranks; ++rank) {
    RankState& state = states[rank];
    state.program = std::move(programs[rank]);
    for (const std::vector<int64_t>& ops : state.program.kind_ops)
      state.kinds.push_back(list_paths(shard, ops, rank, duration_us, /*own_rank_inputs=*/false, receives_after_start));
    state.step = list_paths(shard, state.program.step_ops, rank, duration_us, true);
    std::for_each(state.kinds.begin(), state.kinds.end(), export_inputs);
    export_inputs(state.step);
    // The step_start ops first.
    const ListPaths starting = list_paths(shard, state.program.step_start_ops, rank, duration_us);
    state.compute_free_us = state.step_start_end_us = compute_free_after(starting, 0, {});
  }
  for (RankState& state : states)
    for (const std::vector<int64_t>& ops : state.program.kind_ops) {
      std::vector<std::pair<size_t, size_t>>& outputs = state.outputs.emplace_back();
      for (size_t p = 0; p < ops.size(); ++p)
        if (export_of[ops[p]] >= 0) outputs.emplace_back(p, static_cast<size_t>(export_of[ops[p]]));
    }
  // Slots in any order their inputs allow: each rank's in its order, a slot once the ops of
  // other ranks it depends on have their finish.
  size_t left = 0;
  for (const RankState& state : states) left += state.program.slots.size();
  std::vector<double> input_finish;
  while (left > 0) {
    size_t done = 0;
    for (int64_t rank = 0; rank < ranks; ++rank) {
      RankState& state = states[rank];
      for (; state.next_slot < state.program.slots.size(); ++state.next_slot, ++done) {
        const RankProgram::Slot& slot = state.program.slots[state.next_slot];
        const ListPaths& paths = state.kinds[slot.kind];
        const auto microbatch = static_cast<size_t>(slot.microbatch);
        input_finish.clear();
        for (int64_t input : paths.inputs) input_finish.push_back(exported[export_of[input]][microbatch]);
        if (std::any_of(input_finish.begin(), input_finish.end(), [](double t) { return std::isnan(t); })) break;
        const double start_us = compute_start_us(state, state.next_slot);
        for (const auto& [position, index] : state.outputs[slot.kind])
          exported[index][microbatch] = paths.finish(position, start_us, input_finish);
        const double end_us = compute_free_after(paths, start_us, input_finish);
        state.compute_free_us = std::max(state.compute_free_us, end_us);
        if (combined) state.compute_end_us.push_back(end_us);
      }
    }
    if (done == 0)
      throw DataError("/shard/schedule: the pipeline ranks' slots wait for each other; no step can run them");
    left -= done;
  }
  // Each rank ends with its step ops, issued after its slots; their deps on microbatch ops
  // are on the last micro-batch's instances.
  double step_us = 0;
  for (const RankState& state : states) {
    input_finish.clear();
    for (int64_t input : state.step.inputs) input_finish.push_back(exported[export_of[input]].back());
    step_us = std::max(step_us, list_finish(state.step, state.compute_free_us, input_finish));
  }
  return std::max(step_us, busiest_link_us(shard, cost)) * kMsPerUs;
}

}  // namespace syssim
