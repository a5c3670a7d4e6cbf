// Which dispatched ops the trace keeps, their kind and their FLOP count (docs/syssim-trace.md).
#pragma once
#include <string>
#include <vector>

#include "common/op_kinds.hpp"
#include "trace/section.hpp"

namespace syssim::trace_detail {

enum class FlopsRule {
  kNone,              // memory ops
  kPerOutputElement,  // per_element * numel(output 0)
  kPerInputElement,   // per_element * numel(input 0), for reductions
  kLinear,            // 2 * numel(x) * weight rows
  kLinearGrad,        // 2 * numel(grad) * size of the last dim of input 1 (weight or x)
  kQkvLinear,         // kLinear summed over the q, k and v weights
  kQkvLinearGrad,     // kLinearGrad summed over the q, k and v gradients
  kBatchedMatmul,     // 2 * numel(output) * inner dim
  kFlashAttention,    // per_element * s * (numel(q) + numel(out)): causal, half of 2*b*s^2*heads*(d_qk + d_v)
  kWindowAttention,   // as kFlashAttention with the window x for s: each query attends to x keys
  kStackedLinear,     // kLinear summed over the two stacked weights
  kStackedLinearGrad, // kLinearGrad summed over the two gradients
  kGroupedLinear,     // 2 * numel(x) * weight rows per expert (weight [experts, out, in])
};

struct OpRule {
  OpKind kind = OpKind::math;  // gemm | attention | math | memory
  FlopsRule flops = FlopsRule::kNone;
  double per_element = 1;
};

// The rule of an op the trace keeps, or null.
const OpRule* find_op_rule(const std::string& name);

// Views, allocations and composite ops: not recorded themselves, their children may be.
bool is_transparent_op(const std::string& name);

Poly op_flops(const OpRule& rule, const std::vector<TensorRef>& inputs, const std::vector<TensorRef>& outputs);

}  // namespace syssim::trace_detail
