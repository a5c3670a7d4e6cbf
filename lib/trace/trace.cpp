#include "trace/trace.hpp"

#include <c10/util/Exception.h>

#include "common/dtype.hpp"
#include "common/error.hpp"
#include "trace/model.hpp"
#include "trace/op_rules.hpp"
#include "trace/recorder.hpp"

namespace syssim {
namespace {

using AxisSizeMap = std::map<std::string, int64_t>;

// Pairwise-distinct primes above 5: a size traced with them factors uniquely into axes and a
// coefficient made of 2s, 3s and 5s (the 2 of a fused gate/up projection, say).
AxisSizeMap tracing_sizes(const ModelConfig& model) {
  AxisSizeMap primes = {{"b", 7}, {"s", 11}, {"h", 13}, {"g", 17}, {"r", 19}, {"d", 23}, {"f", 29}, {"v", 31}, {"p", 37}};
  // Multi-head attention has no groups to expand keys and values to: r is 1, in no dim.
  if (model.num_attention_heads == model.num_query_groups) primes["r"] = 1;
  // The axes of experts, latent attention and windows, only where the model has them.
  const AxisSizeMap more = {{"e", 41}, {"k", 43}, {"m", 47}, {"u", 53}, {"q", 59},
                            {"c", 61}, {"n", 67}, {"t", 71}, {"w", 73}, {"x", 79}};
  for (const auto& [axis, value] : architecture_axes(model))
    if (more.count(axis)) primes[axis] = more.at(axis);
  return primes;
}

Poly factor_dim(int64_t size, const AxisSizeMap& primes, const std::string& where) {
  Poly dim = Poly::constant(1);
  int64_t coefficient = size;
  for (const auto& [axis, prime] : primes)
    for (; prime > 1 && coefficient > 0 && coefficient % prime == 0; coefficient /= prime) dim = dim * Poly::axis(axis);
  int64_t rest = coefficient;
  for (int64_t small : {2, 3, 5})
    while (rest > 0 && rest % small == 0) rest /= small;
  if (rest != 1)
    throw DataError("cannot express dim " + std::to_string(size) + " of " + where + " as a product of axes");
  return dim * static_cast<double>(coefficient);
}

Dims factor_shape(const std::vector<int64_t>& shape, const AxisSizeMap& primes, const std::string& where) {
  Dims dims;
  for (int64_t size : shape) dims.push_back(factor_dim(size, primes, where));
  return dims;
}

std::vector<TensorRef> factor_operands(const std::vector<ConcreteOperand>& operands, const AxisSizeMap& primes,
                                       const std::string& where) {
  std::vector<TensorRef> refs;
  for (const ConcreteOperand& operand : operands)
    refs.push_back(TensorRef{operand.tensor, factor_shape(operand.shape, primes, where), operand.dtype});
  return refs;
}

Poly bytes_of(const std::vector<TensorRef>& refs) {
  Poly bytes;
  for (const TensorRef& ref : refs) bytes = bytes + numel(ref.dims) * element_bytes(ref.dtype).value();
  return bytes;
}

}  // namespace

ConcreteTrace trace_concrete(const ModelConfig& model, const std::map<std::string, int64_t>& axis_sizes) {
  validate(model, model.name);
  auto size = [&](const std::string& axis) {
    auto it = axis_sizes.find(axis);
    if (it == axis_sizes.end() || it->second <= 0)
      throw DataError("trace of " + model.name + ": axis '" + axis + "' needs a positive size");
    return it->second;
  };
  trace_detail::AxisSizes sizes{size("b"), size("s"), size("h"), size("g"), size("r"),
                                size("d"), size("f"), size("v"), size("p")};
  // The axes of experts, latent attention and windows: required where the model has them.
  const AxisValues used = architecture_axes(model);
  auto optional_size = [&](const std::string& axis) { return used.count(axis) ? size(axis) : int64_t{1}; };
  sizes.e = optional_size("e"), sizes.k = optional_size("k"), sizes.m = optional_size("m");
  sizes.u = optional_size("u"), sizes.q = optional_size("q"), sizes.c = optional_size("c");
  sizes.n = optional_size("n"), sizes.t = optional_size("t"), sizes.w = optional_size("w");
  sizes.x = optional_size("x");
  trace_detail::Recorder recorder;
  try {
    trace_detail::run_training_step(model, sizes, recorder);
  } catch (const c10::Error& e) {  // LibTorch rejected a shape: report the first line of its message
    throw DataError("trace of " + model.name + ": " + e.msg().substr(0, e.msg().find('\n')));
  }
  return recorder.finish();
}

TraceSection trace_model(const ModelConfig& model) {
  const AxisSizeMap primes = tracing_sizes(model);
  ConcreteTrace concrete = trace_concrete(model, primes);
  TraceSection trace;
  trace.axes = architecture_axes(model);  // v unpadded: syssim-shard pads it for its tp
  for (size_t id = 0; id < concrete.ops.size(); ++id) {
    const ConcreteOp& c = concrete.ops[id];
    const std::string where = "op " + std::to_string(id) + " (" + c.name + ")";
    TraceOp op;
    op.id = static_cast<int64_t>(id);
    op.name = c.name;
    op.kind = c.kind;
    op.phase = c.phase;
    op.layer = c.layer;
    op.module = c.module;
    op.tp_role = c.tp_role;
    op.inputs = factor_operands(c.inputs, primes, where);
    op.outputs = factor_operands(c.outputs, primes, where);
    op.deps = c.deps;
    op.fwd_op = c.fwd_op;
    op.flops = trace_detail::op_flops(*trace_detail::find_op_rule(c.name), op.inputs, op.outputs);
    op.bytes = bytes_of(op.inputs) + bytes_of(op.outputs);
    trace.ops.push_back(std::move(op));
  }
  for (const ConcreteTensor& t : concrete.tensors)
    trace.tensors.push_back(
        TraceTensor{t.id, factor_shape(t.shape, primes, "tensor " + std::to_string(t.id)), t.dtype, t.role, t.param});
  return trace;
}

}  // namespace syssim
