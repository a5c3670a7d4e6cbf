// The library's calls on the graph format's JSON text (docs/python.md): a model, a hardware, a
// job and the stages given and returned as the text the tools read and write, as the Python
// module binds them.
#pragma once
#include <optional>
#include <string>
#include <utility>

#include "config/config.hpp"
#include "shard/shard.hpp"

namespace syssim::text_calls {

// A model and a hardware from the graph format's JSON, checked as a loaded YAML is.
ModelConfig checked_model(const std::string& text);
HardwareConfig checked_hardware(const std::string& text);

// One job: the model and hardware as the graph format writes them (a relative
// calibrated_model taken from hardware_dir, the hardware YAML's folder), parallelism and
// training as the keys to set.
struct Job {
  ModelConfig model;
  HardwareConfig hardware;
  ShardOptions options;
};

Job job_of(const std::string& model, const std::string& hardware, const std::string& hardware_dir,
           const std::string& parallelism, const std::string& training);

// The job's report as JSON and as text, rendered from one simulated graph (`memory_only`: the
// memory fields, no simulation).
std::pair<std::string, std::string> simulate(const Job& job, bool memory_only);

// The stages on a graph's text, as their tools run them: the graph read and checked, the stage
// applied, a provenance entry naming the Python function (syssim.stages.NAME) and its
// arguments, the graph written (docs/python.md, "Stages"). report_stage returns the report.
std::string trace_stage(const std::string& model);
std::string shard_stage(const std::string& graph, const std::string& parallelism, const std::string& training);
std::string cost_stage(const std::string& graph, const std::string& hardware, const std::string& hardware_dir,
                       const std::string& estimator);
std::string simulate_stage(const std::string& graph, bool timeline, bool every_microbatch);
std::string memory_stage(const std::string& graph);
std::string report_stage(const std::string& graph, const std::string& format, const std::string& mfu_convention,
                         std::optional<double> train_tokens);

}  // namespace syssim::text_calls
