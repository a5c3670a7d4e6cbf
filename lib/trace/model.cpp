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
      x = decoder_layer("decoder.layers." + std::to_string(layer), x);
    x = norm("decoder.final_layernorm", x);
    Tensor logits;
    {
      ModuleScope scope("output_layer", "vocab_output");
      Tensor weight =
          model_.tie_word_embeddings ? word_embeddings_ : parameter("output_layer.weight", {n_.v, n_.h});
      logits = call("syssim::linear", {x, weight, c10::nullopt})[0];
    }
    Tensor labels = token_ids();
    Tensor per_token;
    {
      ModuleScope scope("loss", "vocab_loss");
      per_token = call("syssim::cross_entropy", {logits, labels})[0];
    }
    ModuleScope scope("loss", "none");
    return per_token.sum();
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

  Tensor embedding() {
    Tensor x;
    {
      ModuleScope scope("embedding.word_embeddings", "vocab_embedding");
      word_embeddings_ = parameter("embedding.word_embeddings.weight", {n_.v, n_.h});
      x = call("syssim::embedding", {word_embeddings_, token_ids()})[0];
    }
    if (!model_.rope) {
      ModuleScope scope("embedding.position_embeddings", "none");
      Tensor table = parameter("embedding.position_embeddings.weight", {n_.p, n_.h});
      Tensor positions = call("syssim::embedding", {table, recorder_.input(meta({n_.s}, at::kLong))})[0];
      x = x + positions.unsqueeze(1);  // broadcast over the batch
    }
    return dropout("embedding.embedding_dropout", x, model_.hidden_dropout);
  }

  // Megatron's bias-dropout-add: the branch is dropped out before the residual add.
  Tensor decoder_layer(const std::string& prefix, const Tensor& x) {
    Tensor attention = self_attention(prefix + ".self_attention", norm(prefix + ".input_layernorm", x));
    Tensor hidden = residual(prefix, x, dropout(prefix + ".self_attn_bda", attention, model_.hidden_dropout));
    Tensor mlp_out = mlp(prefix + ".mlp", norm(prefix + ".pre_mlp_layernorm", hidden));
    return residual(prefix, hidden, dropout(prefix + ".mlp_bda", mlp_out, model_.hidden_dropout));
  }

  // Dropout with probability p (none when p is 0), keeping its mask for backward.
  Tensor dropout(const std::string& module, const Tensor& x, double p) {
    if (p == 0) return x;
    ModuleScope scope(module, "none");
    return call("syssim::dropout", {x, p})[0];
  }

  Tensor residual(const std::string& module, const Tensor& x, const Tensor& branch) {
    ModuleScope scope(module, "none");
    return x + branch;
  }

  Tensor norm(const std::string& module, const Tensor& x) {
    ModuleScope scope(module, "none");
    int64_t width = x.size(-1);
    Tensor weight = parameter(module + ".weight", {width});
    if (model_.normalization == "LayerNorm")
      return call("syssim::layer_norm", {x, weight, parameter(module + ".bias", {width})})[0];
    return call("syssim::rms_norm", {x, weight})[0];
  }

  Tensor linear(const std::string& module, const std::string& tp_role, const Tensor& x, int64_t out_features) {
    ModuleScope scope(module, tp_role);
    Tensor weight = parameter(module + ".weight", {out_features, x.size(-1)});
    return call("syssim::linear", {x, weight, bias(module + ".bias", model_.add_bias_linear, out_features)})[0];
  }

  Tensor self_attention(const std::string& module, const Tensor& x) {
    Tensor q, k, v;
    {
      const std::string qkv = module + ".linear_qkv";
      ModuleScope scope(qkv, "column");
      const int64_t q_width = n_.g * n_.r * n_.d, kv_width = n_.g * n_.d;
      const bool with_bias = model_.add_qkv_bias || model_.add_bias_linear;
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
      ModuleScope scope(module, "none");
      q = call("syssim::rope", {q})[0];
      k = call("syssim::rope", {k})[0];
    }
    Tensor context = core_attention(module + ".core_attention", q, k, v);
    return linear(module + ".linear_proj", "row", context, n_.h);
  }

  // Causal attention of q [s, b, g*r, d] over k, v [s, b, g, d]; returns [s, b, g*r*d].
  Tensor core_attention(const std::string& module, const Tensor& q, const Tensor& k, const Tensor& v) {
    ModuleScope scope(module, "none");
    const int64_t heads = n_.g * n_.r;
    if (model_.attention_backend == "flash")
      return call("syssim::flash_attn", {q, k, v})[0].view({n_.s, n_.b, heads * n_.d});
    // Megatron's unfused path: batched matmuls over b * heads, [b*heads, s, d] operands.
    auto batched = [&](const Tensor& t) { return t.reshape({n_.s, n_.b * heads, n_.d}).transpose(0, 1); };
    Tensor keys = batched(repeat_groups(k));
    Tensor values = batched(repeat_groups(v));
    Tensor scores = at::bmm(batched(q), keys.transpose(1, 2)).view({n_.b, heads, n_.s, n_.s});
    Tensor probs = call("syssim::scale_mask_softmax", {scores, 1.0 / std::sqrt(static_cast<double>(n_.d))})[0];
    probs = dropout(module, probs, model_.attention_dropout);  // the flash kernel regenerates its mask instead
    Tensor context = at::bmm(probs.view({n_.b * heads, n_.s, n_.s}), values);
    return context.view({n_.b, heads, n_.s, n_.d}).permute({2, 0, 1, 3}).contiguous().view({n_.s, n_.b, heads * n_.d});
  }

  // Each of the g key/value heads repeated r times: a real copy, like Megatron's repeat_interleave.
  Tensor repeat_groups(const Tensor& t) {
    if (model_.num_attention_heads == model_.num_query_groups) return t;
    return t.unsqueeze(3).expand({n_.s, n_.b, n_.g, n_.r, n_.d}).reshape({n_.s, n_.b, n_.g * n_.r, n_.d});
  }

  Tensor mlp(const std::string& module, const Tensor& x) {
    Tensor hidden = linear(module + ".linear_fc1", "column", x, model_.swiglu ? 2 * n_.f : n_.f);
    Tensor activated;
    {
      ModuleScope scope(module, "none");
      if (model_.swiglu)
        activated = call("syssim::swiglu", {hidden})[0];
      else if (model_.activation == "squared_relu")
        activated = squared_relu(hidden);
      else
        activated = at::gelu(hidden);
    }
    return linear(module + ".linear_fc2", "row", activated, n_.h);
  }

  // NeMo's squared_relu (nemo/collections/llm/fn/activation.py): torch.pow(relu(x), 2), run
  // eagerly as two kernels; autograd's PowBackward0 is aten::pow(r, 1) and two aten::mul.
  static Tensor squared_relu(const Tensor& x) { return at::pow(call("syssim::relu", {x})[0], 2); }

  const ModelConfig& model_;
  const AxisSizes n_;
  Recorder& recorder_;
  Tensor word_embeddings_;
};

}  // namespace

void run_training_step(const ModelConfig& model, const AxisSizes& sizes, Recorder& recorder) {
  Tensor loss = TrainingStep(model, sizes, recorder).loss();
  ModuleScope scope("loss", "none");  // for the seed gradient, which no forward op produces
  recorder.backward(loss);
}

}  // namespace syssim::trace_detail
