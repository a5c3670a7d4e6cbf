// Records the ops LibTorch dispatches on this thread into a ConcreteTrace (docs/syssim-trace.md).
#pragma once
#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <memory>
#include <string>

#include "trace/trace.hpp"

namespace syssim::trace_detail {

// While alive, forward ops recorded on this thread belong to module `path` (e.g.
// "decoder.layers.3.mlp.linear_fc1") whose tensor-parallel role is `tp_role`.
class ModuleScope {
 public:
  ModuleScope(const std::string& path, TpRole tp_role);
  ~ModuleScope();
  ModuleScope(const ModuleScope&) = delete;
  ModuleScope& operator=(const ModuleScope&) = delete;
};

// Records while alive; one recorder per thread at a time.
class Recorder {
 public:
  Recorder();
  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // Register a tensor the step reads but no op produces, a named weight or an input (token ids,
  // labels, positions); return it.
  at::Tensor parameter(const std::string& name, const at::Tensor& tensor);
  at::Tensor input(const at::Tensor& tensor);

  // Runs loss.backward(), recording its ops as phase "bwd".
  void backward(const at::Tensor& loss);

  // The trace so far, with the gradients of the parameters; throws DataError if an op had no
  // cost rule or an unsupported dtype.
  ConcreteTrace finish();

  struct State;  // public for the RecordFunction callbacks, which must be plain functions

 private:
  std::unique_ptr<State> state_;
  at::CallbackHandle op_callback_ = 0;
  at::CallbackHandle node_callback_ = 0;
};

}  // namespace syssim::trace_detail
