// `syssim sweep --search`: every layout of N GPUs, pruned by memory and by a bound on the step
// time, down to the Pareto front of step time against peak memory.
#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "common/cache.hpp"
#include "common/error.hpp"
#include "common/units.hpp"
#include "driver/driver.hpp"
#include "mem/mem.hpp"
#include "network/network.hpp"
#include "sim/sim.hpp"
#include "sweep/detail.hpp"
#include "sweep/sweep.hpp"

namespace syssim {
namespace {

// A part's time per micro-batch: its compute in all passes, in the forward, in the weight
// gradients and in the recomputed forward; then the spans of its forward and backward slots
// (part_spans_ms: its compute and the communication that compute waits for).
using PassCompute = std::array<double, 6>;
constexpr size_t kAllPasses = 0, kForward = 1, kWeight = 2, kRecomputed = 3, kForwardSpan = 4, kBackwardSpan = 5;

// A decoder layer's kind: whether it is an MoE layer and whether its attention is windowed.
std::pair<bool, bool> layer_kind(const ModelConfig& model, int64_t layer) {
  return {model.is_moe_layer(layer), model.is_sliding_window_layer(layer)};
}

// The micro-batches each pipeline runs in a step of the layout.
int64_t microbatches_per_pipeline(const ShardOptions& layout) {
  return layout.training.global_batch / (layout.parallelism.dp * layout.training.micro_batch);
}

// The decoder layers on virtual stage v of the layout: its uneven split, or the even one.
int64_t stage_layers(const ShardOptions& layout, int64_t num_layers, int64_t v) {
  const int64_t stages = layout.parallelism.pp * layout.parallelism.vpp.value_or(1);
  return layout.pp_layout.empty() ? num_layers / stages : layout.pp_layout[v];
}

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> found;
  for (int64_t d = 1; d <= n; ++d)
    if (n % d == 0) found.push_back(d);
  return found;
}

// The expert-parallel splits of a stage of `ranks` GPUs with tensor parallelism tp: ep dividing
// the experts and etp, 1 or tp (Megatron's defaults, expert_tensor_parallel_size), dividing each
// expert's FFN, with ep x etp dividing the stage (parallel folding); {1, none} without experts.
std::vector<std::pair<int64_t, std::optional<int64_t>>> expert_splits(const ModelConfig& model, int64_t tp,
                                                                     int64_t ranks) {
  if (!model.is_moe()) return {{1, std::nullopt}};
  std::vector<std::pair<int64_t, std::optional<int64_t>>> splits;
  for (int64_t ep : divisors(model.num_moe_experts))
    for (int64_t etp : tp > 1 ? std::vector<int64_t>{1, tp} : std::vector<int64_t>{1})
      if (ranks % (ep * etp) == 0 && model.moe_ffn_hidden_size % etp == 0) splits.emplace_back(ep, etp);
  return splits;
}

// The layouts of `gpus` GPUs the shard stage accepts (shard.cpp check_layout, pipeline.cpp,
// schedule.cpp), in a fixed order: tp, pp, cp, micro-batch, ep and etp, vpp, recompute,
// data-parallel sharding (no_shard, the distributed optimizer, and ZeRO-2 and ZeRO-3 when the
// base job's strategy is at least that), hybrid sharding's replicas (replica_counts). Layers that pp does not divide are split unevenly (uneven_pipeline_layout) when
// the stages average at least two layers.
// Hybrid sharding's replicas of a layout: 1, and when the base job shards into replicas
// (dp_replicate > 1), every other count that divides dp and leaves shard groups of two or more
// ranks, for the strategies that shard the gradients of a model without experts.
std::vector<int64_t> replica_counts(const ModelConfig& model, const ShardOptions& base, int64_t dp, int64_t cp,
                                    DataParallelSharding sharding) {
  std::vector<int64_t> counts = {1};
  if (base.parallelism.dp_replicate == 1 || sharding < DataParallelSharding::optim_grads || model.is_moe()) return counts;
  for (int64_t replicas : divisors(dp))
    if (replicas > 1 && dp * cp / replicas > 1) counts.push_back(replicas);
  return counts;
}

std::vector<ShardOptions> enumerate_layouts(const ModelConfig& model, const HardwareConfig& hardware,
                                            const ShardOptions& base) {
  if (!base.gpus) throw UsageError("--search needs --gpus N");
  if (*base.gpus < 1 || *base.gpus > kMaxGpus)
    throw UsageError("--gpus: expected 1 to " + std::to_string(kMaxGpus) + ", got " + std::to_string(*base.gpus));
  const int64_t gpus = *base.gpus;
  const int64_t seq = base.training.seq_length.value_or(model.seq_length);
  const int64_t global_batch = base.training.global_batch;
  // No sharding and the distributed optimizer; the per-layer strategies up to the base job's.
  // Their layouts use the least memory and are often far slower (collectives in every
  // micro-batch), so each joins the Pareto front and is simulated: a search asks for them.
  // Where the base job needs the distributed optimizer (its parameter gathers), no sharding is
  // not a layout of it.
  std::vector<DataParallelSharding> shardings = {DataParallelSharding::no_shard, DataParallelSharding::optim};
  if (base.training.overlap_param_gather || base.training.fp8_param_gather) shardings.erase(shardings.begin());
  for (DataParallelSharding more : {DataParallelSharding::optim_grads, DataParallelSharding::optim_grads_params})
    if (base.training.data_parallel_sharding >= more) shardings.push_back(more);
  std::vector<ShardOptions> layouts;
  for (int64_t tp : divisors(gpus)) {
    // Megatron-LM keeps tensor parallelism inside a node; tp splits heads, groups and the MLP.
    if (tp > hardware.gpus_per_node || model.num_attention_heads % tp || !tp_splits_query_groups(model, tp) ||
        model.ffn_hidden_size % tp || (model.moe_shared_expert_intermediate_size % tp))
      continue;
    for (int64_t pp : divisors(gpus / tp)) {
      const bool even = model.num_layers % pp == 0;
      if (!even && pp > model.num_layers / 2) continue;
      for (int64_t cp : divisors(gpus / tp / pp)) {
        // Context parallelism: flash attention only, 2*cp sequence chunks; SP splits each by tp.
        if (cp > 1 && (model.attention_backend != "flash" || seq % (2 * cp) || model.multi_latent_attention ||
                       tp > model.num_query_groups ||
                       window_slides_at(model, seq) || model.softmax_type != "vanilla"))
          continue;
        if (seq % (tp * cp)) continue;
        const int64_t dp = gpus / tp / pp / cp;
        if (global_batch % dp) continue;
        for (int64_t micro_batch : divisors(global_batch / dp))
          for (const auto& [ep, etp] : expert_splits(model, tp, tp * cp * dp)) {
            const int64_t microbatches = global_batch / dp / micro_batch;
            // The interleaved schedule needs vpp dividing each rank's layers and whole rounds of pp micro-batches.
            std::vector<std::optional<int64_t>> vpps = {std::nullopt};
            if (even && pp > 1 && microbatches % pp == 0)
              for (int64_t vpp : divisors(model.num_layers / pp))
                if (vpp > 1) vpps.push_back(vpp);
            for (std::optional<int64_t> vpp : vpps)
              for (const char* recompute : {"none", "selective", "full"})
                for (DataParallelSharding sharding : shardings)
                  for (int64_t replicas : replica_counts(model, base, dp, cp, sharding)) {
                    ShardOptions layout = base;
                    ParallelismConfig& p = layout.parallelism;
                    p.tp = tp, p.pp = pp, p.cp = cp, p.dp = dp, p.vpp = vpp, p.sp = tp > 1, p.ep = ep, p.etp = etp;
                    // Shards over one rank (dp x cp ranks; an MoE's experts over expert-dp ranks):
                    // the same job as the least sharding.
                    if (sharding != shardings.front() && dp * cp == 1 && (!model.is_moe() || p.expert_dp() == 1))
                      continue;
                    p.dp_replicate = replicas;
                    if (!even) layout.pp_layout = uneven_pipeline_layout(model.num_layers, pp);
                    if (pp == 1) layout.pipeline_schedule.reset();  // a schedule is of pipeline ranks
                    layout.training.micro_batch = micro_batch;
                    layout.training.recompute = recompute;
                    layout.training.data_parallel_sharding = sharding;
                    layout.training.distributed_optimizer = sharding != DataParallelSharding::no_shard;
                    layouts.push_back(layout);
                  }
          }
      }
    }
  }
  return layouts;
}

// (inputs_but below keys the same fields: a field added here goes there too.)
nlohmann::ordered_json layout_inputs(const ShardOptions& o) {
  const ParallelismConfig& p = o.parallelism;
  nlohmann::ordered_json inputs = {{"parallelism.tp", p.tp},
                                   {"parallelism.pp", p.pp},
                                   {"parallelism.vpp", p.vpp ? nlohmann::ordered_json(*p.vpp) : nlohmann::ordered_json()},
                                   {"parallelism.cp", p.cp},
                                   {"parallelism.dp", p.dp}};
  if (p.dp_replicate > 1) inputs["parallelism.dp_replicate"] = p.dp_replicate;
  // The expert splits of a model with experts (the search sets etp for them) and an uneven split.
  if (p.etp) inputs.update({{"parallelism.ep", p.ep}, {"parallelism.etp", *p.etp}});
  if (!o.pp_layout.empty()) inputs["pp_layout"] = o.pp_layout;
  inputs.update({{"training.micro_batch", o.training.micro_batch},
                 {"training.recompute", o.training.recompute},
                 {"training.distributed_optimizer", o.training.distributed_optimizer},
                 {"training.data_parallel_sharding_strategy", to_string(o.training.data_parallel_sharding)}});
  return inputs;
}

// The layout's inputs (layout_inputs) but its micro-batch or its recompute, field by field:
// the key of the layouts that differ only there (a text made per layout cost more than the
// rest of a search's bookkeeping).
enum class AllBut { micro_batch, recompute };
auto inputs_but(const ShardOptions& o, AllBut but) {
  const ParallelismConfig& p = o.parallelism;
  return std::make_tuple(p.tp, p.pp, p.vpp.value_or(-1), p.cp, p.dp, p.dp_replicate, p.etp ? p.ep : -1, p.etp.value_or(-1), o.pp_layout,
                         but == AllBut::micro_batch ? int64_t{0} : o.training.micro_batch,
                         but == AllBut::recompute ? std::string() : o.training.recompute,
                         o.training.distributed_optimizer, o.training.data_parallel_sharding);
}
using InputsKey = decltype(inputs_but(ShardOptions{}, AllBut::recompute));

// A layout's memory estimate and the lower bound on its step time (step_time_lower_bound_ms):
// {"status": "invalid" | "oom" | "fits", "peak_memory_gb", "step_bound_ms"}, the bound for
// out-of-memory layouts too (it bounds their recomputing siblings), from the result cache
// (kind "estimate") when it has them; a cached record without "step_bound_ms" (made by an
// earlier version) is made again.
nlohmann::json memory_estimate(PointEvaluator& evaluate, const ShardOptions& layout, bool use_cache) {
  const std::string key = use_cache ? job_cache_key(evaluate.model(), evaluate.hardware(), layout) : "";
  if (use_cache)
    if (std::optional<std::string> cached = cache_get("estimate", key)) {
      nlohmann::json record = nlohmann::json::parse(*cached);
      if (record["status"] == "invalid" || record.contains("step_bound_ms")) return record;
    }
  const CostEstimator& estimator = evaluate.estimator();  // a hardware it cannot load stops the search
  nlohmann::json estimated = {{"status", "invalid"}};
  try {
    Graph graph = estimate_memory(evaluate.model(), evaluate.trace(layout.training.seq_length), estimator, layout,
                                  &evaluate.reuse(layout.training.seq_length));
    estimated = {{"status", graph.mem->oom ? "oom" : "fits"},
                 {"peak_memory_gb", graph.mem->peak_memory_gb},
                 {"step_bound_ms", step_time_lower_bound_ms(*graph.shard, *graph.cost)}};
  } catch (const DataError& error) {
    estimated["reason"] = error.what();
  } catch (const UsageError& error) {
    estimated["reason"] = error.what();
  }
  if (use_cache) cache_put("estimate", key, estimated.dump());
  return estimated;
}

// What the search knows of a layout: until it is estimated, lower bounds on its peak memory
// (its model states) and on its step (its compute, or its sibling's estimated bound without
// recompute); then its own.
struct Candidate {
  double peak_memory_gb = 0;
  double bound_ms = 0;
  bool estimated = false;
};

bool dominates(const SweepRow& a, const SweepRow& b) {
  return a.step_time_ms <= b.step_time_ms && a.peak_memory_gb <= b.peak_memory_gb &&
         (a.step_time_ms < b.step_time_ms || a.peak_memory_gb < b.peak_memory_gb);
}

// Adds a simulated layout to the Pareto front unless a member dominates it, dropping the
// members it dominates.
void add_to_front(std::vector<SweepRow>& front, const SweepRow& row) {
  if (std::any_of(front.begin(), front.end(), [&](const SweepRow& q) { return dominates(q, row); })) return;
  front.erase(std::remove_if(front.begin(), front.end(), [&](const SweepRow& q) { return dominates(row, q); }),
              front.end());
  front.push_back(row);
}

}  // namespace

nlohmann::json layer_compute(PointEvaluator& evaluate, const ModelConfig& short_model, const TraceSection& short_trace,
                             const ShardOptions& layout, bool use_cache) {
  ShardOptions one_rank = layout;
  ParallelismConfig& p = one_rank.parallelism;
  // The data-parallel ranks the experts fold onto (ep x etp of them), none otherwise.
  const int64_t expert_ranks = p.ep * p.expert_tp();
  p.dp = expert_ranks % (p.tp * p.cp) == 0 ? std::max<int64_t>(expert_ranks / (p.tp * p.cp), 1) : expert_ranks;
  p.pp = 1, p.vpp.reset();
  one_rank.pp_layout.clear();
  one_rank.gpus.reset();
  one_rank.pipeline_schedule.reset();
  one_rank.training.global_batch = one_rank.training.micro_batch * p.dp;
  one_rank.training.distributed_optimizer = false;
  one_rank.training.data_parallel_sharding = DataParallelSharding::no_shard;
  const std::string key = use_cache ? job_cache_key(short_model, evaluate.hardware(), one_rank) : "";
  if (use_cache)
    if (std::optional<std::string> cached = cache_get("layers", key)) {
      nlohmann::json record = nlohmann::json::parse(*cached);
      auto per_pass = [&](const char* part) { return record.contains(part) && record[part].size() == PassCompute().size(); };
      if (record.is_null() || (per_pass("layer") && per_pass("embedding") && per_pass("head") &&
                               record.contains("layers") && record.contains("layer_kept_bytes")))
        return record;
    }
  const CostEstimator& estimator = evaluate.estimator();  // a hardware it cannot load stops the search
  nlohmann::json compute;
  try {
    Graph graph = shard_and_cost(short_model, short_trace, estimator, one_rank);  // no memory read
    // Per part: the decoder layers, then the embedding and the output layer; per pass.
    const size_t layers = static_cast<size_t>(short_model.num_layers);
    std::vector<size_t> part_of(graph.shard->ops.size());
    std::vector<PassCompute> ms(layers + 2, PassCompute{});
    for (const ShardOp& op : graph.shard->ops) {
      const size_t part = op.layer ? static_cast<size_t>(*op.layer) : before_layers(op) ? layers : layers + 1;
      part_of[op.id] = part;
      if (op.scope != OpScope::microbatch || op.stream != Stream::compute) continue;
      const double time_ms = graph.cost->ops[op.id].time_us / kUsPerMs;
      ms.at(part)[kAllPasses] += time_ms;
      if (op.pass == OpPass::forward) ms.at(part)[kForward] += time_ms;
      if (op.pass == OpPass::weight) ms.at(part)[kWeight] += time_ms;
      if (op.recompute) ms.at(part)[kRecomputed] += time_ms;
    }
    // One rank without pipeline runs a forward slot kind, then a backward one.
    const std::vector<std::vector<double>> spans = part_spans_ms(*graph.shard, *graph.cost, 0, part_of, layers + 2);
    if (spans.size() != 2)
      throw DataError("layer compute: one rank runs " + std::to_string(spans.size()) + " slot kinds, not 2");
    for (size_t part = 0; part < ms.size(); ++part)
      ms[part][kForwardSpan] = spans[0][part], ms[part][kBackwardSpan] = spans[1][part];
    PassCompute layer = ms[0];
    for (size_t l = 1; l < layers; ++l)
      for (size_t pass = 0; pass < layer.size(); ++pass) layer[pass] = std::min(layer[pass], ms[l][pass]);
    nlohmann::json by_layer = nlohmann::json::array();
    for (size_t l = 0; l < layers; ++l) {
      const auto [moe, windowed] = layer_kind(short_model, static_cast<int64_t>(l));
      by_layer.push_back({{"moe", moe}, {"windowed", windowed}, {"ms", ms[l]}});
    }
    const std::vector<double> kept = layer_bytes_kept_for_backward(*graph.shard, layers);
    compute = {{"layer", layer},
               {"layers", by_layer},
               {"embedding", ms[layers]},
               {"head", ms[layers + 1]},
               {"layer_kept_bytes", *std::min_element(kept.begin(), kept.end())}};
  } catch (const DataError&) {
  } catch (const UsageError&) {
  }
  if (use_cache) cache_put("layers", key, compute.dump());
  return compute;
}

ModelConfig short_model_of(const ModelConfig& model) {
  ModelConfig short_model = model;
  short_model.num_layers = std::min<int64_t>(2, model.num_layers);
  short_model.mtp_num_layers = 0;
  // One layer of each kind where the model mixes them (dense and MoE, windowed and full), so
  // that the cheaper kind's layer bounds every layer.
  for (std::vector<int>* pattern : {&short_model.moe_layer_pattern, &short_model.sliding_window_pattern}) {
    if (pattern->empty()) continue;
    const bool mixed = std::count(pattern->begin(), pattern->end(), 0) && std::count(pattern->begin(), pattern->end(), 1);
    if (mixed && short_model.num_layers == 2)
      *pattern = {0, 1};
    else
      pattern->resize(static_cast<size_t>(short_model.num_layers));
  }
  return short_model;
}

double compute_lower_bound_ms(const nlohmann::json& compute, const ModelConfig& model, const ShardOptions& layout) {
  if (compute.is_null()) return 0;
  const PassCompute fewest = compute["layer"], embedding = compute["embedding"], head = compute["head"];
  // A decoder layer's compute: the least of the short model's layers of its kind, or of all
  // of them where none is of its kind.
  std::map<std::pair<bool, bool>, PassCompute> of_kind;
  for (const nlohmann::json& layer : compute["layers"]) {
    const PassCompute ms = layer["ms"];
    auto [known, added] = of_kind.try_emplace({layer["moe"].get<bool>(), layer["windowed"].get<bool>()}, ms);
    for (size_t pass = 0; pass < ms.size(); ++pass) known->second[pass] = std::min(known->second[pass], ms[pass]);
  }
  auto layer_ms = [&](int64_t l) -> const PassCompute& {
    auto known = of_kind.find(layer_kind(model, l));
    return known == of_kind.end() ? fewest : known->second;
  };
  const ParallelismConfig& p = layout.parallelism;
  const int64_t stages = p.pp * p.vpp.value_or(1), num_layers = model.num_layers;
  std::vector<PassCompute> stage(stages);
  int64_t first_layer = 0;  // of virtual stage v
  for (int64_t v = 0; v < stages; ++v) {
    // The layout's layers on the stage, each of its kind: its uneven split, or the even one;
    // where that does not divide them, floor(layers / stages) of the least compute.
    const int64_t layers = stage_layers(layout, num_layers, v);
    const bool contiguous = !layout.pp_layout.empty() || num_layers % stages == 0;
    for (int64_t l = first_layer, end = first_layer + layers; l < end;) {  // by runs of one kind
      const PassCompute& ms = contiguous ? layer_ms(l) : fewest;
      int64_t run = 1;
      while (l + run < end && (!contiguous || &layer_ms(l + run) == &ms)) ++run;
      for (size_t pass = 0; pass < ms.size(); ++pass) stage[v][pass] += static_cast<double>(run) * ms[pass];
      l += run;
    }
    first_layer += layers;
  }
  for (size_t pass = 0; pass < fewest.size(); ++pass) stage.front()[pass] += embedding[pass], stage.back()[pass] += head[pass];
  const std::optional<ScheduleKind> schedule = layout.pipeline_schedule;
  // A slot's parts run one after another on the compute stream, so their spans add up; where
  // the schedule moves the weight gradients to slots of their own (zero bubble), or where the
  // combined 1F1B schedule hides one slot's communication under the other's compute, only the
  // compute is counted.
  const bool whole_backward =
      !layout.training.overlap_moe_expert_parallel_comm &&
      schedule != ScheduleKind::zb_h1;
  auto forward_ms = [&](const PassCompute& s) { return whole_backward ? s[kForwardSpan] : s[kForward]; };
  auto backward_ms = [&](const PassCompute& s) { return whole_backward ? s[kBackwardSpan] : s[kAllPasses] - s[kForward]; };
  // A part's input-gradient compute: its backward less the weight gradients and the
  // recomputed forward, neither of which the gradient sent to the stage before waits for.
  auto input_gradient_ms = [](const PassCompute& s) { return s[kAllPasses] - s[kForward] - s[kWeight] - s[kRecomputed]; };
  // 1F1B and its interleaved form end each rank with the last micro-batch's backward of its
  // first virtual stage, and only what follows the input gradient in that slot may run while
  // the stages before take that gradient back; zero-bubble and GPipe orders are not counted on.
  const bool drains = whole_backward && schedule != ScheduleKind::gpipe;
  const double microbatches = static_cast<double>(microbatches_per_pipeline(layout));
  double bound = 0, before = 0, after = 0;  // the first forward to rank r's first virtual stage; the last backward from it
  for (int64_t r = 0; r < p.pp; ++r) {
    double per_microbatch = 0;
    for (int64_t v = r; v < stages; v += p.pp) per_microbatch += forward_ms(stage[v]) + backward_ms(stage[v]);
    const PassCompute& first = stage[r];
    const double meanwhile = backward_ms(first) - input_gradient_ms(first) - first[kRecomputed];
    const double drain = drains ? after - meanwhile : 0;
    bound = std::max(bound, before + microbatches * per_microbatch + std::max(drain, 0.0));
    before += forward_ms(first);
    after += input_gradient_ms(first);
  }
  return bound;
}

std::vector<int64_t> forwards_before_first_backward(const ShardOptions& layout) {
  const ParallelismConfig& p = layout.parallelism;
  const PipelineSchedule schedule = make_schedule(pipeline_schedule_of(layout), p.pp, p.vpp.value_or(1),
                                                  microbatches_per_pipeline(layout),
                                                  layout.training.overlap_moe_expert_parallel_comm);
  std::vector<int64_t> forwards;
  for (const std::vector<ScheduleSlot>& slots : schedule)
    forwards.push_back(std::find_if(slots.begin(), slots.end(), [](const ScheduleSlot& slot) {
                         return slot.pass != OpPass::forward;
                       }) - slots.begin());
  return forwards;
}

double activation_lower_bound_gb(const nlohmann::json& compute, int64_t num_layers, const ShardOptions& layout,
                                 const std::vector<int64_t>& forwards_before_backward) {
  const ParallelismConfig& p = layout.parallelism;
  if (compute.is_null() || layout.training.cpu_offloading_num_layers != 0 ||
      static_cast<int64_t>(forwards_before_backward.size()) != p.pp)
    return 0;
  const double layer_kept_bytes = compute["layer_kept_bytes"];
  const int64_t stages = p.pp * p.vpp.value_or(1);
  double bytes = 0;  // summed over the ranks
  for (int64_t r = 0; r < p.pp; ++r) {
    // Each forward slot of the rank holds at least its fewest-layered virtual stage's layers.
    int64_t fewest_layers = num_layers;
    for (int64_t v = r; v < stages; v += p.pp)
      fewest_layers = std::min(fewest_layers, stage_layers(layout, num_layers, v));
    bytes += static_cast<double>(forwards_before_backward[r] * fewest_layers) * layer_kept_bytes;
  }
  return bytes / static_cast<double>(p.pp) / kBytesPerGB;
}

double sharded_communication_lower_bound_ms(const ModelConfig& model, const HardwareConfig& hardware,
                                            double params_total, double expert_params, const ShardOptions& layout) {
  const TrainingConfig& t = layout.training;
  if (!t.shards_gradients()) return 0;
  // The decoder layers' parameters of the busiest rank (split at most tp ways, the experts'
  // ep x etp ways): the units it gathers and reduces in every micro-batch. The embedding and
  // output layer are left out, which keeps this a lower bound.
  const ParallelismConfig& p = layout.parallelism;
  const double outside_layers =
      static_cast<double>(model.vocab_size) * static_cast<double>(model.hidden_size) * (model.tie_word_embeddings ? 1 : 2);
  const double pp = static_cast<double>(p.pp);
  const double dense = std::max(params_total - expert_params - outside_layers, 0.0) / (static_cast<double>(p.tp) * pp);
  const double experts = expert_params / (static_cast<double>(p.ep * p.expert_tp()) * pp);
  const bool once_a_step = fsdp_units_once_a_step(layout);
  const double microbatches = once_a_step ? 1.0 : static_cast<double>(microbatches_per_pipeline(layout));
  const double weight_bytes = t.fp8_param_gather ? 1 : 2;  // fp8 parameters gather a byte per element
  const double gradient_bytes = t.main_grad_bytes();       // fp32, or bf16 with grad_reduce_in_bf16
  // Each group's collectives run one at a time on its stream. A collective of the summed bytes
  // takes no longer than the collectives it sums (their latencies add, their bandwidth does
  // not fall with size), so it bounds that stream's busy time, and the step's.
  double bound_us = 0;
  auto stream_bound = [&](CommGroup group, int64_t ranks, double params) {
    if (ranks == 1 || params <= 0) return;
    ShardOp collective;
    collective.kind = OpKind::collective;
    collective.group = group;
    collective.group_size = ranks;
    collective.collective = Collective::reduce_scatter;
    collective.message_bytes = microbatches * params * gradient_bytes;
    try {
      double us = shard_collective_time(collective, p, hardware).time_us;
      if (t.shards_weights()) {  // gathered before forward and again before backward, or once
        collective.collective = Collective::all_gather;
        collective.message_bytes = microbatches * (once_a_step ? 1 : 2) * params * weight_bytes;
        us += shard_collective_time(collective, p, hardware).time_us;
      }
      bound_us = std::max(bound_us, us);
    } catch (const DataError&) {  // a group the hardware cannot place: the estimate says why
    }
  };
  stream_bound(CommGroup::dp, p.dp_shard_group(), dense);
  stream_bound(CommGroup::edp, p.expert_dp(), experts);
  return bound_us / kUsPerMs;
}

double model_state_lower_bound_gb(double params_total, const ShardOptions& layout, double expert_params) {
  // Every parameter lives on some pipeline rank, split at most tp ways (an expert's, ep x etp
  // ways), so the heaviest rank holds at least params / (tp * pp) of them (the experts' /
  // (ep * etp * pp)): their weights (16-bit, or at least the fp8 byte of --fp8-param-gather),
  // gradients and optimizer states, counted as syssim-mem does.
  const ParallelismConfig& p = layout.parallelism;
  constexpr double kHalfPrecisionBytes = 2, kFp8Bytes = 1;
  const double pp = static_cast<double>(p.pp);
  const double experts = expert_params / (static_cast<double>(p.ep * p.expert_tp()) * pp);
  const double params = (params_total - expert_params) / (static_cast<double>(p.tp) * pp) + experts;
  const double weight_bytes_per_param = layout.training.fp8_param_gather ? kFp8Bytes : kHalfPrecisionBytes;
  TrainingStateBytes states = training_state_bytes(params, p, layout.training, experts);
  return (params * weight_bytes_per_param * states.weight_share + states.grad_bytes + states.optimizer_state_bytes) / kBytesPerGB;
}

namespace {

// The search of one base job (search_layouts), as the steps it takes over its layouts: lower
// bounds first (model states, compute, sharded communication), then rounds that estimate and
// simulate the open layouts in order of their bound while the front of simulated layouts
// prunes the rest.
class LayoutSearch {
 public:
  LayoutSearch(const ModelConfig& model, const HardwareConfig& hardware, const ShardOptions& base, bool prune,
               const SweepSettings& settings)
      : model_(model),
        hardware_(hardware),
        base_(base),
        prune_(prune),
        settings_(settings),
        layouts_(enumerate_layouts(model, hardware, base)),
        evaluate_(model, hardware, settings.use_cache),
        outcome_(layouts_.size(), Outcome::kOpen),
        refusal_(layouts_.size()),
        known_(layouts_.size()),
        group_of_(layouts_.size()),
        communication_bound_ms_(layouts_.size(), 0),
        sibling_without_recompute_(layouts_.size()) {
    group_by_micro_batch();
  }

  // A layout whose weights, gradients and optimizer states alone exceed the GPU is out of
  // memory whatever its micro-batch, and needs no estimate at all. Sharded data parallelism's
  // per-micro-batch collectives bound a layout's step from below as its compute does.
  void bound_by_model_states() {
    const double params_total = traced_parameters(evaluate_.trace(), evaluate_.trace().axes);
    const double expert_params = expert_parameters(evaluate_.trace());
    if (prune_)
      for (size_t i = 0; i < layouts_.size(); ++i)
        communication_bound_ms_[i] =
            sharded_communication_lower_bound_ms(model_, hardware_, params_total, expert_params, layouts_[i]);
    const std::optional<double> capacity_gb = hardware_.gpu_memory_GB;
    if (!capacity_gb) return;
    for (size_t i = 0; i < layouts_.size(); ++i) {
      known_[i].peak_memory_gb = model_state_lower_bound_gb(params_total, layouts_[i], expert_params);
      if (prune_ && known_[i].peak_memory_gb > *capacity_gb) outcome_[i] = Outcome::kOom;
    }
  }

  // Without pruning, every layout is estimated, a group per thread. With it, each starts from
  // the compute of its busiest rank (one shard per tp, cp, micro-batch, recompute, ep and etp;
  // docs/syssim-sweep.md) where the layers split evenly, and at least its communication bound.
  void bound_by_compute() {
    if (!prune_) {
      for_each_point(groups_.size(), settings_, [&](size_t g) {
        for (size_t i : groups_[g]) record(i, memory_estimate(evaluate_, layouts_[i], settings_.use_cache));
      });
    } else if (base_.pp_layout.empty() && !base_.decoder_first_pipeline_num_layers &&
               !base_.decoder_last_pipeline_num_layers && !base_.account_for_embedding_in_pipeline_split &&
               !base_.account_for_loss_in_pipeline_split) {  // the even split the compute bound assumes
      std::map<std::tuple<int64_t, int64_t, int64_t, std::string, int64_t, int64_t>, size_t> family_index;
      std::vector<size_t> family_layout;  // a layout of each family
      std::vector<size_t> family_of(layouts_.size());
      for (size_t i = 0; i < layouts_.size(); ++i) {
        if (outcome_[i] != Outcome::kOpen) continue;
        const ParallelismConfig& p = layouts_[i].parallelism;
        const TrainingConfig& t = layouts_[i].training;
        auto [it, added] = family_index.emplace(
            std::tuple{p.tp, p.cp, t.micro_batch, t.recompute, p.ep, p.expert_tp()}, family_layout.size());
        if (added) family_layout.push_back(i);
        family_of[i] = it->second;
      }
      ModelConfig short_model = short_model_of(model_);
      const TraceSection& short_trace = trace_of(short_model, base_.training.seq_length);
      std::vector<nlohmann::json> family_compute(family_layout.size());
      for_each_point(family_layout.size(), settings_, [&](size_t f) {
        family_compute[f] =
            layer_compute(evaluate_, short_model, short_trace, layouts_[family_layout[f]], settings_.use_cache);
      });
      for (size_t i = 0; i < layouts_.size(); ++i)
        if (outcome_[i] == Outcome::kOpen) {
          known_[i].bound_ms = compute_lower_bound_ms(family_compute[family_of[i]], model_, layouts_[i]);
          bound_activations(i, family_compute[family_of[i]]);
        }
    }
    for (size_t i = 0; i < layouts_.size(); ++i)
      if (outcome_[i] == Outcome::kOpen) known_[i].bound_ms = std::max(known_[i].bound_ms, communication_bound_ms_[i]);
  }

  // The activations its ranks hold at their first backward slots add to a layout's memory
  // bound, and may put it out of memory without an estimate.
  void bound_activations(size_t i, const nlohmann::json& compute) {
    const ShardOptions& layout = layouts_[i];
    const ParallelismConfig& p = layout.parallelism;
    const std::tuple key{pipeline_schedule_of(layout), p.pp, p.vpp.value_or(1), microbatches_per_pipeline(layout),
                         layout.training.overlap_moe_expert_parallel_comm};
    auto [known, added] = forwards_before_backward_.try_emplace(key);
    if (added) {
      try {
        known->second = forwards_before_first_backward(layout);
      } catch (const UsageError&) {  // a schedule the shard stage refuses: its estimate says so
      }
    }
    known_[i].peak_memory_gb += activation_lower_bound_gb(compute, model_.num_layers, layout, known->second);
    if (hardware_.gpu_memory_GB && known_[i].peak_memory_gb > *hardware_.gpu_memory_GB) outcome_[i] = Outcome::kOom;
  }

  // Recomputation only adds work to the same step (ops on the compute stream and their
  // communication), so the bound of a layout without recompute, once estimated, bounds its
  // recomputing siblings' too.
  void pair_recompute_siblings() {
    std::map<InputsKey, size_t> without_recompute;
    for (size_t i = 0; i < layouts_.size(); ++i)
      if (layouts_[i].training.recompute == "none")
        without_recompute.emplace(inputs_but(layouts_[i], AllBut::recompute), i);
    for (size_t i = 0; i < layouts_.size(); ++i) {
      if (layouts_[i].training.recompute == "none") continue;
      auto sibling = without_recompute.find(inputs_but(layouts_[i], AllBut::recompute));
      if (sibling != without_recompute.end()) sibling_without_recompute_[i] = sibling->second;
    }
  }

  // The open layouts wait in order of their bound, lowest first, so that the layouts simulated
  // early prune the most: a lower bound until the layout is estimated, then its own. Each
  // round takes up to kRound layouts from the front of the line that the front of simulated
  // layouts does not prune (a member using no more memory and faster than the bound dominates
  // the layout): those not estimated yet are estimated and go back in line with their own
  // bound and memory; the others are simulated and join the front. A recomputing layout waits
  // for the estimate of its sibling without recompute when that is in the round. Each round
  // runs in parallel; its size is fixed, not one per thread, so that the counts do not
  // depend on the threads.
  void simulate_in_rounds() {
    for (size_t i = 0; i < layouts_.size(); ++i)
      if (outcome_[i] == Outcome::kOpen) line_.emplace(known_[i].bound_ms, known_[i].peak_memory_gb, i), ++open_count_;
    while (!line_.empty()) run_round();
  }

  SearchResult result() const {
    SearchResult result;
    result.enumerated = static_cast<int64_t>(layouts_.size());
    for (Outcome o : outcome_) {
      result.invalid += o == Outcome::kInvalid;
      result.pruned_by_memory += o == Outcome::kOom;
      result.pruned_by_bound += o == Outcome::kPrunedByBound;
      result.simulated += o == Outcome::kSimulated;
    }
    for (size_t i = 0; i < layouts_.size() && result.first_refusal.empty(); ++i) result.first_refusal = refusal_[i];
    result.front = front_;
    std::stable_sort(result.front.begin(), result.front.end(), [](const SweepRow& a, const SweepRow& b) {
      return a.step_time_ms != b.step_time_ms ? a.step_time_ms < b.step_time_ms : a.peak_memory_gb < b.peak_memory_gb;
    });
    return result;
  }

 private:
  enum class Outcome { kOpen, kInvalid, kOom, kPrunedByBound, kSimulated };
  static constexpr size_t kRound = 8;

  // Layouts that differ only in their micro-batch form a group. Activations grow with the
  // micro-batch, so once a layout is out of memory the same layout with a larger micro-batch
  // is too, and is dropped without an estimate.
  void group_by_micro_batch() {
    std::map<InputsKey, size_t> group_index;
    for (size_t i = 0; i < layouts_.size(); ++i) {
      auto [it, added] = group_index.emplace(inputs_but(layouts_[i], AllBut::micro_batch), groups_.size());
      if (added) groups_.emplace_back();
      groups_[it->second].push_back(i);
      group_of_[i] = it->second;
    }
    smallest_oom_.resize(groups_.size());
  }

  bool skipped_by_micro_batch(size_t i) const {
    const std::optional<int64_t>& oom = smallest_oom_[group_of_[i]];
    return prune_ && oom && *oom <= layouts_[i].training.micro_batch;
  }

  // A layout's memory estimate: invalid, out of memory (its group's larger micro-batches too),
  // or its peak and the bound on its step.
  void record(size_t i, const nlohmann::json& estimated) {
    const std::string status = estimated["status"];
    known_[i].estimated = true;
    if (status == "invalid") {
      outcome_[i] = Outcome::kInvalid;
      refusal_[i] = estimated.value("reason", "");
      return;
    }
    known_[i].peak_memory_gb = estimated["peak_memory_gb"];
    known_[i].bound_ms = std::max(estimated["step_bound_ms"].get<double>(), communication_bound_ms_[i]);
    if (status == "oom") {
      outcome_[i] = Outcome::kOom;
      std::optional<int64_t>& oom = smallest_oom_[group_of_[i]];
      oom = std::min(oom.value_or(layouts_[i].training.micro_batch), layouts_[i].training.micro_batch);
    }
  }

  // What is known of a layout now: its estimate, or its lower bounds, the sibling's included.
  Candidate candidate(size_t i) const {
    Candidate c = known_[i];
    const std::optional<size_t>& sibling = sibling_without_recompute_[i];
    if (!c.estimated && sibling && known_[*sibling].estimated && outcome_[*sibling] != Outcome::kInvalid)
      c.bound_ms = std::max(c.bound_ms, known_[*sibling].bound_ms);
    return c;
  }

  bool pruned_by_front(const Candidate& c) const {
    return prune_ && std::any_of(front_.begin(), front_.end(), [&](const SweepRow& q) {
             return q.peak_memory_gb <= c.peak_memory_gb && q.step_time_ms < c.bound_ms;
           });
  }

  void run_round() {
    std::vector<size_t> to_estimate, to_simulate, waiting;
    while (!line_.empty() && to_estimate.size() + to_simulate.size() < kRound) {
      const auto [bound_ms, memory_gb, i] = *line_.begin();
      line_.erase(line_.begin());
      const Candidate c = candidate(i);
      const std::optional<size_t>& sibling = sibling_without_recompute_[i];
      if (pruned_by_front(c))
        outcome_[i] = Outcome::kPrunedByBound;
      else if (known_[i].estimated)
        to_simulate.push_back(i);
      else if (c.bound_ms > bound_ms)
        line_.emplace(c.bound_ms, c.peak_memory_gb, i);  // the sibling's estimate raised it
      else if (sibling && outcome_[*sibling] == Outcome::kOpen && !known_[*sibling].estimated)
        waiting.push_back(i);
      else if (skipped_by_micro_batch(i))
        outcome_[i] = Outcome::kOom;
      else
        to_estimate.push_back(i);
    }
    std::vector<nlohmann::json> estimates(to_estimate.size());
    std::vector<SweepRow> rows(to_simulate.size());
    SweepSettings round_settings = settings_;
    round_settings.progress = nullptr;
    // The simulations first: each takes several estimates' time, and started last they would
    // leave one thread running alone at the round's end.
    for_each_point(to_estimate.size() + to_simulate.size(), round_settings, [&](size_t k) {
      if (k < to_simulate.size()) {
        rows[k].inputs = layout_inputs(layouts_[to_simulate[k]]);
        evaluate_(layouts_[to_simulate[k]], rows[k]);
      } else {
        const size_t e = k - to_simulate.size();
        estimates[e] = memory_estimate(evaluate_, layouts_[to_estimate[e]], settings_.use_cache);
      }
    });
    for (size_t k = 0; k < to_estimate.size(); ++k) {
      const size_t i = to_estimate[k];
      record(i, estimates[k]);
      if (outcome_[i] == Outcome::kOpen) line_.emplace(known_[i].bound_ms, known_[i].peak_memory_gb, i);
    }
    for (size_t i : waiting) line_.emplace(known_[i].bound_ms, known_[i].peak_memory_gb, i);
    for (size_t k = 0; k < rows.size(); ++k) {
      outcome_[to_simulate[k]] = Outcome::kSimulated;
      if (rows[k].status != "ok")
        throw DataError("search: the layout " + rows[k].inputs.dump() + " fit in the memory estimate but its "
                        "simulation reports: " + (rows[k].reason.empty() ? rows[k].status : rows[k].reason));
      add_to_front(front_, rows[k]);
    }
    // Progress restarts: the open layouts decided (simulated or pruned).
    if (settings_.progress)
      settings_.progress(static_cast<int64_t>(open_count_ - line_.size()), static_cast<int64_t>(open_count_));
  }

  const ModelConfig& model_;
  const HardwareConfig& hardware_;
  const ShardOptions& base_;
  const bool prune_;
  const SweepSettings& settings_;
  const std::vector<ShardOptions> layouts_;
  PointEvaluator evaluate_;
  std::vector<Outcome> outcome_;
  std::vector<std::string> refusal_;  // by layout: why the shard stage refused it
  std::vector<Candidate> known_;
  std::vector<std::vector<size_t>> groups_;  // by micro-batch group, its layouts
  std::vector<size_t> group_of_;
  std::vector<std::optional<int64_t>> smallest_oom_;  // per group: its smallest micro-batch out of memory
  std::vector<double> communication_bound_ms_;
  std::vector<std::optional<size_t>> sibling_without_recompute_;
  // By schedule, pipeline size, vpp, micro-batches and combined 1F1B: forwards_before_first_backward.
  std::map<std::tuple<ScheduleKind, int64_t, int64_t, int64_t, bool>, std::vector<int64_t>> forwards_before_backward_;
  std::set<std::tuple<double, double, size_t>> line_;  // (bound, memory, layout)
  size_t open_count_ = 0;
  std::vector<SweepRow> front_;
};

}  // namespace

SearchResult search_layouts(const ModelConfig& model, const HardwareConfig& hardware, const ShardOptions& base,
                            bool prune, const SweepSettings& settings) {
  LayoutSearch search(model, hardware, base, prune, settings);
  search.bound_by_model_states();
  search.bound_by_compute();
  search.pair_recompute_siblings();
  search.simulate_in_rounds();
  return search.result();
}

}  // namespace syssim
