#include "shard/section.hpp"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <string_view>
#include <tuple>

#include "common/json_util.hpp"

namespace syssim {
namespace {

// The streams an op may run on: every one but the host thread's, which issues ops and runs none.
const std::vector<Stream> kOpStreams = [] {
  std::vector<Stream> streams;
  for (size_t s = 0; s < EnumNames<Stream>::kNames.size(); ++s)
    if (static_cast<Stream>(s) != Stream::host) streams.push_back(static_cast<Stream>(s));
  return streams;
}();

json schedule_to_json(const PipelineSchedule& schedule) {
  json ranks = json::array();
  for (const auto& slots : schedule) {
    json rank = json::array();
    for (const ScheduleSlot& slot : slots)
      rank.push_back({{"chunk", slot.chunk}, {"microbatch", slot.microbatch}, {"pass", to_string(slot.pass)}});
    ranks.push_back(rank);
  }
  return ranks;
}

// The sizes parallelism_from_json, which takes each parallel size from 1 to 2^20, leaves: their
// product, the world size, the rank order over them, and num_microbatches.
void check_sizes(const ParallelismConfig& p, int64_t microbatches, const std::string& path) {
  if (std::string excess = p.world_size_excess(); !excess.empty())
    throw DataError("graph: " + path + "/parallelism: " + excess);
  try {  // every stage places ranks by the order: each refuses one it cannot follow
    rank_order(p);
    if (p.ep > 1) expert_rank_order(p);
  } catch (const DataError& e) {
    throw DataError("graph: " + path + "/parallelism/order: " + e.what());
  }
  const int64_t most = kMaxChunkPasses / p.vpp.value_or(1);
  if (microbatches < 1 || microbatches > most)
    throw DataError("graph: " + path + "/num_microbatches: expected 1 to " + std::to_string(most) + ", got " +
                    std::to_string(microbatches));
}

// What the section states twice agrees: a size edited in one place would price another job.
void check_stated_twice(const ShardSection& s, const json& parallelism, const std::string& path) {
  const ParallelismConfig& p = s.parallelism;
  if (parallelism.contains("world_size")) {
    const int64_t stated = require_as<int64_t>(parallelism, "world_size", path + "/parallelism");
    if (stated != p.world_size())
      throw DataError("graph: " + path + "/parallelism/world_size: " + std::to_string(stated) + ", but tp*cp*pp*dp = " +
                      std::to_string(p.world_size()));
  }
  const auto pp = static_cast<size_t>(p.pp);
  auto require_per_rank = [&](size_t count, const std::string& key, size_t expected, const std::string& meaning) {
    if (count != expected)
      throw DataError("graph: " + path + "/" + key + ": " + std::to_string(count) + " entries, expected " + meaning + " " +
                      std::to_string(expected));
  };
  require_per_rank(s.schedule.size(), "schedule", pp, "one per pipeline rank: pp =");
  require_per_rank(s.stage_params_local.size(), "stage_params_local", pp, "one per pipeline rank: pp =");
  if (!s.stage_expert_params_local.empty())
    require_per_rank(s.stage_expert_params_local.size(), "stage_expert_params_local", pp, "one per pipeline rank: pp =");
  require_per_rank(s.pp_layout.size(), "pp_layout", pp * static_cast<size_t>(p.vpp.value_or(1)),
                   "one per virtual stage: pp*vpp =");
  // The batch and the sequence, which the throughput figures read, as the simulation runs them.
  const TrainingConfig& t = s.training;
  if (t.micro_batch * p.dp * s.num_microbatches != t.global_batch)
    throw DataError("graph: " + path + "/num_microbatches: " + std::to_string(s.num_microbatches) +
                    ", but global_batch / (micro_batch * dp) = " + std::to_string(t.global_batch) + " / (" +
                    std::to_string(t.micro_batch) + " * " + std::to_string(p.dp) + ")");
  if (t.seq_length && *t.seq_length != s.seq_length)
    throw DataError("graph: " + path + "/seq_length: " + std::to_string(s.seq_length) + ", but training/seq_length is " +
                    std::to_string(*t.seq_length));
}

// The chunk of an op or slot at `where`: one of the `chunks` (vpp) model chunks of its rank.
void check_chunk(int64_t chunk, int64_t chunks, const std::string& where) {
  if (chunk < 0 || chunk >= chunks)
    throw DataError("graph: " + where + "/chunk: chunk " + std::to_string(chunk) + " does not exist (vpp=" +
                    std::to_string(chunks) + ")");
}

PipelineSchedule schedule_from_json(const json& j, const std::string& path, int64_t chunks, int64_t microbatches) {
  PipelineSchedule schedule;
  if (!j.is_array()) throw DataError("graph: " + path + ": expected an array of slot lists, got " + j.dump());
  for (size_t r = 0; r < j.size(); ++r) {
    if (!j[r].is_array())
      throw DataError("graph: " + path + "/" + std::to_string(r) + ": expected an array of slots, got " + j[r].dump());
    std::vector<ScheduleSlot>& slots = schedule.emplace_back();
    for (size_t i = 0; i < j[r].size(); ++i) {
      std::string p = path + "/" + std::to_string(r) + "/" + std::to_string(i);
      ScheduleSlot slot{require_as<int64_t>(j[r][i], "chunk", p), require_as<int64_t>(j[r][i], "microbatch", p),
                        require_enum<OpPass>(j[r][i], "pass", p, {OpPass::forward, OpPass::backward, OpPass::weight})};
      check_chunk(slot.chunk, chunks, p);
      if (slot.microbatch < 0 || slot.microbatch >= microbatches)
        throw DataError("graph: " + p + "/microbatch: micro-batch " + std::to_string(slot.microbatch) +
                        " does not exist (num_microbatches=" + std::to_string(microbatches) + ")");
      slots.push_back(slot);
    }
  }
  return schedule;
}

// What the shard stage's options checks refuse, refused in a section another program wrote:
// batches below 1, an unknown dtype or recompute setting.
void check_training(const TrainingConfig& t, const std::string& path) {
  for (const auto& [key, value] : {std::pair{"micro_batch", t.micro_batch}, {"global_batch", t.global_batch}})
    if (value < 1) throw DataError("graph: " + path + "/" + key + ": expected 1 or more, got " + std::to_string(value));
  if (!t.known_dtype())
    throw DataError("graph: " + path + "/dtype: expected bf16, fp16, fp8 or fp4, got \"" + t.dtype + "\"");
  if (!t.known_recompute())
    throw DataError("graph: " + path + "/recompute: expected none, selective or full, got \"" + t.recompute + "\"");
}

// The slot pass that runs an op: recomputed forward ops run at the start of the backward.
OpPass slot_pass_of(const ShardOp& op) { return op.recompute ? OpPass::backward : op.pass; }

}  // namespace

std::vector<char> buffers_saved_for_backward(const ShardSection& shard, int64_t rank) {
  std::vector<char> written_in_forward(shard.buffers.size(), 0), read_in_backward(shard.buffers.size(), 0);
  for (const ShardOp& op : shard.ops) {
    if (op.stage != rank) continue;
    if (op.phase == OpPhase::fwd)
      for (int64_t b : op.writes) written_in_forward[b] = 1;
    if (op.phase == OpPhase::bwd)
      for (int64_t b : op.reads) read_in_backward[b] = 1;
  }
  std::vector<char> saved(shard.buffers.size());
  for (size_t b = 0; b < saved.size(); ++b) saved[b] = written_in_forward[b] && read_in_backward[b];
  return saved;
}

namespace {

// The program of rank `stage`, whose ops are `rank_ops` (in id order).
RankProgram program_of(const std::vector<const ShardOp*>& rank_ops, int64_t stage, const PipelineSchedule& schedule,
                       int64_t microbatches) {
  const std::string where = "/shard/schedule/" + std::to_string(stage);
  if (stage < 0 || stage >= static_cast<int64_t>(schedule.size()))
    throw DataError("/shard/schedule: no slot list for pipeline rank " + std::to_string(stage));
  const std::vector<ScheduleSlot>& slots = schedule[stage];
  // The slot passes, forward, backward and weight, in OpPass order; OpPass::step is none.
  static const std::vector<std::string> passes = {"forward", "backward", "weight"};
  auto pass_index = [](OpPass pass) { return static_cast<size_t>(pass); };

  // Position of each (chunk, micro-batch, pass) slot; a weight slot takes the weight ops
  // out of the backward slot of the same chunk and micro-batch.
  int64_t chunks = 0;
  for (const ScheduleSlot& s : slots) chunks = std::max(chunks, s.chunk + 1);
  for (const ShardOp* op : rank_ops) chunks = std::max(chunks, op->chunk + 1);
  constexpr size_t kNone = SIZE_MAX;
  std::vector<size_t> position(static_cast<size_t>(chunks * microbatches) * passes.size(), kNone);
  auto at = [&](int64_t chunk, int64_t microbatch, size_t pass) -> size_t& {
    return position[(static_cast<size_t>(chunk * microbatches + microbatch)) * passes.size() + pass];
  };
  for (size_t i = 0; i < slots.size(); ++i) {
    const ScheduleSlot& s = slots[i];
    if (s.microbatch >= microbatches)
      throw DataError(where + "/" + std::to_string(i) + ": micro-batch " + std::to_string(s.microbatch) +
                      " does not exist (num_microbatches=" + std::to_string(microbatches) + ")");
    size_t& slot = at(s.chunk, s.microbatch, pass_index(s.pass));
    if (slot != kNone)
      throw DataError(where + "/" + std::to_string(i) + ": a second " + to_string(s.pass) + " slot for chunk " +
                      std::to_string(s.chunk) + ", micro-batch " + std::to_string(s.microbatch));
    slot = i;
  }

  // The ops of each (chunk, pass), in op id order.
  RankProgram program;
  std::vector<std::vector<int64_t>> ops_of(static_cast<size_t>(chunks) * passes.size());
  for (const ShardOp* rank_op : rank_ops) {
    const ShardOp& op = *rank_op;
    if (op.scope == OpScope::step_start) program.step_start_ops.push_back(op.id);
    if (op.scope == OpScope::step) program.step_ops.push_back(op.id);
    if (op.scope != OpScope::microbatch) continue;
    size_t pass = pass_index(slot_pass_of(op));
    if (pass == passes.size())
      throw DataError("/shard/ops/" + std::to_string(op.id) + "/pass: a microbatch op needs forward, backward or "
                      "weight, got \"" + to_string(op.pass) + "\"");
    std::vector<int64_t>& of_pass = ops_of[static_cast<size_t>(op.chunk) * passes.size() + pass];
    // Every micro-batch needs the slot that runs the op, after the slot before it.
    if (of_pass.empty())
      for (int64_t m = 0; m < microbatches; ++m) {
        size_t slot_pass = pass == 2 && at(op.chunk, m, 2) == kNone ? 1 : pass;
        auto slot_name = [&] {
          return passes[slot_pass] + " slot of chunk " + std::to_string(op.chunk) + ", micro-batch " + std::to_string(m);
        };
        size_t slot = at(op.chunk, m, slot_pass);
        if (slot == kNone) throw DataError(where + ": no " + slot_name() + ", which op " + std::to_string(op.id) + " needs");
        size_t before = slot_pass == 0 ? kNone : at(op.chunk, m, slot_pass - 1);
        if (slot_pass != 0 && (before == kNone || before > slot))
          throw DataError(where + ": the " + slot_name() + " is not preceded by its " + passes[slot_pass - 1] + " slot");
      }
    of_pass.push_back(op.id);
  }
  // A kind per (chunk, pass, weight ops merged): without a weight slot the backward slot
  // runs the weight ops too, in op order as autograd does.
  std::vector<size_t> kind_of(static_cast<size_t>(chunks) * passes.size() * 2, kNone);
  for (const ScheduleSlot& s : slots) {
    const size_t pass = pass_index(s.pass);
    const bool merged = pass == 1 && at(s.chunk, s.microbatch, 2) == kNone;
    size_t& kind_index = kind_of[(static_cast<size_t>(s.chunk) * passes.size() + pass) * 2 + merged];
    if (kind_index == kNone) {
      kind_index = program.kind_ops.size();
      program.backward_kind.push_back(pass != 0);
      const std::vector<int64_t>& ops = ops_of[static_cast<size_t>(s.chunk) * passes.size() + pass];
      std::vector<int64_t>& kind = program.kind_ops.emplace_back();
      if (merged) {
        const std::vector<int64_t>& weight = ops_of[static_cast<size_t>(s.chunk) * passes.size() + 2];
        std::merge(ops.begin(), ops.end(), weight.begin(), weight.end(), std::back_inserter(kind));
      } else {
        kind = ops;
      }
    }
    program.slots.push_back({s.microbatch, kind_index});
  }
  return program;
}

}  // namespace

bool receives_after_previous_slot(const ShardSection& shard) {
  return !shard.training.overlap_moe_expert_parallel_comm && shard.parallelism.vpp.value_or(1) <= 1;
}

RankProgram rank_program(const ShardSection& shard, int64_t stage) {
  std::vector<const ShardOp*> rank_ops;
  for (const ShardOp& op : shard.ops)
    if (op.stage == stage) rank_ops.push_back(&op);
  return program_of(rank_ops, stage, shard.schedule, shard.num_microbatches);
}

std::string op_label(const ShardOp& op, bool any_layer) {
  const std::string& module = any_layer ? op.module.any_layer() : op.module.str();
  const std::string_view name = op.name.str();
  const size_t colons = name.find("::");
  std::string label = module + " " + std::string(colons == std::string_view::npos ? name : name.substr(colons + 2));
  if (op.kind == OpKind::collective) label += std::string(" ") + to_string(op.group);
  if (op.recompute) label += " (recompute)";
  return label;
}

std::vector<RankProgram> rank_programs(const ShardSection& shard) {
  const int64_t ranks = std::max<int64_t>(shard.parallelism.pp, 0);
  std::vector<std::vector<const ShardOp*>> ops_of_rank(static_cast<size_t>(ranks));
  for (const ShardOp& op : shard.ops)
    if (op.stage >= 0 && op.stage < ranks) ops_of_rank[op.stage].push_back(&op);
  std::vector<RankProgram> programs;
  for (int64_t rank = 0; rank < ranks; ++rank)
    programs.push_back(program_of(ops_of_rank[rank], rank, shard.schedule, shard.num_microbatches));
  return programs;
}

json to_json(const ShardSection& s) {
  json buffers = json::array();
  for (const auto& b : s.buffers)
    buffers.push_back({{"id", b.id}, {"bytes", b.bytes}, {"role", to_string(b.role)}, {"param", b.param},
                       {"producer", nullable_to_json(b.producer)}});
  json ops = json::array();
  for (const auto& op : s.ops) {
    json o = {{"id", op.id}, {"trace_op", nullable_to_json(op.trace_op)}, {"name", op.name}, {"kind", to_string(op.kind)},
              {"phase", to_string(op.phase)}, {"layer", nullable_to_json(op.layer)}, {"module", op.module}, {"scope", to_string(op.scope)},
              {"pass", to_string(op.pass)}, {"stage", op.stage}, {"chunk", op.chunk}, {"recompute", op.recompute},
              {"stream", to_string(op.stream)}, {"dtype", op.dtype}, {"deps", op.deps}, {"flops", op.flops},
              {"bytes", op.bytes}, {"reads", op.reads}, {"writes", op.writes}};
    if (!op.shape.empty()) o["shape"] = op.shape;
    if (op.host_waits_for) o["host_waits_for"] = *op.host_waits_for;
    if (op.cuda_graph) o["cuda_graph"] = to_string(*op.cuda_graph);
    if (op.kind == OpKind::collective) {
      o["collective"] = to_string(op.collective);
      o["group"] = to_string(op.group);
      o["group_size"] = op.group_size;
      o["message_bytes"] = op.message_bytes;
    }
    ops.push_back(o);
  }
  json axes = json::object();
  for (const auto& [k, v] : s.axes) axes[k] = v;
  json section = {{"parallelism", to_json(s.parallelism)},
          {"training", to_json(s.training)},
          {"seq_length", s.seq_length},
          {"num_microbatches", s.num_microbatches},
          {"axes", axes},
          {"params_total", s.params_total},
          {"params_active", s.params_active},
          {"params_local", s.params_local},
          {"model_flops_per_step", s.model_flops_per_step},
          {"buffers", buffers},
          {"ops", ops},
          {"pipeline_schedule", to_string(s.pipeline_schedule)},
          {"pp_layout", s.pp_layout},
          {"stage_params_local", s.stage_params_local},
          {"schedule", schedule_to_json(s.schedule)}};
  if (!s.stage_expert_params_local.empty()) section["stage_expert_params_local"] = s.stage_expert_params_local;
  if (s.model_attention_flops_per_step) section["model_attention_flops_per_step"] = *s.model_attention_flops_per_step;
  return section;
}

ShardSection shard_from_json(const json& j, const std::string& path) {
  ShardSection s;
  s.parallelism = parallelism_from_json(require(j, "parallelism", path), path + "/parallelism");
  s.training = training_from_json(require(j, "training", path), path + "/training");
  check_training(s.training, path + "/training");
  s.seq_length = require_as<int64_t>(j, "seq_length", path);
  s.num_microbatches = require_as<int64_t>(j, "num_microbatches", path);
  check_sizes(s.parallelism, s.num_microbatches, path);
  const int64_t chunks = s.parallelism.vpp.value_or(1);
  s.axes = require_as<AxisValues>(j, "axes", path);
  s.params_total = require_at_least(j, "params_total", path, 0);
  // New in 1.5: without it, every parameter is active.
  s.params_active = j.contains("params_active") ? require_at_least(j, "params_active", path, 0) : s.params_total;
  s.params_local = require_at_least(j, "params_local", path, 0);
  s.model_flops_per_step = require_at_least(j, "model_flops_per_step", path, 0);
  // Format 1.7 added its attention part.
  if (j.contains("model_attention_flops_per_step"))
    s.model_attention_flops_per_step = require_at_least(j, "model_attention_flops_per_step", path, 0);
  const json& buffers = require(j, "buffers", path);
  for (size_t i = 0; i < buffers.size(); ++i) {
    std::string p = path + "/buffers/" + std::to_string(i);
    ShardBuffer b{require_position_id(buffers[i], i, p), require_at_least(buffers[i], "bytes", p, 0),
                  require_enum<TensorRole>(buffers[i], "role", p), require_as<std::string>(buffers[i], "param", p),
                  read_nullable<int64_t>(buffers[i], "producer", p)};
    s.buffers.push_back(b);
  }
  const json& ops = require(j, "ops", path);
  if (!ops.is_array() || ops.empty()) throw DataError("graph: " + path + "/ops: expected the ops of a step, got " + ops.dump());
  auto check_buffers = [&](const IdList& ids, const std::string& p) {
    for (int64_t id : ids)
      if (id < 0 || id >= static_cast<int64_t>(s.buffers.size()))
        throw DataError("graph: " + p + ": buffer " + std::to_string(id) + " does not exist");
  };
  for (size_t i = 0; i < ops.size(); ++i) {
    std::string p = path + "/ops/" + std::to_string(i);
    const json& o = ops[i];
    ShardOp op;
    op.id = require_position_id(o, i, p);
    op.trace_op = read_nullable<int64_t>(o, "trace_op", p);
    op.name = require_as<std::string>(o, "name", p);
    op.kind = require_enum<OpKind>(o, "kind", p);
    op.phase = require_enum<OpPhase>(o, "phase", p);
    op.layer = read_nullable<int64_t>(o, "layer", p);
    op.module = require_as<std::string>(o, "module", p);
    op.scope = require_enum<OpScope>(o, "scope", p);
    op.pass = require_enum<OpPass>(o, "pass", p);
    op.stage = require_as<int64_t>(o, "stage", p);
    if (op.stage < 0 || op.stage >= s.parallelism.pp)
      throw DataError("graph: " + p + "/stage: pipeline rank " + std::to_string(op.stage) + " does not exist (pp=" +
                      std::to_string(s.parallelism.pp) + ")");
    op.chunk = require_as<int64_t>(o, "chunk", p);
    check_chunk(op.chunk, chunks, p);
    op.recompute = require_as<bool>(o, "recompute", p);
    op.stream = require_enum<Stream>(o, "stream", p, kOpStreams);
    op.dtype = require_as<std::string>(o, "dtype", p);
    op.deps = require_as<std::vector<int64_t>>(o, "deps", p);
    for (int64_t d : op.deps)
      if (d < 0 || d >= op.id) throw DataError("graph: " + p + "/deps: " + std::to_string(d) + " is not an earlier op");
    if (o.contains("host_waits_for")) {  // new in graph format 1.8
      const auto waited = require_as<int64_t>(o, "host_waits_for", p);
      if (waited < 0 || waited >= op.id || s.ops[waited].stage != op.stage)
        throw DataError("graph: " + p + "/host_waits_for: " + std::to_string(waited) +
                        " is not an earlier op of pipeline rank " + std::to_string(op.stage));
      op.host_waits_for = waited;
    }
    if (o.contains("cuda_graph")) op.cuda_graph = require_enum<CudaGraphScope>(o, "cuda_graph", p);  // new in 1.8
    op.flops = require_at_least(o, "flops", p, 0);
    op.bytes = require_at_least(o, "bytes", p, 0);
    if (o.contains("shape")) {
      op.shape = require_as<KernelShape>(o, "shape", p);
      for (const auto& [key, value] : op.shape)  // sizes, counts and 0/1 switches
        check_at_least(value, 0, "graph: " + p + "/shape/" + key, o["shape"][key]);
    }
    op.reads = require_as<std::vector<int64_t>>(o, "reads", p);
    op.writes = require_as<std::vector<int64_t>>(o, "writes", p);
    check_buffers(op.reads, p + "/reads");
    check_buffers(op.writes, p + "/writes");
    if (op.kind == OpKind::collective) {
      op.collective = require_enum<Collective>(o, "collective", p);
      op.group = require_enum<CommGroup>(o, "group", p);
      op.group_size = require_as<int64_t>(o, "group_size", p);
      op.message_bytes = require_at_least(o, "message_bytes", p, 0);
    }
    s.ops.push_back(std::move(op));
  }
  s.pipeline_schedule = require_enum<ScheduleKind>(j, "pipeline_schedule", path);
  s.pp_layout = require_as<std::vector<int64_t>>(j, "pp_layout", path);
  s.stage_params_local = require_all_at_least(j, "stage_params_local", path, 0);
  if (j.contains("stage_expert_params_local"))
    s.stage_expert_params_local = require_all_at_least(j, "stage_expert_params_local", path, 0);
  s.schedule = schedule_from_json(require(j, "schedule", path), path + "/schedule", chunks, s.num_microbatches);
  check_stated_twice(s, require(j, "parallelism", path), path);
  return s;
}

}  // namespace syssim
