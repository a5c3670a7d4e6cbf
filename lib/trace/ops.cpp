#include "trace/ops.hpp"

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

namespace syssim::trace_ops {
namespace {

using at::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::Function;
using torch::autograd::variable_list;
using OptionalTensor = c10::optional<Tensor>;
using Tensors = std::vector<Tensor>;
using Shape = std::vector<int64_t>;

// `t`'s shape without its last `drop` dims, followed by `tail`.
Shape shape_with_tail(const Tensor& t, size_t drop, Shape tail) {
  Shape shape(t.sizes().begin(), t.sizes().end() - drop);
  shape.insert(shape.end(), tail.begin(), tail.end());
  return shape;
}

Tensor meta_empty(const Shape& shape, const Tensor& like) { return at::empty(shape, like.options()); }

// Weight gradients [width, x.size(-1)] of GEMMs with these output widths, then their bias gradients.
Tensors weight_grads(const Shape& widths, const Tensor& x, bool with_bias, const Tensor& like) {
  Tensors grads;
  for (int64_t width : widths) grads.push_back(meta_empty({width, x.size(-1)}, like));
  if (with_bias)
    for (int64_t width : widths) grads.push_back(meta_empty({width}, like));
  return grads;
}

int64_t heads_times_dim(const Tensor& t) { return t.size(-2) * t.size(-1); }

// Per-row fp32 statistics of a norm over the last dim (mean, reciprocal standard deviation).
Tensor row_statistics(const Tensor& x) { return at::empty(shape_with_tail(x, 1, {}), x.options().dtype(at::kFloat)); }

TORCH_LIBRARY(syssim, m) {
  m.def("embedding(Tensor weight, Tensor ids) -> Tensor");
  m.def("embedding_backward(Tensor grad, Tensor ids, int rows) -> Tensor");
  m.def("rms_norm(Tensor x, Tensor weight) -> (Tensor, Tensor)");
  m.def("rms_norm_backward(Tensor grad, Tensor x, Tensor weight, Tensor rstd) -> (Tensor, Tensor)");
  m.def("layer_norm(Tensor x, Tensor weight, Tensor bias) -> (Tensor, Tensor, Tensor)");
  m.def("layer_norm_backward(Tensor grad, Tensor x, Tensor weight, Tensor mean, Tensor rstd)"
        " -> (Tensor, Tensor, Tensor)");
  m.def("qkv_linear(Tensor x, Tensor wq, Tensor wk, Tensor wv, Tensor? bq, Tensor? bk, Tensor? bv, int head_dim)"
        " -> (Tensor, Tensor, Tensor)");
  m.def("qkv_linear_dgrad(Tensor gq, Tensor gk, Tensor gv, Tensor wq, Tensor wk, Tensor wv) -> Tensor");
  m.def("qkv_linear_wgrad(Tensor gq, Tensor gk, Tensor gv, Tensor x, bool bias) -> Tensor[]");
  m.def("rope(Tensor x) -> Tensor");
  m.def("rope_backward(Tensor grad) -> Tensor");
  // Megatron-Core's _rotate_half of the unfused RoPE: the halves of the head swapped, the
  // second negated; its backward the same in reverse.
  m.def("rotate_half(Tensor x) -> Tensor");
  m.def("rotate_half_backward(Tensor grad) -> Tensor");
  // Causal attention; `sinks`: one learned logit per head added to each softmax's denominator
  // (GPT-OSS). The window variant attends to the last `window_size` keys only.
  m.def("flash_attn(Tensor q, Tensor k, Tensor v, Tensor? sinks) -> Tensor");
  m.def("flash_attn_backward(Tensor grad, Tensor q, Tensor k, Tensor v, Tensor out, Tensor? sinks)"
        " -> (Tensor, Tensor, Tensor, Tensor)");
  m.def("scale_mask_softmax(Tensor scores, float scale) -> Tensor");
  m.def("scale_mask_softmax_backward(Tensor grad, Tensor probs, float scale) -> Tensor");
  m.def("linear(Tensor x, Tensor weight, Tensor? bias) -> Tensor");
  m.def("linear_dgrad(Tensor grad, Tensor weight) -> Tensor");
  m.def("linear_wgrad(Tensor grad, Tensor x, bool bias) -> Tensor[]");
  // Megatron-Core's router GEMM with moe_router_dtype fp32 (RouterGatingLinearFunction): the
  // 16-bit input and weight, fp32 logits; its backward casts both to fp32 and runs the data
  // and weight gradients as fp32 GEMMs, then casts the gradients back.
  m.def("router_linear(Tensor x, Tensor weight) -> Tensor");
  m.def("swiglu(Tensor x) -> Tensor");
  m.def("swiglu_backward(Tensor grad, Tensor x) -> Tensor");
  // SiLU of the gate times the up projection, one kernel over two tensors (torch.compile's
  // fusion of torchtitan's FeedForward, whose w1 and w3 are separate linears).
  m.def("silu_mul(Tensor gate, Tensor up) -> Tensor");
  m.def("silu_mul_backward(Tensor grad, Tensor gate, Tensor up) -> (Tensor, Tensor)");
  m.def("clamp(Tensor x, float? min, float max) -> Tensor");
  m.def("where_else_zero(Tensor condition, Tensor x) -> Tensor");
  m.def("relu(Tensor x) -> Tensor");
  m.def("relu_backward(Tensor grad, Tensor out) -> Tensor");
  m.def("cross_entropy(Tensor logits, Tensor labels) -> (Tensor, Tensor)");
  m.def("cross_entropy_backward(Tensor grad, Tensor softmax, Tensor labels, ScalarType dtype) -> Tensor");
  // The negative log-likelihood of each token's label under fp32 log-probabilities [.., v]: a
  // gather; its backward writes the whole [.., v] gradient (zeros and the labels' entries).
  m.def("nll_loss(Tensor log_probs, Tensor labels) -> Tensor");
  m.def("nll_loss_backward(Tensor grad, Tensor labels, int vocab, ScalarType dtype) -> Tensor");
  m.def("dropout(Tensor x, float p) -> (Tensor, Tensor)");
  m.def("dropout_backward(Tensor grad, Tensor mask, float p) -> Tensor");
  // One GEMM over two weights stacked along its output (MLA's K/V down and up projections).
  m.def("stacked_linear(Tensor x, Tensor w1, Tensor w2) -> (Tensor, Tensor)");
  m.def("stacked_linear_dgrad(Tensor g1, Tensor g2, Tensor w1, Tensor w2) -> Tensor");
  m.def("stacked_linear_wgrad(Tensor g1, Tensor g2, Tensor x) -> (Tensor, Tensor)");
  // Megatron-Core's fused MLA RoPE: on the RoPE part of each query head, and the keys and values
  // made from the up-projected K/V and the shared RoPE key.
  m.def("mla_rope_q(Tensor q) -> Tensor");
  m.def("mla_rope_q_backward(Tensor grad) -> Tensor");
  m.def("mla_rope_kv(Tensor k_nope, Tensor v, Tensor k_pe, int head_dim) -> (Tensor, Tensor)");
  m.def("mla_rope_kv_backward(Tensor grad_key, Tensor grad_value, int nope_width, int rope_dim) -> (Tensor, Tensor, Tensor)");
  m.def("flash_attn_window(Tensor q, Tensor k, Tensor v, Tensor? sinks) -> Tensor");
  m.def("flash_attn_window_backward(Tensor grad, Tensor q, Tensor k, Tensor v, Tensor out, Tensor? sinks)"
        " -> (Tensor, Tensor, Tensor, Tensor)");
  // Mixture of experts: the router (scores and top-k in one fused kernel), its load-balancing
  // loss, the token permutation to expert order and back, the experts' grouped GEMMs and their
  // activation weighted by the routing probabilities.
  m.def("moe_router(Tensor logits, int topk) -> (Tensor, Tensor)");
  m.def("moe_router_backward(Tensor grad, Tensor probs, Tensor routing_map, ScalarType dtype) -> Tensor");
  m.def("moe_aux_loss(Tensor probs, Tensor routing_map) -> Tensor");
  m.def("moe_aux_loss_backward(Tensor grad, Tensor probs, Tensor routing_map) -> Tensor");
  m.def("moe_permute(Tensor x, Tensor routing_map, Tensor probs, int topk) -> (Tensor, Tensor)");
  m.def("moe_permute_backward(Tensor grad_tokens, Tensor grad_probs, Tensor routing_map, ScalarType dtype)"
        " -> (Tensor, Tensor)");
  m.def("moe_unpermute(Tensor tokens, Tensor routing_map, int topk) -> Tensor");
  m.def("moe_unpermute_backward(Tensor grad, Tensor routing_map, int topk) -> Tensor");
  m.def("grouped_linear(Tensor x, Tensor weight, Tensor? bias) -> Tensor");
  m.def("grouped_linear_dgrad(Tensor grad, Tensor weight) -> Tensor");
  m.def("grouped_linear_wgrad(Tensor grad, Tensor x, bool bias, int experts) -> Tensor[]");
  m.def("weighted_swiglu(Tensor x, Tensor probs) -> Tensor");
  m.def("weighted_swiglu_backward(Tensor grad, Tensor x, Tensor probs) -> (Tensor, Tensor)");
  m.def("concat(Tensor a, Tensor b) -> Tensor");
  m.def("concat_backward(Tensor grad, int split) -> (Tensor, Tensor)");
}

// Shapes and dtypes only: nothing is computed on the meta device.
TORCH_LIBRARY_IMPL(syssim, Meta, m) {
  m.impl("embedding", [](const Tensor& weight, const Tensor& ids) {
    return meta_empty(shape_with_tail(ids, 0, {weight.size(1)}), weight);
  });
  m.impl("embedding_backward", [](const Tensor& grad, const Tensor&, int64_t rows) {
    return meta_empty({rows, grad.size(-1)}, grad);
  });
  m.impl("rms_norm", [](const Tensor& x, const Tensor&) { return std::make_tuple(at::empty_like(x), row_statistics(x)); });
  m.impl("rms_norm_backward", [](const Tensor&, const Tensor& x, const Tensor& weight, const Tensor&) {
    return std::make_tuple(at::empty_like(x), at::empty_like(weight));
  });
  m.impl("layer_norm", [](const Tensor& x, const Tensor&, const Tensor&) {
    return std::make_tuple(at::empty_like(x), row_statistics(x), row_statistics(x));
  });
  m.impl("layer_norm_backward",
         [](const Tensor&, const Tensor& x, const Tensor& weight, const Tensor&, const Tensor&) {
           return std::make_tuple(at::empty_like(x), at::empty_like(weight), at::empty_like(weight));
         });
  m.impl("qkv_linear", [](const Tensor& x, const Tensor& wq, const Tensor& wk, const Tensor& wv,
                          const OptionalTensor&, const OptionalTensor&, const OptionalTensor&, int64_t head_dim) {
    auto heads = [&](const Tensor& w) { return meta_empty(shape_with_tail(x, 1, {w.size(0) / head_dim, head_dim}), x); };
    return std::make_tuple(heads(wq), heads(wk), heads(wv));
  });
  m.impl("qkv_linear_dgrad", [](const Tensor& gq, const Tensor&, const Tensor&, const Tensor& wq, const Tensor&,
                                const Tensor&) { return meta_empty(shape_with_tail(gq, 2, {wq.size(1)}), gq); });
  m.impl("qkv_linear_wgrad", [](const Tensor& gq, const Tensor& gk, const Tensor& gv, const Tensor& x, bool bias) {
    return weight_grads({heads_times_dim(gq), heads_times_dim(gk), heads_times_dim(gv)}, x, bias, gq);
  });
  m.impl("rope", [](const Tensor& x) { return at::empty_like(x); });
  m.impl("rope_backward", [](const Tensor& grad) { return at::empty_like(grad); });
  m.impl("rotate_half", [](const Tensor& x) { return at::empty_like(x); });
  m.impl("rotate_half_backward", [](const Tensor& grad) { return at::empty_like(grad); });
  // The output has the value's head width (MLA's differs from the query's).
  auto attention = [](const Tensor& q, const Tensor&, const Tensor& v, const OptionalTensor&) {
    return meta_empty(shape_with_tail(q, 1, {v.size(-1)}), q);
  };
  auto attention_backward = [](const Tensor&, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor&,
                               const OptionalTensor& sinks) {
    return std::make_tuple(at::empty_like(q), at::empty_like(k), at::empty_like(v),
                           sinks ? at::empty_like(*sinks) : Tensor());
  };
  m.impl("flash_attn", attention);
  m.impl("flash_attn_backward", attention_backward);
  m.impl("flash_attn_window", attention);
  m.impl("flash_attn_window_backward", attention_backward);
  m.impl("scale_mask_softmax", [](const Tensor& scores, double) { return at::empty_like(scores); });
  m.impl("scale_mask_softmax_backward",
         [](const Tensor& grad, const Tensor&, double) { return at::empty_like(grad); });
  m.impl("linear", [](const Tensor& x, const Tensor& weight, const OptionalTensor&) {
    return meta_empty(shape_with_tail(x, 1, {weight.size(0)}), x);
  });
  m.impl("router_linear", [](const Tensor& x, const Tensor& weight) {
    return at::empty(shape_with_tail(x, 1, {weight.size(0)}), x.options().dtype(at::kFloat));
  });
  m.impl("linear_dgrad", [](const Tensor& grad, const Tensor& weight) {
    return meta_empty(shape_with_tail(grad, 1, {weight.size(1)}), grad);
  });
  m.impl("linear_wgrad", [](const Tensor& grad, const Tensor& x, bool bias) {
    return weight_grads({grad.size(-1)}, x, bias, grad);
  });
  m.impl("swiglu", [](const Tensor& x) { return meta_empty(shape_with_tail(x, 1, {x.size(-1) / 2}), x); });
  m.impl("swiglu_backward", [](const Tensor&, const Tensor& x) { return at::empty_like(x); });
  m.impl("silu_mul", [](const Tensor& gate, const Tensor&) { return at::empty_like(gate); });
  m.impl("silu_mul_backward", [](const Tensor&, const Tensor& gate, const Tensor& up) {
    return std::make_tuple(at::empty_like(gate), at::empty_like(up));
  });
  m.impl("clamp", [](const Tensor& x, c10::optional<double>, double) { return at::empty_like(x); });
  m.impl("where_else_zero", [](const Tensor&, const Tensor& x) { return at::empty_like(x); });
  m.impl("relu", [](const Tensor& x) { return at::empty_like(x); });
  m.impl("relu_backward", [](const Tensor& grad, const Tensor&) { return at::empty_like(grad); });
  // Megatron's vocab-parallel cross entropy computes in fp32: the loss per token and the
  // softmax it keeps for backward; the backward writes the logits' gradient in their dtype.
  m.impl("cross_entropy", [](const Tensor& logits, const Tensor& labels) {
    return std::make_tuple(at::empty(labels.sizes(), logits.options().dtype(at::kFloat)),
                           at::empty(logits.sizes(), logits.options().dtype(at::kFloat)));
  });
  m.impl("cross_entropy_backward", [](const Tensor&, const Tensor& softmax, const Tensor&, at::ScalarType dtype) {
    return at::empty_like(softmax, softmax.options().dtype(dtype));
  });
  m.impl("nll_loss", [](const Tensor& log_probs, const Tensor& labels) {
    return at::empty(labels.sizes(), log_probs.options());
  });
  m.impl("nll_loss_backward", [](const Tensor& grad, const Tensor& labels, int64_t vocab, at::ScalarType dtype) {
    return at::empty(shape_with_tail(labels, 0, {vocab}), grad.options().dtype(dtype));
  });
  // The mask is one byte per element, as torch's native_dropout keeps it.
  m.impl("dropout", [](const Tensor& x, double) {
    return std::make_tuple(at::empty_like(x), at::empty(x.sizes(), x.options().dtype(at::kBool)));
  });
  m.impl("dropout_backward", [](const Tensor& grad, const Tensor&, double) { return at::empty_like(grad); });
  m.impl("stacked_linear", [](const Tensor& x, const Tensor& w1, const Tensor& w2) {
    return std::make_tuple(meta_empty(shape_with_tail(x, 1, {w1.size(0)}), x),
                           meta_empty(shape_with_tail(x, 1, {w2.size(0)}), x));
  });
  m.impl("stacked_linear_dgrad", [](const Tensor& g1, const Tensor&, const Tensor& w1, const Tensor&) {
    return meta_empty(shape_with_tail(g1, 1, {w1.size(1)}), g1);
  });
  m.impl("stacked_linear_wgrad", [](const Tensor& g1, const Tensor& g2, const Tensor& x) {
    return std::make_tuple(meta_empty({g1.size(-1), x.size(-1)}, g1), meta_empty({g2.size(-1), x.size(-1)}, g2));
  });
  m.impl("mla_rope_q", [](const Tensor& q) { return at::empty_like(q); });
  m.impl("mla_rope_q_backward", [](const Tensor& grad) { return at::empty_like(grad); });
  // k_nope [s, b, heads, n], v [s, b, heads, w], k_pe [s, b, r] -> key [s, b, heads, n+r] (as
  // head_dim) and value [s, b, heads, w].
  m.impl("mla_rope_kv", [](const Tensor& k_nope, const Tensor& v, const Tensor&, int64_t head_dim) {
    return std::make_tuple(meta_empty(shape_with_tail(k_nope, 1, {head_dim}), k_nope), at::empty_like(v));
  });
  m.impl("mla_rope_kv_backward", [](const Tensor& grad_key, const Tensor& grad_value, int64_t nope_width,
                                    int64_t rope_dim) {
    return std::make_tuple(meta_empty(shape_with_tail(grad_key, 1, {nope_width}), grad_key), at::empty_like(grad_value),
                           meta_empty(shape_with_tail(grad_key, 2, {rope_dim}), grad_key));
  });
  // Router scores and the routing map are [s, b, experts]: fp32 scores (Megatron's router
  // computes them in fp32), a boolean map.
  m.impl("moe_router", [](const Tensor& logits, int64_t) {
    return std::make_tuple(at::empty_like(logits, logits.options().dtype(at::kFloat)),
                           at::empty_like(logits, logits.options().dtype(at::kBool)));
  });
  m.impl("moe_router_backward", [](const Tensor& grad, const Tensor&, const Tensor&, at::ScalarType dtype) {
    return at::empty_like(grad, grad.options().dtype(dtype));
  });
  m.impl("moe_aux_loss", [](const Tensor& probs, const Tensor&) { return at::empty({}, probs.options()); });
  m.impl("moe_aux_loss_backward", [](const Tensor&, const Tensor& probs, const Tensor&) { return at::empty_like(probs); });
  // Each token once per expert it is routed to: [s*b*topk, h] in expert order, and its probability.
  m.impl("moe_permute", [](const Tensor& x, const Tensor&, const Tensor& probs, int64_t topk) {
    const int64_t routed = x.numel() / x.size(-1) * topk;
    return std::make_tuple(meta_empty({routed, x.size(-1)}, x), meta_empty({routed}, probs));
  });
  m.impl("moe_permute_backward", [](const Tensor& grad_tokens, const Tensor&, const Tensor& routing_map,
                                    at::ScalarType dtype) {
    return std::make_tuple(
        meta_empty(shape_with_tail(routing_map, 1, {grad_tokens.size(-1)}), grad_tokens),
        at::empty_like(routing_map, routing_map.options().dtype(dtype)));
  });
  m.impl("moe_unpermute", [](const Tensor& tokens, const Tensor& routing_map, int64_t) {
    return meta_empty(shape_with_tail(routing_map, 1, {tokens.size(-1)}), tokens);
  });
  m.impl("moe_unpermute_backward", [](const Tensor& grad, const Tensor&, int64_t topk) {
    return meta_empty({grad.numel() / grad.size(-1) * topk, grad.size(-1)}, grad);
  });
  // Expert weights are [experts, out, in]; tokens [tokens, in] sorted by expert.
  m.impl("grouped_linear", [](const Tensor& x, const Tensor& weight, const OptionalTensor&) {
    return meta_empty({x.size(0), weight.size(1)}, x);
  });
  m.impl("grouped_linear_dgrad", [](const Tensor& grad, const Tensor& weight) {
    return meta_empty({grad.size(0), weight.size(2)}, grad);
  });
  m.impl("grouped_linear_wgrad", [](const Tensor& grad, const Tensor& x, bool bias, int64_t experts) {
    Tensors grads = {meta_empty({experts, grad.size(-1), x.size(-1)}, grad)};
    if (bias) grads.push_back(meta_empty({experts, grad.size(-1)}, grad));
    return grads;
  });
  m.impl("weighted_swiglu", [](const Tensor& x, const Tensor&) {
    return meta_empty(shape_with_tail(x, 1, {x.size(-1) / 2}), x);
  });
  m.impl("weighted_swiglu_backward", [](const Tensor&, const Tensor& x, const Tensor& probs) {
    return std::make_tuple(at::empty_like(x), at::empty_like(probs));
  });
  m.impl("concat", [](const Tensor& a, const Tensor& b) {
    return meta_empty(shape_with_tail(a, 1, {a.size(-1) + b.size(-1)}), a);
  });
  m.impl("concat_backward", [](const Tensor& grad, int64_t split) {
    return std::make_tuple(meta_empty(shape_with_tail(grad, 1, {split}), grad),
                           meta_empty(shape_with_tail(grad, 1, {grad.size(-1) - split}), grad));
  });
}

// Autograd: forward and backward call the ops below the autograd dispatch key, so that each
// recorded op is one kernel, and the backward op runs inside the autograd node of its forward.

struct EmbeddingFunction : Function<EmbeddingFunction> {
  static Tensor forward(AutogradContext* ctx, const Tensor& weight, const Tensor& ids) {
    at::AutoDispatchBelowADInplaceOrView guard;
    ctx->save_for_backward({ids});
    ctx->saved_data["rows"] = weight.size(0);
    return call("syssim::embedding", {weight, ids})[0];
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    at::AutoDispatchBelowADInplaceOrView guard;
    Tensor ids = ctx->get_saved_variables()[0];
    return {call("syssim::embedding_backward", {grads[0], ids, ctx->saved_data["rows"]})[0], Tensor()};
  }
};

// Ops whose first output is differentiable and whose others (statistics, masks) are not: no
// gradient flows to those, and autograd must not materialize zeros for them.
variable_list with_statistics(AutogradContext* ctx, variable_list outputs) {
  for (size_t i = 1; i < outputs.size(); ++i) ctx->mark_non_differentiable({outputs[i]});
  ctx->set_materialize_grads(false);
  return outputs;
}

// The norms keep their input and per-row statistics for backward, as Apex's and Transformer
// Engine's fused kernels do.
struct RmsNormFunction : Function<RmsNormFunction> {
  static variable_list forward(AutogradContext* ctx, const Tensor& x, const Tensor& weight) {
    at::AutoDispatchBelowADInplaceOrView guard;
    variable_list out = call("syssim::rms_norm", {x, weight});
    ctx->save_for_backward({x, weight, out[1]});
    return with_statistics(ctx, out);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    at::AutoDispatchBelowADInplaceOrView guard;
    variable_list saved = ctx->get_saved_variables();
    return call("syssim::rms_norm_backward", {grads[0], saved[0], saved[1], saved[2]});
  }
};

struct LayerNormFunction : Function<LayerNormFunction> {
  static variable_list forward(AutogradContext* ctx, const Tensor& x, const Tensor& weight, const Tensor& bias) {
    at::AutoDispatchBelowADInplaceOrView guard;
    variable_list out = call("syssim::layer_norm", {x, weight, bias});
    ctx->save_for_backward({x, weight, out[1], out[2]});
    return with_statistics(ctx, out);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    at::AutoDispatchBelowADInplaceOrView guard;
    variable_list s = ctx->get_saved_variables();
    return call("syssim::layer_norm_backward", {grads[0], s[0], s[1], s[2], s[3]});
  }
};

struct QkvLinearFunction : Function<QkvLinearFunction> {
  static variable_list forward(AutogradContext* ctx, const Tensor& x, const Tensor& wq, const Tensor& wk,
                               const Tensor& wv, const OptionalTensor& bq, const OptionalTensor& bk,
                               const OptionalTensor& bv, int64_t head_dim) {
    at::AutoDispatchBelowADInplaceOrView guard;
    ctx->save_for_backward({x, wq, wk, wv});
    ctx->saved_data["bias"] = bq.has_value();
    return call("syssim::qkv_linear", {x, wq, wk, wv, bq, bk, bv, head_dim});
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    at::AutoDispatchBelowADInplaceOrView guard;
    variable_list s = ctx->get_saved_variables();
    Tensor grad_x = call("syssim::qkv_linear_dgrad", {grads[0], grads[1], grads[2], s[1], s[2], s[3]})[0];
    Tensors w = call("syssim::qkv_linear_wgrad", {grads[0], grads[1], grads[2], s[0], ctx->saved_data["bias"]});
    w.resize(6);  // bias gradients stay undefined without biases
    return {grad_x, w[0], w[1], w[2], w[3], w[4], w[5], Tensor()};
  }
};

// An op whose backward reads only the output gradient (the rotary embeddings): `op`, then
// `backward_op` on the gradient.
struct GradientOnlyFunction : Function<GradientOnlyFunction> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x, const std::string& op, const std::string& backward_op) {
    at::AutoDispatchBelowADInplaceOrView guard;
    ctx->saved_data["backward_op"] = backward_op;
    return call(op.c_str(), {x})[0];
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return {call(ctx->saved_data["backward_op"].toStringRef().c_str(), {grads[0]})[0], Tensor(), Tensor()};
  }
};

// Causal flash attention, over the whole sequence or a sliding window (`window`).
struct FlashAttnFunction : Function<FlashAttnFunction> {
  static Tensor forward(AutogradContext* ctx, const Tensor& q, const Tensor& k, const Tensor& v,
                        const OptionalTensor& sinks, bool window) {
    at::AutoDispatchBelowADInplaceOrView guard;
    Tensor out = call(window ? "syssim::flash_attn_window" : "syssim::flash_attn", {q, k, v, sinks})[0];
    ctx->save_for_backward({q, k, v, out, sinks.value_or(Tensor())});
    ctx->saved_data["window"] = window;
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    at::AutoDispatchBelowADInplaceOrView guard;
    variable_list s = ctx->get_saved_variables();
    OptionalTensor sinks = s[4].defined() ? OptionalTensor(s[4]) : c10::nullopt;
    const bool window = ctx->saved_data["window"].toBool();
    variable_list g = call(window ? "syssim::flash_attn_window_backward" : "syssim::flash_attn_backward",
                           {grads[0], s[0], s[1], s[2], s[3], sinks});
    g.resize(4);
    return {g[0], g[1], g[2], g[3], Tensor()};
  }
};

// Two weights stacked along the output of one GEMM; backward as LinearFunction's.
struct StackedLinearFunction : Function<StackedLinearFunction> {
  static variable_list forward(AutogradContext* ctx, const Tensor& x, const Tensor& w1, const Tensor& w2) {
    at::AutoDispatchBelowADInplaceOrView guard;
    ctx->save_for_backward({x, w1, w2});
    return call("syssim::stacked_linear", {x, w1, w2});
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    at::AutoDispatchBelowADInplaceOrView guard;
    variable_list s = ctx->get_saved_variables();
    Tensor grad_x = call("syssim::stacked_linear_dgrad", {grads[0], grads[1], s[1], s[2]})[0];
    Tensors w = call("syssim::stacked_linear_wgrad", {grads[0], grads[1], s[0]});
    return {grad_x, w[0], w[1]};
  }
};

struct MlaRopeKvFunction : Function<MlaRopeKvFunction> {
  static variable_list forward(AutogradContext* ctx, const Tensor& k_nope, const Tensor& v, const Tensor& k_pe,
                               int64_t head_dim) {
    at::AutoDispatchBelowADInplaceOrView guard;
    ctx->saved_data["nope_width"] = k_nope.size(-1);
    ctx->saved_data["rope_dim"] = k_pe.size(-1);
    return call("syssim::mla_rope_kv", {k_nope, v, k_pe, head_dim});
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    at::AutoDispatchBelowADInplaceOrView guard;
    variable_list g = call("syssim::mla_rope_kv_backward",
                           {grads[0], grads[1], ctx->saved_data["nope_width"], ctx->saved_data["rope_dim"]});
    return {g[0], g[1], g[2], Tensor()};
  }
};

// The router's scores (fp32) and routing map; the map is not differentiable.
struct MoeRouterFunction : Function<MoeRouterFunction> {
  static variable_list forward(AutogradContext* ctx, const Tensor& logits, int64_t topk) {
    at::AutoDispatchBelowADInplaceOrView guard;
    variable_list out = call("syssim::moe_router", {logits, topk});
    ctx->save_for_backward({out[0], out[1]});
    ctx->saved_data["dtype"] = static_cast<int64_t>(logits.scalar_type());
    return with_statistics(ctx, out);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    at::AutoDispatchBelowADInplaceOrView guard;
    variable_list s = ctx->get_saved_variables();
    auto dtype = static_cast<at::ScalarType>(ctx->saved_data["dtype"].toInt());
    return {call("syssim::moe_router_backward", {grads[0], s[0], s[1], dtype})[0], Tensor()};
  }
};

struct MoeAuxLossFunction : Function<MoeAuxLossFunction> {
  static Tensor forward(AutogradContext* ctx, const Tensor& probs, const Tensor& routing_map) {
    at::AutoDispatchBelowADInplaceOrView guard;
    ctx->save_for_backward({probs, routing_map});
    return call("syssim::moe_aux_loss", {probs, routing_map})[0];
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    at::AutoDispatchBelowADInplaceOrView guard;
    variable_list s = ctx->get_saved_variables();
    return {call("syssim::moe_aux_loss_backward", {grads[0], s[0], s[1]})[0], Tensor()};
  }
};

// Tokens to expert order (and their probabilities); the backward sums each token's copies.
struct MoePermuteFunction : Function<MoePermuteFunction> {
  static variable_list forward(AutogradContext* ctx, const Tensor& x, const Tensor& routing_map, const Tensor& probs,
                               int64_t topk) {
    at::AutoDispatchBelowADInplaceOrView guard;
    ctx->save_for_backward({routing_map});
    ctx->saved_data["dtype"] = static_cast<int64_t>(probs.scalar_type());
    return call("syssim::moe_permute", {x, routing_map, probs, topk});
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    at::AutoDispatchBelowADInplaceOrView guard;
    Tensor routing_map = ctx->get_saved_variables()[0];
    auto dtype = static_cast<at::ScalarType>(ctx->saved_data["dtype"].toInt());
    variable_list g = call("syssim::moe_permute_backward", {grads[0], grads[1], routing_map, dtype});
    return {g[0], Tensor(), g[1], Tensor()};
  }
};

struct MoeUnpermuteFunction : Function<MoeUnpermuteFunction> {
  static Tensor forward(AutogradContext* ctx, const Tensor& tokens, const Tensor& routing_map, int64_t topk) {
    at::AutoDispatchBelowADInplaceOrView guard;
    ctx->save_for_backward({routing_map});
    ctx->saved_data["topk"] = topk;
    return call("syssim::moe_unpermute", {tokens, routing_map, topk})[0];
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    at::AutoDispatchBelowADInplaceOrView guard;
    Tensor routing_map = ctx->get_saved_variables()[0];
    return {call("syssim::moe_unpermute_backward", {grads[0], routing_map, ctx->saved_data["topk"]})[0], Tensor(),
            Tensor()};
  }
};

// The experts' GEMMs, all local experts in one grouped kernel; backward as LinearFunction's.
struct GroupedLinearFunction : Function<GroupedLinearFunction> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x, const Tensor& weight, const OptionalTensor& bias) {
    at::AutoDispatchBelowADInplaceOrView guard;
    ctx->save_for_backward({x, weight});
    ctx->saved_data["bias"] = bias.has_value();
    return call("syssim::grouped_linear", {x, weight, bias})[0];
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    at::AutoDispatchBelowADInplaceOrView guard;
    variable_list s = ctx->get_saved_variables();
    Tensor grad_x = call("syssim::grouped_linear_dgrad", {grads[0], s[1]})[0];
    Tensors w = call("syssim::grouped_linear_wgrad", {grads[0], s[0], ctx->saved_data["bias"], s[1].size(0)});
    w.resize(2);
    return {grad_x, w[0], w[1]};
  }
};

// An op of two tensors that keeps both for its backward, which returns a gradient for each.
template <const char* kForward, const char* kBackward>
struct TwoInputFunction : Function<TwoInputFunction<kForward, kBackward>> {
  static Tensor forward(AutogradContext* ctx, const Tensor& a, const Tensor& b) {
    at::AutoDispatchBelowADInplaceOrView guard;
    ctx->save_for_backward({a, b});
    return call(kForward, {a, b})[0];
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    at::AutoDispatchBelowADInplaceOrView guard;
    variable_list s = ctx->get_saved_variables();
    return call(kBackward, {grads[0], s[0], s[1]});
  }
};

// SwiGLU of the expert's fc1 output, times each token's routing probability (Megatron's
// weighted_bias_swiglu): the probabilities get a gradient too.
constexpr char kWeightedSwiglu[] = "syssim::weighted_swiglu";
constexpr char kWeightedSwigluBackward[] = "syssim::weighted_swiglu_backward";
using WeightedSwigluFunction = TwoInputFunction<kWeightedSwiglu, kWeightedSwigluBackward>;

// SiLU of the gate times the up projection (torchtitan's FeedForward under torch.compile).
constexpr char kSiluMul[] = "syssim::silu_mul";
constexpr char kSiluMulBackward[] = "syssim::silu_mul_backward";
using SiluMulFunction = TwoInputFunction<kSiluMul, kSiluMulBackward>;

// Two tensors joined along their last dim (the MTP layer's embedding and hidden state).
struct ConcatFunction : Function<ConcatFunction> {
  static Tensor forward(AutogradContext* ctx, const Tensor& a, const Tensor& b) {
    at::AutoDispatchBelowADInplaceOrView guard;
    ctx->saved_data["split"] = a.size(-1);
    return call("syssim::concat", {a, b})[0];
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return call("syssim::concat_backward", {grads[0], ctx->saved_data["split"]});
  }
};

struct ScaleMaskSoftmaxFunction : Function<ScaleMaskSoftmaxFunction> {
  static Tensor forward(AutogradContext* ctx, const Tensor& scores, double scale) {
    at::AutoDispatchBelowADInplaceOrView guard;
    Tensor probs = call("syssim::scale_mask_softmax", {scores, scale})[0];
    ctx->save_for_backward({probs});
    ctx->saved_data["scale"] = scale;
    return probs;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    at::AutoDispatchBelowADInplaceOrView guard;
    Tensor probs = ctx->get_saved_variables()[0];
    return {call("syssim::scale_mask_softmax_backward", {grads[0], probs, ctx->saved_data["scale"]})[0], Tensor()};
  }
};

struct LinearFunction : Function<LinearFunction> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x, const Tensor& weight, const OptionalTensor& bias) {
    at::AutoDispatchBelowADInplaceOrView guard;
    ctx->save_for_backward({x, weight});
    ctx->saved_data["bias"] = bias.has_value();
    return call("syssim::linear", {x, weight, bias})[0];
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    at::AutoDispatchBelowADInplaceOrView guard;
    variable_list saved = ctx->get_saved_variables();
    // Two kernels, as in Megatron: the data gradient first, then the weight gradient.
    Tensor grad_x = call("syssim::linear_dgrad", {grads[0], saved[1]})[0];
    Tensors w = call("syssim::linear_wgrad", {grads[0], saved[0], ctx->saved_data["bias"]});
    w.resize(2);  // the bias gradient stays undefined without a bias
    return {grad_x, w[0], w[1]};
  }
};

struct RouterLinearFunction : Function<RouterLinearFunction> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x, const Tensor& weight) {
    at::AutoDispatchBelowADInplaceOrView guard;
    ctx->save_for_backward({x, weight});
    return call("syssim::router_linear", {x, weight})[0];
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    at::AutoDispatchBelowADInplaceOrView guard;
    variable_list saved = ctx->get_saved_variables();
    const Tensor x32 = saved[0].to(at::kFloat), weight32 = saved[1].to(at::kFloat);
    Tensor grad_x = call("syssim::linear_dgrad", {grads[0], weight32})[0];
    Tensor grad_weight = call("syssim::linear_wgrad", {grads[0], x32, false})[0];
    return {grad_x.to(saved[0].scalar_type()), grad_weight.to(saved[1].scalar_type())};
  }
};

struct SwigluFunction : Function<SwigluFunction> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x) {
    at::AutoDispatchBelowADInplaceOrView guard;
    ctx->save_for_backward({x});
    return call("syssim::swiglu", {x})[0];
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return call("syssim::swiglu_backward", {grads[0], ctx->get_saved_variables()[0]});
  }
};

// aten::relu has no Meta kernel in LibTorch 1.13 (CPU and CUDA only). Like aten::relu, it keeps
// its output for backward, which aten::threshold_backward reads.
struct ReluFunction : Function<ReluFunction> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x) {
    at::AutoDispatchBelowADInplaceOrView guard;
    Tensor out = call("syssim::relu", {x})[0];
    ctx->save_for_backward({out});
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return call("syssim::relu_backward", {grads[0], ctx->get_saved_variables()[0]});
  }
};

// aten::clamp's backward runs logical_and and where, which have no Meta kernels in LibTorch
// 1.13. Its kernels as PyTorch's clamp_backward runs them: the gradient where the input lies
// within the bounds, else 0: a comparison per bound, their conjunction (aten::bitwise_and
// here, which moves the same bool bytes as logical_and), the where (syssim::where_else_zero).
struct ClampFunction : Function<ClampFunction> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x, c10::optional<double> min, double max) {
    at::AutoDispatchBelowADInplaceOrView guard;
    ctx->save_for_backward({x});
    ctx->saved_data["min"] = min ? c10::IValue(*min) : c10::IValue();
    ctx->saved_data["max"] = max;
    return call("syssim::clamp", {x, min, max})[0];
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    at::AutoDispatchBelowADInplaceOrView guard;
    const Tensor x = ctx->get_saved_variables()[0];
    const c10::IValue min = ctx->saved_data["min"];
    Tensor inside = x.le(ctx->saved_data["max"].toDouble());
    if (!min.isNone()) inside = x.ge(min.toDouble()).bitwise_and(inside);
    return {call("syssim::where_else_zero", {inside, grads[0]})[0], Tensor(), Tensor()};
  }
};

struct CrossEntropyFunction : Function<CrossEntropyFunction> {
  static variable_list forward(AutogradContext* ctx, const Tensor& logits, const Tensor& labels) {
    at::AutoDispatchBelowADInplaceOrView guard;
    variable_list out = call("syssim::cross_entropy", {logits, labels});
    ctx->save_for_backward({out[1], labels});
    ctx->saved_data["logits_dtype"] = static_cast<int64_t>(logits.scalar_type());
    return with_statistics(ctx, out);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    at::AutoDispatchBelowADInplaceOrView guard;
    variable_list saved = ctx->get_saved_variables();
    auto logits_dtype = static_cast<at::ScalarType>(ctx->saved_data["logits_dtype"].toInt());
    return {call("syssim::cross_entropy_backward", {grads[0], saved[0], saved[1], logits_dtype})[0], Tensor()};
  }
};

// aten::nll_loss takes log-probabilities of one or two dimensions only; this one keeps the
// [s, b] token axes. Its backward needs the labels, not the log-probabilities' values.
struct NllLossFunction : Function<NllLossFunction> {
  static Tensor forward(AutogradContext* ctx, const Tensor& log_probs, const Tensor& labels) {
    at::AutoDispatchBelowADInplaceOrView guard;
    ctx->save_for_backward({labels});
    ctx->saved_data["vocab"] = log_probs.size(-1);
    ctx->saved_data["dtype"] = static_cast<int64_t>(log_probs.scalar_type());
    return call("syssim::nll_loss", {log_probs, labels})[0];
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    at::AutoDispatchBelowADInplaceOrView guard;
    const auto dtype = static_cast<at::ScalarType>(ctx->saved_data["dtype"].toInt());
    return {call("syssim::nll_loss_backward",
                 {grads[0], ctx->get_saved_variables()[0], ctx->saved_data["vocab"], dtype})[0],
            Tensor()};
  }
};

struct DropoutFunction : Function<DropoutFunction> {
  static variable_list forward(AutogradContext* ctx, const Tensor& x, double p) {
    at::AutoDispatchBelowADInplaceOrView guard;
    variable_list out = call("syssim::dropout", {x, p});
    ctx->save_for_backward({out[1]});
    ctx->saved_data["p"] = p;
    return with_statistics(ctx, out);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    at::AutoDispatchBelowADInplaceOrView guard;
    Tensor mask = ctx->get_saved_variables()[0];
    return {call("syssim::dropout_backward", {grads[0], mask, ctx->saved_data["p"]})[0], Tensor()};
  }
};

struct AttachAuxLossFunction : Function<AttachAuxLossFunction> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x, const Tensor& aux_loss) {
    ctx->saved_data["aux_shape"] = aux_loss.sizes().vec();
    ctx->saved_data["aux_dtype"] = static_cast<int64_t>(aux_loss.scalar_type());
    return x;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto dtype = static_cast<at::ScalarType>(ctx->saved_data["aux_dtype"].toInt());
    Tensor scale = at::empty(ctx->saved_data["aux_shape"].toIntVector(), grads[0].options().dtype(dtype));
    return {grads[0], scale};
  }
};

// Registered as the ops' Autograd kernels (rather than called directly) so that the recorded
// forward op carries the sequence number of the autograd node it creates.
TORCH_LIBRARY_IMPL(syssim, Autograd, m) {
  m.impl("embedding", [](const Tensor& weight, const Tensor& ids) { return EmbeddingFunction::apply(weight, ids); });
  m.impl("rms_norm", [](const Tensor& x, const Tensor& weight) {
    variable_list out = RmsNormFunction::apply(x, weight);
    return std::make_tuple(out[0], out[1]);
  });
  m.impl("layer_norm", [](const Tensor& x, const Tensor& weight, const Tensor& bias) {
    variable_list out = LayerNormFunction::apply(x, weight, bias);
    return std::make_tuple(out[0], out[1], out[2]);
  });
  m.impl("qkv_linear", [](const Tensor& x, const Tensor& wq, const Tensor& wk, const Tensor& wv,
                          const OptionalTensor& bq, const OptionalTensor& bk, const OptionalTensor& bv,
                          int64_t head_dim) {
    variable_list qkv = QkvLinearFunction::apply(x, wq, wk, wv, bq, bk, bv, head_dim);
    return std::make_tuple(qkv[0], qkv[1], qkv[2]);
  });
  m.impl("rope",
         [](const Tensor& x) { return GradientOnlyFunction::apply(x, "syssim::rope", "syssim::rope_backward"); });
  m.impl("rotate_half", [](const Tensor& x) {
    return GradientOnlyFunction::apply(x, "syssim::rotate_half", "syssim::rotate_half_backward");
  });
  m.impl("flash_attn", [](const Tensor& q, const Tensor& k, const Tensor& v, const OptionalTensor& sinks) {
    return FlashAttnFunction::apply(q, k, v, sinks, false);
  });
  m.impl("flash_attn_window", [](const Tensor& q, const Tensor& k, const Tensor& v, const OptionalTensor& sinks) {
    return FlashAttnFunction::apply(q, k, v, sinks, true);
  });
  m.impl("stacked_linear", [](const Tensor& x, const Tensor& w1, const Tensor& w2) {
    variable_list out = StackedLinearFunction::apply(x, w1, w2);
    return std::make_tuple(out[0], out[1]);
  });
  m.impl("mla_rope_q", [](const Tensor& q) {
    return GradientOnlyFunction::apply(q, "syssim::mla_rope_q", "syssim::mla_rope_q_backward");
  });
  m.impl("mla_rope_kv", [](const Tensor& k_nope, const Tensor& v, const Tensor& k_pe, int64_t head_dim) {
    variable_list out = MlaRopeKvFunction::apply(k_nope, v, k_pe, head_dim);
    return std::make_tuple(out[0], out[1]);
  });
  m.impl("moe_router", [](const Tensor& logits, int64_t topk) {
    variable_list out = MoeRouterFunction::apply(logits, topk);
    return std::make_tuple(out[0], out[1]);
  });
  m.impl("moe_aux_loss",
         [](const Tensor& probs, const Tensor& routing_map) { return MoeAuxLossFunction::apply(probs, routing_map); });
  m.impl("moe_permute", [](const Tensor& x, const Tensor& routing_map, const Tensor& probs, int64_t topk) {
    variable_list out = MoePermuteFunction::apply(x, routing_map, probs, topk);
    return std::make_tuple(out[0], out[1]);
  });
  m.impl("grouped_linear", [](const Tensor& x, const Tensor& weight, const OptionalTensor& bias) {
    return GroupedLinearFunction::apply(x, weight, bias);
  });
  m.impl("weighted_swiglu", [](const Tensor& x, const Tensor& probs) { return WeightedSwigluFunction::apply(x, probs); });
  m.impl("moe_unpermute", [](const Tensor& tokens, const Tensor& routing_map, int64_t topk) {
    return MoeUnpermuteFunction::apply(tokens, routing_map, topk);
  });
  m.impl("concat", [](const Tensor& a, const Tensor& b) { return ConcatFunction::apply(a, b); });
  m.impl("scale_mask_softmax",
         [](const Tensor& scores, double scale) { return ScaleMaskSoftmaxFunction::apply(scores, scale); });
  m.impl("linear", [](const Tensor& x, const Tensor& weight, const OptionalTensor& bias) {
    return LinearFunction::apply(x, weight, bias);
  });
  m.impl("router_linear", [](const Tensor& x, const Tensor& weight) { return RouterLinearFunction::apply(x, weight); });
  m.impl("swiglu", [](const Tensor& x) { return SwigluFunction::apply(x); });
  m.impl("silu_mul", [](const Tensor& gate, const Tensor& up) { return SiluMulFunction::apply(gate, up); });
  m.impl("clamp", [](const Tensor& x, c10::optional<double> min, double max) {
    return ClampFunction::apply(x, min, max);
  });
  m.impl("relu", [](const Tensor& x) { return ReluFunction::apply(x); });
  m.impl("cross_entropy", [](const Tensor& logits, const Tensor& labels) {
    variable_list out = CrossEntropyFunction::apply(logits, labels);
    return std::make_tuple(out[0], out[1]);
  });
  m.impl("nll_loss", [](const Tensor& log_probs, const Tensor& labels) { return NllLossFunction::apply(log_probs, labels); });
  m.impl("dropout", [](const Tensor& x, double p) {
    variable_list out = DropoutFunction::apply(x, p);
    return std::make_tuple(out[0], out[1]);
  });
}

}  // namespace

Tensor attach_aux_loss(const Tensor& x, const Tensor& aux_loss) { return AttachAuxLossFunction::apply(x, aux_loss); }

std::vector<Tensor> call(const char* name, std::vector<c10::IValue> args) {
  c10::Dispatcher::singleton().findSchemaOrThrow(name, "").callBoxed(args);
  Tensors outputs;
  for (const c10::IValue& output : args) {
    if (output.isTensor()) outputs.push_back(output.toTensor());
    if (output.isTensorList())
      for (const Tensor& t : output.toTensorVector()) outputs.push_back(t);
  }
  return outputs;
}

}  // namespace syssim::trace_ops
