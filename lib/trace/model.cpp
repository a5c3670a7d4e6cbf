#include "trace/model.hpp"

#include <cmath>
#include <string>
#include <vector>

#include "trace/ops.hpp"

namespace syssim::trace_detail {
namespace {

using at::Tensor;
using trace_ops::call;
using OptionalTensor = c10::optional<Tensor>;

// Module paths, parameter names and tensor layouts ([s, b, h] activations, [s, b, heads, d]
// attention tensors) follow Megatron-Core's GPTModel.
class TrainingStep {
 public:
  TrainingStep(const ModelConfig& model, const AxisSizes& sizes, Recorder& recorder)
      : model_(model), n_(sizes), recorder_(recorder) {}

  Tensor loss() {
    Tensor x = embedding();
    for (int64_t layer = 0; layer < model_.num_layers; ++layer)
      x = decoder_layer(layer, "decoder.layers." + std::to_string(layer), x);
    Tensor total = language_model_loss("", norm("decoder.final_layernorm", x));
    // Megatron-Core's multi-token prediction: each MTP layer predicts one token further from
    // the previous one's hidden state and the embedding of the shifted tokens.
    for (int64_t depth = 0; depth < model_.mtp_num_layers; ++depth) {
      const std::string prefix = "mtp.layers." + std::to_string(depth);
      x = mtp_layer(prefix, x);
      Tensor mtp_loss = language_model_loss(prefix + ".", norm(prefix + ".final_layernorm", x));
      ModuleScope scope(prefix + ".loss", TpRole::none);
      total = total + mtp_loss;
    }
    return total;
  }

 private:
  static Tensor meta(const std::vector<int64_t>& shape, at::ScalarType dtype) {
    return at::empty(shape, at::TensorOptions().device(at::kMeta).dtype(dtype));
  }

  Tensor token_ids() { return recorder_.input(meta({n_.s, n_.b}, at::kLong)); }

  Tensor parameter(const std::string& name, const std::vector<int64_t>& shape) {
    return recorder_.parameter(name, meta(shape, at::kBFloat16).requires_grad_());
  }

  OptionalTensor bias(const std::string& name, bool enabled, int64_t width) {
    if (!enabled) return c10::nullopt;
    return parameter(name, {width});
  }

  // The output layer (the word embeddings when tied) and the vocab-parallel cross entropy,
  // summed over the tokens; `prefix` names an MTP layer's copies of the modules.
  Tensor language_model_loss(const std::string& prefix, const Tensor& x) {
    Tensor logits;
    {
      ModuleScope scope(prefix + "output_layer", TpRole::vocab_output);
      if (model_.tie_word_embeddings)
        output_weight_ = word_embeddings_;
      else if (!output_weight_.defined())
        output_weight_ = parameter("output_layer.weight", {n_.v, n_.h});
      logits = call("syssim::linear", {x, output_weight_, c10::nullopt})[0];
    }
    Tensor labels = token_ids();
    Tensor per_token;
    if (model_.cross_entropy == "torch_fp32") {
      Tensor log_probs;
      {
        ModuleScope scope(prefix + "loss", TpRole::none);
        log_probs = at::log_softmax(logits.to(at::kFloat), -1);
      }
      ModuleScope scope(prefix + "loss", TpRole::vocab_loss);
      per_token = call("syssim::nll_loss", {log_probs, labels})[0];
    } else {
      ModuleScope scope(prefix + "loss", TpRole::vocab_loss);
      per_token = call("syssim::cross_entropy", {logits, labels})[0];
    }
    ModuleScope scope(prefix + "loss", TpRole::none);
    return per_token.sum();
  }

  // An MTP layer (Megatron-Core's MultiTokenPredictionLayer): the shifted tokens' embedding and
  // the hidden state, each normed, joined and projected to the hidden size (eh_proj), then one
  // transformer layer of the decoder's last layer's kind. eh_proj is Megatron's column-parallel
  // linear followed by a gather; here it is one GEMM per rank on its sequence-parallel tokens
  // (the same FLOPs; the gather of its output is not modelled).
  Tensor mtp_layer(const std::string& prefix, const Tensor& hidden) {
    Tensor embedded;
    {
      ModuleScope scope(prefix + ".embedding", TpRole::vocab_embedding);
      embedded = call("syssim::embedding", {word_embeddings_, token_ids()})[0];
    }
    Tensor joined;
    {
      Tensor e = norm(prefix + ".enorm", embedded);
      Tensor h = norm(prefix + ".hnorm", hidden);
      ModuleScope scope(prefix, TpRole::none);
      joined = call("syssim::concat", {e, h})[0];
    }
    Tensor projected = linear(prefix + ".eh_proj", TpRole::none, joined, n_.h);
    return decoder_layer(model_.num_layers - 1, prefix + ".transformer_layer", projected);
  }

  Tensor embedding() {
    Tensor x;
    {
      ModuleScope scope("embedding.word_embeddings", TpRole::vocab_embedding);
      word_embeddings_ = parameter("embedding.word_embeddings.weight", {n_.v, n_.h});
      x = call("syssim::embedding", {word_embeddings_, token_ids()})[0];
    }
    if (!model_.rope) {
      ModuleScope scope("embedding.position_embeddings", TpRole::none);
      Tensor table = parameter("embedding.position_embeddings.weight", {n_.p, n_.h});
      Tensor positions = call("syssim::embedding", {table, recorder_.input(meta({n_.s}, at::kLong))})[0];
      x = x + positions.unsqueeze(1);  // broadcast over the batch
    }
    return dropout("embedding.embedding_dropout", x, model_.hidden_dropout);
  }

  // Megatron's bias-dropout-add: the branch is dropped out before the residual add. `layer`
  // decides the kinds of attention and MLP.
  Tensor decoder_layer(int64_t layer, const std::string& prefix, const Tensor& x) {
    Tensor normed = norm(prefix + ".input_layernorm", x);
    Tensor attention = model_.multi_latent_attention ? latent_attention(prefix + ".self_attention", normed)
                                                     : self_attention(layer, prefix + ".self_attention", normed);
    Tensor hidden = residual(prefix, x, dropout(prefix + ".self_attn_bda", attention, model_.hidden_dropout));
    Tensor mlp_in = norm(prefix + ".pre_mlp_layernorm", hidden);
    Tensor mlp_out = model_.is_moe_layer(layer) ? mixture_of_experts(prefix + ".mlp", mlp_in)
                                                : mlp(prefix + ".mlp", mlp_in, n_.f);
    return residual(prefix, hidden, dropout(prefix + ".mlp_bda", mlp_out, model_.hidden_dropout));
  }

  // Dropout with probability p (none when p is 0), keeping its mask for backward.
  Tensor dropout(const std::string& module, const Tensor& x, double p) {
    if (p == 0) return x;
    ModuleScope scope(module, TpRole::none);
    return call("syssim::dropout", {x, p})[0];
  }

  Tensor residual(const std::string& module, const Tensor& x, const Tensor& branch) {
    ModuleScope scope(module, TpRole::none);
    return x + branch;
  }

  Tensor norm(const std::string& module, const Tensor& x) {
    ModuleScope scope(module, TpRole::none);
    int64_t width = x.size(-1);
    Tensor weight = parameter(module + ".weight", {width});
    if (model_.normalization == "LayerNorm")
      return call("syssim::layer_norm", {x, weight, parameter(module + ".bias", {width})})[0];
    if (!model_.rms_norm_fusion) return eager_rms_norm(x, weight);
    return call("syssim::rms_norm", {x, weight})[0];
  }

  // PyTorch's RMSNorm run eagerly (torch.nn.RMSNorm, torchtitan's RMSNorm): in fp32, one kernel
  // each for the cast, the square, the mean, the epsilon, the reciprocal root, the scaling, the
  // cast back and the weight; autograd's backward of each.
  Tensor eager_rms_norm(const Tensor& x, const Tensor& weight) {
    Tensor x32 = x.to(at::kFloat);
    Tensor scaled = x32 * at::rsqrt(x32.pow(2).mean(-1, true) + model_.rms_norm_eps);
    return scaled.to(x.scalar_type()) * weight;
  }

  Tensor linear(const std::string& module, TpRole tp_role, const Tensor& x, int64_t out_features) {
    return linear(module, tp_role, x, out_features, model_.add_bias_linear);
  }

  Tensor linear(const std::string& module, TpRole tp_role, const Tensor& x, int64_t out_features, bool with_bias) {
    ModuleScope scope(module, tp_role);
    Tensor weight = parameter(module + ".weight", {out_features, x.size(-1)});
    return call("syssim::linear", {x, weight, bias(module + ".bias", with_bias, out_features)})[0];
  }

  Tensor self_attention(int64_t layer, const std::string& module, const Tensor& x) {
    Tensor q, k, v;
    const int64_t q_width = n_.g * n_.r * n_.d, kv_width = n_.g * n_.d;
    const bool with_bias = model_.add_qkv_bias || model_.add_bias_linear;
    if (!model_.projection_fusion) {
      q = linear(module + ".linear_q", TpRole::column, x, q_width, with_bias).view({n_.s, n_.b, n_.g * n_.r, n_.d});
      k = linear(module + ".linear_k", TpRole::column, x, kv_width, with_bias).view({n_.s, n_.b, n_.g, n_.d});
      v = linear(module + ".linear_v", TpRole::column, x, kv_width, with_bias).view({n_.s, n_.b, n_.g, n_.d});
    } else {
      const std::string qkv = module + ".linear_qkv";
      ModuleScope scope(qkv, TpRole::column);
      Tensor wq = parameter(qkv + ".weight_q", {q_width, n_.h});
      Tensor wk = parameter(qkv + ".weight_k", {kv_width, n_.h});
      Tensor wv = parameter(qkv + ".weight_v", {kv_width, n_.h});
      OptionalTensor bq = bias(qkv + ".bias_q", with_bias, q_width);
      OptionalTensor bk = bias(qkv + ".bias_k", with_bias, kv_width);
      OptionalTensor bv = bias(qkv + ".bias_v", with_bias, kv_width);
      std::vector<Tensor> qkv_heads = call("syssim::qkv_linear", {x, wq, wk, wv, bq, bk, bv, n_.d});
      q = qkv_heads[0], k = qkv_heads[1], v = qkv_heads[2];
    }
    if (model_.qk_layernorm) {
      q = norm(module + ".q_layernorm", q);
      k = norm(module + ".k_layernorm", k);
    }
    if (model_.rope) {
      ModuleScope scope(module, TpRole::none);
      q = model_.apply_rope_fusion ? call("syssim::rope", {q})[0] : eager_rope(q);
      k = model_.apply_rope_fusion ? call("syssim::rope", {k})[0] : eager_rope(k);
    }
    Tensor context = core_attention(layer, module + ".core_attention", q, k, v);
    return linear(module + ".linear_proj", TpRole::row, context, n_.h);
  }

  // Megatron-Core's MLASelfAttention with fused RoPE (DeepSeek-V2/V3): queries from a low-rank
  // latent (q_lora_rank) or the hidden state, keys and values up-projected from a shared K/V
  // latent (both latents normed with qk_layernorm, as Megatron's layer spec), and one RoPE key
  // per token shared by the heads. The down projections are TP-
  // duplicated (each rank projects its own sequence-parallel tokens), the up projections
  // column-parallel; the RoPE key is all-gathered where keys are made (the column role).
  Tensor latent_attention(const std::string& module, const Tensor& x) {
    const int64_t heads = n_.g * n_.r;
    Tensor q;
    if (model_.q_lora_rank > 0) {
      Tensor latent = linear(module + ".linear_q_down_proj", TpRole::none, x, n_.q);
      if (model_.qk_layernorm) latent = norm(module + ".q_layernorm", latent);
      q = linear(module + ".linear_q_up_proj", TpRole::column, latent, heads * n_.d);
    } else {
      q = linear(module + ".linear_q_proj", TpRole::column, x, heads * n_.d);
    }
    Tensor kv_latent, k_pe;
    {
      const std::string down = module + ".linear_kv_down_proj";
      ModuleScope scope(down, TpRole::none);
      std::vector<Tensor> out = call("syssim::stacked_linear", {x, parameter(down + ".weight_kv", {n_.c, n_.h}),
                                                                parameter(down + ".weight_k_pe", {n_.t, n_.h})});
      kv_latent = out[0], k_pe = out[1];
    }
    if (model_.qk_layernorm) kv_latent = norm(module + ".kv_layernorm", kv_latent);
    Tensor k_nope, v;
    {
      const std::string up = module + ".linear_kv_up_proj";
      ModuleScope scope(up, TpRole::column);
      std::vector<Tensor> out = call("syssim::stacked_linear", {kv_latent, parameter(up + ".weight_k", {heads * n_.n, n_.c}),
                                                                parameter(up + ".weight_v", {heads * n_.w, n_.c})});
      k_nope = out[0].view({n_.s, n_.b, heads, n_.n}), v = out[1].view({n_.s, n_.b, heads, n_.w});
    }
    Tensor query, key, value;
    {
      ModuleScope scope(module + ".mla_rope", TpRole::none);
      query = call("syssim::mla_rope_q", {q.view({n_.s, n_.b, heads, n_.d})})[0];
    }
    {
      ModuleScope scope(module + ".mla_rope", TpRole::column);
      std::vector<Tensor> kv = call("syssim::mla_rope_kv", {k_nope, v, k_pe, n_.d});
      key = kv[0], value = kv[1];
    }
    Tensor context = core_attention(-1, module + ".core_attention", query, key, value);
    return linear(module + ".linear_proj", TpRole::row, context, n_.h);
  }

  // Causal attention of q [s, b, g*r, d] over k [s, b, g, d] and v [s, b, g, d_v]; returns
  // [s, b, g*r*d_v]. `layer` decides a sliding window (-1: none).
  Tensor core_attention(int64_t layer, const std::string& module, const Tensor& q, const Tensor& k, const Tensor& v) {
    ModuleScope scope(module, TpRole::none);
    const int64_t heads = n_.g * n_.r;
    if (model_.flash_attention()) {
      OptionalTensor sinks;
      if (model_.softmax_type == "learnable") sinks = parameter(module + ".softmax_offset", {heads});
      const bool window = layer >= 0 && model_.is_sliding_window_layer(layer);
      Tensor out = call(window ? "syssim::flash_attn_window" : "syssim::flash_attn", {q, k, v, sinks})[0];
      return out.view({n_.s, n_.b, heads * v.size(-1)});
    }
    // Megatron's unfused path: batched matmuls over b * heads, [b*heads, s, d] operands (MLA's
    // queries and keys with their own head dimension, its values with theirs).
    auto batched = [&](const Tensor& t) { return t.reshape({n_.s, n_.b * heads, t.size(-1)}).transpose(0, 1); };
    Tensor keys = batched(repeat_groups(k));
    Tensor values = batched(repeat_groups(v));
    Tensor scores = at::bmm(batched(q), keys.transpose(1, 2)).view({n_.b, heads, n_.s, n_.s});
    Tensor probs = runs_fused_softmax_kernel(model_, model_.seq_length)
                       ? call("syssim::scale_mask_softmax", {scores, 1.0 / std::sqrt(static_cast<double>(n_.d))})[0]
                       : torch_softmax(scores);
    probs = dropout(module, probs, model_.attention_dropout);  // the flash kernel regenerates its mask instead
    Tensor context = at::bmm(probs.view({n_.b * heads, n_.s, n_.s}), values);
    const int64_t d_v = v.size(-1);
    return context.view({n_.b, heads, n_.s, d_v}).permute({2, 0, 1, 3}).contiguous().view({n_.s, n_.b, heads * d_v});
  }

  // Megatron's FusedScaleMaskSoftmax.forward_torch_softmax, run where its fused kernel does not
  // apply: the scores cast to fp32 (attention_softmax_in_fp32), the causal mask filled in place
  // (attention_mask_func), the softmax and the cast back, each its own kernel. No multiply: the
  // 1/sqrt(d) scale is the scores GEMM's alpha there, and the softmax's own scale is unset
  // without apply_query_key_layer_scaling.
  Tensor torch_softmax(const Tensor& scores) {
    // One [s, s] mask for the whole step, as Megatron caches get_default_causal_mask.
    if (!causal_mask_.defined()) causal_mask_ = recorder_.input(meta({n_.s, n_.s}, at::kBool));
    Tensor fp32_scores = scores.to(at::kFloat);
    fp32_scores.masked_fill_(causal_mask_, -10000.0);
    return at::softmax(fp32_scores, -1).to(scores.scalar_type());
  }

  // Megatron-Core's unfused RoPE (_apply_rotary_pos_emb_bshd): t * cos + rotate_half(t) * sin,
  // cos and sin of the step's fp32 frequencies cast to t's dtype on every call. rotate_half
  // negates one half of t and concatenates the halves swapped: one copy of t here (a half of
  // the head dimension has no axis in the trace), without the negation of the half, which
  // moves a tenth of the chain's bytes.
  Tensor eager_rope(const Tensor& t) {
    // One [s, 1, 1, d] table of frequencies for the step, as Megatron's RotaryEmbedding makes it.
    if (!rope_freqs_.defined()) rope_freqs_ = recorder_.input(meta({n_.s, 1, 1, t.size(-1)}, at::kFloat));
    Tensor cos = at::cos(rope_freqs_).to(t.scalar_type());
    Tensor sin = at::sin(rope_freqs_).to(t.scalar_type());
    return t * cos + call("syssim::rotate_half", {t})[0] * sin;
  }

  // Megatron's SwiGLU without bias_swiglu_fusion: the halves of fc1's output, SiLU of the first
  // times the second, two kernels; autograd's backward of each and the halves' concatenation.
  static Tensor eager_swiglu(const Tensor& hidden) {
    std::vector<Tensor> halves = hidden.chunk(2, -1);
    return at::silu(halves[0]) * halves[1];
  }

  // Each of the g key/value heads repeated r times: a real copy, like Megatron's repeat_interleave.
  Tensor repeat_groups(const Tensor& t) {
    if (model_.num_attention_heads == model_.num_query_groups) return t;
    const int64_t d = t.size(-1);
    return t.unsqueeze(3).expand({n_.s, n_.b, n_.g, n_.r, d}).reshape({n_.s, n_.b, n_.g * n_.r, d});
  }

  Tensor mlp(const std::string& module, const Tensor& x, int64_t width) {
    if (model_.swiglu && !model_.projection_fusion) return unfused_swiglu_mlp(module, x, width);
    Tensor hidden = linear(module + ".linear_fc1", TpRole::column, x, model_.swiglu ? 2 * width : width);
    Tensor activated;
    {
      ModuleScope scope(module, TpRole::none);
      if (!model_.swiglu)
        activated = plain_activation(hidden);
      else
        activated = model_.bias_swiglu_fusion ? call("syssim::swiglu", {hidden})[0] : eager_swiglu(hidden);
    }
    return linear(module + ".linear_fc2", TpRole::row, activated, n_.h);
  }

  // A SwiGLU MLP whose gate and up projections are separate linears (torchtitan's FeedForward:
  // w2(silu(w1(x)) * w3(x))), the SiLU and the product one fused kernel or two eager ones.
  Tensor unfused_swiglu_mlp(const std::string& module, const Tensor& x, int64_t width) {
    Tensor gate = linear(module + ".linear_fc1_gate", TpRole::column, x, width);
    Tensor up = linear(module + ".linear_fc1_up", TpRole::column, x, width);
    Tensor activated;
    {
      ModuleScope scope(module, TpRole::none);
      activated = model_.bias_swiglu_fusion ? call("syssim::silu_mul", {gate, up})[0] : at::silu(gate) * up;
    }
    return linear(module + ".linear_fc2", TpRole::row, activated, n_.h);
  }

  // The activation of an MLP without a gate: NeMo's squared ReLU or GELU.
  Tensor plain_activation(const Tensor& hidden) {
    return model_.activation == "squared_relu" ? squared_relu(hidden) : at::gelu(hidden);
  }

  // Megatron-Core's MoELayer with the alltoall token dispatcher, in its order without overlap:
  // the shared experts, the router (scores, top-k, load-balancing loss), the permutation of
  // the tokens to expert order, the routed experts, the permutation back and the sum with the
  // shared experts' output. Ops of the experts have the tp_role expert_*: syssim-shard
  // evaluates them on the rank's experts and the tokens dispatched to them, and exchanges
  // what crosses between the two layouts (docs/parallelism.md "Expert parallelism").
  Tensor mixture_of_experts(const std::string& module, const Tensor& x) {
    Tensor shared;
    if (model_.moe_shared_expert_intermediate_size > 0) shared = mlp(module + ".shared_experts", x, n_.u);
    Tensor probs, routing_map;
    {
      const std::string router = module + ".router";
      ModuleScope scope(router, TpRole::none);
      Tensor weight = parameter(router + ".weight", {n_.e, n_.h});
      Tensor logits = model_.moe_router_dtype == "fp32"
                          ? call("syssim::router_linear", {x, weight})[0]
                          : call("syssim::linear", {x, weight, bias(router + ".bias", model_.add_bias_linear, n_.e)})[0];
      std::vector<Tensor> routed = call("syssim::moe_router", {logits, n_.k});
      probs = routed[0], routing_map = routed[1];
    }
    Tensor aux_loss;
    if (model_.moe_router_load_balancing_type != "none") {
      ModuleScope scope(module + ".router", TpRole::none);
      aux_loss = call("syssim::moe_aux_loss", {probs, routing_map})[0];
    }
    Tensor tokens, token_probs;
    {
      ModuleScope scope(module + ".token_dispatcher", TpRole::expert_dispatch);
      std::vector<Tensor> permuted = call("syssim::moe_permute", {x, routing_map, probs, n_.k});
      tokens = permuted[0], token_probs = permuted[1];
    }
    Tensor expert_out = experts(module + ".experts", tokens, token_probs);
    Tensor out;
    {
      ModuleScope scope(module + ".token_dispatcher", TpRole::expert_dispatch);
      out = call("syssim::moe_unpermute", {expert_out, routing_map, n_.k})[0];
    }
    if (shared.defined()) {
      ModuleScope scope(module, TpRole::none);
      out = out + shared;
    }
    // Megatron's MoEAuxLossAutoScaler: the loss's gradient enters backward here, in the layer.
    return aux_loss.defined() ? trace_ops::attach_aux_loss(out, aux_loss) : out;
  }

  // The routed experts (Megatron-Core's TEGroupedMLP): fc1 and fc2 as grouped GEMMs over the
  // local experts, between them the activation weighted by each token's routing probability:
  // fused for SwiGLU (weighted_bias_swiglu), otherwise the activation and then the multiply
  // (activation_func_with_probs). fc1 adds its bias in the GEMM; fc2 returns its bias, added
  // after the GEMM weighted by the probability (experts_bias).
  Tensor experts(const std::string& module, const Tensor& tokens, const Tensor& probs) {
    auto grouped = [&](const std::string& name, TpRole role, const Tensor& in, int64_t out, bool with_bias) {
      ModuleScope scope(module + "." + name, role);
      Tensor weight = parameter(module + "." + name + ".weight", {n_.e, out, in.size(-1)});
      OptionalTensor b;
      if (with_bias) b = parameter(module + "." + name + ".bias", {n_.e, out});
      return call("syssim::grouped_linear", {in, weight, b})[0];
    };
    Tensor hidden =
        grouped("linear_fc1", TpRole::expert_column, tokens, model_.swiglu ? 2 * n_.m : n_.m, model_.add_bias_linear);
    Tensor activated;
    {
      ModuleScope scope(module + ".activation_func", TpRole::expert);
      if (model_.activation_func_clamp_value > 0) hidden = clamped_glu_input(hidden);
      // The fp32 probabilities promote the product, cast back as Megatron does.
      if (model_.swiglu && model_.bias_swiglu_fusion)
        activated = call("syssim::weighted_swiglu", {hidden, probs})[0];
      else
        activated = ((model_.swiglu ? eager_swiglu(hidden) : plain_activation(hidden)) * probs.unsqueeze(-1))
                        .to(hidden.scalar_type());
    }
    Tensor out = grouped("linear_fc2", TpRole::expert_row, activated, n_.h, false);
    return model_.add_bias_linear ? experts_bias(module, out, probs) : out;
  }

  // GPT-OSS's clamped GLU in Megatron-Core (weighted_bias_quick_geglu_impl): the gate half
  // capped at +v and the linear half clamped to [-v, v], each its own kernel, and the halves
  // concatenated again for the fused kernel.
  Tensor clamped_glu_input(const Tensor& hidden) {
    const double v = model_.activation_func_clamp_value;
    std::vector<Tensor> halves = hidden.chunk(2, -1);
    return at::cat({call("syssim::clamp", {halves[0], c10::nullopt, v})[0], call("syssim::clamp", {halves[1], -v, v})[0]},
                   -1);
  }

  // TEGroupedMLP._apply_bias: fc2's bias times each token's probability, added to the GEMM's
  // output expert by expert (fp32, as the probability promotes it), the experts' pieces
  // concatenated and cast back: here over all the rank's tokens at once, the same bytes.
  Tensor experts_bias(const std::string& module, const Tensor& out, const Tensor& probs) {
    Tensor bias = parameter(module + ".linear_fc2.bias", {n_.e, n_.h});
    ModuleScope scope(module, TpRole::expert);
    Tensor weighted = bias.select(0, 0) * probs.unsqueeze(-1);
    return at::cat({out + weighted}, 0).to(out.scalar_type());
  }

  // NeMo's squared_relu (nemo/collections/llm/fn/activation.py): torch.pow(relu(x), 2), run
  // eagerly as two kernels; autograd's PowBackward0 is aten::pow(r, 1) and two aten::mul.
  static Tensor squared_relu(const Tensor& x) { return at::pow(call("syssim::relu", {x})[0], 2); }

  const ModelConfig& model_;
  const AxisSizes n_;
  Recorder& recorder_;
  Tensor word_embeddings_;
  Tensor output_weight_;  // made by the first output layer, shared by the MTP layers'
  Tensor causal_mask_;    // made by the first attention that needs it
  Tensor rope_freqs_;     // made by the first unfused RoPE
};

}  // namespace

void run_training_step(const ModelConfig& model, const AxisSizes& sizes, Recorder& recorder) {
  Tensor loss = TrainingStep(model, sizes, recorder).loss();
  ModuleScope scope("loss", TpRole::none);  // for the seed gradient, which no forward op produces
  recorder.backward(loss);
}

}  // namespace syssim::trace_detail
