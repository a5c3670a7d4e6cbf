#include "driver/driver.hpp"

#include "cost/cost.hpp"
#include "mem/mem.hpp"
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
  return load_model_yaml(request.model_path.value_or(kDefaultModel));
}

HardwareConfig hardware_of(const RunRequest& request) {
  return load_hardware_yaml(request.hardware_path.value_or(kDefaultHardware));
}

}  // namespace

Graph simulate(const ModelConfig& model, const TraceSection& trace, const CostEstimator& estimator,
               const ShardOptions& options, const SimOptions& sim_options, ShardReuse* reuse) {
  Graph graph = cost_and_shard(model, trace, estimator, options, reuse);
  simulate_graph(graph, sim_options);
  account_memory(graph);
  return graph;
}

Graph simulate(const ModelConfig& model, const HardwareConfig& hardware, const ShardOptions& options,
               const SimOptions& sim_options) {
  return simulate(model, trace_of(model), CostEstimator(hardware), options, sim_options);
}

void resimulate_with_global_batch(Graph& graph, int64_t global_batch, const SimOptions& sim_options) {
  need_section(graph.shard, "shard", "syssim-shard");
  set_global_batch(need_section(graph.model, "model", "syssim-trace"), global_batch, *graph.shard);
  graph.sim.reset();
  graph.mem.reset();
  simulate_graph(graph, sim_options);
  account_memory(graph);
}

Graph estimate_memory(const ModelConfig& model, const TraceSection& trace, const CostEstimator& estimator,
                      const ShardOptions& options, ShardReuse* reuse) {
  Graph graph = cost_and_shard(model, trace, estimator, options, reuse);
  account_memory(graph);
  return graph;
}

Graph estimate_memory(const ModelConfig& model, const HardwareConfig& hardware, const ShardOptions& options) {
  return estimate_memory(model, trace_of(model), CostEstimator(hardware), options);
}

ShardOptions shard_options_from_json(const nlohmann::json& parallelism, const nlohmann::json& training) {
  ShardOptions options;
  auto merged = [](nlohmann::json defaults, const nlohmann::json& given, const std::string& section) {
    if (!given.is_object()) throw DataError(section + ": expected an object, got " + given.dump());
    for (const auto& [key, value] : given.items()) {
      if (!defaults.contains(key) || key == "world_size")
        throw DataError(section + ": unknown key '" + key + "' (docs/graph-format.md lists them)");
      defaults[key] = value;
    }
    return defaults;
  };
  options.parallelism = parallelism_from_json(merged(to_json(options.parallelism), parallelism, "parallelism"), "parallelism");
  options.training = training_from_json(merged(to_json(options.training), training, "training"), "training");
  return options;
}

std::string run_report(const RunRequest& request) {
  return render_report(simulate(model_of(request), hardware_of(request), request.options), request.format);
}

RunOutput run_with_timeline(const RunRequest& request) {
  Graph graph = simulate(model_of(request), hardware_of(request), request.options, SimOptions{true});
  return {render_report(graph, request.format), render_chrome_trace(graph)};
}

std::string memory_report(const RunRequest& request) {
  return render_memory_report(estimate_memory(model_of(request), hardware_of(request), request.options),
                              request.format);
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
