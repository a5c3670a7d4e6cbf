#include "shard/section.hpp"

#include "common/json_util.hpp"

namespace syssim {
namespace {

}  // namespace

json to_json(const ShardSection& s) {
  json buffers = json::array();
  for (const auto& b : s.buffers)
    buffers.push_back({{"id", b.id}, {"bytes", b.bytes}, {"role", b.role}, {"param", b.param},
                       {"producer", nullable_to_json(b.producer)}});
  json ops = json::array();
  for (const auto& op : s.ops) {
    json o = {{"id", op.id}, {"trace_op", nullable_to_json(op.trace_op)}, {"name", op.name}, {"kind", op.kind},
              {"phase", op.phase}, {"layer", nullable_to_json(op.layer)}, {"module", op.module}, {"scope", op.scope},
              {"pass", op.pass}, {"stage", op.stage}, {"chunk", op.chunk}, {"recompute", op.recompute},
              {"stream", op.stream}, {"dtype", op.dtype}, {"deps", op.deps}, {"flops", op.flops},
              {"bytes", op.bytes}, {"reads", op.reads}, {"writes", op.writes}};
    if (op.kind == "collective") {
      o["collective"] = op.collective;
      o["group"] = op.group;
      o["group_size"] = op.group_size;
      o["message_bytes"] = op.message_bytes;
    }
    ops.push_back(o);
  }
  json axes = json::object();
  for (const auto& [k, v] : s.axes) axes[k] = v;
  return {{"parallelism", to_json(s.parallelism)},
          {"training", to_json(s.training)},
          {"seq_length", s.seq_length},
          {"num_microbatches", s.num_microbatches},
          {"axes", axes},
          {"params_total", s.params_total},
          {"params_local", s.params_local},
          {"model_flops_per_step", s.model_flops_per_step},
          {"buffers", buffers},
          {"ops", ops}};
}

ShardSection shard_from_json(const json& j, const std::string& path) {
  ShardSection s;
  s.parallelism = parallelism_from_json(require(j, "parallelism", path), path + "/parallelism");
  s.training = training_from_json(require(j, "training", path), path + "/training");
  s.seq_length = require_as<int64_t>(j, "seq_length", path);
  s.num_microbatches = require_as<int64_t>(j, "num_microbatches", path);
  s.axes = require_as<AxisValues>(j, "axes", path);
  s.params_total = require_as<double>(j, "params_total", path);
  s.params_local = require_as<double>(j, "params_local", path);
  s.model_flops_per_step = require_as<double>(j, "model_flops_per_step", path);
  const json& buffers = require(j, "buffers", path);
  for (size_t i = 0; i < buffers.size(); ++i) {
    std::string p = path + "/buffers/" + std::to_string(i);
    ShardBuffer b{require_as<int64_t>(buffers[i], "id", p), require_as<double>(buffers[i], "bytes", p),
                  require_as<std::string>(buffers[i], "role", p), require_as<std::string>(buffers[i], "param", p),
                  read_nullable<int64_t>(buffers[i], "producer", p)};
    if (b.id != static_cast<int64_t>(i)) throw DataError("graph: " + p + "/id: expected " + std::to_string(i));
    s.buffers.push_back(b);
  }
  const json& ops = require(j, "ops", path);
  auto check_buffers = [&](const std::vector<int64_t>& ids, const std::string& p) {
    for (int64_t id : ids)
      if (id < 0 || id >= static_cast<int64_t>(s.buffers.size()))
        throw DataError("graph: " + p + ": buffer " + std::to_string(id) + " does not exist");
  };
  for (size_t i = 0; i < ops.size(); ++i) {
    std::string p = path + "/ops/" + std::to_string(i);
    const json& o = ops[i];
    ShardOp op;
    op.id = require_as<int64_t>(o, "id", p);
    if (op.id != static_cast<int64_t>(i)) throw DataError("graph: " + p + "/id: expected " + std::to_string(i));
    op.trace_op = read_nullable<int64_t>(o, "trace_op", p);
    op.name = require_as<std::string>(o, "name", p);
    op.kind = require_as<std::string>(o, "kind", p);
    op.phase = require_as<std::string>(o, "phase", p);
    op.layer = read_nullable<int64_t>(o, "layer", p);
    op.module = require_as<std::string>(o, "module", p);
    op.scope = require_as<std::string>(o, "scope", p);
    if (op.scope != "microbatch" && op.scope != "step" && op.scope != "step_start")
      throw DataError("graph: " + p + "/scope: expected microbatch, step or step_start, got \"" + op.scope + "\"");
    op.pass = require_as<std::string>(o, "pass", p);
    op.stage = require_as<int64_t>(o, "stage", p);
    op.chunk = require_as<int64_t>(o, "chunk", p);
    op.recompute = require_as<bool>(o, "recompute", p);
    op.stream = require_as<std::string>(o, "stream", p);
    op.dtype = require_as<std::string>(o, "dtype", p);
    op.deps = require_as<std::vector<int64_t>>(o, "deps", p);
    for (int64_t d : op.deps)
      if (d < 0 || d >= op.id) throw DataError("graph: " + p + "/deps: " + std::to_string(d) + " is not an earlier op");
    op.flops = require_as<double>(o, "flops", p);
    op.bytes = require_as<double>(o, "bytes", p);
    op.reads = require_as<std::vector<int64_t>>(o, "reads", p);
    op.writes = require_as<std::vector<int64_t>>(o, "writes", p);
    check_buffers(op.reads, p + "/reads");
    check_buffers(op.writes, p + "/writes");
    if (op.kind == "collective") {
      op.collective = require_as<std::string>(o, "collective", p);
      op.group = require_as<std::string>(o, "group", p);
      op.group_size = require_as<int64_t>(o, "group_size", p);
      op.message_bytes = require_as<double>(o, "message_bytes", p);
    }
    s.ops.push_back(std::move(op));
  }
  return s;
}

}  // namespace syssim
