#include "cost/cost.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include "common/text.hpp"
#include "common/units.hpp"
#include "network/network.hpp"

namespace syssim {
namespace {


std::string op_path(const ShardOp& op) { return "/shard/ops/" + std::to_string(op.id); }

// The estimator family of a compute op (lib/calibrate/calibrate.hpp): GEMMs and attention by
// kind; the other kernels by the op they are, named exactly (the norms, the reductions and
// Transformer Engine's and torchao's casts; every other op is elementwise).
std::string family_of(const ShardOp& op) {
  switch (op.kind) {
    case OpKind::gemm: return "gemm";
    case OpKind::attention: return "attention";
    case OpKind::collective:
    case OpKind::host_copy: throw InternalError(op_path(op) + ": a " + to_string(op.kind) + " has no kernel family");
    case OpKind::math:
    case OpKind::memory:
    case OpKind::optimizer: break;
  }
  switch (op.name.named_op()) {
    case NamedOp::rms_norm:
    case NamedOp::rms_norm_backward:
    case NamedOp::layer_norm:
    case NamedOp::layer_norm_backward:
    case NamedOp::grad_norm: return "norm";
    case NamedOp::sum:
    case NamedOp::cross_entropy:
    case NamedOp::amax: return "reduction";
    case NamedOp::quantize:
    case NamedOp::transpose:
    case NamedOp::torchao_quantize: return "quantize";
    default: return "elementwise";
  }
}

// A copy to or from host memory: one cudaMemcpyAsync, its bytes over one direction of the
// host link.
double host_copy_us(const ShardOp& op, const HardwareConfig& hw) {
  if (!hw.host_link_GBps)
    throw DataError("hardware " + hw.label() + ": no host_link_GBps, needed by the copy to or from host memory at " +
                    op_path(op));
  return hw.kernel_launch_us + op.bytes / (*hw.host_link_GBps * 1e3);
}

Kernel kernel_of(const ShardOp& op) {
  return Kernel{family_of(op), op.dtype, op.runs_backward_kernel(), op.shape, op.flops, op.bytes};
}

// The token rows an expert's GEMM is priced at: its share of the routed tokens (a mean, which
// a skew or a capacity makes fractional) as whole rows, up to a multiple of 16. An expert's
// tokens are a slice of the permuted rows, never an operand's leading dimension, so a ragged
// count costs a tile's tail, not the misaligned-operand kernels that the calibrated model
// learned from GEMMs whose reduction dim is contiguous (docs/syssim-cost.md "Grouped GEMMs").
double priced_expert_tokens(double tokens) {
  constexpr double kTokenGranule = 16;
  return std::ceil(tokens / kTokenGranule - 1e-9) * kTokenGranule;
}

// The kernels an op's time is the sum of, each with how many times it runs: the op itself, or
// for the experts' grouped GEMM one GEMM per local expert at its shape, the busiest expert's
// at its own (docs/syssim-cost.md "Grouped GEMMs").
std::vector<std::pair<Kernel, double>> parts_of(const ShardOp& op) {
  Kernel kernel = kernel_of(op);
  if (!op.shape.count("groups")) return {{std::move(kernel), 1.0}};
  const double groups = op.shape.at("groups");
  const char* tokens = op.pass == OpPass::weight ? "k" : "m";
  auto expert_gemm = [&](double mean_tokens) {
    const double expert_tokens = priced_expert_tokens(mean_tokens);
    const double m = tokens[0] == 'm' ? expert_tokens : op.shape.at("m");
    const double k = tokens[0] == 'k' ? expert_tokens : op.shape.at("k");
    Kernel gemm = gemm_kernel(m, op.shape.at("n"), k, op.dtype);
    gemm.backward = kernel.backward;
    return gemm;
  };
  if (!op.shape.count("busiest")) return {{expert_gemm(op.shape.at(tokens)), groups}};
  return {{expert_gemm(op.shape.at(tokens)), groups - 1}, {expert_gemm(op.shape.at("busiest")), 1.0}};
}

double roofline_of(const Kernel& kernel, const ShardOp& op, const HardwareConfig& hw) {
  try {
    return roofline_us(kernel, hw);
  } catch (const DataError& e) {
    throw DataError(std::string(e.what()) + ", needed by the " + op.dtype + " op at " + op_path(op));
  }
}

// The kernels an op launches: its shape's `kernels` (Transformer Engine's casts of the experts'
// rows, expert by expert), one GEMM per local expert for the experts' grouped GEMM (TE's
// GroupedLinear issues one cuBLAS GEMM per expert, general_grouped_gemm), else one; each
// issued by the host at the launch rate.
double kernel_launches(const ShardOp& op) {
  if (op.shape.count("kernels")) return op.shape.at("kernels");
  return op.shape.count("groups") ? op.shape.at("groups") : 1.0;
}

// The host's time to issue every op (docs/syssim-sim.md, "The host"). The host issues a
// rank's ops call by call: consecutive ops of one module in one pass (a linear's cast and
// GEMM, its dgrad and wgrad) are one call of the framework, a Transformer Engine module when
// it holds a GEMM or attention, else a PyTorch op. A call costs its kind's time, which
// launches its first kernel, and launch_us for every further kernel; the first op takes the
// call's time, the others their launches. Ops a CUDA graph captured are replayed instead:
// the consecutive ops of one graph (a scope in one layer and pass; the whole sequence for
// full_iteration) cost one PyTorch call, op_us, on the first. Only the micro-batches' ops are
// issued so: the step_start and step ops (bucket collectives issued from hooks, the
// optimizer's multi-tensor kernels) cost the host nothing here.
void price_host(const ShardSection& shard, const HardwareConfig::Host& host, std::vector<OpCost>& costs) {
  if (!host.simulated()) return;
  // The ops issued in one sequence: a stage's chunk, scope and slot pass (recomputed forward
  // ops and weight passes run among the backward ops, in op order).
  auto sequence_of = [](const ShardOp& op) {
    const bool backward = op.recompute || op.pass == OpPass::weight || op.pass == OpPass::backward;
    return std::tuple(op.stage, op.chunk, static_cast<int>(op.scope), backward);
  };
  auto same_call = [](const ShardOp& a, const ShardOp& b) {
    if (a.cuda_graph != b.cuda_graph) return false;
    if (a.cuda_graph == CudaGraphScope::full_iteration) return true;
    if (a.cuda_graph) return a.layer == b.layer && a.phase == b.phase && a.recompute == b.recompute;
    return a.module == b.module && a.phase == b.phase && a.recompute == b.recompute;
  };
  std::map<std::tuple<int64_t, int64_t, int, bool>, size_t> last_of;  // by sequence: its last op so far
  std::vector<size_t> call_of(shard.ops.size());                       // by op: its call's first op
  std::vector<char> engine_call(shard.ops.size(), 0);                  // by first op: a Transformer Engine module
  for (size_t i = 0; i < shard.ops.size(); ++i) {
    const ShardOp& op = shard.ops[i];
    auto [last, first_of_sequence] = last_of.try_emplace(sequence_of(op), i);
    call_of[i] = !first_of_sequence && same_call(shard.ops[last->second], op) ? call_of[last->second] : i;
    last->second = i;
    if (op.kind == OpKind::gemm || op.kind == OpKind::attention) engine_call[call_of[i]] = 1;
  }
  for (size_t i = 0; i < shard.ops.size(); ++i) {
    if (shard.ops[i].scope != OpScope::microbatch) continue;
    if (shard.ops[i].cuda_graph) {
      costs[i].host_us = call_of[i] == i ? host.op_us : 0;
      continue;
    }
    const double kernels = kernel_launches(shard.ops[i]);
    costs[i].host_us = call_of[i] != i ? kernels * host.launch_us
                                       : (engine_call[i] ? host.module_us : host.op_us) + (kernels - 1) * host.launch_us;
  }
}

// Which roofline term is the larger one, or the launch floor when neither reaches it.
OpBound bound_of(const Kernel& kernel, double time_us, double floor_us, const HardwareConfig& hw) {
  if (time_us <= floor_us) return OpBound::launch;
  Kernel memory_only = kernel;
  memory_only.flops = 0;
  return roofline_us(memory_only, hw) >= roofline_us(kernel, hw) ? OpBound::memory : OpBound::compute;
}

// What shard_collective_time reads of an op (besides its id, for messages); symbols by
// identity, as these tables are only looked up.
using CollectiveKey = std::tuple<uintptr_t, uintptr_t, uintptr_t, int64_t, int64_t, int64_t, double>;
// What a compute op's time depends on: the fields kernel_of reads (FLOPs and bytes first, as
// they tell most kernels apart at once); the shape is the op's, which outlives the key.
struct KernelKey {
  double flops, bytes;
  bool backward;
  uintptr_t kind, name, dtype;
  const KernelShape* shape;
  explicit KernelKey(const ShardOp& op)
      : flops(op.flops), bytes(op.bytes), backward(op.runs_backward_kernel()), kind(static_cast<uintptr_t>(op.kind)),
        name(op.name.identity()), dtype(op.dtype.identity()), shape(&op.shape) {}
  bool operator==(const KernelKey& o) const {
    return std::tie(flops, bytes, backward, kind, name, dtype, *shape) ==
           std::tie(o.flops, o.bytes, o.backward, o.kind, o.name, o.dtype, *o.shape);
  }
};
// Most of a step's compute ops repeat an earlier op's kernel (every layer's): a hash finds the
// first at once, where ordering keys would compare whole shapes along a tree's path.
struct KernelKeyHash {
  size_t operator()(const KernelKey& k) const {
    size_t h = std::hash<double>()(k.flops);
    auto mix = [&h](size_t v) { h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2); };
    mix(std::hash<double>()(k.bytes));
    mix(k.backward);
    mix(k.kind), mix(k.name), mix(k.dtype);
    for (const auto& dim : *k.shape) mix(std::hash<double>()(dim.second));  // the names follow from the op's name, mostly
    return h;
  }
};

// The attention kernel's time over the hardware's flash attention, as the model's
// attention_backend names it (docs/syssim-cost.md, "Attention kernels").
HardwareConfig::AttentionKernelTime attention_kernel_time(const std::string& backend, const HardwareConfig& hw) {
  auto time = hw.attention_kernels.find(backend);
  if (time == hw.attention_kernels.end())
    throw DataError("hardware " + hw.label() + ": no attention_kernels." + backend +
                    " (its time over the flash attention), needed by the model's attention_backend " + backend);
  return time->second;
}

// flash-attn's Triton kernel computes over the head dimension padded to a power of two, at
// least 16 (BLOCK_HEADDIM = max(next_power_of_2(d), 16) in flash_attn_triton.py): its time
// at head dimension d is that of the padded one. The hardware's factor is for powers of two,
// the head dimensions the FlashAttention-2 paper compares the kernels at (64, 128).
double triton_head_padding(const ShardOp& op) {
  auto head_dim = op.shape.find("head_dim");
  if (head_dim == op.shape.end() || head_dim->second <= 0) return 1;
  double padded = 16;
  while (padded < head_dim->second) padded *= 2;
  return padded / head_dim->second;
}

// Flash attention's softmax exponentials run on the special-function units between its two
// GEMMs (S = QK^T, then softmax, then PV), largely not beside them, so a score costs its GEMM
// FLOPs at the tensor-core peak plus one exponential at sfu_peak, forward and backward (which
// recomputes P). An uncalibrated attention's efficiency is its share at head dimension 128 (512
// FLOPs per score forward, 2.5 times that backward); at F FLOPs per score its time is that at
// 128 times (1 + r/F) / (1 + r/F_128), r the peak FLOPs per exponential, and never less: past
// head dimension 128 the kernels' smaller tiles cost what the fewer exponentials save (an H200
// runs MLA's 192/128 at 1.00 and 1.10 times head dimension 128's time per FLOP, forward and
// backward; docs/syssim-cost.md, "Attention's exponentials"). Without sfu_peak, or a shape to
// count the scores, 1.
double attention_exponential_factor(const Kernel& kernel, const HardwareConfig& hw) {
  if (!hw.sfu_peak) return 1;
  const KernelShape& shape = kernel.dims;
  for (const char* key : {"b", "s_q", "s_kv", "heads", "causal"})
    if (!shape.count(key)) return 1;
  const double scores = shape.at("b") * shape.at("heads") * shape.at("s_q") * shape.at("s_kv") *
                        (shape.at("causal") > 0 ? 0.5 : 1.0);
  if (!(scores > 0) || !(kernel.flops > 0)) return 1;
  constexpr double kForwardFlopsPerScoreAt128 = 4 * 128;  // QK^T and PV, 2 x 128 each
  const double reference = kForwardFlopsPerScoreAt128 * (kernel.backward ? 2.5 : 1.0);
  const double flops_per_exponential = tensor_core_peak_tflops(hw, kernel.dtype) / *hw.sfu_peak;
  return std::max(1.0, (1 + flops_per_exponential * scores / kernel.flops) / (1 + flops_per_exponential / reference));
}

}  // namespace

CostEstimator::CostEstimator(HardwareConfig hardware, const CostOptions& options)
    : hardware_(std::move(hardware)), options_(options) {
  if (options_.estimator != "auto" && options_.estimator != "roofline" && options_.estimator != "calibrated")
    throw UsageError("estimator: expected auto, roofline or calibrated, got '" + options_.estimator + "'");
  std::string bundle = options_.calibrated_model.empty() ? hardware_.calibrated_model_dir : options_.calibrated_model;
  if (options_.estimator == "calibrated" && bundle.empty())
    throw DataError("hardware " + hardware_.label() + ": the calibrated estimator needs calibrated_model in the hardware YAML or --calibrated DIR");
  // A preset's relative bundle does not travel with a copy of its YAML (`extends` keeps it).
  if (options_.estimator != "roofline" && options_.calibrated_model.empty() && !bundle.empty() &&
      !std::filesystem::is_directory(bundle))
    throw DataError("hardware " + hardware_.label() + ": key 'calibrated_model' is '" + hardware_.calibrated_model +
                    "', but there is no folder " + bundle +
                    " (a copy of a preset keeps the preset's bundle with `extends: PRESET` instead)");
  if (options_.estimator != "roofline" && !bundle.empty()) {
    calibrated_ = std::make_shared<CalibratedModel>(CalibratedModel::load(bundle, hardware_));
    const std::vector<std::string> fitted = calibrated_->families();
    auto fits = [&](const std::string& family) { return std::find(fitted.begin(), fitted.end(), family) != fitted.end(); };
    if (!options_.calibrated_model.empty()) {
      // A bundle given for the job: the hardware's calibrated families it fits, the others
      // priced as a hardware without a bundle prices them; reported as the bundle given.
      std::vector<std::string>& families = hardware_.calibrated_families;
      if (families.empty()) families = fitted;
      families.erase(std::remove_if(families.begin(), families.end(), [&](const std::string& f) { return !fits(f); }),
                     families.end());
      if (families.empty())
        throw DataError(bundle + ": fits " + join(fitted) + ", none of the families hardware " + hardware_.label() +
                        " prices from a bundle");
      hardware_.calibrated_model = hardware_.calibrated_model_dir = bundle;
    } else {
      // A family the hardware's own bundle has no model of would be priced by the roofline and
      // reported as calibrated.
      for (const std::string& family : hardware_.calibrated_families)
        if (!fits(family))
          throw DataError("hardware " + hardware_.label() + ": key 'calibrated_families' lists '" + family +
                          "', which its bundle " + std::filesystem::path(bundle).filename().string() +
                          " has no model of (it fits " + join(fitted) + ")");
    }
  }
  if (options_.estimator == "roofline") hardware_.efficiency.clear();
}

// The roofline an uncalibrated kernel's efficiency applies to: an FP8 GEMM on hardware with a
// measured FP8 speed-up takes its 16-bit twin's over it, never less than its own at the FP8
// peak; an attention kernel's counts its exponentials against its head dimension's. The bare
// roofline (--roofline) is the peaks' alone.
double CostEstimator::uncalibrated_roofline(const Kernel& kernel, double roofline) const {
  if (options_.estimator == "roofline") return roofline;
  if (kernel.family == "attention") return roofline * attention_exponential_factor(kernel, hardware_);
  if (kernel.family != "gemm" || kernel.dtype != "fp8" || !hardware_.fp8_gemm_speedup) return roofline;
  return std::max(roofline, roofline_us(kernel_in_dtype(kernel, "bf16"), hardware_) / *hardware_.fp8_gemm_speedup);
}

bool CostEstimator::priced_by_bundle(const std::string& family) const {
  const auto& chosen = hardware_.calibrated_families;
  return chosen.empty() || std::find(chosen.begin(), chosen.end(), family) != chosen.end();
}

std::optional<std::pair<Kernel, double>> CostEstimator::bundle_kernel(const Kernel& kernel, double roofline,
                                                                       const ShardOp& op) const {
  if (!calibrated_ || kernel.dims.empty() || !priced_by_bundle(kernel.family)) return std::nullopt;
  if (calibrated_->covers(kernel)) return std::pair{kernel, 1.0};
  // An FP4 GEMM the bundle has not measured: its FP8 twin's calibrated time over the
  // hardware's measured FP4 speed-up, else over the two rooflines, so that it is never faster
  // than FP8 by more than the peaks allow (the FP4 roofline over the gemm efficiency gave it a
  // better share of peak than measured FP8).
  if (kernel.family != "gemm" || kernel.dtype != "fp4") return std::nullopt;
  Kernel twin = kernel_in_dtype(kernel, "fp8");
  if (!calibrated_->covers(twin)) return std::nullopt;
  const double factor = hardware_.fp4_gemm_speedup ? 1 / *hardware_.fp4_gemm_speedup
                                                   : roofline / roofline_of(twin, op, hardware_);
  return std::pair{std::move(twin), factor};
}

// Compute ops: a covered kernel takes the calibrated time, any other the roofline over its
// family's efficiency; none is faster than the launch floor.
void CostEstimator::cost_graph(Graph& g) const {
  const ShardSection& shard = need_section(g.shard, "shard", "syssim-shard");
  check_precision_support(hardware_, shard.training);
  CostSection cost{calibrated_ ? "calibrated" : "roofline", hardware_, network_links(hardware_), {}};
  cost.ops.resize(shard.ops.size());
  std::vector<Kernel> calibrated_kernels;
  std::vector<std::pair<size_t, double>> calibrated_parts;  // (op, times the kernel runs)
  // An op's time no shorter than the launch floor of its kernels, and what bounds it; once
  // for an op of several calibrated parts.
  std::vector<char> finished(shard.ops.size(), 0);
  auto finish = [&](size_t i) {
    if (finished[i]) return;
    finished[i] = 1;
    OpCost& c = cost.ops[i];
    const double floor_us = hardware_.kernel_launch_us * kernel_launches(shard.ops[i]);
    c.bound = bound_of(kernel_of(shard.ops[i]), c.time_us, floor_us, hardware_);
    c.time_us = std::max(c.time_us, floor_us);
  };
  std::map<CollectiveKey, CollectiveTime> collective_times;
  // Every layer's compute ops repeat too: each distinct kernel is priced once, at its first op.
  std::unordered_map<KernelKey, size_t, KernelKeyHash> first_op_of;
  std::vector<std::pair<size_t, size_t>> repeats;  // (op, the first op of its kernel)
  for (size_t i = 0; i < shard.ops.size(); ++i) {
    const ShardOp& op = shard.ops[i];
    if (op.kind == OpKind::collective) {
      // Every layer's collectives repeat: each distinct one is placed and timed once.
      CollectiveKey key{static_cast<uintptr_t>(op.collective), static_cast<uintptr_t>(op.group), static_cast<uintptr_t>(op.phase), op.group_size, op.stage,
                        op.chunk, op.message_bytes};
      auto known = collective_times.find(key);
      if (known == collective_times.end())
        known = collective_times.emplace(key, shard_collective_time(op, shard.parallelism, hardware_)).first;
      cost.ops[i] = {op.id, known->second.time_us, OpBound::network, known->second.phases};
      continue;
    }
    if (op.kind == OpKind::host_copy) {
      cost.ops[i] = {op.id, host_copy_us(op, hardware_), OpBound::host_link, {}};
      continue;
    }
    auto [first, added] = first_op_of.emplace(KernelKey(op), i);
    if (!added) {
      repeats.emplace_back(i, first->second);
      continue;
    }
    // Each part from the bundle when it covers it, else from the roofline over its family's
    // efficiency; the launch floor applies to the op's kernels together.
    double time = 0;
    bool calibrated_part = false;
    for (auto& [kernel, count] : parts_of(op)) {
      if (count <= 0) continue;
      double roofline = roofline_of(kernel, op, hardware_);
      if (auto priced = bundle_kernel(kernel, roofline, op)) {
        calibrated_kernels.push_back(std::move(priced->first));
        calibrated_parts.push_back({i, count * priced->second});
        calibrated_part = true;
        continue;
      }
      auto share = hardware_.efficiency.find(kernel.family);
      time += count * uncalibrated_roofline(kernel, roofline) / (share == hardware_.efficiency.end() ? 1.0 : share->second);
    }
    cost.ops[i] = {op.id, time, OpBound::compute, {}};  // its bound set by finish
    if (!calibrated_part) finish(i);
  }
  if (!calibrated_kernels.empty()) {
    std::vector<double> times = calibrated_->predict_us(calibrated_kernels);
    for (size_t j = 0; j < times.size(); ++j) cost.ops[calibrated_parts[j].first].time_us += calibrated_parts[j].second * times[j];
    for (size_t j = 0; j < times.size(); ++j) {
      const size_t i = calibrated_parts[j].first;
      finish(i);
    }
  }
  scale_attention(g, cost.ops);
  for (const auto& [i, first] : repeats) {
    cost.ops[i] = cost.ops[first];
    cost.ops[i].id = shard.ops[i].id;
  }
  price_host(shard, hardware_.host, cost.ops);
  g.cost = std::move(cost);
  // The sections computed from a cost section (the simulation from its times, memory from its
  // hardware) describe another job now (docs/graph-format.md).
  g.sim.reset();
  g.mem.reset();
}

// Attention ops run the model's attention kernel: its time over the flash attention priced
// above, by direction (repeats copy their first op's time afterwards). A graph without a
// model section, or with flash (or unfused: no attention op) attention, keeps the price.
void CostEstimator::scale_attention(const Graph& g, std::vector<OpCost>& ops) const {
  if (!g.model || g.model->attention_backend == "flash" || g.model->attention_backend == "unfused") return;
  const HardwareConfig::AttentionKernelTime time = attention_kernel_time(g.model->attention_backend, hardware_);
  const bool triton = g.model->attention_backend == "triton";
  const std::vector<ShardOp>& shard_ops = g.shard->ops;
  for (size_t i = 0; i < shard_ops.size(); ++i) {
    const ShardOp& op = shard_ops[i];
    if (op.kind != OpKind::attention) continue;
    ops[i].time_us *= (op.runs_backward_kernel() ? time.backward : time.forward) * (triton ? triton_head_padding(op) : 1);
  }
}

void cost_graph(Graph& g, const HardwareConfig& hw, const CostOptions& options) {
  CostEstimator(hw, options).cost_graph(g);
}

}  // namespace syssim
