#include "mem/mem.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "common/units.hpp"
#include "mem/allocator.hpp"
#include "mem/reserve.hpp"

namespace syssim {
namespace {

// The memory of one pipeline rank at its peak.
struct StageMemory {
  double param_bytes = 0;
  double grad_bytes = 0;
  double optimizer_state_bytes = 0;
  double activation_bytes = 0;
  double temporary_bytes = 0;
  double fp32_grad_copy_bytes = 0;  // TrainingStateBytes': live during the optimizer step only
  std::string module;
  int64_t microbatches_in_flight = 0;
  double total_bytes() const {
    return param_bytes + grad_bytes + optimizer_state_bytes + activation_bytes + temporary_bytes;
  }
};

// The optimizer's fp32 copy of bf16 gradients among a rank's step ops, taken in issue order: it
// is made by its copy op and last read by Adam.
class GradCopyWindow {
 public:
  // Whether the copy is live while `op` runs (allocated at the copy op, freed after Adam).
  bool live_at(const ShardOp& op) {
    open_ = open_ || op.name.named_op() == NamedOp::copy_grads_to_fp32;
    const bool live = open_;
    if (op.kind == OpKind::optimizer) open_ = false;
    return live;
  }

 private:
  bool open_ = false;
};

// Bytes of the weights the ops of pipeline rank `rank` use: the 16-bit weights, and their
// low-precision copies.
struct WeightBytes {
  double params = 0;
  double quantized = 0;
};
WeightBytes weight_bytes(const ShardSection& shard, int64_t rank) {
  std::set<int64_t> held;
  for (const ShardOp& op : shard.ops)
    if (op.stage == rank)
      for (const auto* list : {&op.reads, &op.writes})
        for (int64_t b : *list)
          if (is_weight(shard.buffers[b])) held.insert(b);
  WeightBytes bytes;
  for (int64_t b : held) (shard.buffers[b].role == TensorRole::param ? bytes.params : bytes.quantized) += shard.buffers[b].bytes;
  return bytes;
}

// Live bytes split as the report splits them.
struct LiveBytes {
  double activation = 0;
  double temporary = 0;
  double total() const { return activation + temporary; }
  LiveBytes& operator+=(const LiveBytes& o) {
    activation += o.activation, temporary += o.temporary;
    return *this;
  }
  LiveBytes& operator-=(const LiveBytes& o) {
    activation -= o.activation, temporary -= o.temporary;
    return *this;
  }
};

// The transient buffers of one rank, numbered densely in the order its ops name them, and
// the ones each op uses, compactly: the sequences below walk them once per op they hold.
struct RankBuffers {
  std::vector<double> bytes;
  std::vector<char> saved;  // written by a forward op and read by a backward op
  std::vector<uint32_t> uses_begin;  // by op id
  std::vector<std::pair<uint32_t, bool>> uses;  // local buffer, written

  // A buffer's bytes, as activation when it is saved for backward, else as temporary.
  LiveBytes live(size_t buffer) const {
    LiveBytes result;
    (saved[buffer] ? result.activation : result.temporary) = bytes[buffer];
    return result;
  }

  RankBuffers(const ShardSection& shard, const std::vector<char>& transient, int64_t rank) {
    const std::vector<char> saved_ids = buffers_saved_for_backward(shard, rank);
    std::vector<int64_t> local(shard.buffers.size(), -1);
    uses_begin.assign(shard.ops.size() + 1, 0);
    for (const ShardOp& op : shard.ops) {
      if (op.stage == rank)
        for (const auto* list : {&op.reads, &op.writes})
          for (int64_t b : *list) {
            if (!transient[b]) continue;
            if (local[b] < 0) {
              local[b] = static_cast<int64_t>(bytes.size());
              bytes.push_back(shard.buffers[b].bytes);
              saved.push_back(saved_ids[b]);
            }
            uses.emplace_back(static_cast<uint32_t>(local[b]), list == &op.writes);
          }
      uses_begin[op.id + 1] = static_cast<uint32_t>(uses.size());
    }
  }
};

// One instance of each buffer an op sequence uses, live from its first write (from the
// sequence's first op when nothing writes it) to its last use, as in docs/syssim-mem.md.
struct Lifetime {
  size_t buffer = 0;
  size_t allocated = 0;  // index into the sequence
  size_t last_use = 0;
  bool written = false;
};
// Buffers marked in `left_out` (the step's, in a micro-batch's sequence) are not followed.
std::vector<Lifetime> lifetimes(const RankBuffers& buffers, const std::vector<int64_t>& sequence,
                                const std::vector<char>* left_out = nullptr) {
  std::vector<int64_t> found(buffers.bytes.size(), -1);  // index into the result
  std::vector<Lifetime> result;
  for (size_t position = 0; position < sequence.size(); ++position) {
    const auto op = static_cast<size_t>(sequence[position]);
    for (uint32_t u = buffers.uses_begin[op]; u < buffers.uses_begin[op + 1]; ++u) {
      const auto [buffer, writes] = buffers.uses[u];
      if (left_out && (*left_out)[buffer]) continue;
      if (found[buffer] < 0) {
        found[buffer] = static_cast<int64_t>(result.size());
        result.push_back({buffer, 0, position, false});
      }
      Lifetime& life = result[found[buffer]];
      life.last_use = position;
      if (writes && !life.written) life.allocated = position, life.written = true;
    }
  }
  return result;
}

// Live bytes of `lives` at each index of a sequence of `length` ops.
std::vector<LiveBytes> live_profile(const RankBuffers& buffers, const std::vector<Lifetime>& lives, size_t length) {
  std::vector<LiveBytes> delta(length + 1);
  for (const Lifetime& life : lives) {
    const LiveBytes bytes = buffers.live(life.buffer);
    delta[life.allocated] += bytes;
    delta[life.last_use + 1] -= bytes;
  }
  LiveBytes live;
  for (size_t i = 0; i < length; ++i) delta[i] = live += delta[i];
  delta.pop_back();
  return delta;
}

// By buffer, whether one of `lives` follows it.
std::vector<char> buffers_of(const std::vector<Lifetime>& lives, const RankBuffers& buffers) {
  std::vector<char> followed(buffers.bytes.size(), 0);
  for (const Lifetime& life : lives) followed[life.buffer] = 1;
  return followed;
}

// A micro-batch's part of the rank's step, shared by every micro-batch whose slots come in
// the same sequence of kinds: the ops of those slots in order, and per slot the highest
// live bytes of the micro-batch's own buffers (the first op that reaches them), and what it
// keeps live between this slot and its next.
struct MicrobatchPattern {
  std::vector<int64_t> ops;
  std::vector<size_t> slot_end;   // index into ops after each slot's last
  std::vector<LiveBytes> slot_peak;
  std::vector<size_t> slot_peak_at;
  std::vector<LiveBytes> kept;    // per slot boundary, [0] before the first slot, [slots] after the last
  std::vector<char> kept_saved;   // whether a saved activation is among the kept
  std::vector<Lifetime> lives;
};

MicrobatchPattern microbatch_pattern(const RankBuffers& buffers, const RankProgram& program,
                                     const std::vector<size_t>& kinds, const std::vector<char>& step_buffers) {
  MicrobatchPattern pattern;
  for (size_t kind : kinds) {
    const std::vector<int64_t>& ops = program.kind_ops[kind];
    pattern.ops.insert(pattern.ops.end(), ops.begin(), ops.end());
    pattern.slot_end.push_back(pattern.ops.size());
  }
  pattern.lives = lifetimes(buffers, pattern.ops, &step_buffers);
  const std::vector<LiveBytes> live = live_profile(buffers, pattern.lives, pattern.ops.size());
  size_t begin = 0;
  for (size_t end : pattern.slot_end) {
    LiveBytes peak;
    size_t peak_at = begin;
    for (size_t i = begin; i < end; ++i)
      if (i == begin || live[i].total() > peak.total()) peak = live[i], peak_at = i;
    pattern.slot_peak.push_back(peak);
    pattern.slot_peak_at.push_back(peak_at);
    begin = end;
  }
  // Boundary j + 1 follows slot j: a buffer allocated in slot a and last used in slot z is
  // kept over the boundaries a + 1 .. z.
  const size_t slots = kinds.size();
  std::vector<LiveBytes> kept_delta(slots + 2);
  std::vector<int64_t> saved_delta(slots + 2, 0);
  auto slot_of = [&](size_t index) {
    return static_cast<size_t>(std::upper_bound(pattern.slot_end.begin(), pattern.slot_end.end(), index) -
                               pattern.slot_end.begin());
  };
  for (const Lifetime& life : pattern.lives) {
    const size_t first = slot_of(life.allocated) + 1, last = slot_of(life.last_use);
    if (first > last) continue;
    const LiveBytes bytes = buffers.live(life.buffer);
    kept_delta[first] += bytes;
    kept_delta[last + 1] -= bytes;
    saved_delta[first] += buffers.saved[life.buffer];
    saved_delta[last + 1] -= buffers.saved[life.buffer];
  }
  LiveBytes kept;
  int64_t saved = 0;
  for (size_t boundary = 0; boundary <= slots; ++boundary) {
    pattern.kept.push_back(kept += kept_delta[boundary]);
    pattern.kept_saved.push_back((saved += saved_delta[boundary]) > 0);
  }
  return pattern;
}

// A rank's transient buffers over the op instances it runs, in issue order (shard
// rank_program): the step ops' (step_start ops, then, after every slot, step ops; one nobody
// writes is live from the rank's first op on) and each micro-batch's, micro-batches grouped
// by their sequence of slot kinds. A buffer a step op uses is the step's, once, however many
// micro-batches' ops use it too (FSDP2's weights kept whole across them, and the gradients
// accumulated for one reduction).
struct RankLives {
  RankBuffers buffers;
  std::vector<int64_t> step_ops;
  size_t step_start_count = 0;
  std::vector<Lifetime> step_lives;
  std::vector<MicrobatchPattern> patterns;
  std::vector<size_t> pattern_of;  // by micro-batch

  RankLives(const ShardSection& shard, const std::vector<char>& transient, int64_t rank, const RankProgram& program)
      : buffers(shard, transient, rank), step_ops(program.step_start_ops), step_start_count(program.step_start_ops.size()) {
    step_ops.insert(step_ops.end(), program.step_ops.begin(), program.step_ops.end());
    step_lives = lifetimes(buffers, step_ops);
    const std::vector<char> step_buffers = buffers_of(step_lives, buffers);
    const auto microbatches = static_cast<size_t>(shard.num_microbatches);
    std::vector<std::vector<size_t>> kinds_of(microbatches);
    for (std::vector<size_t>& kinds : kinds_of) kinds.reserve(program.slots.size() / std::max<size_t>(microbatches, 1) + 1);
    for (const RankProgram::Slot& slot : program.slots)
      kinds_of[static_cast<size_t>(slot.microbatch)].push_back(slot.kind);
    std::map<std::vector<size_t>, size_t> pattern_index;
    pattern_of.resize(microbatches);
    for (size_t m = 0; m < microbatches; ++m) {
      auto [it, added] = pattern_index.emplace(kinds_of[m], patterns.size());
      if (added) patterns.push_back(microbatch_pattern(buffers, program, kinds_of[m], step_buffers));
      pattern_of[m] = it->second;
    }
  }
};

// Each op's allocations and frees in a sequence: the lives written there (those nobody writes
// at the sequence's start) and those last used there.
struct LifeEvents {
  std::vector<std::vector<size_t>> allocate, free;  // by index into the sequence: life indices
  LifeEvents(const std::vector<Lifetime>& lives, size_t length) : allocate(length), free(length) {
    for (size_t l = 0; l < lives.size(); ++l) {
      allocate[lives[l].written ? lives[l].allocated : 0].push_back(l);
      free[lives[l].last_use].push_back(l);
    }
  }
};

// The caching allocator over every op instance of the rank in issue order: each op's outputs
// allocated while its inputs live, then the buffers it used last freed.
double replayed_reserved_bytes(const ShardSection& shard, const RankLives& lives, const RankProgram& program,
                               double fp32_grad_copy_bytes) {
  const RankBuffers& buffers = lives.buffers;
  const std::vector<Lifetime>& step_lives = lives.step_lives;
  const std::vector<MicrobatchPattern>& patterns = lives.patterns;
  const std::vector<size_t>& pattern_of = lives.pattern_of;
  const size_t step_start_count = lives.step_start_count, step_count = lives.step_ops.size();
  CachingAllocator allocator;
  auto bytes_of = [&](const Lifetime& life) { return static_cast<int64_t>(buffers.bytes[life.buffer]); };
  const LifeEvents step_events(step_lives, step_count);
  std::vector<CachingAllocator::BlockId> step_blocks(step_lives.size());
  auto run_step_op = [&](size_t i) {
    for (size_t l : step_events.allocate[i]) step_blocks[l] = allocator.allocate(bytes_of(step_lives[l]));
    for (size_t l : step_events.free[i]) allocator.free(step_blocks[l]);
  };
  for (size_t i = 0; i < step_start_count; ++i) run_step_op(i);
  std::vector<LifeEvents> pattern_events;
  for (const MicrobatchPattern& pattern : patterns) pattern_events.emplace_back(pattern.lives, pattern.ops.size());
  std::vector<std::vector<CachingAllocator::BlockId>> blocks(pattern_of.size());
  std::vector<size_t> passed(pattern_of.size(), 0);
  for (const RankProgram::Slot& slot : program.slots) {
    const auto m = static_cast<size_t>(slot.microbatch);
    const MicrobatchPattern& pattern = patterns[pattern_of[m]];
    const LifeEvents& events = pattern_events[pattern_of[m]];
    if (blocks[m].empty()) blocks[m].resize(pattern.lives.size());
    const size_t j = passed[m]++;
    for (size_t i = j == 0 ? 0 : pattern.slot_end[j - 1]; i < pattern.slot_end[j]; ++i) {
      for (size_t l : events.allocate[i]) blocks[m][l] = allocator.allocate(bytes_of(pattern.lives[l]));
      for (size_t l : events.free[i]) allocator.free(blocks[m][l]);
    }
  }
  GradCopyWindow copy;
  std::optional<CachingAllocator::BlockId> copy_block;
  for (size_t i = step_start_count; i < step_count; ++i) {
    const ShardOp& op = shard.ops[lives.step_ops[i]];
    if (copy.live_at(op) && !copy_block && fp32_grad_copy_bytes > 0)
      copy_block = allocator.allocate(static_cast<int64_t>(fp32_grad_copy_bytes));
    run_step_op(i);
    if (copy_block && op.kind == OpKind::optimizer) allocator.free(*copy_block), copy_block.reset();
  }
  return static_cast<double>(allocator.reserved_bytes());
}

// The peak of the transient buffers of a rank over the op instances it runs, in issue order.
// A transient buffer exists once per micro-batch (once per step for step ops' buffers); the peak is the largest sum of live bytes while an op runs, its inputs
// and outputs both allocated.
//
// Without walking every instance: micro-batch m's buffers are used by m's slots only, so
// while another micro-batch's slot runs, m holds what its pattern keeps at its current
// boundary, and the live bytes inside a slot are the pattern's own plus a sum that is the
// same for the whole slot. The work is linear in the ops of the rank's patterns (one, when
// every micro-batch runs its slots in the same order of kinds) plus its slots.
void transient_peak(const ShardSection& shard, const RankLives& lives, const RankProgram& program, StageMemory& stage) {
  const RankBuffers& buffers = lives.buffers;
  const std::vector<int64_t>& step_ops = lives.step_ops;
  const std::vector<Lifetime>& step_lives = lives.step_lives;
  const std::vector<MicrobatchPattern>& patterns = lives.patterns;
  const std::vector<size_t>& pattern_of = lives.pattern_of;
  const size_t step_start_count = lives.step_start_count;
  LiveBytes over_slots;  // step buffers live while the slots run
  for (const Lifetime& life : step_lives) {
    if (life.allocated < step_start_count || !life.written)
      if (life.last_use >= step_start_count) over_slots += buffers.live(life.buffer);
  }
  const std::vector<LiveBytes> step_live = live_profile(buffers, step_lives, step_ops.size());
  const size_t microbatches = pattern_of.size();

  // Positions in issue order, the first reaching the peak wins.
  double peak = -1;
  auto consider = [&](const LiveBytes& live, int64_t op) {
    if (live.total() <= peak) return false;
    peak = live.total();
    stage.activation_bytes = live.activation;
    stage.temporary_bytes = live.temporary;
    stage.module = shard.ops[op].module;
    stage.microbatches_in_flight = 0;
    return true;
  };
  for (size_t i = 0; i < step_start_count; ++i) consider(step_live[i], step_ops[i]);
  std::vector<size_t> passed(microbatches, 0);  // slots of each micro-batch run so far
  LiveBytes kept_by_all;                          // what every micro-batch keeps at its boundary
  std::optional<size_t> peak_slot;
  for (size_t s = 0; s < program.slots.size(); ++s) {
    const auto m = static_cast<size_t>(program.slots[s].microbatch);
    const MicrobatchPattern& pattern = patterns[pattern_of[m]];
    const size_t j = passed[m];
    const size_t begin = j == 0 ? 0 : pattern.slot_end[j - 1];
    if (begin < pattern.slot_end[j]) {
      LiveBytes live = over_slots;
      live += kept_by_all;
      live -= pattern.kept[j];
      live += pattern.slot_peak[j];
      if (consider(live, pattern.ops[pattern.slot_peak_at[j]])) peak_slot = s;
    }
    kept_by_all -= pattern.kept[j];
    kept_by_all += pattern.kept[j + 1];
    passed[m] = j + 1;
  }
  GradCopyWindow copy;
  for (size_t i = step_start_count; i < step_ops.size(); ++i) {
    LiveBytes live = step_live[i];
    if (copy.live_at(shard.ops[step_ops[i]])) live.temporary += stage.fp32_grad_copy_bytes;
    if (consider(live, step_ops[i])) peak_slot.reset();
  }

  // Micro-batches in flight at the peak: those with saved activations live there.
  if (!peak_slot) return;
  std::fill(passed.begin(), passed.end(), 0);
  for (size_t s = 0; s < *peak_slot; ++s) ++passed[static_cast<size_t>(program.slots[s].microbatch)];
  const auto peak_microbatch = static_cast<size_t>(program.slots[*peak_slot].microbatch);
  for (size_t m = 0; m < microbatches; ++m) {
    const MicrobatchPattern& pattern = patterns[pattern_of[m]];
    if (m != peak_microbatch) {
      stage.microbatches_in_flight += pattern.kept_saved[passed[m]];
      continue;
    }
    const size_t at = pattern.slot_peak_at[passed[m]];
    stage.microbatches_in_flight += std::any_of(pattern.lives.begin(), pattern.lives.end(), [&](const Lifetime& life) {
      return buffers.saved[life.buffer] && life.allocated <= at && at <= life.last_use;
    });
  }
}

// By buffer id, whether it is transient (is_transient): looked up for every op instance.
std::vector<char> transient_buffers(const ShardSection& shard) {
  std::vector<char> transient;
  for (const ShardBuffer& buffer : shard.buffers) transient.push_back(is_transient(buffer));
  return transient;
}

}  // namespace

std::vector<double> layer_bytes_kept_for_backward(const ShardSection& shard, size_t layers) {
  const RankProgram program = shard.parallelism.pp == 1 ? rank_program(shard, 0) : RankProgram{};
  if (program.slots.size() != 2)
    throw DataError("layer bytes kept for backward: expected one rank running one micro-batch's forward and "
                    "backward slots, got pp=" + std::to_string(shard.parallelism.pp) + " and " +
                    std::to_string(program.slots.size()) + " slots");
  const RankLives lives(shard, transient_buffers(shard), 0, program);  // one micro-batch: one pattern
  const RankBuffers& buffers = lives.buffers;
  const MicrobatchPattern& pattern = lives.patterns.front();
  const size_t forward_end = pattern.slot_end[0];
  std::vector<double> kept(layers, 0.0);
  for (const Lifetime& life : pattern.lives) {
    if (life.allocated >= forward_end || life.last_use < forward_end) continue;  // not kept over the boundary
    const std::optional<int64_t>& layer = shard.ops[pattern.ops[life.last_use]].layer;
    if (layer && *layer >= 0 && static_cast<size_t>(*layer) < layers) kept[*layer] += buffers.bytes[life.buffer];
  }
  return kept;
}

TrainingStateBytes training_state_bytes(double params, const ParallelismConfig& parallelism,
                                        const TrainingConfig& training, double expert_params) {
  // The distributed optimizer's data-parallel group spans the context-parallel ranks too; under
  // hybrid sharding, one replica's ranks.
  const bool sharded = training.distributed_optimizer || training.shards_gradients();
  const double dense_shards = sharded ? static_cast<double>(parallelism.dp_shard_group()) : 1.0;
  const double expert_shards = sharded && expert_params > 0 ? static_cast<double>(parallelism.expert_dp()) : 1.0;
  const double shard_params = (params - expert_params) / dense_shards + expert_params / expert_shards;
  TrainingStateBytes states;
  states.optimizer_state_bytes = shard_params * training.optimizer_state_bytes();
  if (training.shards_weights() && params > 0) states.weight_share = shard_params / params;
  // FSDP2 (torchtitan) shards the fp32 parameters themselves: the optimizer updates them in
  // place, as its master weights, and they are cast to 16 bits (or to fp8 by torchao's float8
  // all-gather) as they are gathered (MixedPrecisionPolicy's param_dtype). A reduced gradient
  // is cast back to its sharded parameter's dtype whatever the reduce dtype (foreach_reduce,
  // torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py), and Adam reads it in place.
  if (training.shards_weights() && training.fsdp_implementation == FsdpImplementation::fsdp2 &&
      training.master_weight_bytes() == kFp32Bytes) {
    states.optimizer_state_bytes -= shard_params * kFp32Bytes;
    states.fp32_weight_shard_bytes = shard_params * kFp32Bytes;
    states.grad_bytes = shard_params * kFp32Bytes;
    return states;
  }
  states.grad_bytes = (training.shards_gradients() ? shard_params : params) * training.main_grad_bytes();
  if (training.grad_reduce_in_bf16) states.fp32_grad_copy_bytes = shard_params * kFp32Bytes;
  return states;
}

void account_memory(Graph& g, const MemOptions& options) {
  const ShardSection& shard = need_section(g.shard, "shard", "syssim-shard");
  const int64_t pp = shard.parallelism.pp;
  if (static_cast<int64_t>(shard.stage_params_local.size()) != pp)
    throw DataError("/shard/stage_params_local: " + std::to_string(shard.stage_params_local.size()) +
                    " entries for pp=" + std::to_string(pp) + " pipeline ranks");
  const std::vector<char> transient = transient_buffers(shard);

  MemSection mem;
  StageMemory heaviest;
  MemoryReserve heaviest_reserve;
  // The GPU's memory: tensors, the allocator's fragmentation of them, and the reserve.
  const double fragmentation = shard.training.allocator_fragmentation;
  auto device_bytes = [&](const StageMemory& stage, const MemoryReserve& reserve) {
    return stage.total_bytes() * (1 + fragmentation) + reserve.total();
  };
  double most_device_bytes = 0;  // over the ranks
  std::optional<RankLives> heaviest_lives;  // kept for the allocator's replay
  const HardwareConfig* hardware = g.cost ? &g.cost->hardware : nullptr;
  const std::vector<RankProgram> programs = rank_programs(shard);
  const std::vector<MemoryReserve> reserves =
      hardware ? memory_reserves(shard, *hardware) : std::vector<MemoryReserve>(static_cast<size_t>(pp));
  for (int64_t rank = 0; rank < pp; ++rank) {
    StageMemory stage;
    double params = shard.stage_params_local[rank];
    const WeightBytes weights = weight_bytes(shard, rank);
    const double expert_params = shard.stage_expert_params_local.empty() ? 0 : shard.stage_expert_params_local.at(rank);
    TrainingStateBytes states = training_state_bytes(params, shard.parallelism, shard.training, expert_params);
    stage.param_bytes = states.fp32_weight_shard_bytes.value_or((weights.params + weights.quantized) * states.weight_share);
    stage.grad_bytes = states.grad_bytes;
    stage.optimizer_state_bytes = states.optimizer_state_bytes;
    RankLives lives(shard, transient, rank, programs[rank]);
    stage.fp32_grad_copy_bytes = states.fp32_grad_copy_bytes;
    transient_peak(shard, lives, programs[rank], stage);
    mem.pp_stage_memory_gb.push_back(stage.total_bytes() / kBytesPerGB);
    mem.pp_stage_microbatches_in_flight.push_back(stage.microbatches_in_flight);
    const MemoryReserve& reserve = reserves[static_cast<size_t>(rank)];
    most_device_bytes = std::max(most_device_bytes, device_bytes(stage, reserve));
    if (rank == 0 || stage.total_bytes() > heaviest.total_bytes()) {
      heaviest = stage;
      heaviest_reserve = reserve;
      mem.peak_pp_stage = rank;
      if (options.replay_allocator) heaviest_lives.emplace(std::move(lives));
    }
  }
  mem.param_bytes = heaviest.param_bytes;
  mem.grad_bytes = heaviest.grad_bytes;
  mem.optimizer_state_bytes = heaviest.optimizer_state_bytes;
  mem.activation_bytes = heaviest.activation_bytes;
  mem.temporary_bytes = heaviest.temporary_bytes;
  mem.peak_module = heaviest.module;
  mem.peak_memory_gb = heaviest.total_bytes() / kBytesPerGB;
  mem.cuda_context_bytes = heaviest_reserve.cuda_context_bytes;
  mem.nccl_buffer_bytes = heaviest_reserve.nccl_buffer_bytes;
  mem.fragmentation_bytes = fragmentation * heaviest.total_bytes();
  // The heaviest rank's, as the fields above; its model states are allocated once, whole,
  // before the step.
  if (heaviest_lives)
    mem.reserved_memory_gb = (heaviest.param_bytes + heaviest.grad_bytes + heaviest.optimizer_state_bytes +
                              replayed_reserved_bytes(shard, *heaviest_lives, programs[static_cast<size_t>(mem.peak_pp_stage)],
                                                      heaviest.fp32_grad_copy_bytes)) /
                             kBytesPerGB;
  mem.device_memory_gb = device_bytes(heaviest, heaviest_reserve) / kBytesPerGB;

  if (hardware && hardware->gpu_memory_GB) {
    const double capacity_gb = *hardware->gpu_memory_GB, required_gb = most_device_bytes / kBytesPerGB;
    mem.gpu_memory_gb = capacity_gb;
    if (required_gb > capacity_gb) mem.oom = OomInfo{capacity_gb, required_gb, required_gb - capacity_gb};
  }
  g.mem = std::move(mem);
}

}  // namespace syssim
