#include "driver/text_calls.hpp"

#include <vector>

#include "common/error.hpp"
#include "common/json_util.hpp"
#include "common/version.hpp"
#include "cost/cost.hpp"
#include "driver/driver.hpp"
#include "mem/mem.hpp"
#include "report/report.hpp"
#include "sim/sim.hpp"

namespace syssim::text_calls {
namespace {

// One stage on a graph's text, as its tool runs it (text_calls.hpp).
template <typename Stage>
std::string apply_stage(const std::string& graph_text, const std::string& function,
                        const std::vector<std::string>& args, Stage stage) {
  syssim::Graph graph = syssim::read_graph(graph_text, function + " input");
  stage(graph);
  graph.provenance.push_back(syssim::Provenance{function, syssim::kSyssimVersion, args});
  return syssim::write_graph(graph);
}

}  // namespace

syssim::ModelConfig checked_model(const std::string& text) {
  syssim::ModelConfig model = syssim::model_from_json(syssim::parse_json(text, "model"), "model");
  syssim::validate(model, "model");
  return model;
}

syssim::HardwareConfig checked_hardware(const std::string& text) {
  syssim::HardwareConfig hardware = syssim::hardware_from_json(syssim::parse_json(text, "hardware"), "hardware");
  syssim::validate(hardware, "hardware");
  return hardware;
}

Job job_of(const std::string& model, const std::string& hardware, const std::string& hardware_dir,
           const std::string& parallelism, const std::string& training) {
  Job job{checked_model(model), checked_hardware(hardware),
          syssim::shard_options_from_json(syssim::parse_json(parallelism, "parallelism"),
                                          syssim::parse_json(training, "training"))};
  job.hardware.calibrated_model_dir = syssim::resolve_calibrated_model(job.hardware.calibrated_model, hardware_dir);
  return job;
}

std::pair<std::string, std::string> simulate(const Job& job, bool memory_only) {
  if (memory_only) {
    syssim::Graph graph = syssim::estimate_memory(job.model, job.hardware, job.options);
    return {syssim::render_memory_report(graph, "json"), syssim::render_memory_report(graph, "text")};
  }
  syssim::Graph graph = syssim::simulate(job.model, job.hardware, job.options);
  return {syssim::render_report(graph, "json"), syssim::render_report(graph, "text")};
}


std::string trace_stage(const std::string& model) {
  syssim::Graph graph;
  graph.model = checked_model(model);
  graph.trace = syssim::trace_of(*graph.model);
  graph.provenance.push_back(syssim::Provenance{"syssim.stages.trace", syssim::kSyssimVersion, {}});
  return syssim::write_graph(graph);
}

std::string shard_stage(const std::string& graph, const std::string& parallelism, const std::string& training) {
  const syssim::ShardOptions options =
      syssim::shard_options_from_json(syssim::parse_json(parallelism, "parallelism"),
                                      syssim::parse_json(training, "training"));
  return apply_stage(graph, "syssim.stages.shard", {parallelism, training},
                     [&](syssim::Graph& g) { syssim::shard_graph(g, options); });
}

std::string cost_stage(const std::string& graph, const std::string& hardware, const std::string& hardware_dir,
                       const std::string& estimator) {
  syssim::HardwareConfig hw = checked_hardware(hardware);
  hw.calibrated_model_dir = syssim::resolve_calibrated_model(hw.calibrated_model, hardware_dir);
  syssim::CostOptions options;
  options.estimator = estimator;
  return apply_stage(graph, "syssim.stages.cost", {hw.name, estimator},
                     [&](syssim::Graph& g) { syssim::cost_graph(g, hw, options); });
}

std::string simulate_stage(const std::string& graph, bool timeline, bool every_microbatch) {
  syssim::SimOptions options;
  options.record_timeline = timeline;
  options.extrapolate_microbatches = !every_microbatch;
  return apply_stage(graph, "syssim.stages.simulate",
                     {timeline ? "timeline" : "", every_microbatch ? "every_microbatch" : ""},
                     [&](syssim::Graph& g) { syssim::simulate_graph(g, options); });
}

std::string report_stage(const std::string& graph, const std::string& format, const std::string& mfu_convention,
                         std::optional<double> train_tokens) {
  syssim::ReportOptions options;
  const auto convention = syssim::parse_mfu_convention(mfu_convention);
  if (!convention) throw syssim::UsageError("mfu_convention: expected megatron or causal, got '" + mfu_convention + "'");
  options.mfu_convention = *convention;
  if (train_tokens && !(*train_tokens > 0))
    throw syssim::UsageError("train_tokens: expected a positive number, got " + std::to_string(*train_tokens));
  options.train_tokens = train_tokens;
  return syssim::render_report(syssim::read_graph(graph, "syssim.stages.report input"), format, options);
}


std::string memory_stage(const std::string& graph) {
  return apply_stage(graph, "syssim.stages.memory", {}, [](Graph& g) { account_memory(g); });
}

}  // namespace syssim::text_calls
