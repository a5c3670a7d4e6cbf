// The "model" and "trace" sections of a graph (docs/graph-format.md), owned by syssim-trace.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/expr.hpp"
#include "common/op_kinds.hpp"
#include "common/symbol.hpp"
#include "config/config.hpp"

namespace syssim {

// One operand of an op: a buffer and the view of it the op uses.
struct TensorRef {
  int64_t tensor = 0;
  Dims dims;
  Symbol dtype;  // bf16 | fp16 | fp32 | i64 | bool
};

// A buffer (a storage): every view of it has the same id.
struct TraceTensor {
  int64_t id = 0;
  Dims dims;
  Symbol dtype;
  TensorRole role = TensorRole::activation;  // param | grad | input | activation
  Symbol param;    // parameter name when role == param or grad
};

struct TraceOp {
  int64_t id = 0;
  Symbol name;     // "syssim::linear", "aten::add", ...
  OpKind kind = OpKind::math;  // gemm | attention | math | memory (the others are the shard stage's)
  OpPhase phase = OpPhase::fwd;  // fwd | bwd
  std::optional<int64_t> layer;
  Symbol module;   // e.g. "decoder.layers.3.mlp.linear_fc1"
  TpRole tp_role = TpRole::none;
  std::vector<TensorRef> inputs;
  std::vector<TensorRef> outputs;
  std::vector<int64_t> deps;   // ops that wrote a buffer this op reads (read after write)
  std::optional<int64_t> fwd_op;  // for bwd ops: the forward op they differentiate
  Poly flops;
  Poly bytes;  // bytes read plus bytes written
};

struct TraceSection {
  AxisValues axes;  // architecture axes; b and s are left free
  std::vector<TraceTensor> tensors;
  std::vector<TraceOp> ops;
};

// The values of the architecture axes (h, g, r, d, f, v, p) of a model: trace.axes.
AxisValues architecture_axes(const ModelConfig& model);

// Throws DataError naming /trace/axes/AXIS unless every axis the trace and the model section
// both give has the model's value, and /trace/ops unless the trace holds the model's decoder
// layers: a model section edited after tracing would count one model's FLOPs (MFU) beside
// another's ops.
void check_axes_match_model(const TraceSection& trace, const ModelConfig& model);

// The parameters of the traced model (its param tensors) at the axis values `axes`: the whole
// model at trace.axes, one tensor-parallel rank's share at a rank's axes.
double traced_parameters(const TraceSection& trace, const AxisValues& axes);

nlohmann::json to_json(const TraceSection& trace);
TraceSection trace_from_json(const nlohmann::json& j, const std::string& path);

// A compact binary form of the section for the driver's trace cache: reading the JSON form of
// a 70B trace took a quarter of a cached `syssim run`. Machine-local (host byte order), with
// its own version; trace_from_binary throws DataError naming `source` on anything it cannot read.
std::string trace_to_binary(const TraceSection& trace);
TraceSection trace_from_binary(const std::string& bytes, const std::string& source);

}  // namespace syssim
