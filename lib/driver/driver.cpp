#include "driver/driver.hpp"

#include <algorithm>

#include "cost/cost.hpp"
#include "mem/mem.hpp"
#include "report/format.hpp"
#include "report/pictures.hpp"
#include "report/report.hpp"
#include "sim/sim.hpp"

namespace syssim {
namespace {

// The graph holds no trace section: the stages after the shard stage do not read it, and a
// copy of the trace cost a tenth of a run.
Graph cost_and_shard(const ModelConfig& model, const TraceSection& trace, const CostEstimator& estimator,
                     const ShardOptions& options, ShardReuse* reuse) {
  Graph graph;
  graph.model = model;
  graph.shard = shard_trace(model, trace, options, reuse);
  estimator.cost_graph(graph);
  return graph;
}

ModelConfig model_of(const RunRequest& request) {
  return load_model(request.model_path.value_or(kDefaultModel), request.options.training.seq_length);
}

HardwareConfig hardware_of(const RunRequest& request) {
  return load_hardware_yaml(request.hardware_path.value_or(kDefaultHardware));
}

}  // namespace

Graph simulate(const ModelConfig& model, const TraceSection& trace, const CostEstimator& estimator,
               const ShardOptions& options, const SimOptions& sim_options, ShardReuse* reuse,
               const MemOptions& mem_options) {
  Graph graph = cost_and_shard(model, trace, estimator, options, reuse);
  simulate_graph(graph, sim_options);
  account_memory(graph, mem_options);
  return graph;
}

Graph simulate(const ModelConfig& model, const HardwareConfig& hardware, const ShardOptions& options,
               const SimOptions& sim_options, const MemOptions& mem_options) {
  return simulate(model, trace_of(model, options.training.seq_length), CostEstimator(hardware), options, sim_options,
                  nullptr, mem_options);
}

void resimulate_with_global_batch(Graph& graph, int64_t global_batch, const SimOptions& sim_options,
                                  const MemOptions& mem_options) {
  need_section(graph.shard, "shard", "syssim-shard");
  set_global_batch(need_section(graph.model, "model", "syssim-trace"), global_batch, *graph.shard);
  graph.sim.reset();
  graph.mem.reset();
  simulate_graph(graph, sim_options);
  account_memory(graph, mem_options);
}

Graph estimate_memory(const ModelConfig& model, const TraceSection& trace, const CostEstimator& estimator,
                      const ShardOptions& options, ShardReuse* reuse, const MemOptions& mem_options) {
  Graph graph = cost_and_shard(model, trace, estimator, options, reuse);
  account_memory(graph, mem_options);
  return graph;
}

Graph estimate_memory(const ModelConfig& model, const HardwareConfig& hardware, const ShardOptions& options,
                      const MemOptions& mem_options) {
  return estimate_memory(model, trace_of(model, options.training.seq_length), CostEstimator(hardware), options, nullptr,
                         mem_options);
}

ShardOptions shard_options_from_json(const nlohmann::json& parallelism, const nlohmann::json& training) {
  ShardOptions options;
  auto merged = [](nlohmann::json defaults, const nlohmann::json& given, const std::string& section,
                   const std::map<std::string, nlohmann::json>& also = {}) {
    if (!given.is_object()) throw DataError(section + ": expected an object, got " + given.dump());
    for (const auto& [key, value] : given.items()) {
      const bool known = defaults.contains(key) || also.count(key) > 0;
      if (!known || key == "world_size")
        throw DataError(section + ": unknown key '" + key + "' (docs/graph-format.md lists them)");
      defaults[key] = value;
    }
    return defaults;
  };
  options.parallelism = parallelism_from_json(merged(to_json(options.parallelism), parallelism, "parallelism"), "parallelism");
  options.training =
      training_from_json(merged(to_json(options.training), training, "training", kTrainingKeysWhenSet), "training");
  return options;
}

RunOutput run(const RunRequest& request) {
  const ModelConfig model = model_of(request);
  const HardwareConfig hardware = hardware_of(request);
  RunOutput output;
  Graph graph;
  if (request.memory_only) {
    graph = estimate_memory(model, hardware, request.options, request.mem_options);
    output.report = render_memory_report(graph, request.format);
  } else {
    graph = simulate(model, hardware, request.options, SimOptions{request.timeline || request.critical_path},
                     request.mem_options);
    ReportOptions report_options = request.report_options;
    if (request.timeline) report_options.timeline_window = {};  // --timeline's, not the report's
    output.report = render_report(graph, request.format, report_options);
    if (request.timeline) output.chrome_trace = render_chrome_trace(graph, request.report_options.timeline_window);
    if (request.critical_path) output.critical_path = render_report(graph, "critical-path");
  }
  if (const std::optional<OomInfo>& oom = graph.mem->oom) {
    const std::vector<double>& stages = graph.mem->pp_stage_memory_gb;
    const auto stage = std::max_element(stages.begin(), stages.end()) - stages.begin();
    output.out_of_memory = "needs " + fixed(oom->required_gb, 1) + " GB per GPU of " + fixed(oom->capacity_gb, 1) +
                           " GB (" + fixed(oom->excess_gb, 1) + " GB over) on pipeline stage " + std::to_string(stage);
  }
  return output;
}

ShardOptions default_job_options() {
  ShardOptions options;
  options.parallelism.tp = 2;
  options.parallelism.sp = true;
  options.parallelism.dp = 4;
  options.training.micro_batch = 1;
  options.training.global_batch = 128;
  options.training.distributed_optimizer = true;
  return options;
}

}  // namespace syssim
