// Internals of lib/sweep shared by the sweep, the search and the renderers.
#pragma once
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "mem/section.hpp"
#include "report/format.hpp"  // fixed()
#include "sweep/sweep.hpp"

namespace syssim {

// Simulates jobs of one model on one hardware: traces and loads the estimator once, on the
// first job the cache does not answer, so that a rerun of a cached sweep neither traces nor
// loads a calibrated bundle.
class PointEvaluator {
 public:
  PointEvaluator(const ModelConfig& model, const HardwareConfig& hardware, bool use_cache);
  // Fills the metrics, step-time band and status of `row` (its inputs are kept) from the
  // simulated job; a job that throws makes it invalid. `built`, when given, holds nothing or the simulated graph of
  // a job that differs from this one at most in its global batch: that graph is simulated again
  // with this batch (resimulate_with_global_batch), or this job's graph is left there.
  void operator()(const ShardOptions& options, SweepRow& row, std::optional<Graph>* built = nullptr);
  const ModelConfig& model() const { return model_; }
  const HardwareConfig& hardware() const { return hardware_; }
  // The trace at a job's sequence length, the model's when not given (trace_of), and what
  // the jobs of that trace share in the shard stage.
  const TraceSection& trace(std::optional<int64_t> seq_length = std::nullopt);
  ShardReuse& reuse(std::optional<int64_t> seq_length = std::nullopt);
  const CostEstimator& estimator();

 private:
  const ModelConfig& model_;
  const HardwareConfig& hardware_;
  bool use_cache_;
  std::mutex loading_;  // points run on several threads; the first that needs them loads these
  // A trace serves every sequence length whose unfused softmax runs the same kernels
  // (runs_fused_softmax_kernel): one per answer, with its reuse.
  struct Traced {
    const TraceSection* trace = nullptr;
    std::optional<ShardReuse> reuse;
  };
  Traced& traced(std::optional<int64_t> seq_length);  // under loading_
  // The row's status and metrics, from the cache or simulated.
  void simulate_row(const ShardOptions& options, SweepRow& row, std::optional<Graph>* built);
  std::map<bool, Traced> traced_;
  std::optional<CostEstimator> estimator_;
  StepTimeBands bands_;  // the data folder's, read once
};

void mark_invalid(SweepRow& row, const std::string& reason);

// A lower bound on a layout's peak memory in GB (its heaviest rank's weights, gradients and
// optimizer states), from the model's parameter count (`expert_params` of them the experts')
// alone: the search drops layouts above the GPU's memory without an estimate.
double model_state_lower_bound_gb(double params_total, const ShardOptions& layout, double expert_params = 0);
// Under optim_grads and optim_grads_params, a lower bound on the step from the reduce-scatters
// (and all-gathers) each micro-batch runs on the data-parallel streams; 0 for other layouts.
double sharded_communication_lower_bound_ms(const ModelConfig& model, const HardwareConfig& hardware,
                                            double params_total, double expert_params, const ShardOptions& layout);

// The model cut to its first two layers (their kinds) and no MTP layer, whose layers the
// search's compute bound prices.
ModelConfig short_model_of(const ModelConfig& model);

// What one decoder layer, the embedding and the output layer take per micro-batch on a rank,
// for the layouts with `layout`'s tp, cp, micro-batch and recompute: {"layer"|"embedding"|
// "head": [compute in all passes, in the forward, in the weight gradients, recomputed; the
// span of the forward slot, of the backward slot (part_spans_ms)] in ms ("layer": the least
// of the layers), "layers": [{"moe", "windowed": the layer's kind, "ms": the same}, one per
// layer], "layer_kept_bytes": the least a layer keeps for its backward
// (layer_bytes_kept_for_backward)}, from one shard of
// `short_model` (the model cut to two layers, whose trace is `short_trace`) on one rank; null
// when the shard stage refuses it. Cached (kind "layers") when use_cache.
nlohmann::json layer_compute(PointEvaluator& evaluate, const ModelConfig& short_model, const TraceSection& short_trace,
                             const ShardOptions& layout, bool use_cache);
// A lower bound on the step of `layout` (the model's layers split evenly, or by its
// pp_layout) from those times alone, each layer at the least of the short model's layers of
// its kind (of all of them where none is, or where the split is not whole layers): the
// most over its pipeline ranks of the first micro-batch's forward through the virtual stages
// before the rank's first, plus the rank's forward and backward slots of every micro-batch,
// plus (1F1B and interleaved) the last backward's input gradient through the stages before
// it, less what follows the input gradient in the rank's last slot. Zero-bubble schedules
// count the compute alone. 0 for null.
double compute_lower_bound_ms(const nlohmann::json& compute, const ModelConfig& model, const ShardOptions& layout);
// A lower bound in GB on the activations a layout's pipeline ranks hold on average at their
// peaks, from what a layer keeps for its backward: at its first backward slot, a rank holds
// that for every layer of every forward slot it ran before (`forwards_before_backward`, by
// rank). 0 for null, or with activation offloading (which keeps some layers' off the GPU).
double activation_lower_bound_gb(const nlohmann::json& compute, int64_t num_layers, const ShardOptions& layout,
                                 const std::vector<int64_t>& forwards_before_backward);
// By pipeline rank, the forward slots the layout's schedule runs before the rank's first
// backward (or weight) slot.
std::vector<int64_t> forwards_before_first_backward(const ShardOptions& layout);

// Runs run_point(i) for every i < count on settings.threads threads, reporting progress in
// points (points_of(i) for unit i, else 1 each); an exception run_point lets out stops the
// others and is rethrown here.
void for_each_point(size_t count, const SweepSettings& settings, const std::function<void(size_t)>& run_point,
                    const std::function<size_t(size_t)>& points_of = {});

// The cache key of a job's results: the syssim version and the canonical JSON of the model,
// the hardware and every setting of the job.
std::string job_cache_key(const ModelConfig& model, const HardwareConfig& hardware, const ShardOptions& options);

// "needs 91.2 GB of 80.0 GB": why an oom row is excluded.
std::string oom_reason(const MemSection& mem);

// The front and the counts of a search as table, csv (the front only) or json.
std::string render_search(const SearchResult& result, const std::string& format);

// A metric for people: mfu with 4 decimals, milliseconds and gigabytes with 2.
std::string metric_text(double value, const std::string& metric);

}  // namespace syssim
