#include "driver/driver.hpp"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "common/text.hpp"

#include "cost/cost.hpp"
#include "mem/mem.hpp"
#include "report/format.hpp"
#include "report/pictures.hpp"
#include "report/report.hpp"
#include "sim/sim.hpp"

namespace syssim {
namespace {

ModelConfig model_of(const RunRequest& request) {
  return load_model(request.model_path.value_or(kDefaultModel), request.options.training.seq_length);
}

HardwareConfig hardware_of(const RunRequest& request) {
  return load_hardware_yaml(request.hardware_path.value_or(kDefaultHardware));
}

}  // namespace

// The graph holds no trace section: the stages after the shard stage do not read it, and a
// copy of the trace cost a tenth of a run.
Graph shard_and_cost(const ModelConfig& model, const TraceSection& trace, const CostEstimator& estimator,
                     const ShardOptions& options, ShardReuse* reuse) {
  Graph graph;
  graph.model = model;
  graph.shard = shard_trace(model, trace, options, reuse);
  estimator.cost_graph(graph);
  return graph;
}

Graph simulate(const ModelConfig& model, const TraceSection& trace, const CostEstimator& estimator,
               const ShardOptions& options, const SimOptions& sim_options, ShardReuse* reuse,
               const MemOptions& mem_options) {
  Graph graph = shard_and_cost(model, trace, estimator, options, reuse);
  simulate_graph(graph, sim_options);
  account_memory(graph, mem_options);
  return graph;
}

Graph simulate(const ModelConfig& model, const HardwareConfig& hardware, const ShardOptions& options,
               const SimOptions& sim_options, const MemOptions& mem_options, const CostOptions& cost_options) {
  return simulate(model, trace_of(model, options.training.seq_length), CostEstimator(hardware, cost_options), options,
                  sim_options, nullptr, mem_options);
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
  Graph graph = shard_and_cost(model, trace, estimator, options, reuse);
  account_memory(graph, mem_options);
  return graph;
}

Graph estimate_memory(const ModelConfig& model, const HardwareConfig& hardware, const ShardOptions& options,
                      const MemOptions& mem_options) {
  return estimate_memory(model, trace_of(model, options.training.seq_length), CostEstimator(hardware), options, nullptr,
                         mem_options);
}

namespace {

// The value of `key` in `object`, removed from it; none when absent or null.
template <typename T>
std::optional<T> taken(nlohmann::json& object, const char* key) {
  if (!object.contains(key)) return std::nullopt;
  const nlohmann::json value = object.at(key);
  object.erase(key);
  if (value.is_null()) return std::nullopt;
  try {
    return value.get<T>();
  } catch (const nlohmann::json::exception&) {
    throw DataError(std::string("parallelism: key '") + key + "' has a value of the wrong kind: " + value.dump());
  }
}

}  // namespace

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
  // The pipeline's layer split, schedule and CP exchange are the shard stage's options, not
  // graph-format parallelism keys; the flags' names with underscores (docs/python.md).
  nlohmann::json sizes = parallelism;
  if (sizes.is_object()) {
    if (auto schedule = taken<std::string>(sizes, "pipeline_schedule")) {
      options.pipeline_schedule = parse_enum<ScheduleKind>(*schedule);
      if (!options.pipeline_schedule)
        throw DataError("parallelism: pipeline_schedule '" + *schedule + "': expected " +
                        either_of(names_of<ScheduleKind>()));
    }
    if (auto layout = taken<std::vector<int64_t>>(sizes, "pp_layout")) options.pp_layout = *layout;
    options.decoder_first_pipeline_num_layers = taken<int64_t>(sizes, "decoder_first_pipeline_num_layers");
    options.decoder_last_pipeline_num_layers = taken<int64_t>(sizes, "decoder_last_pipeline_num_layers");
    options.account_for_embedding_in_pipeline_split =
        taken<bool>(sizes, "account_for_embedding_in_pipeline_split").value_or(false);
    options.account_for_loss_in_pipeline_split = taken<bool>(sizes, "account_for_loss_in_pipeline_split").value_or(false);
    options.cp_comm_type = taken<std::string>(sizes, "cp_comm_type").value_or(options.cp_comm_type);  // checked by the shard stage
  }
  options.parallelism = parallelism_from_json(merged(to_json(options.parallelism), sizes, "parallelism"), "parallelism");
  options.training =
      training_from_json(merged(to_json(options.training), training, "training", kTrainingKeysWhenSet), "training");
  return options;
}

RunOutput run(const RunRequest& request) {
  // Before the simulation: the window is --timeline's, else the report's.
  check_timeline_window(request.report_options.timeline_window, request.timeline ? request.timeline_format : request.format);
  const ModelConfig model = model_of(request);
  const HardwareConfig hardware = hardware_of(request);
  RunOutput output;
  Graph graph;
  if (request.memory_only) {
    graph = estimate_memory(model, hardware, request.options, request.mem_options);
    output.report = render_memory_report(graph, request.format);
  } else {
    SimOptions sim_options;
    sim_options.record_timeline = request.timeline || request.critical_path;
    sim_options.extrapolate_microbatches = !request.every_microbatch;
    graph = simulate(model, hardware, request.options, sim_options, request.mem_options, request.cost_options);
    ReportOptions report_options = request.report_options;
    if (request.timeline) report_options.timeline_window = {};  // --timeline's, not the report's
    output.report = render_report(graph, request.format, report_options);
    if (request.timeline) output.timeline = render_report(graph, request.timeline_format, request.report_options);
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
