#include "sim/sim.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>

#include "common/json_util.hpp"
#include "common/units.hpp"
#include "sim/event_loop.hpp"
#include "sim/plan.hpp"
#include "sim/step_recorder.hpp"

namespace syssim {
namespace {

using namespace sim_detail;

constexpr size_t kTopOps = 10;

// The summed time of the ops `ran` by op_label of any layer, each label's added up in op order.
// The label follows from the module's path of any layer, the name, the group and the recompute
// flag, so it is made once for each of those seen, not for each op.
std::map<std::string, double> time_by_label(const ShardSection& shard, const StepTotals& totals,
                                            const std::vector<int64_t>& ran) {
  using Key = std::tuple<const std::string*, const std::string*, int, bool>;  // interned texts
  std::map<Key, size_t> label_of_key;
  std::map<std::string, size_t> label_index;
  std::vector<double> sums;  // by label index
  for (int64_t id : ran) {
    const ShardOp& op = shard.ops[id];
    const Key key{&op.module.any_layer(), &op.name.str(),
                  op.kind == OpKind::collective ? static_cast<int>(op.group) : -1, op.recompute};
    auto known = label_of_key.find(key);
    if (known == label_of_key.end()) {
      auto [label, added] = label_index.try_emplace(op_label(op, true), sums.size());
      if (added) sums.push_back(0);
      known = label_of_key.emplace(key, label->second).first;
    }
    sums[known->second] += totals.duration_us[id];
  }
  std::map<std::string, double> by_label_us;
  for (const auto& [label, index] : label_index) by_label_us.emplace(label, sums[index]);
  return by_label_us;
}

// The report of a step from its totals: the step time is the last rank's finish; the binding
// rank's phase, kind and collective-group times, longest ops, link loads, exposed
// communication and pipeline bubble (docs/syssim-sim.md).
SimSection sim_section(const ShardSection& shard, const CostSection& cost, const StepTotals& totals) {
  SimSection sim;
  sim.hardware_flops_per_rank = totals.flops / static_cast<double>(shard.parallelism.pp);
  sim.host_busy_ms = totals.host_busy_us[totals.binding] * kMsPerUs;
  for (double us : totals.finish_us) sim.per_pp_rank_step_time_ms.push_back(us * kMsPerUs);
  sim.binding_pp_stage = totals.binding;
  const double step_us = *std::max_element(totals.finish_us.begin(), totals.finish_us.end());
  sim.step_time_ms = step_us * kMsPerUs;

  double collective_standalone_ms = 0;
  // By kind and by group, summed in op order as the maps would be, without a lookup per op.
  std::array<std::optional<double>, EnumNames<OpKind>::kNames.size()> by_kind_ms;
  std::array<std::optional<double>, EnumNames<CommGroup>::kNames.size()> by_group_ms;
  auto add = [](std::optional<double>& sum, double ms) { sum = sum.value_or(0) + ms; };
  for (const ShardOp& op : shard.ops) {
    if (!totals.ran[op.id]) continue;
    double ms = totals.duration_us[op.id] * kMsPerUs;
    add(by_kind_ms[static_cast<size_t>(op.kind)], ms);
    if (op.kind == OpKind::collective) {
      sim.collective_total_ms += ms;
      add(by_group_ms[static_cast<size_t>(op.group)], ms);
      collective_standalone_ms += totals.standalone_us[op.id] * kMsPerUs;
    } else {
      (op.phase == OpPhase::fwd ? sim.forward_ms : op.phase == OpPhase::bwd ? sim.backward_ms : sim.optimizer_ms) += ms;
    }
  }
  for (size_t k = 0; k < by_kind_ms.size(); ++k)
    if (by_kind_ms[k]) sim.by_op_type_ms[to_string(static_cast<OpKind>(k))] = *by_kind_ms[k];
  for (size_t g = 0; g < by_group_ms.size(); ++g)
    if (by_group_ms[g]) sim.collective_by_group_ms[to_string(static_cast<CommGroup>(g))].total_ms = *by_group_ms[g];
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
  const std::map<std::string, double> by_label_us = time_by_label(shard, totals, ran);
  std::vector<std::pair<std::string, double>> labels(by_label_us.begin(), by_label_us.end());
  std::stable_sort(labels.begin(), labels.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  for (size_t i = 0; i < std::min(kTopOps, labels.size()); ++i)
    sim.top_modules.push_back(TimedOp{labels[i].first, labels[i].second * kMsPerUs});
  auto longest = std::find_if(ran.begin(), ran.end(), [&](int64_t id) { return shard.ops[id].kind == OpKind::collective; });
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
  // Without a pipeline no rank waits for another: what idles is the host's start of the step.
  if (shard.parallelism.pp > 1 && totals.pipeline_end_us > 0) sim.bubble_fraction = totals.idle_us / totals.pipeline_end_us;
  return sim;
}

}  // namespace

SimStats simulate_graph(Graph& g, const SimOptions& options) {
  const ShardSection& shard = need_section(g.shard, "shard", "syssim-shard");
  const CostSection& cost = need_section(g.cost, "cost", "syssim-cost");
  check_matches_shard(cost, shard, "/cost");
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
  SimSection sim = sim_section(shard, cost, recorder.totals(loop.networks()));
  if (!std::isfinite(sim.step_time_ms)) {  // no section JSON can hold (it writes null)
    const auto longest = std::max_element(cost.ops.begin(), cost.ops.end(),
                                          [](const OpCost& a, const OpCost& b) { return a.time_us < b.time_us; });
    throw DataError("/cost/ops/" + std::to_string(longest - cost.ops.begin()) + "/time_us: " + text_of(longest->time_us) +
                    ": the step takes longer than a double can count");
  }
  if (!std::isfinite(sim.hardware_flops_per_rank)) {
    const auto largest = std::max_element(shard.ops.begin(), shard.ops.end(),
                                          [](const ShardOp& a, const ShardOp& b) { return a.flops < b.flops; });
    throw DataError("/shard/ops/" + std::to_string(largest - shard.ops.begin()) + "/flops: " +
                    text_of(largest->flops) + " FLOPs per instance overflow a double over the step's " +
                    std::to_string(shard.num_microbatches) + " micro-batches");
  }
  g.sim = std::move(sim);
  if (options.record_timeline) g.sim->timeline = recorder.timeline();
  return SimStats{recorder.instances(), loop.replayed(), loop.skipped() > 0};
}

}  // namespace syssim
