// `syssim sweep --search`: every layout of N GPUs, pruned by memory and by a bound on the step
// time, down to the Pareto front of step time against peak memory.
#include <algorithm>
#include <map>
#include <optional>

#include "common/cache.hpp"
#include "common/error.hpp"
#include "driver/driver.hpp"
#include "mem/mem.hpp"
#include "sim/sim.hpp"
#include "sweep/detail.hpp"
#include "sweep/sweep.hpp"

namespace syssim {
namespace {

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> found;
  for (int64_t d = 1; d <= n; ++d)
    if (n % d == 0) found.push_back(d);
  return found;
}

// The layouts of `gpus` GPUs the shard stage accepts (shard.cpp check_layout, pipeline.cpp,
// schedule.cpp), in a fixed order: tp, pp, cp, micro-batch, vpp, recompute, optimizer.
std::vector<ShardOptions> enumerate_layouts(const ModelConfig& model, const HardwareConfig& hardware,
                                            const ShardOptions& base) {
  if (!base.gpus) throw UsageError("--search needs --gpus N");
  const int64_t gpus = *base.gpus;
  const int64_t seq = base.training.seq_length.value_or(model.seq_length);
  const int64_t global_batch = base.training.global_batch;
  std::vector<ShardOptions> layouts;
  for (int64_t tp : divisors(gpus)) {
    // Megatron-LM keeps tensor parallelism inside a node; tp splits heads, groups and the MLP.
    if (tp > hardware.gpus_per_node || model.num_attention_heads % tp || model.num_query_groups % tp ||
        model.ffn_hidden_size % tp)
      continue;
    for (int64_t pp : divisors(gpus / tp)) {
      if (model.num_layers % pp) continue;
      for (int64_t cp : divisors(gpus / tp / pp)) {
        // Context parallelism: flash attention only, 2*cp sequence chunks; SP splits each by tp.
        if (cp > 1 && (model.attention_backend != "flash" || seq % (2 * cp))) continue;
        if (seq % (tp * cp)) continue;
        const int64_t dp = gpus / tp / pp / cp;
        if (global_batch % dp) continue;
        for (int64_t micro_batch : divisors(global_batch / dp)) {
          const int64_t microbatches = global_batch / dp / micro_batch;
          // The interleaved schedule needs vpp dividing each rank's layers and whole rounds of pp micro-batches.
          std::vector<std::optional<int64_t>> vpps = {std::nullopt};
          if (pp > 1 && microbatches % pp == 0)
            for (int64_t vpp : divisors(model.num_layers / pp))
              if (vpp > 1) vpps.push_back(vpp);
          for (std::optional<int64_t> vpp : vpps)
            for (const char* recompute : {"none", "selective", "full"})
              for (bool distributed_optimizer : {false, true}) {
                if (distributed_optimizer && dp == 1) continue;  // shards over one rank: the same job
                ShardOptions layout = base;
                ParallelismConfig& p = layout.parallelism;
                p.tp = tp, p.pp = pp, p.cp = cp, p.dp = dp, p.vpp = vpp, p.sp = tp > 1;
                layout.training.micro_batch = micro_batch;
                layout.training.recompute = recompute;
                layout.training.distributed_optimizer = distributed_optimizer;
                layouts.push_back(layout);
              }
        }
      }
    }
  }
  return layouts;
}

nlohmann::ordered_json layout_inputs(const ShardOptions& o) {
  const ParallelismConfig& p = o.parallelism;
  return {{"parallelism.tp", p.tp},
          {"parallelism.pp", p.pp},
          {"parallelism.vpp", p.vpp ? nlohmann::ordered_json(*p.vpp) : nlohmann::ordered_json()},
          {"parallelism.cp", p.cp},
          {"parallelism.dp", p.dp},
          {"training.micro_batch", o.training.micro_batch},
          {"training.recompute", o.training.recompute},
          {"training.distributed_optimizer", o.training.distributed_optimizer}};
}

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
  nlohmann::json estimated = {{"status", "invalid"}};
  try {
    Graph graph = estimate_memory(evaluate.model(), evaluate.trace(), evaluate.estimator(), layout);
    estimated = {{"status", graph.mem->oom ? "oom" : "fits"},
                 {"peak_memory_gb", graph.mem->peak_memory_gb},
                 {"step_bound_ms", step_time_lower_bound_ms(*graph.shard, *graph.cost)}};
  } catch (const DataError&) {
  } catch (const UsageError&) {
  }
  if (use_cache) cache_put("estimate", key, estimated.dump());
  return estimated;
}

// What the search knows of a layout: until it is estimated, lower bounds on its peak memory
// (its model states) and on its step (its sibling's without recompute, or 0); then its own.
struct Candidate {
  size_t layout = 0;  // index into the enumeration
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

double model_state_lower_bound_gb(double params_total, const ShardOptions& layout) {
  // Every parameter lives on some pipeline rank, split at most tp ways, so the heaviest rank
  // holds at least params / (tp * pp) of them: their weights (16-bit, or at least the fp8
  // byte of --fp8-param-gather), gradients and optimizer states, counted as syssim-mem does.
  const ParallelismConfig& p = layout.parallelism;
  constexpr double kHalfPrecisionBytes = 2, kFp8Bytes = 1;
  const double params = params_total / static_cast<double>(p.tp * p.pp);
  const double weight_bytes_per_param = layout.training.fp8_param_gather ? kFp8Bytes : kHalfPrecisionBytes;
  TrainingStateBytes states = training_state_bytes(params, p, layout.training);
  constexpr double kBytesPerGB = 1e9;
  return (params * weight_bytes_per_param + states.grad_bytes + states.optimizer_state_bytes) / kBytesPerGB;
}

SearchResult search_layouts(const ModelConfig& model, const HardwareConfig& hardware, const ShardOptions& base,
                            bool prune, const SweepSettings& settings) {
  const std::vector<ShardOptions> layouts = enumerate_layouts(model, hardware, base);
  SearchResult result;
  result.enumerated = static_cast<int64_t>(layouts.size());
  PointEvaluator evaluate(model, hardware, settings.use_cache);
  // Layouts that differ only in their micro-batch form a group. Activations grow with the
  // micro-batch, so once a layout is out of memory the same layout with a larger micro-batch
  // is too, and is dropped without an estimate.
  std::map<std::string, size_t> group_index;
  std::vector<std::vector<size_t>> groups;
  std::vector<size_t> group_of(layouts.size());
  for (size_t i = 0; i < layouts.size(); ++i) {
    nlohmann::ordered_json group = layout_inputs(layouts[i]);
    group.erase("training.micro_batch");
    auto [it, added] = group_index.emplace(group.dump(), groups.size());
    if (added) groups.emplace_back();
    groups[it->second].push_back(i);
    group_of[i] = it->second;
  }
  std::vector<std::optional<int64_t>> smallest_oom(groups.size());  // per group: its smallest micro-batch out of memory
  enum class Outcome { kOpen, kInvalid, kOom, kPrunedByBound, kSimulated };
  std::vector<Outcome> outcome(layouts.size(), Outcome::kOpen);
  std::vector<Candidate> known(layouts.size());
  // A layout whose weights, gradients and optimizer states alone exceed the GPU is out of
  // memory whatever its micro-batch, and needs no estimate at all.
  const std::optional<double> capacity_gb = hardware.gpu_memory_GB;
  const double params_total = capacity_gb ? traced_parameters(evaluate.trace(), evaluate.trace().axes) : 0;
  for (size_t i = 0; i < layouts.size(); ++i) {
    known[i].layout = i;
    if (!capacity_gb) continue;
    known[i].peak_memory_gb = model_state_lower_bound_gb(params_total, layouts[i]);
    if (prune && known[i].peak_memory_gb > *capacity_gb) outcome[i] = Outcome::kOom;
  }
  auto skipped_by_micro_batch = [&](size_t i) {
    const std::optional<int64_t>& oom = smallest_oom[group_of[i]];
    return prune && oom && *oom <= layouts[i].training.micro_batch;
  };
  auto record = [&](size_t i, const nlohmann::json& estimated) {
    const std::string status = estimated["status"];
    known[i].estimated = true;
    if (status == "invalid") {
      outcome[i] = Outcome::kInvalid;
      return;
    }
    known[i].peak_memory_gb = estimated["peak_memory_gb"];
    known[i].bound_ms = estimated["step_bound_ms"];
    if (status == "oom") {
      outcome[i] = Outcome::kOom;
      std::optional<int64_t>& oom = smallest_oom[group_of[i]];
      oom = std::min(oom.value_or(layouts[i].training.micro_batch), layouts[i].training.micro_batch);
    }
  };
  // First the layouts without recompute (all of them without pruning), group by group in
  // parallel, the layouts of a group in enumeration order. Recomputation only adds work to
  // the same step (ops on the compute stream and their communication), so their bounds bound
  // their recomputing siblings' too, which are estimated only if that does not prune them.
  for_each_point(groups.size(), settings, [&](size_t g) {
    if (prune && layouts[groups[g].front()].training.recompute != "none") return;
    for (size_t i : groups[g])
      if (outcome[i] == Outcome::kOpen && !skipped_by_micro_batch(i))
        record(i, memory_estimate(evaluate, layouts[i], settings.use_cache));
      else if (outcome[i] == Outcome::kOpen)
        outcome[i] = Outcome::kOom;
  });
  std::map<std::string, size_t> without_recompute;
  for (size_t i = 0; i < layouts.size(); ++i)
    if (layouts[i].training.recompute == "none") {
      nlohmann::ordered_json inputs = layout_inputs(layouts[i]);
      inputs.erase("training.recompute");
      without_recompute.emplace(inputs.dump(), i);
    }
  std::vector<Candidate> open;
  for (size_t i = 0; i < layouts.size(); ++i) {
    if (outcome[i] != Outcome::kOpen) continue;
    if (!known[i].estimated) {
      nlohmann::ordered_json inputs = layout_inputs(layouts[i]);
      inputs.erase("training.recompute");
      auto sibling = without_recompute.find(inputs.dump());
      if (sibling != without_recompute.end() && known[sibling->second].estimated)
        known[i].bound_ms = known[sibling->second].bound_ms;
    }
    open.push_back(known[i]);
  }
  // Fastest bounds first, so that the layouts simulated early prune the most.
  std::stable_sort(open.begin(), open.end(), [](const Candidate& a, const Candidate& b) {
    return a.bound_ms != b.bound_ms ? a.bound_ms < b.bound_ms : a.peak_memory_gb < b.peak_memory_gb;
  });
  // A front member using no more memory than a layout's and faster than its bound dominates
  // it. The open layouts go in rounds of kRound that the front does not prune, each round in
  // parallel: those not estimated yet are estimated, then those the front still does not
  // prune are simulated and join the front. A fixed round, not one per thread, so that the
  // counts do not depend on the threads.
  constexpr size_t kRound = 8;
  SweepSettings round_settings = settings;
  round_settings.progress = nullptr;
  std::vector<SweepRow> front;
  auto pruned_by_front = [&](const Candidate& c) {
    return prune && std::any_of(front.begin(), front.end(), [&](const SweepRow& q) {
             return q.peak_memory_gb <= c.peak_memory_gb && q.step_time_ms < c.bound_ms;
           });
  };
  for (size_t f = 0; f < open.size();) {
    std::vector<size_t> round;
    for (; f < open.size() && round.size() < kRound; ++f) {
      const size_t i = open[f].layout;
      if (pruned_by_front(open[f]))
        outcome[i] = Outcome::kPrunedByBound;
      else if (!known[i].estimated && skipped_by_micro_batch(i))
        outcome[i] = Outcome::kOom;
      else
        round.push_back(i);
    }
    std::vector<nlohmann::json> estimates(round.size());
    for_each_point(round.size(), round_settings, [&](size_t k) {
      if (!known[round[k]].estimated) estimates[k] = memory_estimate(evaluate, layouts[round[k]], settings.use_cache);
    });
    std::vector<size_t> simulate;
    for (size_t k = 0; k < round.size(); ++k) {
      const size_t i = round[k];
      if (!known[i].estimated) record(i, estimates[k]);
      if (outcome[i] != Outcome::kOpen) continue;
      if (pruned_by_front(known[i]))
        outcome[i] = Outcome::kPrunedByBound;
      else
        simulate.push_back(i);
    }
    std::vector<SweepRow> rows(simulate.size());
    for_each_point(simulate.size(), round_settings, [&](size_t k) {
      rows[k].inputs = layout_inputs(layouts[simulate[k]]);
      evaluate(layouts[simulate[k]], rows[k]);
    });
    for (size_t k = 0; k < rows.size(); ++k) {
      outcome[simulate[k]] = Outcome::kSimulated;
      if (rows[k].status != "ok")
        throw DataError("search: the layout " + rows[k].inputs.dump() + " fit in the memory estimate but its "
                        "simulation reports: " + (rows[k].reason.empty() ? rows[k].status : rows[k].reason));
      add_to_front(front, rows[k]);
    }
    // Progress restarts: the open layouts, simulated or pruned.
    if (settings.progress) settings.progress(static_cast<int64_t>(f), static_cast<int64_t>(open.size()));
  }
  for (Outcome o : outcome) {
    result.invalid += o == Outcome::kInvalid;
    result.pruned_by_memory += o == Outcome::kOom;
    result.pruned_by_bound += o == Outcome::kPrunedByBound;
    result.simulated += o == Outcome::kSimulated;
  }
  std::stable_sort(front.begin(), front.end(), [](const SweepRow& a, const SweepRow& b) {
    return a.step_time_ms != b.step_time_ms ? a.step_time_ms < b.step_time_ms : a.peak_memory_gb < b.peak_memory_gb;
  });
  result.front = front;
  return result;
}

}  // namespace syssim
