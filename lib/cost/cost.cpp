#include "cost/cost.hpp"

#include <algorithm>
#include <memory>

namespace syssim {
namespace {

constexpr double kBytesPerGB = 1e9;
constexpr double kFlopsPerTflop = 1e12;
constexpr double kUsPerS = 1e6;

struct Link {
  double bandwidth_GBps = 0;  // per GPU, one direction
  double latency_us = 0;
};

std::string op_path(const ShardOp& op) { return "/shard/ops/" + std::to_string(op.id); }

// The estimator family of a compute op (lib/calibrate/calibrate.hpp).
std::string family_of(const ShardOp& op) {
  if (op.kind == "gemm" || op.kind == "attention") return op.kind;
  if (op.kind != "math" && op.kind != "memory" && op.kind != "optimizer")
    throw DataError(op_path(op) + "/kind: unknown op kind \"" + op.kind + "\"");
  if (op.name.find("norm") != std::string::npos) return "norm";
  if (op.name == "aten::sum" || op.name == "syssim::cross_entropy" || op.name == "te::amax") return "reduction";
  return "elementwise";
}

Kernel kernel_of(const ShardOp& op) {
  return Kernel{family_of(op), op.dtype, op.phase == "bwd", op.shape, op.flops, op.bytes};
}

double roofline_of(const Kernel& kernel, const ShardOp& op, const HardwareConfig& hw) {
  try {
    return roofline_us(kernel, hw);
  } catch (const DataError& e) {
    throw DataError(std::string(e.what()) + ", needed by the " + op.dtype + " op at " + op_path(op));
  }
}

// Which roofline term is the larger one, or the launch floor when neither reaches it.
std::string bound_of(const Kernel& kernel, double time_us, const HardwareConfig& hw) {
  if (time_us <= hw.kernel_launch_us) return "launch";
  Kernel memory_only = kernel;
  memory_only.flops = 0;
  return roofline_us(memory_only, hw) >= roofline_us(kernel, hw) ? "memory" : "compute";
}

// Megatron orders ranks TP fastest, then CP, then DP, so a group's members lie within a
// block of this many consecutive ranks.
int64_t rank_span(const ShardOp& op, const ParallelismConfig& p) {
  if (op.group == "tp") return p.tp;
  if (op.group == "cp") return p.tp * p.cp;
  if (op.group == "dp") return p.tp * p.cp * p.dp;
  throw DataError(op_path(op) + "/group: unknown collective group \"" + op.group + "\"");
}

// The pipeline stages a pp or embedding collective connects: a send_recv joins its stage with
// the virtual stage it receives from (the previous one in the forward direction, the next in
// the backward one); the embedding group is the first and last stage, the pp group all.
std::vector<int64_t> pipeline_stages(const ShardOp& op, const ParallelismConfig& p) {
  if (op.group == "embedding") return {0, p.pp - 1};
  std::vector<int64_t> stages;
  if (op.collective != "send_recv") {
    for (int64_t s = 0; s < p.pp; ++s) stages.push_back(s);
    return stages;
  }
  int64_t virtual_stage = op.chunk * p.pp + op.stage;
  int64_t peer = op.phase == "fwd" ? virtual_stage - 1 : virtual_stage + 1;
  if (peer < 0 || peer >= p.pp * p.vpp.value_or(1))
    throw DataError(op_path(op) + ": a " + op.phase + " send_recv of virtual stage " + std::to_string(virtual_stage) +
                    " has no neighbour to receive from");
  return {op.stage, peer % p.pp};
}

// Megatron's rank order ends with PP: pipeline stage s of TP/CP/DP position i is global rank
// s * tp*cp*dp + i. The stages talk within a node when, for every position, all their ranks
// are in one node.
bool stages_within_node(const std::vector<int64_t>& stages, const ParallelismConfig& p, int64_t gpus_per_node) {
  const int64_t stride = p.tp * p.cp * p.dp;
  for (int64_t i = 0; i < stride; ++i)
    for (int64_t s : stages)
      if ((s * stride + i) / gpus_per_node != (stages.front() * stride + i) / gpus_per_node) return false;
  return true;
}

Link link_of(const ShardOp& op, const ParallelismConfig& p, const HardwareConfig& hw) {
  const bool pipeline = op.group == "pp" || op.group == "embedding";
  const int64_t span = pipeline ? 0 : rank_span(op, p);
  if (pipeline ? stages_within_node(pipeline_stages(op, p), p, hw.gpus_per_node) : span <= hw.gpus_per_node) {
    if (hw.topology.empty())
      throw DataError("hardware " + hw.name + ": topology.levels[0] is required by the " + op.group +
                      " collective at " + op_path(op));
    return {hw.topology[0].bandwidth_GBps * hw.topology[0].efficiency, hw.topology[0].latency_us};
  }
  if (!hw.inter_node_bandwidth_GBps)
    throw DataError("hardware " + hw.name + ": inter_node_bandwidth_GBps is required: the " + op.group +
                    (pipeline ? " collective at " + op_path(op) + " connects pipeline stages on different nodes"
                              : " group spans " + std::to_string(span) + " ranks, more than gpus_per_node=" +
                                    std::to_string(hw.gpus_per_node)));
  return {*hw.inter_node_bandwidth_GBps, hw.inter_node_latency_us};
}

// Ring algorithms: each of the n-1 steps moves M/n bytes per GPU; all-reduce is a
// reduce-scatter followed by an all-gather. A send_recv is one step of a ring (the
// context-parallel K/V exchange): each rank sends M bytes to the next and receives M from the
// previous at once, one direction of its link each.
OpCost collective_cost(const ShardOp& op, const ParallelismConfig& p, const HardwareConfig& hw) {
  double passes = 0;  // passes of a ring over the whole message (none for a single send_recv step)
  if (op.collective == "all_reduce")
    passes = 2;
  else if (op.collective == "all_gather" || op.collective == "reduce_scatter")
    passes = 1;
  else if (op.collective != "send_recv")
    throw DataError(op_path(op) + "/collective: unknown collective \"" + op.collective + "\"");
  if (op.group_size < 1)
    throw DataError(op_path(op) + "/group_size: expected at least 1, got " + std::to_string(op.group_size));
  if (op.group_size == 1) return {op.id, 0.0, "network"};
  Link link = link_of(op, p, hw);
  if (op.collective == "send_recv")
    return {op.id, op.message_bytes / (link.bandwidth_GBps * kBytesPerGB) * kUsPerS + link.latency_us, "network"};
  double n = static_cast<double>(op.group_size);
  double transfer_us = passes * (n - 1) / n * op.message_bytes / (link.bandwidth_GBps * kBytesPerGB) * kUsPerS;
  return {op.id, transfer_us + passes * (n - 1) * link.latency_us, "network"};
}

}  // namespace

CostEstimator::CostEstimator(HardwareConfig hardware, const CostOptions& options)
    : hardware_(std::move(hardware)), options_(options) {
  if (options_.estimator != "auto" && options_.estimator != "roofline" && options_.estimator != "calibrated")
    throw UsageError("estimator: expected auto, roofline or calibrated, got '" + options_.estimator + "'");
  std::string bundle = options_.calibrated_model.empty() ? hardware_.calibrated_model_dir : options_.calibrated_model;
  if (options_.estimator == "calibrated" && bundle.empty())
    throw DataError("hardware " + hardware_.name + ": the calibrated estimator needs calibrated_model in the hardware YAML or --calibrated DIR");
  if (options_.estimator != "roofline" && !bundle.empty())
    calibrated_ = std::make_shared<CalibratedModel>(CalibratedModel::load(bundle, hardware_));
  if (options_.estimator == "roofline") hardware_.efficiency.clear();
}

bool CostEstimator::priced_by_bundle(const std::string& family) const {
  const auto& chosen = hardware_.calibrated_families;
  return chosen.empty() || std::find(chosen.begin(), chosen.end(), family) != chosen.end();
}

// Compute ops: a covered kernel takes the calibrated time, any other the roofline over its
// family's efficiency; none is faster than the launch floor.
void CostEstimator::cost_graph(Graph& g) const {
  const ShardSection& shard = need_section(g.shard, "shard", "syssim-shard");
  check_precision_support(hardware_, shard.training);
  CostSection cost{calibrated_ ? "calibrated" : "roofline", hardware_, {}};
  cost.ops.resize(shard.ops.size());
  std::vector<Kernel> calibrated_kernels;
  std::vector<size_t> calibrated_ops;
  for (size_t i = 0; i < shard.ops.size(); ++i) {
    const ShardOp& op = shard.ops[i];
    if (op.kind == "collective") {
      cost.ops[i] = collective_cost(op, shard.parallelism, hardware_);
      continue;
    }
    Kernel kernel = kernel_of(op);
    double roofline = roofline_of(kernel, op, hardware_);
    if (calibrated_ && !kernel.dims.empty() && priced_by_bundle(kernel.family) && calibrated_->covers(kernel)) {
      calibrated_kernels.push_back(std::move(kernel));
      calibrated_ops.push_back(i);
      continue;
    }
    auto share = hardware_.efficiency.find(kernel.family);
    double time = roofline / (share == hardware_.efficiency.end() ? 1.0 : share->second);
    cost.ops[i] = {op.id, std::max(time, hardware_.kernel_launch_us), bound_of(kernel, time, hardware_)};
  }
  if (!calibrated_kernels.empty()) {
    std::vector<double> times = calibrated_->predict_us(calibrated_kernels);
    for (size_t j = 0; j < times.size(); ++j) {
      const ShardOp& op = shard.ops[calibrated_ops[j]];
      cost.ops[calibrated_ops[j]] = {op.id, std::max(times[j], hardware_.kernel_launch_us),
                                     bound_of(calibrated_kernels[j], times[j], hardware_)};
    }
  }
  g.cost = std::move(cost);
}

void cost_graph(Graph& g, const HardwareConfig& hw, const CostOptions& options) {
  CostEstimator(hw, options).cost_graph(g);
}

}  // namespace syssim
