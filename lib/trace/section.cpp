#include "trace/section.hpp"

#include "common/json_util.hpp"

namespace syssim {
namespace {

json ref_to_json(const TensorRef& r) {
  return {{"tensor", r.tensor}, {"dims", dims_to_strings(r.dims)}, {"dtype", r.dtype}};
}

TensorRef ref_from_json(const json& j, const std::string& path) {
  return TensorRef{require_as<int64_t>(j, "tensor", path),
                   dims_from_strings(require_as<std::vector<std::string>>(j, "dims", path), path + "/dims"),
                   require_as<std::string>(j, "dtype", path)};
}

std::vector<TensorRef> refs_from_json(const json& j, const std::string& key, const std::string& path) {
  std::vector<TensorRef> refs;
  const json& list = require(j, key, path);
  for (size_t i = 0; i < list.size(); ++i) refs.push_back(ref_from_json(list[i], path + "/" + key + "/" + std::to_string(i)));
  return refs;
}

}  // namespace

AxisValues architecture_axes(const ModelConfig& model) {
  auto value = [](int64_t v) { return static_cast<double>(v); };
  return {{"h", value(model.hidden_size)},
          {"g", value(model.num_query_groups)},
          {"r", value(model.num_attention_heads / model.num_query_groups)},
          {"d", value(model.kv_channels)},
          {"f", value(model.ffn_hidden_size)},
          {"v", value(model.vocab_size)},
          {"p", value(model.max_position_embeddings)}};
}

double traced_parameters(const TraceSection& trace, const AxisValues& axes) {
  double params = 0;
  for (const TraceTensor& t : trace.tensors)
    if (t.role == "param") params += numel(t.dims).evaluate(axes, "/trace/tensors/" + std::to_string(t.id));
  return params;
}

json to_json(const TraceSection& t) {
  json tensors = json::array();
  for (const auto& x : t.tensors)
    tensors.push_back({{"id", x.id}, {"dims", dims_to_strings(x.dims)}, {"dtype", x.dtype}, {"role", x.role},
                       {"param", x.param}});
  json ops = json::array();
  for (const auto& op : t.ops) {
    json inputs = json::array(), outputs = json::array();
    for (const auto& r : op.inputs) inputs.push_back(ref_to_json(r));
    for (const auto& r : op.outputs) outputs.push_back(ref_to_json(r));
    ops.push_back({{"id", op.id}, {"name", op.name}, {"kind", op.kind}, {"phase", op.phase},
                   {"layer", nullable_to_json(op.layer)}, {"module", op.module}, {"tp_role", op.tp_role},
                   {"inputs", inputs}, {"outputs", outputs}, {"deps", op.deps}, {"fwd_op", nullable_to_json(op.fwd_op)},
                   {"flops", op.flops.to_string()}, {"bytes", op.bytes.to_string()}});
  }
  return {{"axes", t.axes}, {"tensors", tensors}, {"ops", ops}};
}

TraceSection trace_from_json(const json& j, const std::string& path) {
  TraceSection t;
  t.axes = require_as<AxisValues>(j, "axes", path);
  const json& tensors = require(j, "tensors", path);
  for (size_t i = 0; i < tensors.size(); ++i) {
    std::string p = path + "/tensors/" + std::to_string(i);
    const json& x = tensors[i];
    t.tensors.push_back(TraceTensor{require_as<int64_t>(x, "id", p),
                                    dims_from_strings(require_as<std::vector<std::string>>(x, "dims", p), p + "/dims"),
                                    require_as<std::string>(x, "dtype", p), require_as<std::string>(x, "role", p),
                                    require_as<std::string>(x, "param", p)});
    if (t.tensors.back().id != static_cast<int64_t>(i)) throw DataError("graph: " + p + "/id: expected " + std::to_string(i));
  }
  const json& ops = require(j, "ops", path);
  for (size_t i = 0; i < ops.size(); ++i) {
    std::string p = path + "/ops/" + std::to_string(i);
    const json& o = ops[i];
    TraceOp op;
    op.id = require_as<int64_t>(o, "id", p);
    if (op.id != static_cast<int64_t>(i)) throw DataError("graph: " + p + "/id: expected " + std::to_string(i));
    op.name = require_as<std::string>(o, "name", p);
    op.kind = require_as<std::string>(o, "kind", p);
    op.phase = require_as<std::string>(o, "phase", p);
    op.layer = read_nullable<int64_t>(o, "layer", p);
    op.module = require_as<std::string>(o, "module", p);
    op.tp_role = require_as<std::string>(o, "tp_role", p);
    op.inputs = refs_from_json(o, "inputs", p);
    op.outputs = refs_from_json(o, "outputs", p);
    op.deps = require_as<std::vector<int64_t>>(o, "deps", p);
    for (int64_t d : op.deps)
      if (d < 0 || d >= op.id) throw DataError("graph: " + p + "/deps: " + std::to_string(d) + " is not an earlier op");
    op.fwd_op = read_nullable<int64_t>(o, "fwd_op", p);
    op.flops = Poly::parse(require_as<std::string>(o, "flops", p), p + "/flops");
    op.bytes = Poly::parse(require_as<std::string>(o, "bytes", p), p + "/bytes");
    for (const auto* refs : {&op.inputs, &op.outputs})
      for (const auto& r : *refs)
        if (r.tensor < 0 || r.tensor >= static_cast<int64_t>(t.tensors.size()))
          throw DataError("graph: " + p + ": tensor " + std::to_string(r.tensor) + " does not exist");
    t.ops.push_back(std::move(op));
  }
  return t;
}

}  // namespace syssim
