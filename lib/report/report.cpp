#include "report/report.hpp"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "common/error.hpp"

namespace syssim {
namespace {

using nlohmann::json;

constexpr double kBytesPerGB = 1e9;
constexpr double kFlopsPerTflop = 1e12;
constexpr double kMsPerS = 1e3;
constexpr size_t kTextTopOps = 3;

void check_format(const std::string& format) {
  if (format != "text" && format != "json")
    throw UsageError("unknown report format \"" + format + "\": expected text or json");
}

std::string fixed(double value, int decimals) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

std::string ms(double value) { return fixed(value, 4); }
std::string gb(double value) { return fixed(value, 3); }
std::string percent(double fraction) { return fixed(fraction * 100, 2) + "%"; }

std::string timed_text(const TimedOp& op) { return "('" + op.name + "', " + ms(op.time_ms) + ")"; }

std::string oom_text(const MemSection& mem) {
  if (!mem.oom) return "none";
  return "capacity " + gb(mem.oom->capacity_gb) + " GB, required " + gb(mem.oom->required_gb) + " GB, excess " +
         gb(mem.oom->excess_gb) + " GB";
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
                {"oom", oom_text(mem)}});
}

// The memory fields and the configurations, shared by both JSON reports.
json memory_json(const Graph& g, const ShardSection& shard, const MemSection& mem) {
  return {{"param_bytes", mem.param_bytes},
          {"grad_bytes", mem.grad_bytes},
          {"optimizer_state_bytes", mem.optimizer_state_bytes},
          {"activation_bytes", mem.activation_bytes},
          {"temporary_bytes", mem.temporary_bytes},
          {"peak_memory_gb", mem.peak_memory_gb},
          {"pp_stage_memory_gb", mem.pp_stage_memory_gb},
          {"bottlenecks", {{"peak_module", mem.peak_module}, {"oom", oom_to_json(mem.oom)}}},
          {"model", g.model ? to_json(*g.model) : json()},
          {"parallelism", to_json(shard.parallelism)},
          {"training", to_json(shard.training)},
          {"hardware", g.cost ? to_json(g.cost->hardware) : json()}};
}

std::string full_text(const MemSection& mem, const SimSection& sim, const Throughput& rate) {
  std::string top_ops = "[";
  for (size_t i = 0; i < std::min(kTextTopOps, sim.top_ops.size()); ++i)
    top_ops += (i ? ", " : "") + timed_text(sim.top_ops[i]);
  top_ops += "]";
  std::string bottlenecks =
      block("Bottlenecks", 2,
            {{"dominant_op_type", sim.dominant_op_type},
             {"top_ops_by_time", top_ops},
             {"longest_collective", sim.longest_collective.name.empty() ? "none" : timed_text(sim.longest_collective)},
             {"binding_pp_stage", std::to_string(sim.binding_pp_stage)},
             {"peak_module", mem.peak_module},
             {"oom", oom_text(mem)}});
  return block("SimulationReport", 0,
               {{"step_time_ms", ms(sim.step_time_ms)},
                {"forward_ms", ms(sim.forward_ms), true},
                {"backward_ms", ms(sim.backward_ms), true},
                {"optimizer_ms", ms(sim.optimizer_ms), true},
                {"collective_total_ms", ms(sim.collective_total_ms)},
                {"collective_exposed", ms(sim.collective_exposed_ms)},
                {"achieved_tflops", fixed(rate.achieved_tflops, 2)},
                {"mfu", percent(rate.mfu)},
                {"hfu", percent(rate.hfu)},
                {"peak_memory_gb", gb(mem.peak_memory_gb)}},
               {memory_block(mem), bottlenecks});
}

json full_json(const Graph& g, const ShardSection& shard, const MemSection& mem, const SimSection& sim,
               const Throughput& rate) {
  json report = memory_json(g, shard, mem);
  json top_ops = json::array();
  for (const TimedOp& op : sim.top_ops) top_ops.push_back({op.name, op.time_ms});
  json& bottlenecks = report["bottlenecks"];
  bottlenecks["dominant_op_type"] = sim.dominant_op_type;
  bottlenecks["top_ops_by_time"] = top_ops;
  bottlenecks["longest_collective"] = {sim.longest_collective.name, sim.longest_collective.time_ms};
  bottlenecks["binding_pp_stage"] = sim.binding_pp_stage;
  report.update({{"step_time_ms", sim.step_time_ms},
                 {"forward_ms", sim.forward_ms},
                 {"backward_ms", sim.backward_ms},
                 {"optimizer_ms", sim.optimizer_ms},
                 {"collective_total_ms", sim.collective_total_ms},
                 {"collective_exposed_ms", sim.collective_exposed_ms},
                 {"by_op_type_ms", sim.by_op_type_ms},
                 {"model_flops_per_step", shard.model_flops_per_step},
                 {"achieved_tflops", rate.achieved_tflops},
                 {"mfu", rate.mfu},
                 {"hfu", rate.hfu},
                 {"per_pp_rank_step_time_ms", sim.per_pp_rank_step_time_ms}});
  return report;
}

}  // namespace

Throughput throughput(const Graph& g) {
  const ShardSection& shard = need_section(g.shard, "shard", "syssim-shard");
  const CostSection& cost = need_section(g.cost, "cost", "syssim-cost");
  const SimSection& sim = need_section(g.sim, "sim", "syssim-sim");
  if (sim.step_time_ms <= 0)
    throw DataError("/sim/step_time_ms: expected a positive step time, got " + std::to_string(sim.step_time_ms));
  double step_time_s = sim.step_time_ms / kMsPerS;
  double num_gpus = static_cast<double>(shard.parallelism.world_size());
  Throughput rate;
  rate.achieved_tflops = shard.model_flops_per_step / (step_time_s * num_gpus) / kFlopsPerTflop;
  rate.mfu = rate.achieved_tflops / cost.hardware.peak_tflops_mm;
  // Without activation recomputation a rank executes no FLOPs beyond the model's (docs/metrics.md).
  rate.hfu = rate.mfu;
  return rate;
}

std::string render_report(const Graph& g, const std::string& format) {
  check_format(format);
  const ShardSection& shard = need_section(g.shard, "shard", "syssim-shard");
  const SimSection& sim = need_section(g.sim, "sim", "syssim-sim");
  const MemSection& mem = need_section(g.mem, "mem", "syssim-mem");
  Throughput rate = throughput(g);
  if (format == "text") return full_text(mem, sim, rate);
  return full_json(g, shard, mem, sim, rate).dump(2) + "\n";
}

std::string render_memory_report(const Graph& g, const std::string& format) {
  check_format(format);
  const ShardSection& shard = need_section(g.shard, "shard", "syssim-shard");
  const MemSection& mem = need_section(g.mem, "mem", "syssim-mem");
  if (format == "json") return memory_json(g, shard, mem).dump(2) + "\n";
  std::string bottlenecks = block("Bottlenecks", 2, {{"peak_module", mem.peak_module}, {"oom", oom_text(mem)}});
  return block("SimulationReport", 0, {{"peak_memory_gb", gb(mem.peak_memory_gb)}}, {memory_block(mem), bottlenecks});
}

}  // namespace syssim
