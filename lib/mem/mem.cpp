#include "mem/mem.hpp"

#include <set>
#include <vector>

namespace syssim {
namespace {

constexpr double kBytesPerGB = 1e9;
// Megatron mixed precision, bytes per parameter: fp32 main gradients, fp32 master weights plus
// Adam's two moments. The weights are counted from their buffers (16-bit, or fp8 parameters).
constexpr double kMainGradBytes = 4;
constexpr double kOptimizerStateBytes = 12;

// The memory of one pipeline rank at its peak.
struct StageMemory {
  double param_bytes = 0;
  double grad_bytes = 0;
  double optimizer_state_bytes = 0;
  double activation_bytes = 0;
  double temporary_bytes = 0;
  std::string module;
  int64_t microbatches_in_flight = 0;
  double total_bytes() const {
    return param_bytes + grad_bytes + optimizer_state_bytes + activation_bytes + temporary_bytes;
  }
};

// Bytes of the weights the ops of pipeline rank `rank` use.
double weight_bytes(const ShardSection& shard, int64_t rank) {
  std::set<int64_t> held;
  for (const ShardOp& op : shard.ops)
    if (op.stage == rank)
      for (const auto* list : {&op.reads, &op.writes})
        for (int64_t b : *list)
          if (is_weight(shard.buffers[b])) held.insert(b);
  double bytes = 0;
  for (int64_t b : held) bytes += shard.buffers[b].bytes;
  return bytes;
}

// Replays the op instances a rank runs, in the order of its schedule (shard issue_order). A
// transient buffer exists once per micro-batch (once per step for step ops' buffers); each
// instance is live from the first op that writes it (one nobody writes, like the token ids:
// from the start of its micro-batch on the rank) until the last op that uses it has
// finished. The peak is the largest sum of live bytes while an op runs, its inputs and
// outputs both allocated.
void transient_peak(const ShardSection& shard, const std::vector<char>& transient, int64_t rank, StageMemory& stage) {
  std::vector<ScheduledOp> order = issue_order(shard, rank);
  const size_t instance_slots = static_cast<size_t>(shard.num_microbatches) + 1;  // slot 0: step ops
  auto slot_of = [](const ScheduledOp& s) { return static_cast<size_t>(s.microbatch + 1); };

  // The rank's transient buffers, numbered densely in the order its ops name them, and the
  // ones each op uses, compactly: the loop below runs once per op instance.
  std::vector<int64_t> local(shard.buffers.size(), -1);
  std::vector<int64_t> buffers;
  std::vector<uint32_t> uses_begin(shard.ops.size() + 1, 0);
  std::vector<std::pair<uint32_t, bool>> uses;  // local buffer, written
  for (const ShardOp& op : shard.ops) {
    if (op.stage == rank)
      for (const auto* list : {&op.reads, &op.writes})
        for (int64_t b : *list) {
          if (!transient[b]) continue;
          if (local[b] < 0) {
            local[b] = static_cast<int64_t>(buffers.size());
            buffers.push_back(b);
          }
          uses.emplace_back(static_cast<uint32_t>(local[b]), list == &op.writes);
        }
    uses_begin[op.id + 1] = static_cast<uint32_t>(uses.size());
  }
  const std::vector<char> saved_ids = buffers_saved_for_backward(shard, rank);

  // First write and last use of each buffer instance, and where each micro-batch starts.
  const size_t instances = buffers.size() * instance_slots;
  std::vector<int64_t> first_write(instances, -1), last_use(instances, -1);
  std::vector<int64_t> slot_start(instance_slots, -1);
  slot_start[0] = 0;
  for (size_t position = 0; position < order.size(); ++position) {
    const auto op = static_cast<size_t>(order[position].op);
    size_t slot = slot_of(order[position]);
    if (slot_start[slot] < 0) slot_start[slot] = static_cast<int64_t>(position);
    for (uint32_t u = uses_begin[op]; u < uses_begin[op + 1]; ++u) {
      const size_t instance = uses[u].first * instance_slots + slot;
      last_use[instance] = static_cast<int64_t>(position);
      if (uses[u].second && first_write[instance] < 0) first_write[instance] = static_cast<int64_t>(position);
    }
  }

  // Live bytes per position, split into saved activations and the rest.
  auto saved = [&](size_t i) { return saved_ids[buffers[i]] != 0; };
  auto allocated_at = [&](size_t instance) {
    return first_write[instance] >= 0 ? first_write[instance] : slot_start[instance % instance_slots];
  };
  std::vector<double> activation_delta(order.size() + 1, 0.0), temporary_delta(order.size() + 1, 0.0);
  for (size_t instance = 0; instance < instances; ++instance) {
    if (last_use[instance] < 0) continue;
    size_t i = instance / instance_slots;
    std::vector<double>& delta = saved(i) ? activation_delta : temporary_delta;
    double bytes = shard.buffers[buffers[i]].bytes;
    delta[allocated_at(instance)] += bytes;
    delta[last_use[instance] + 1] -= bytes;
  }
  double activation = 0, temporary = 0, peak = -1;
  int64_t peak_position = -1;
  for (size_t position = 0; position < order.size(); ++position) {
    activation += activation_delta[position];
    temporary += temporary_delta[position];
    if (activation + temporary > peak) {
      peak = activation + temporary;
      peak_position = static_cast<int64_t>(position);
      stage.activation_bytes = activation;
      stage.temporary_bytes = temporary;
      stage.module = shard.ops[order[position].op].module;
    }
  }
  // Micro-batches in flight at the peak: those with saved activations live there.
  std::set<size_t> in_flight;
  for (size_t instance = 0; instance < instances; ++instance)
    if (instance % instance_slots > 0 && last_use[instance] >= peak_position && saved(instance / instance_slots) &&
        allocated_at(instance) <= peak_position)
      in_flight.insert(instance % instance_slots);
  stage.microbatches_in_flight = static_cast<int64_t>(in_flight.size());
}

}  // namespace

TrainingStateBytes training_state_bytes(double params, const ParallelismConfig& parallelism,
                                        const TrainingConfig& training) {
  // The distributed optimizer's data-parallel group spans the context-parallel ranks too.
  double optimizer_shards =
      training.distributed_optimizer ? static_cast<double>(parallelism.dp * parallelism.cp) : 1.0;
  return {params * kMainGradBytes, params * kOptimizerStateBytes / optimizer_shards};
}

void account_memory(Graph& g) {
  const ShardSection& shard = need_section(g.shard, "shard", "syssim-shard");
  const int64_t pp = shard.parallelism.pp;
  if (static_cast<int64_t>(shard.stage_params_local.size()) != pp)
    throw DataError("/shard/stage_params_local: " + std::to_string(shard.stage_params_local.size()) +
                    " entries for pp=" + std::to_string(pp) + " pipeline ranks");
  std::vector<char> transient;  // by buffer id: looked up for every op instance
  for (const ShardBuffer& buffer : shard.buffers) transient.push_back(is_transient(buffer));

  MemSection mem;
  StageMemory heaviest;
  for (int64_t rank = 0; rank < pp; ++rank) {
    StageMemory stage;
    double params = shard.stage_params_local[rank];
    stage.param_bytes = weight_bytes(shard, rank);
    TrainingStateBytes states = training_state_bytes(params, shard.parallelism, shard.training);
    stage.grad_bytes = states.grad_bytes;
    stage.optimizer_state_bytes = states.optimizer_state_bytes;
    transient_peak(shard, transient, rank, stage);
    mem.pp_stage_memory_gb.push_back(stage.total_bytes() / kBytesPerGB);
    mem.pp_stage_microbatches_in_flight.push_back(stage.microbatches_in_flight);
    if (rank == 0 || stage.total_bytes() > heaviest.total_bytes()) {
      heaviest = stage;
      mem.peak_pp_stage = rank;
    }
  }
  mem.param_bytes = heaviest.param_bytes;
  mem.grad_bytes = heaviest.grad_bytes;
  mem.optimizer_state_bytes = heaviest.optimizer_state_bytes;
  mem.activation_bytes = heaviest.activation_bytes;
  mem.temporary_bytes = heaviest.temporary_bytes;
  mem.peak_module = heaviest.module;
  mem.peak_memory_gb = heaviest.total_bytes() / kBytesPerGB;

  if (g.cost && g.cost->hardware.gpu_memory_GB) {
    double capacity_gb = *g.cost->hardware.gpu_memory_GB;
    mem.gpu_memory_gb = capacity_gb;
    if (mem.peak_memory_gb > capacity_gb)
      mem.oom = OomInfo{capacity_gb, mem.peak_memory_gb, mem.peak_memory_gb - capacity_gb};
  }
  g.mem = std::move(mem);
}

}  // namespace syssim
