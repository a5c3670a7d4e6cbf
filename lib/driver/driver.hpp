// The syssim driver: every stage in one process, on the in-memory graph (no JSON between
// stages), printing the same report as the pipe of single-stage tools.
#pragma once
#include <optional>
#include <string>

#include "common/graph.hpp"
#include "cost/cost.hpp"
#include "mem/mem.hpp"
#include "report/report.hpp"
#include "shard/shard.hpp"
#include "sim/sim.hpp"

namespace syssim {

// The default job of `syssim run` with no arguments: Llama-3-8B on one 8-GPU H100 node.
inline constexpr const char* kDefaultModel = "llama3-8b";
inline constexpr const char* kDefaultHardware = "h100-sxm-80gb";

struct RunRequest {
  std::optional<std::string> model_path;     // a YAML file or a preset; default kDefaultModel
  std::optional<std::string> hardware_path;  // a YAML file or a preset; default kDefaultHardware
  ShardOptions options;
  std::string format = "text";  // text | json
  bool memory_only = false;     // `syssim memory`: no discrete-event simulation
  bool timeline = false;        // also the simulated step's timeline, in timeline_format
  std::string timeline_format = "chrome-trace";  // chrome-trace | svg (syssim-report's formats)
  bool critical_path = false;   // also the step's critical path (report/critical_path.hpp)
  MemOptions mem_options;       // the caching allocator's replay
  ReportOptions report_options;  // MFU convention, training time
  CostOptions cost_options;     // the estimator: syssim-cost's --roofline and --calibrated
  bool every_microbatch = false;  // syssim-sim's --every-microbatch: no extrapolated periods
};

// The trace of a model at a sequence length (the model's by default), traced once per process
// and architecture and kept for the process's lifetime (and on disk: docs/performance.md). It
// depends on the architecture only, and on the sequence length only where the unfused
// attention's softmax changes kernels (runs_fused_softmax_kernel), so callers that run many
// jobs of one model (sweeps, validation) pass it to the functions below.
const TraceSection& trace_of(const ModelConfig& model, std::optional<int64_t> seq_length = std::nullopt);

// The trace of a model made afresh by the trace stage, bypassing both caches.
TraceSection trace_afresh(const ModelConfig& model);

// Trace, shard, cost, simulate, account memory: the graph the pipe would carry, less its
// trace section (nothing after the shard stage reads it). The estimator form prices many
// jobs with one loaded calibrated model, and shares their shard stage's work through `reuse`.
Graph simulate(const ModelConfig& model, const TraceSection& trace, const CostEstimator& estimator,
               const ShardOptions& options, const SimOptions& sim_options = {}, ShardReuse* reuse = nullptr,
               const MemOptions& mem_options = {});
Graph simulate(const ModelConfig& model, const HardwareConfig& hardware, const ShardOptions& options,
               const SimOptions& sim_options = {}, const MemOptions& mem_options = {},
               const CostOptions& cost_options = {});
// Simulates a simulated graph's job again with another global batch, on the same shard
// and cost sections (set_global_batch): what a sweep over the batch shares between points.
void resimulate_with_global_batch(Graph& graph, int64_t global_batch, const SimOptions& sim_options = {},
                                  const MemOptions& mem_options = {});

// Same, without the discrete-event simulation (memory fields only).
Graph estimate_memory(const ModelConfig& model, const TraceSection& trace, const CostEstimator& estimator,
                      const ShardOptions& options, ShardReuse* reuse = nullptr, const MemOptions& mem_options = {});
// The shard and cost sections alone (no trace section: the later stages do not read it).
Graph shard_and_cost(const ModelConfig& model, const TraceSection& trace, const CostEstimator& estimator,
                     const ShardOptions& options, ShardReuse* reuse = nullptr);
Graph estimate_memory(const ModelConfig& model, const HardwareConfig& hardware, const ShardOptions& options,
                      const MemOptions& mem_options = {});

// `syssim run` and `syssim memory`: the report, the timeline when asked for, and when the
// job does not fit, one line saying by how much and on which pipeline stage.
struct RunOutput {
  std::string report;
  std::string timeline;
  std::string critical_path;
  std::optional<std::string> out_of_memory;
};
RunOutput run(const RunRequest& request);

// Options from the graph format's `parallelism` and `training` keys (docs/graph-format.md): each
// key given replaces the default (tp = dp = 1, micro-batch 1, global batch 1, bf16), read by
// the graph's own readers; `parallelism` also takes the shard stage's pipeline_schedule,
// pp_layout, decoder_first/last_pipeline_num_layers, account_for_embedding/loss_in_pipeline_split
// and cp_comm_type. DataError naming an unknown key or a bad value.
ShardOptions shard_options_from_json(const nlohmann::json& parallelism, const nlohmann::json& training);

// The layout of the default job (tp 2 with SP, dp 4, distributed optimizer,
// micro-batch 1, global batch 128): used for each flag the user did not give.
ShardOptions default_job_options();

}  // namespace syssim
