#include "trace/op_rules.hpp"

#include <map>
#include <set>

namespace syssim::trace_detail {
namespace {

using R = FlopsRule;

// FLOPs per element are rough counts of the arithmetic of a fused kernel (docs/syssim-trace.md); these
// ops are bandwidth-bound, so their bytes matter far more than these constants.
const std::map<std::string, OpRule> kOpRules = {
    {"syssim::embedding", {OpKind::memory}},
    {"syssim::embedding_backward", {OpKind::memory}},
    {"syssim::rms_norm", {OpKind::math, R::kPerOutputElement, 4}},
    {"syssim::rms_norm_backward", {OpKind::math, R::kPerOutputElement, 8}},
    {"syssim::layer_norm", {OpKind::math, R::kPerOutputElement, 5}},
    {"syssim::layer_norm_backward", {OpKind::math, R::kPerOutputElement, 10}},
    {"syssim::qkv_linear", {OpKind::gemm, R::kQkvLinear}},
    {"syssim::qkv_linear_dgrad", {OpKind::gemm, R::kQkvLinearGrad}},
    {"syssim::qkv_linear_wgrad", {OpKind::gemm, R::kQkvLinearGrad}},
    {"syssim::rope", {OpKind::math, R::kPerOutputElement, 3}},
    {"syssim::rope_backward", {OpKind::math, R::kPerOutputElement, 3}},
    {"syssim::flash_attn", {OpKind::attention, R::kFlashAttention, 1}},
    {"syssim::flash_attn_backward", {OpKind::attention, R::kFlashAttention, 2.5}},  // 5 matmuls instead of 2
    {"syssim::flash_attn_window", {OpKind::attention, R::kWindowAttention, 1}},
    {"syssim::flash_attn_window_backward", {OpKind::attention, R::kWindowAttention, 2.5}},
    {"syssim::stacked_linear", {OpKind::gemm, R::kStackedLinear}},
    {"syssim::stacked_linear_dgrad", {OpKind::gemm, R::kStackedLinearGrad}},
    {"syssim::stacked_linear_wgrad", {OpKind::gemm, R::kStackedLinearGrad}},
    {"syssim::mla_rope_q", {OpKind::math, R::kPerOutputElement, 3}},  // rotation of the RoPE part, copy of the rest
    {"syssim::mla_rope_q_backward", {OpKind::math, R::kPerOutputElement, 3}},
    {"syssim::mla_rope_kv", {OpKind::math, R::kPerOutputElement, 1}},  // copies, the RoPE key broadcast to the heads
    {"syssim::mla_rope_kv_backward", {OpKind::math, R::kPerOutputElement, 1}},
    // The router's fused scores and top-k (Megatron-Core's moe_router_fusion): a softmax or
    // sigmoid and a top-k selection per token, a handful of operations per score.
    {"syssim::moe_router", {OpKind::math, R::kPerInputElement, 8}},
    {"syssim::moe_router_backward", {OpKind::math, R::kPerOutputElement, 4}},
    {"syssim::moe_aux_loss", {OpKind::math, R::kPerInputElement, 2}},
    {"syssim::moe_aux_loss_backward", {OpKind::math, R::kPerOutputElement, 2}},
    {"syssim::moe_permute", {OpKind::memory}},
    {"syssim::moe_permute_backward", {OpKind::memory}},
    {"syssim::moe_unpermute", {OpKind::memory}},
    {"syssim::moe_unpermute_backward", {OpKind::memory}},
    {"syssim::grouped_linear", {OpKind::gemm, R::kGroupedLinear}},
    {"syssim::grouped_linear_dgrad", {OpKind::gemm, R::kLinearGrad}},
    {"syssim::grouped_linear_wgrad", {OpKind::gemm, R::kLinearGrad}},
    {"syssim::weighted_swiglu", {OpKind::math, R::kPerOutputElement, 6}},  // SwiGLU and the probability's multiply
    {"syssim::weighted_swiglu_backward", {OpKind::math, R::kPerOutputElement, 6}},
    {"syssim::concat", {OpKind::memory}},
    {"syssim::concat_backward", {OpKind::memory}},
    {"syssim::scale_mask_softmax", {OpKind::math, R::kPerOutputElement, 5}},
    {"syssim::scale_mask_softmax_backward", {OpKind::math, R::kPerOutputElement, 4}},
    {"syssim::linear", {OpKind::gemm, R::kLinear}},
    {"syssim::router_linear", {OpKind::gemm, R::kLinear}},
    {"syssim::linear_dgrad", {OpKind::gemm, R::kLinearGrad}},
    {"syssim::linear_wgrad", {OpKind::gemm, R::kLinearGrad}},
    {"syssim::swiglu", {OpKind::math, R::kPerOutputElement, 5}},
    {"syssim::swiglu_backward", {OpKind::math, R::kPerOutputElement, 5}},
    {"syssim::nll_loss", {OpKind::memory}},
    {"syssim::nll_loss_backward", {OpKind::memory}},
    {"syssim::silu_mul", {OpKind::math, R::kPerOutputElement, 5}},  // SwiGLU's arithmetic, halves apart
    {"syssim::silu_mul_backward", {OpKind::math, R::kPerOutputElement, 5}},
    {"syssim::clamp", {OpKind::math, R::kPerOutputElement, 1}},
    // clamp's backward (ClampFunction): a comparison per bound, their conjunction, the where.
    {"aten::le", {OpKind::math, R::kPerOutputElement, 1}},
    {"aten::ge", {OpKind::math, R::kPerOutputElement, 1}},
    {"aten::bitwise_and", {OpKind::math, R::kPerOutputElement, 1}},
    {"syssim::where_else_zero", {OpKind::math, R::kPerOutputElement, 1}},
    {"syssim::relu", {OpKind::math, R::kPerOutputElement, 1}},
    {"syssim::relu_backward", {OpKind::math, R::kPerOutputElement, 1}},  // aten::threshold_backward
    {"syssim::cross_entropy", {OpKind::math, R::kPerInputElement, 5}},
    {"syssim::cross_entropy_backward", {OpKind::math, R::kPerOutputElement, 3}},
    {"syssim::dropout", {OpKind::math, R::kPerOutputElement, 2}},           // compare with p, scale
    {"syssim::dropout_backward", {OpKind::math, R::kPerOutputElement, 2}},  // mask, scale
    // PyTorch's softmax where Megatron's fused kernel does not run: a max, exp of the
    // difference, sum and divide per element; its backward a multiply, sum, subtract, multiply.
    {"aten::_softmax", {OpKind::math, R::kPerOutputElement, 5}},
    {"aten::_softmax_backward_data", {OpKind::math, R::kPerOutputElement, 4}},
    // torch.nn.functional.cross_entropy's log-softmax (the torch_fp32 loss): a max, the exp of
    // the difference, its sum and log; its backward an exp, a sum and a multiply-subtract.
    {"aten::_log_softmax", {OpKind::math, R::kPerOutputElement, 5}},
    {"aten::_log_softmax_backward_data", {OpKind::math, R::kPerOutputElement, 4}},
    {"aten::masked_fill_", {OpKind::memory}},  // the causal mask, and in its backward the gradient's
    {"aten::masked_fill", {OpKind::memory}},
    {"aten::bmm", {OpKind::gemm, R::kBatchedMatmul}},
    {"aten::baddbmm", {OpKind::gemm, R::kBatchedMatmul}},
    {"aten::mm", {OpKind::gemm, R::kBatchedMatmul}},
    {"aten::add", {OpKind::math, R::kPerOutputElement, 1}},
    {"aten::add_", {OpKind::math, R::kPerOutputElement, 1}},
    {"aten::mul", {OpKind::math, R::kPerOutputElement, 1}},
    {"aten::pow", {OpKind::math, R::kPerOutputElement, 1}},  // squared ReLU's x^2 (and x^1 in its backward)
    // The eager kernels of unfused RMSNorm, RoPE and SwiGLU (docs/syssim-trace.md, "Unfused kernels").
    {"aten::mean", {OpKind::math, R::kPerInputElement, 1}},
    {"aten::rsqrt", {OpKind::math, R::kPerOutputElement, 1}},
    {"aten::div", {OpKind::math, R::kPerOutputElement, 1}},
    {"aten::cos", {OpKind::math, R::kPerOutputElement, 1}},
    {"aten::sin", {OpKind::math, R::kPerOutputElement, 1}},
    {"aten::silu", {OpKind::math, R::kPerOutputElement, 4}},           // x / (1 + exp(-x))
    {"aten::silu_backward", {OpKind::math, R::kPerOutputElement, 6}},  // with the sigmoid recomputed
    {"aten::cat", {OpKind::memory}},
    // The experts' fc2 bias gradient, written into its [e, h] parameter (TEGroupedMLP._apply_bias).
    {"aten::select_backward", {OpKind::memory}},
    {"syssim::rotate_half", {OpKind::memory}},
    {"syssim::rotate_half_backward", {OpKind::memory}},
    {"aten::sum", {OpKind::math, R::kPerInputElement, 1}},
    {"aten::gelu", {OpKind::math, R::kPerOutputElement, 8}},
    {"aten::gelu_backward", {OpKind::math, R::kPerOutputElement, 12}},
    {"aten::clone", {OpKind::memory}},
    {"aten::copy_", {OpKind::memory}},
    {"aten::fill_", {OpKind::memory}},
    {"aten::zero_", {OpKind::memory}},
    {"aten::_to_copy", {OpKind::memory}},
};

// Views and metadata, allocation and composite ops ("detach" is autograd's record inside
// aten::detach, reached when autograd steals a weight gradient).
const std::set<std::string> kTransparentOps = {
    "aten::_reshape_alias", "aten::_unsafe_view", "aten::alias", "aten::as_strided", "aten::chunk",
    "aten::conj", "aten::contiguous", "aten::detach", "detach", "aten::empty", "aten::empty_like",
    "aten::empty_strided", "aten::expand", "aten::expand_as", "aten::linear", "aten::log_softmax", "aten::matmul",
    "aten::narrow", "aten::new_empty_strided", "aten::ones_like", "aten::permute", "aten::reshape",
    "aten::resolve_conj", "aten::resolve_neg", "aten::select", "aten::slice", "aten::softmax", "aten::split",
    "aten::squeeze", "aten::sum_to_size", "aten::t", "aten::to", "aten::transpose", "aten::unsqueeze",
    "aten::view", "aten::view_as", "aten::zeros_like",
};

}  // namespace

const OpRule* find_op_rule(const std::string& name) {
  auto it = kOpRules.find(name);
  return it == kOpRules.end() ? nullptr : &it->second;
}

bool is_transparent_op(const std::string& name) { return kTransparentOps.count(name) > 0; }

Poly op_flops(const OpRule& rule, const std::vector<TensorRef>& inputs, const std::vector<TensorRef>& outputs) {
  switch (rule.flops) {
    case R::kNone:
      return Poly();
    case R::kPerOutputElement:
      return numel(outputs[0].dims) * rule.per_element;
    case R::kPerInputElement:
      return numel(inputs[0].dims) * rule.per_element;
    case R::kLinear:
      return numel(inputs[0].dims) * inputs[1].dims[0] * 2;
    case R::kLinearGrad:
      return numel(inputs[0].dims) * inputs[1].dims.back() * 2;
    case R::kQkvLinear:
      return numel(inputs[0].dims) * (inputs[1].dims[0] + inputs[2].dims[0] + inputs[3].dims[0]) * 2;
    case R::kQkvLinearGrad:
      return (numel(inputs[0].dims) + numel(inputs[1].dims) + numel(inputs[2].dims)) * inputs[3].dims.back() * 2;
    case R::kBatchedMatmul: {
      const Dims& right = inputs.back().dims;  // [.., K, N]
      return numel(outputs[0].dims) * right[right.size() - 2] * 2;
    }
    case R::kFlashAttention:
    case R::kWindowAttention: {
      // q [s, b, heads, d_qk] and the output (forward) or its gradient (backward) [s, b, heads, d_v]:
      // each query's scores over its keys (d_qk per score), then the values (d_v per score).
      const bool backward = outputs.size() > 1;
      const TensorRef& query = inputs[backward ? 1 : 0];
      const TensorRef& out = backward ? inputs[0] : outputs[0];
      // Causal: s/2 keys per query on average, counted as s with the multiply-add's 2 halved; a
      // window of x: x keys each (the first x queries see fewer, x/(2s) of the total).
      const Poly keys = rule.flops == R::kWindowAttention ? Poly::axis("x") * 2 : query.dims[0];
      return (numel(query.dims) + numel(out.dims)) * keys * rule.per_element;
    }
    case R::kStackedLinear:
      return numel(inputs[0].dims) * (inputs[1].dims[0] + inputs[2].dims[0]) * 2;
    case R::kStackedLinearGrad:
      return (numel(inputs[0].dims) + numel(inputs[1].dims)) * inputs[2].dims.back() * 2;
    case R::kGroupedLinear:
      return numel(inputs[0].dims) * inputs[1].dims[1] * 2;
  }
  return Poly();
}

}  // namespace syssim::trace_detail
