#include "report/report.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/io.hpp"
#include "common/json_util.hpp"
#include "common/text.hpp"
#include "common/units.hpp"
#include "report/band.hpp"
#include "report/format.hpp"
#include "report/critical_path.hpp"
#include "report/pictures.hpp"

namespace syssim {
namespace {

using nlohmann::json;

constexpr size_t kTextTopOps = 3;

// The memory report's formats; the full report also draws the timeline (report/pictures.hpp).
const std::vector<std::string> kMemoryFormats = {"text", "json"};
const std::vector<std::string> kReportFormats = {"text", "json", "chrome-trace", "svg", "critical-path"};

void check_format(const std::string& format, const std::vector<std::string>& accepted) {
  if (std::find(accepted.begin(), accepted.end(), format) != accepted.end()) return;
  throw UsageError("unknown report format \"" + format + "\": expected " + either_of(accepted));
}

std::string ms(double value) { return fixed(value, 4); }
std::string gb(double value) { return fixed(value, 3); }
std::string percent(double fraction) { return fixed(fraction * 100, 2) + "%"; }

std::string timed_text(const TimedOp& op) { return "('" + op.name + "', " + ms(op.time_ms) + ")"; }

// An op of the sim section ("<op id>_<op name>") as a person reads it: its module and role
// (op_label); a name that names no op of the shard section is kept.
TimedOp labelled(const TimedOp& op, const ShardSection& shard) {
  const size_t underscore = op.name.find('_');
  int64_t id = -1;
  const auto [end, error] = std::from_chars(op.name.data(), op.name.data() + std::min(underscore, op.name.size()), id);
  if (error != std::errc() || end != op.name.data() + underscore || id < 0 ||
      id >= static_cast<int64_t>(shard.ops.size()) || op.name.substr(underscore + 1) != shard.ops[id].name.str())
    return op;
  return TimedOp{op_label(shard.ops[id]), op.time_ms};
}

// The collective groups of the sim section, the layout's order first (tp, cp, ep, etp, dp,
// edp, pp, embedding), then any other alphabetically.
std::vector<std::pair<std::string, GroupTime>> groups_in_report_order(const SimSection& sim) {
  static const std::vector<std::string> kOrder = {"tp", "cp", "ep", "etp", "dp", "edp", "pp", "embedding"};
  auto rank = [](const std::string& group) {
    return static_cast<size_t>(std::find(kOrder.begin(), kOrder.end(), group) - kOrder.begin());
  };
  std::vector<std::pair<std::string, GroupTime>> groups(sim.collective_by_group_ms.begin(), sim.collective_by_group_ms.end());
  std::stable_sort(groups.begin(), groups.end(), [&](const auto& a, const auto& b) { return rank(a.first) < rank(b.first); });
  return groups;
}

// The first kTextTopOps of a list, as the text report writes lists of timed ops.
std::string timed_list_text(const std::vector<TimedOp>& list, const ShardSection* shard) {
  std::string text = "[";
  for (size_t i = 0; i < std::min(kTextTopOps, list.size()); ++i)
    text += (i ? ", " : "") + timed_text(shard ? labelled(list[i], *shard) : list[i]);
  return text + "]";
}

std::string oom_text(const MemSection& mem) {
  if (!mem.oom) return "none";
  return "capacity " + gb(mem.oom->capacity_gb) + " GB, required " + gb(mem.oom->required_gb) + " GB, excess " +
         gb(mem.oom->excess_gb) + " GB";
}

// The sim section's busiest link (of the links of that name, the most utilized); nullptr when none.
const LinkLoad* busiest_link(const SimSection& sim) {
  const LinkLoad* busiest = nullptr;
  for (const LinkLoad& link : sim.links)
    if (link.name == sim.busiest_link && (!busiest || link.utilization > busiest->utilization)) busiest = &link;
  return busiest;
}

std::string link_text(const LinkLoad& link) {
  return link.name + " (level " + std::to_string(link.level) + ", " + fixed(link.bandwidth_GBps, 1) +
         " GB/s per GPU): " + percent(link.utilization) + " utilized, busy " + ms(link.busy_ms) + " ms";
}

// One "key = value" line; a nested field is indented under the one before it.
struct Field {
  std::string key;
  std::string value;
  bool nested = false;
};

// "Name(", the fields with their '=' aligned, the nested blocks, ")"; at `indent` spaces.
std::string block(const std::string& name, size_t indent, const std::vector<Field>& fields,
                  const std::vector<std::string>& nested_blocks = {}) {
  auto key_text = [](const Field& f) { return (f.nested ? "  " : "") + f.key; };
  size_t width = 0;
  for (const Field& f : fields) width = std::max(width, key_text(f).size());
  std::string margin(indent, ' ');
  std::string out = margin + name + "(\n";
  for (const Field& f : fields) {
    std::string key = key_text(f);
    out += margin + "  " + key + std::string(width - key.size(), ' ') + " = " + f.value + "\n";
  }
  for (const std::string& nested : nested_blocks) out += nested;
  return out + margin + ")\n";
}

std::string memory_block(const MemSection& mem) {
  return block("Memory", 2,
               {{"param_gb", gb(mem.param_bytes / kBytesPerGB)},
                {"grad_gb", gb(mem.grad_bytes / kBytesPerGB)},
                {"optimizer_state_gb", gb(mem.optimizer_state_bytes / kBytesPerGB)},
                {"activation_gb", gb(mem.activation_bytes / kBytesPerGB)},
                {"temporary_gb", gb(mem.temporary_bytes / kBytesPerGB)},
                {"peak_memory_gb", gb(mem.peak_memory_gb)},
                {"cuda_context_gb", gb(mem.cuda_context_bytes / kBytesPerGB)},
                {"nccl_buffers_gb", gb(mem.nccl_buffer_bytes / kBytesPerGB)},
                {"fragmentation_gb", gb(mem.fragmentation_bytes / kBytesPerGB)},
                {"device_memory_gb", gb(mem.device_memory_gb)},
                {"reserved_memory_gb", mem.reserved_memory_gb ? gb(*mem.reserved_memory_gb) : "not replayed"},
                {"oom", oom_text(mem)}});
}

// "[a, b, c]" with each value printed by `text`.
template <typename T>
std::string list_text(const std::vector<T>& values, std::string (*text)(T)) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + text(values[i]);
  return out + "]";
}
std::string integer(int64_t value) { return std::to_string(value); }

// Per pipeline stage, with pp > 1 only; the simulated fields when `sim` is given.
std::vector<std::string> pipeline_blocks(const ShardSection& shard, const MemSection& mem, const SimSection* sim) {
  if (shard.parallelism.pp == 1) return {};
  std::vector<Field> fields = {{"schedule", to_string(shard.pipeline_schedule)}};
  if (sim) {
    fields.push_back({"bubble_fraction", percent(sim->bubble_fraction)});
    fields.push_back({"per_pp_rank_step_time_ms", list_text(sim->per_pp_rank_step_time_ms, ms)});
  }
  fields.push_back({"pp_stage_memory_gb", list_text(mem.pp_stage_memory_gb, gb)});
  fields.push_back({"microbatches_in_flight", list_text(mem.pp_stage_microbatches_in_flight, integer)});
  return {block("Pipeline", 2, fields)};
}

// The model's parameters, all and those a token uses (the same without experts), in billions.
std::vector<Field> parameter_fields(const ShardSection& shard) {
  return {{"params_total_b", fixed(shard.params_total / kParamsPerBillion, 3)},
          {"params_active_b", fixed(shard.params_active / kParamsPerBillion, 3)}};
}

// Which estimator priced the compute ops (docs/syssim-cost.md): the calibrated bundle and the
// families it priced, or the roofline over the hardware's efficiencies (none: the bare peaks).
std::string estimator_text(const CostSection& cost) {
  const HardwareConfig& hw = cost.hardware;
  const std::string roofline = hw.efficiency.empty() ? "the roofline at the bare peaks"
                                                     : "the roofline over the hardware's efficiencies";
  if (cost.estimator != "calibrated") return roofline;
  const std::string families = join(hw.calibrated_families);
  return "calibrated " + (families.empty() ? std::string("(every family the bundle fits)") : families) + " from " +
         hw.calibrated_model + ", the rest " + roofline;
}

// How a mixture of experts routes and exchanges its tokens (docs/parallelism.md, "Expert parallelism").
std::string experts_text(const TrainingConfig& t) {
  std::string text = t.moe_token_dispatcher_type + " dispatcher, ";
  if (t.moe_expert_capacity_factor)
    text += "capacity " + text_of(*t.moe_expert_capacity_factor) + "x the mean" +
            (t.moe_pad_expert_input_to_capacity ? ", padded" : "");
  else
    text += "dropless";
  text += t.moe_imbalance == 1 ? ", balanced routing" : ", busiest expert " + text_of(t.moe_imbalance) + "x the mean";
  if (t.moe_router_padding_for_quantization) text += ", routing map padded for quantization";
  if (t.moe_shared_expert_overlap) text += ", shared experts overlapped";
  if (t.overlap_moe_expert_parallel_comm) text += ", all-to-all overlapped (combined 1F1B)";
  return text;
}

// The job in words: what the numbers below belong to (docs/syssim-report.md, "The job").
std::string job_block(const Graph& g, const ShardSection& shard) {
  const TrainingConfig& t = shard.training;
  std::string model = (g.model ? g.model->name + ", " : std::string()) +
                      fixed(shard.params_total / kParamsPerBillion, 3) + " B parameters";
  if (shard.params_active != shard.params_total)
    model += " (" + fixed(shard.params_active / kParamsPerBillion, 3) + " B active)";
  std::vector<Field> fields = {{"model", model}};
  if (g.cost)
    fields.push_back({"hardware", g.cost->hardware.name + ", " + std::to_string(shard.parallelism.world_size()) +
                                      (shard.parallelism.world_size() == 1 ? " GPU, " : " GPUs, ") +
                                      std::to_string(g.cost->hardware.gpus_per_node) + " per node"});
  fields.push_back({"layout", layout_text(shard.parallelism, t)});
  const std::optional<std::string> recipe = low_precision_recipe(t);
  fields.push_back({"precision", t.dtype + (recipe ? " (" + *recipe + " scaling)" : std::string())});
  std::string recompute = t.recompute;
  if (t.recompute == "selective") {
    recompute += " (" + (t.recompute_modules.empty() ? std::string("core_attn") : join(t.recompute_modules)) + ")";
  } else if (t.recompute == "full") {
    recompute += " (" + t.recompute_method.value_or("uniform") + ", " + std::to_string(t.recompute_num_layers.value_or(1)) +
                 " layer" + (t.recompute_num_layers.value_or(1) == 1 ? "" : "s") + ")";
  }
  fields.push_back({"recompute", recompute});
  if (t.cpu_offloading_num_layers > 0)
    fields.push_back({"cpu_offloading", "the activations of the first " + std::to_string(t.cpu_offloading_num_layers) +
                                            " decoder layers, to host memory and back"});
  if (!t.cuda_graph_scope.empty()) fields.push_back({"cuda_graphs", join(names_of(t.cuda_graph_scope))});
  if (g.model && g.model->is_moe()) fields.push_back({"experts", experts_text(t)});
  std::string data_parallel = std::string("sharding ") + to_string(t.data_parallel_sharding);
  if (t.shards_gradients()) data_parallel += std::string(" (") + to_string(t.fsdp_implementation) + ")";
  if (t.overlap_grad_reduce) data_parallel += ", gradient reduction overlapped";
  if (t.grad_reduce_in_bf16) data_parallel += ", gradients in bf16";
  if (t.optimizer_state_dtype != OptimizerStateDtype::fp32)
    data_parallel += std::string(", optimizer state in ") + to_string(t.optimizer_state_dtype);
  if (t.store_param_remainders) data_parallel += ", master weights as remainders";
  fields.push_back({"data_parallel", data_parallel});
  if (g.cost) fields.push_back({"estimator", estimator_text(*g.cost)});
  return block("Job", 0, fields);
}

// The memory fields and the configurations, shared by both JSON reports.
json memory_json(const Graph& g, const ShardSection& shard, const MemSection& mem) {
  return {{"params_total", shard.params_total},
          {"params_active", shard.params_active},
          {"param_bytes", mem.param_bytes},
          {"grad_bytes", mem.grad_bytes},
          {"optimizer_state_bytes", mem.optimizer_state_bytes},
          {"activation_bytes", mem.activation_bytes},
          {"temporary_bytes", mem.temporary_bytes},
          {"peak_memory_gb", mem.peak_memory_gb},
          {"cuda_context_bytes", mem.cuda_context_bytes},
          {"nccl_buffer_bytes", mem.nccl_buffer_bytes},
          {"fragmentation_bytes", mem.fragmentation_bytes},
          {"device_memory_gb", mem.device_memory_gb},
          {"reserved_memory_gb", nullable_to_json(mem.reserved_memory_gb)},
          {"pp_stage_memory_gb", mem.pp_stage_memory_gb},
          {"pp_stage_microbatches_in_flight", mem.pp_stage_microbatches_in_flight},
          {"pipeline_schedule", to_string(shard.pipeline_schedule)},
          {"bottlenecks", {{"peak_module", mem.peak_module}, {"oom", oom_to_json(mem.oom)}}},
          {"model", g.model ? to_json(*g.model) : json()},
          {"parallelism", to_json(shard.parallelism)},
          {"training", to_json(shard.training)},
          {"hardware", g.cost ? to_json(g.cost->hardware) : json()},
          {"estimator", g.cost ? json(estimator_text(*g.cost)) : json()}};
}

// MFU or HFU as a percentage; above 100% with a word on why (long sequences: docs/metrics.md).
std::string mfu_text(double fraction, MfuConvention convention) {
  if (fraction <= 1) return percent(fraction);
  if (convention == MfuConvention::kCausal) return percent(fraction) + " (above 100%: the model's FLOPs exceed the peak)";
  return percent(fraction) +
         " (above 100%: the FLOP count takes attention over the whole sequence, the simulated kernels the "
         "causal half or the window; --mfu-convention causal counts what they compute)";
}

// The time to train on a number of tokens at the simulated step, whole steps or not.
struct Training {
  double tokens = 0;
  double days = 0;
  double gpu_hours = 0;
};

Training training_of(double tokens, const ShardSection& shard, const SimSection& sim) {
  constexpr double kSPerDay = 86400, kSPerHour = 3600;
  const double tokens_per_step = static_cast<double>(shard.training.global_batch) * static_cast<double>(shard.seq_length);
  const double seconds = tokens / tokens_per_step * sim.step_time_ms / kMsPerS;
  return {tokens, seconds / kSPerDay, seconds * static_cast<double>(shard.parallelism.world_size()) / kSPerHour};
}

// What the MFU's FLOPs are, in words.
std::string convention_text(MfuConvention convention) {
  return convention == MfuConvention::kCausal ? "causal: attention scores and context over the keys each query attends (half the s x s matrix, less with a sliding window)"
                                              : "Megatron-LM's count: attention scores and context over the whole s x s matrix";
}

// The range the step time of such a job was measured in around syssim's prediction
// (report/band.hpp): the prediction times the ratios of the job's class.
struct StepBand {
  ClassBand band;
  double coverage = 0;
  StepTimeRange range;
};

StepBand step_band_of(const ShardSection& shard, const SimSection& sim, const std::optional<StepTimeBands>& given) {
  const StepTimeBands bands = load_step_time_bands(given);
  const bool moe = shard.params_active != shard.params_total;
  StepBand step;
  step.band = bands.of(band_class_of(moe, shard.training.dtype));
  step.coverage = bands.coverage;
  step.range = step_time_range(sim.step_time_ms, step.band);
  return step;
}

std::string band_text(const StepBand& step) {
  return ms(step.range.low_ms) + " to " + ms(step.range.high_ms) + " (where " + fixed(step.coverage * 100, 0) + "% of " +
         std::to_string(step.band.runs) + " published " + to_string(step.band.job_class) +
         " runs measured against their prediction, docs/validation.md)";
}

std::string full_text(const Graph& g, const ShardSection& shard, const MemSection& mem, const SimSection& sim,
                      const Throughput& rate, MfuConvention convention, const std::optional<Training>& training,
                      const StepBand& step_band) {
  std::vector<Field> bottleneck_fields = {
      {"dominant_op_type", sim.dominant_op_type},
      {"top_ops_by_time", timed_list_text(sim.top_ops, &shard)},
      {"top_modules_by_time", timed_list_text(sim.top_modules, nullptr)},
      {"longest_collective",
       sim.longest_collective.name.empty() ? "none" : timed_text(labelled(sim.longest_collective, shard))},
      {"binding_pp_stage", std::to_string(sim.binding_pp_stage)},
      {"peak_module", mem.peak_module},
      {"oom", oom_text(mem)}};
  // After longest_collective, when collectives ran as flows over the links (docs/syssim-sim.md).
  if (const LinkLoad* busiest = busiest_link(sim))
    bottleneck_fields.insert(bottleneck_fields.begin() + 4, Field{"busiest_link", link_text(*busiest)});
  std::string bottlenecks = block("Bottlenecks", 2, bottleneck_fields);
  std::vector<std::string> blocks = {memory_block(mem)};
  for (const std::string& pipeline : pipeline_blocks(shard, mem, &sim)) blocks.push_back(pipeline);
  blocks.push_back(bottlenecks);
  std::vector<Field> fields = {{"step_time_ms", ms(sim.step_time_ms)},
                               {"step_time_band_ms", band_text(step_band), true},
                               {"forward_ms", ms(sim.forward_ms), true},
                               {"backward_ms", ms(sim.backward_ms), true},
                               {"optimizer_ms", ms(sim.optimizer_ms), true}};
  // The host's issue time beside the step's: near it, the step is host-bound.
  if (sim.host_busy_ms > 0) fields.push_back({"host_busy_ms", ms(sim.host_busy_ms), true});
  fields.push_back({"collective_total_ms", ms(sim.collective_total_ms)});
  fields.push_back({"collective_exposed", ms(sim.collective_exposed_ms)});
  // Each communication group's collectives, total and how much of it the compute does not
  // hide. Context parallelism's is attention's K/V exchange; expert parallelism's, the token
  // dispatcher's exchanges (all-to-all, or the allgather dispatcher's gathers).
  for (const auto& [group, times] : groups_in_report_order(sim)) {
    const std::string name = group == "cp" ? "cp_attention_comm_ms" : group == "ep" ? "ep_dispatch_comm_ms" : group + "_comm_ms";
    fields.push_back({name, ms(times.total_ms) + " (exposed " + ms(times.exposed_ms) + ")", true});
  }
  std::vector<std::string> by_type;
  for (const auto& [type, type_ms] : sim.by_op_type_ms) by_type.push_back(type + " " + ms(type_ms));
  fields.push_back({"by_op_type_ms", join(by_type)});
  char flops[32];
  std::snprintf(flops, sizeof flops, "%.4e", rate.model_flops_per_step);
  fields.push_back({"model_flops_per_step", std::string(flops) + " (" + convention_text(convention) + ")"});
  fields.push_back({"achieved_tflops", fixed(rate.achieved_tflops, 2)});
  fields.push_back({"tokens_per_s_per_gpu", fixed(rate.tokens_per_s_per_gpu, 1)});
  if (training) {
    char tokens[32];
    std::snprintf(tokens, sizeof tokens, "%.4e", training->tokens);
    fields.push_back({"train_tokens", tokens});
    fields.push_back({"train_days", fixed(training->days, 4), true});
    fields.push_back({"train_gpu_hours", fixed(training->gpu_hours, 1), true});
  }
  for (Field field : std::vector<Field>{{"mfu", mfu_text(rate.mfu, convention)},
                                        {"hfu", mfu_text(rate.hfu, convention)},
                                        {"peak_memory_gb", gb(mem.peak_memory_gb)}})
    fields.push_back(field);
  for (const Field& field : parameter_fields(shard)) fields.push_back(field);
  return job_block(g, shard) + block("SimulationReport", 0, fields, blocks);
}

json full_json(const Graph& g, const ShardSection& shard, const MemSection& mem, const SimSection& sim,
               const Throughput& rate, MfuConvention convention, const std::optional<Training>& training,
               const StepBand& step_band) {
  json report = memory_json(g, shard, mem);
  json top_ops = json::array();
  for (const TimedOp& op : sim.top_ops) top_ops.push_back({op.name, op.time_ms});
  json& bottlenecks = report["bottlenecks"];
  bottlenecks["dominant_op_type"] = sim.dominant_op_type;
  bottlenecks["top_ops_by_time"] = top_ops;
  json top_modules = json::array();
  for (const TimedOp& total : sim.top_modules) top_modules.push_back({total.name, total.time_ms});
  bottlenecks["top_modules_by_time"] = top_modules;
  bottlenecks["longest_collective"] = {sim.longest_collective.name, sim.longest_collective.time_ms};
  bottlenecks["binding_pp_stage"] = sim.binding_pp_stage;
  const LinkLoad* busiest = busiest_link(sim);
  bottlenecks["busiest_link"] = busiest ? to_json(*busiest) : json();
  report.update({{"step_time_ms", sim.step_time_ms},
                 {"step_time_band_ms", {step_band.range.low_ms, step_band.range.high_ms}},
                 {"step_time_band",
                  {{"class", to_string(step_band.band.job_class)},
                   {"runs", step_band.band.runs},
                   {"coverage", step_band.coverage},
                   {"ratio_low", step_band.band.low},
                   {"ratio_high", step_band.band.high}}},
                 {"forward_ms", sim.forward_ms},
                 {"backward_ms", sim.backward_ms},
                 {"optimizer_ms", sim.optimizer_ms},
                 {"collective_total_ms", sim.collective_total_ms},
                 {"collective_exposed_ms", sim.collective_exposed_ms},
                 {"by_op_type_ms", sim.by_op_type_ms},
                 {"model_flops_per_step", shard.model_flops_per_step},
                 {"achieved_tflops", rate.achieved_tflops},
                 {"tokens_per_s_per_gpu", rate.tokens_per_s_per_gpu},
                 {"mfu", rate.mfu},
                 {"hfu", rate.hfu},
                 {"per_pp_rank_step_time_ms", sim.per_pp_rank_step_time_ms},
                 {"bubble_fraction", sim.bubble_fraction},
                 {"collective_slowdown", sim.collective_slowdown},
                 {"host_busy_ms", sim.host_busy_ms},
                 {"collective_by_group_ms", to_json(sim)["collective_by_group_ms"]},
                 {"mfu_convention", to_string(convention)},
                 {"mfu_model_flops_per_step", rate.model_flops_per_step}});
  if (training)
    report.update({{"train_tokens", training->tokens}, {"train_days", training->days}, {"train_gpu_hours", training->gpu_hours}});
  return report;
}

// The recomputed ops of every micro-batch on all GPUs. The shard ops are those of one rank of
// each pipeline stage, so they run on the tp*cp*dp ranks of their stage.
double recomputed_flops_per_step(const ShardSection& shard) {
  double per_microbatch = 0;
  for (const ShardOp& op : shard.ops)
    if (op.recompute) per_microbatch += op.flops;
  const ParallelismConfig& p = shard.parallelism;
  return per_microbatch * static_cast<double>(shard.num_microbatches) * static_cast<double>(p.world_size() / p.pp);
}

// The attention FLOPs of A (model_attention_flops_per_step: every query against all s keys)
// that causal attention does not compute: half of a full layer's (each query's own key and
// those before it, s/2 on average in the convention's count), and more of a sliding-window
// layer's, which attends K = window_size + 1 keys at most: K - K²/(2s) on average (query i's
// min(i, K) keys). Without the model section the windows are unknown: every layer is full.
double causal_attention_flops_skipped(const Graph& g, double attention_flops, int64_t seq_length) {
  const double skipped_by_mask = attention_flops / 2;
  if (!g.model || !window_slides_at(*g.model, seq_length)) return skipped_by_mask;
  const ModelConfig& model = *g.model;
  int64_t windowed_layers = 0;
  for (int64_t layer = 0; layer < model.num_layers; ++layer) windowed_layers += model.is_sliding_window_layer(layer);
  const double s = static_cast<double>(seq_length), keys = static_cast<double>(model.window_size + 1);
  const double windowed_share = keys / s - keys * keys / (2 * s * s);  // of the s x s matrix; 1/2 when K = s
  const double per_layer = attention_flops / static_cast<double>(model.num_layers + model.mtp_num_layers);
  return skipped_by_mask + static_cast<double>(windowed_layers) * per_layer * (0.5 - windowed_share);
}

}  // namespace

std::string fixed(double value, int decimals) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

std::optional<MfuConvention> parse_mfu_convention(const std::string& name) {
  if (name == "megatron") return MfuConvention::kMegatron;
  if (name == "causal") return MfuConvention::kCausal;
  return std::nullopt;
}

const char* to_string(MfuConvention convention) { return convention == MfuConvention::kCausal ? "causal" : "megatron"; }

Throughput throughput(const Graph& g, MfuConvention convention) {
  const ShardSection& shard = need_section(g.shard, "shard", "syssim-shard");
  const CostSection& cost = need_section(g.cost, "cost", "syssim-cost");
  const SimSection& sim = need_section(g.sim, "sim", "syssim-sim");
  if (sim.step_time_ms <= 0)
    throw DataError("/sim/step_time_ms: expected a positive step time, got " + std::to_string(sim.step_time_ms));
  double step_time_s = sim.step_time_ms / kMsPerS;
  double num_gpus = static_cast<double>(shard.parallelism.world_size());
  Throughput rate;
  rate.model_flops_per_step = shard.model_flops_per_step;
  if (convention == MfuConvention::kCausal) {
    if (!shard.model_attention_flops_per_step)
      throw DataError("/shard/model_attention_flops_per_step: missing (a shard section older than format 1.7); "
                      "rerun syssim-shard to count FLOPs by the causal convention");
    rate.model_flops_per_step -= causal_attention_flops_skipped(g, *shard.model_attention_flops_per_step, shard.seq_length);
  }
  rate.achieved_tflops = rate.model_flops_per_step / (step_time_s * num_gpus) / kFlopsPerTflop;
  const double peak = tensor_core_peak_tflops(cost.hardware, shard.training.dtype);
  rate.mfu = rate.achieved_tflops / peak;
  // HFU adds the FLOPs the GPUs execute again to recompute activations (docs/metrics.md).
  double hardware_flops = rate.model_flops_per_step + recomputed_flops_per_step(shard);
  rate.hfu = hardware_flops / (step_time_s * num_gpus) / kFlopsPerTflop / peak;
  const double tokens = static_cast<double>(shard.training.global_batch) * static_cast<double>(shard.seq_length);
  rate.tokens_per_s_per_gpu = tokens / (step_time_s * num_gpus);
  return rate;
}

namespace {

// "a 1.0000, b 2.0000" of a map of times; "none" when empty.
std::string times_text(const std::map<std::string, double>& times) {
  std::string text;
  for (const auto& [name, time_ms] : times) text += (text.empty() ? "" : ", ") + name + " " + ms(time_ms);
  return text.empty() ? "none" : text;
}

std::string critical_path_text(const Graph& g) {
  const CriticalPath path = critical_path(g);
  const SimSection& sim = *g.sim;
  return block("CriticalPath", 0,
               {{"step_time_ms", ms(sim.step_time_ms)},
                {"path_ms", ms(path.length_ms())},
                {"instances", std::to_string(path.entries.size())},
                {"compute_ms", times_text(path.compute_ms)},
                {"communication_ms", times_text(path.communication_ms)},
                {"host_ms", ms(path.host_ms)},
                {"waiting_ms", ms(path.waiting_ms)},
                {"pp_rank_ms", list_text(path.pp_rank_ms, ms)},
                {"top_modules_by_time", timed_list_text(path.modules_ms, nullptr)}});
}

}  // namespace

void check_timeline_window(const TimelineWindow& window, const std::string& format) {
  if (!window.whole() && format != "chrome-trace" && format != "svg")
    throw UsageError("--timeline-microbatches and --timeline-window choose what a timeline draws: they need --format "
                     "chrome-trace or svg, or syssim run's --timeline FILE");
}

std::string render_report(const Graph& g, const std::string& format, const ReportOptions& options) {
  check_format(format, kReportFormats);
  if (options.train_tokens && !(*options.train_tokens > 0 && std::isfinite(*options.train_tokens)))
    throw UsageError("train_tokens: expected a positive number of tokens, got " + std::to_string(*options.train_tokens));
  check_timeline_window(options.timeline_window, format);
  if (format == "chrome-trace") return render_chrome_trace(g, options.timeline_window);
  if (format == "svg") return render_schedule_svg(g, options.timeline_window);
  if (format == "critical-path") return critical_path_text(g);
  const ShardSection& shard = need_section(g.shard, "shard", "syssim-shard");
  const SimSection& sim = need_section(g.sim, "sim", "syssim-sim");
  const MemSection& mem = need_section(g.mem, "mem", "syssim-mem");
  const Throughput rate = throughput(g, options.mfu_convention);
  const std::optional<Training> training = options.train_tokens ? std::optional(training_of(*options.train_tokens, shard, sim))
                                                                 : std::nullopt;
  const StepBand step_band = step_band_of(shard, sim, options.step_time_bands);
  if (format == "text") return full_text(g, shard, mem, sim, rate, options.mfu_convention, training, step_band);
  return full_json(g, shard, mem, sim, rate, options.mfu_convention, training, step_band).dump(2) + "\n";
}

std::string render_memory_report(const Graph& g, const std::string& format) {
  check_format(format, kMemoryFormats);
  const ShardSection& shard = need_section(g.shard, "shard", "syssim-shard");
  const MemSection& mem = need_section(g.mem, "mem", "syssim-mem");
  if (format == "json") return memory_json(g, shard, mem).dump(2) + "\n";
  std::vector<std::string> blocks = {memory_block(mem)};
  for (const std::string& pipeline : pipeline_blocks(shard, mem, nullptr)) blocks.push_back(pipeline);
  blocks.push_back(block("Bottlenecks", 2, {{"peak_module", mem.peak_module}, {"oom", oom_text(mem)}}));
  std::vector<Field> fields = {{"peak_memory_gb", gb(mem.peak_memory_gb)}};
  for (const Field& field : parameter_fields(shard)) fields.push_back(field);
  return job_block(g, shard) + block("SimulationReport", 0, fields, blocks);
}

}  // namespace syssim
