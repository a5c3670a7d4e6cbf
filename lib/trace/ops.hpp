// The fused kernels of a Megatron training step as custom LibTorch ops "syssim::*" (schemas in
// ops.cpp), with Meta kernels and autograd: each forward and each backward kernel is one op.
#pragma once
#include <ATen/ATen.h>
#include <vector>

namespace syssim::trace_ops {

// Calls op `name` (e.g. "syssim::linear") through the dispatcher, so that RecordFunction sees it;
// returns its output tensors in order, tensor lists flattened.
std::vector<at::Tensor> call(const char* name, std::vector<c10::IValue> args);

// `x` unchanged, with `aux_loss` attached: in backward the loss gets its gradient here, as
// Megatron-Core's MoEAuxLossAutoScaler does, with no kernel of its own.
at::Tensor attach_aux_loss(const at::Tensor& x, const at::Tensor& aux_loss);

}  // namespace syssim::trace_ops
