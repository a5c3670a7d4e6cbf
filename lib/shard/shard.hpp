// syssim-shard: instantiates a traced step for one rank under a parallel layout and
// training settings (docs/syssim-shard.md). Splits the named axes (heads/groups, ffn and
// vocab by TP; sequence of the norm/residual regions by TP under SP), inserts the tensor-
// and data-parallel collectives where Megatron-LM places them, and adds the optimizer step.
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>

#include "common/graph.hpp"

namespace syssim {

struct ShardOptions {
  ParallelismConfig parallelism;
  TrainingConfig training;
  std::optional<int64_t> gpus;  // when given, must equal tp*cp*pp*dp
  // Pipeline parallelism (docs/parallelism.md). Schedule: none given: interleaved when vpp > 1,
  // else 1f1b.
  std::optional<ScheduleKind> pipeline_schedule;
  std::vector<int64_t> pp_layout;  // decoder layers per virtual stage; empty: an even split
  std::optional<int64_t> decoder_first_pipeline_num_layers;  // Megatron-LM's uneven first/last
  std::optional<int64_t> decoder_last_pipeline_num_layers;   // pipeline rank (all its chunks)
  // Megatron-LM's account_for_embedding/loss_in_pipeline_split: the even split counts the
  // embedding (loss) as one more layer of the first (last) virtual stage.
  bool account_for_embedding_in_pipeline_split = false;
  bool account_for_loss_in_pipeline_split = false;
  std::string cp_comm_type = "p2p";  // Megatron-LM's cp_comm_type: p2p (K/V ring) | all_gather
};

// Sets graph.shard from graph.model and graph.trace; throws DataError for impossible
// layouts and UsageError for settings this version does not simulate yet.
void shard_graph(Graph& graph, const ShardOptions& options);
struct ShardContext;

// What the jobs of one trace share in the shard stage: its ops instantiated at one rank's
// shapes, which depend on tp, sequence parallelism, the axis values (micro-batch, sequence,
// cp, the experts'), the dtype, the token dispatcher and the routing balance, not on the pipeline, data
// parallelism, optimizer or recompute. Made once
// per such key and copied for each job (a sixth of a sweep point's time); at most
// kMaxInstantiations are kept, later keys are made each time. Thread-safe.
class ShardReuse {
 public:
  explicit ShardReuse(const TraceSection& trace) : trace_(trace) {}
  const TraceSection& trace() const { return trace_; }
  // instantiate_trace for `context` (whose trace must be this one's), from what was kept.
  void instantiate(const ShardContext& context, ShardSection& shard);

 private:
  static constexpr size_t kMaxInstantiations = 32;
  // The axes (full, sequence, experts'), tp, SP, dtype, dispatcher, and the experts' shares of
  // the busiest and the other experts' tokens, which the grouped GEMMs' shapes take.
  using Key = std::tuple<AxisValues, AxisValues, AxisValues, int64_t, bool, std::string, std::string, double, double>;
  using Instantiated = std::pair<std::vector<ShardOp>, std::vector<ShardBuffer>>;
  const TraceSection& trace_;
  std::mutex mutex_;
  std::map<Key, std::shared_ptr<const Instantiated>> kept_;
};

// The same for a model and its trace that are not in a graph (the driver's: copying a trace
// into each graph took a tenth of a run), reusing `reuse` when it is of this trace.
ShardSection shard_trace(const ModelConfig& model, const TraceSection& trace, const ShardOptions& options,
                         ShardReuse* reuse = nullptr);
// Makes `shard` the section of the same job with `global_batch`: nothing but the micro-batch
// count, the schedule and the step's model FLOPs depend on it, so jobs that differ only there
// (a sweep over the batch) share the rest. DataError when micro_batch * dp does not divide
// it, UsageError when the schedule refuses the micro-batch count; `shard` is unchanged then.
void set_global_batch(const ModelConfig& model, int64_t global_batch, ShardSection& shard);

// The parameters of the experts' weights of a traced model (those the expert ops read).
double expert_parameters(const TraceSection& trace);

// A split of `layers` decoder layers over `stages` virtual pipeline stages when they do not
// divide evenly: every stage ceil(layers / stages) and the last the rest, as Megatron-Bridge's
// DeepSeek-V3 pipeline layouts (recipes/deepseek: 61 layers on 16 stages are 15 x 4 and 1);
// where that leaves the last none, the stages after the first take one layer more than the
// others. Empty when the stages outnumber the layers.
std::vector<int64_t> uneven_pipeline_layout(int64_t layers, int64_t stages);

// Whether a job's sharded data parallelism gathers and reduces each unit once a step: FSDP2
// under PyTorch's pipelining (docs/parallelism.md, "Sharded data parallelism"); otherwise in
// every micro-batch.
bool fsdp_units_once_a_step(const ShardOptions& options);

// The pipeline schedule a layout runs: its own, else the interleaved one with vpp > 1 and
// 1F1B without.
ScheduleKind pipeline_schedule_of(const ShardOptions& options);

// Megatron-LM's padded vocabulary: a multiple of make_vocab_size_divisible_by * tp.
int64_t padded_vocab_size(const ModelConfig& model, int64_t tp);

// Megatron-LM's num_floating_point_operations for one step (all GPUs): docs/metrics.md.
double megatron_model_flops(const ModelConfig& model, int64_t global_batch, int64_t seq_length, int64_t tp);
// The part of megatron_model_flops that is attention's score and context GEMMs (QK^T and the
// weighted sum of V), which that count takes over the whole s x s matrix: the causal MFU
// convention counts half of it (docs/metrics.md).
double megatron_attention_score_flops(const ModelConfig& model, int64_t global_batch, int64_t seq_length);

}  // namespace syssim
