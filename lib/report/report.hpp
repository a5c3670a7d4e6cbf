// The simulation report (docs/syssim-report.md, docs/metrics.md): the sections of a
// simulated graph rendered as text or JSON.
#pragma once
#include <optional>
#include <string>

#include "common/graph.hpp"
#include "report/band.hpp"
#include "report/pictures.hpp"

namespace syssim {

// Which FLOPs MFU counts (docs/metrics.md): Megatron-LM's count, whose attention score and
// context GEMMs take the whole s x s matrix, or the causal count, half of those.
enum class MfuConvention { kMegatron, kCausal };
std::optional<MfuConvention> parse_mfu_convention(const std::string& name);  // megatron | causal
const char* to_string(MfuConvention convention);

// What a report adds to the graph's figures (docs/syssim-report.md).
struct ReportOptions {
  MfuConvention mfu_convention = MfuConvention::kMegatron;
  std::optional<double> train_tokens;  // the time and GPU-hours to train on this many tokens
  TimelineWindow timeline_window;      // what the pictures (chrome-trace, svg) draw
  std::optional<StepTimeBands> step_time_bands;  // report/band.hpp; none: the data folder's
};

// Throughput of the simulated step, per GPU.
struct Throughput {
  double model_flops_per_step = 0;  // all GPUs, counted by the convention
  double achieved_tflops = 0;  // model FLOPs per second per GPU, in TFLOP/s
  double mfu = 0;              // fraction of the dense 16-bit tensor-core peak
  double hfu = 0;
  double tokens_per_s_per_gpu = 0;  // global batch x sequence per step, per GPU
};

// Needs g.shard, g.cost and g.sim; throws DataError when the step takes no time, or when the
// causal convention is asked of a shard section older than format 1.7.
Throughput throughput(const Graph& g, MfuConvention convention = MfuConvention::kMegatron);

// The full report; needs g.shard, g.cost, g.sim and g.mem. format: "text" or "json" (else
// UsageError), or from the sim timeline a picture, "chrome-trace" or "svg"
// (report/pictures.hpp), or the step's critical path as text, "critical-path"
// (report/critical_path.hpp).
std::string render_report(const Graph& g, const std::string& format, const ReportOptions& options = {});
// A window (timeline_window) draws only timelines: UsageError for another format.
void check_timeline_window(const TimelineWindow& window, const std::string& format);

// The memory fields only; needs g.shard and g.mem (g.cost adds the hardware when present).
std::string render_memory_report(const Graph& g, const std::string& format);

}  // namespace syssim
