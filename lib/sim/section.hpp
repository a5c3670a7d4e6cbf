// The "sim" section (docs/graph-format.md), owned by syssim-sim: the simulated timeline's totals.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/op_kinds.hpp"

namespace syssim {

struct TimedOp {
  std::string name;  // an op: "<op id>_<op name>", unique; a module total: its op_label
  double time_ms = 0;  // summed over all micro-batches
};

// Time of the collectives of one group on a rank.
struct GroupTime {
  double total_ms = 0;    // summed durations
  double exposed_ms = 0;  // wall time one runs while the compute stream is idle
};

// The traffic of one network link (a cost section link) of the binding rank over the step.
struct LinkLoad {
  std::string name;  // the topology level's kind
  int64_t level = 0;
  double bandwidth_GBps = 0;  // capacity
  double busy_ms = 0;         // wall time with at least one flow on it
  double bytes = 0;           // moved on it, summed over flows
  double utilization = 0;     // bytes / (bandwidth * step time)
  int64_t max_flows = 0;      // most flows on it at once
};

// One op instance of the simulated step (syssim-sim --timeline), or the host's issue of it.
struct TimelineEntry {
  int64_t rank = 0;         // pipeline rank
  Stream stream = Stream::compute;  // the host's row: Stream::host
  int64_t op = 0;           // shard op id
  int64_t microbatch = -1;  // -1 for step_start and step ops
  double start_ms = 0;
  double end_ms = 0;
  bool host() const { return stream == Stream::host; }
};

struct SimSection {
  double step_time_ms = 0;
  double forward_ms = 0;    // compute-stream busy time of forward ops
  double backward_ms = 0;
  double optimizer_ms = 0;
  double collective_total_ms = 0;    // summed duration of all collectives
  double collective_exposed_ms = 0;  // wall time when a collective runs and the compute stream is idle
  std::map<std::string, double> by_op_type_ms;  // summed duration per op kind
  std::map<std::string, GroupTime> collective_by_group_ms;  // tp, cp, dp, pp, embedding
  std::vector<double> per_pp_rank_step_time_ms;
  std::vector<TimedOp> top_ops;  // longest first
  // The same op of every layer together, named by op_label(op, true): longest first.
  std::vector<TimedOp> top_modules;
  std::string dominant_op_type;
  TimedOp longest_collective;
  int64_t binding_pp_stage = 0;  // the pipeline rank that sets the pace: the least idle (docs/syssim-sim.md)
  double bubble_fraction = 0;  // binding rank: share of its micro-batch phase waiting for other ranks
  double hardware_flops_per_rank = 0;  // FLOPs executed by one rank in the step
  double host_busy_ms = 0;  // binding rank: its host's time issuing ops (docs/syssim-sim.md, "The host")
  std::vector<LinkLoad> links;  // binding rank, one per cost link
  std::string busiest_link;     // name of the most utilized of `links`; "" when none moved bytes
  double collective_slowdown = 1;  // binding rank: simulated / standalone collective time
  // Every op instance of every rank, in issue order per rank; only when asked for (it is large).
  std::optional<std::vector<TimelineEntry>> timeline;
};

nlohmann::json to_json(const LinkLoad& link);
nlohmann::json to_json(const SimSection& sim);
SimSection sim_from_json(const nlohmann::json& j, const std::string& path);

}  // namespace syssim
