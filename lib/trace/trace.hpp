// The trace stage: runs one training step of a model architecture with LibTorch on the meta
// device and records the ops it dispatches (docs/syssim-trace.md).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "trace/section.hpp"

namespace syssim {

// Traces one training step (forward + backward) and returns the symbolic trace: every dim a
// product of named axes (b, s, h, g, r, d, f, v, p).
TraceSection trace_model(const ModelConfig& model);

// The same step traced at concrete axis sizes (keys b, s, h, g, r, d, f, v, p).
struct ConcreteOperand {
  int64_t tensor = 0;
  std::vector<int64_t> shape;
  std::string dtype;
};

struct ConcreteOp {
  std::string name, module;
  TpRole tp_role = TpRole::none;
  OpPhase phase = OpPhase::fwd;
  OpKind kind = OpKind::math;
  std::optional<int64_t> layer, fwd_op;
  std::vector<ConcreteOperand> inputs, outputs;
  std::vector<int64_t> deps;
};

struct ConcreteTensor {
  int64_t id = 0;
  std::vector<int64_t> shape;
  std::string dtype;
  TensorRole role = TensorRole::activation;
  std::string param;
};

struct ConcreteTrace {
  std::vector<ConcreteTensor> tensors;  // indexed by id
  std::vector<ConcreteOp> ops;          // indexed by op id
};

ConcreteTrace trace_concrete(const ModelConfig& model, const std::map<std::string, int64_t>& axis_sizes);

}  // namespace syssim
