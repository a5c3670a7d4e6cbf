// Hand-built traces for the shard-stage tests: the records the tracer writes, made small
// enough that the expected numbers can be worked out by hand.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "trace/section.hpp"

namespace syssim::testing {

inline TensorRef ref(int64_t tensor, const std::vector<std::string>& dims, const std::string& dtype = "bf16") {
  return TensorRef{tensor, dims_from_strings(dims, "test"), dtype};
}

// A dense model with the given shape; the other fields keep their defaults (Llama-style:
// RMSNorm, SwiGLU, RoPE, untied, no biases, flash attention).
inline ModelConfig dense_model(const std::string& name, int64_t layers, int64_t hidden, int64_t heads, int64_t groups,
                               int64_t ffn, int64_t seq, int64_t vocab) {
  ModelConfig m;
  m.name = name;
  m.num_layers = layers;
  m.hidden_size = hidden;
  m.num_attention_heads = heads;
  m.num_query_groups = groups;
  m.kv_channels = hidden / heads;
  m.ffn_hidden_size = ffn;
  m.seq_length = seq;
  m.max_position_embeddings = seq;
  m.vocab_size = vocab;
  return m;
}

// GPT as Megatron trains it: LayerNorm, GELU, learned positions, biases, tied embeddings.
inline ModelConfig megatron_gpt(ModelConfig m) {
  m.swiglu = false;
  m.rope = false;
  m.tie_word_embeddings = true;
  m.normalization = "LayerNorm";
  m.add_bias_linear = true;
  return m;
}

// Appends tensors and ops of layer 0 in `module`, numbering them in order; the trace's axes
// are the model's architecture.
struct TraceBuilder {
  TraceBuilder(const ModelConfig& model, std::string op_module) : module(std::move(op_module)) {
    trace.axes = architecture_axes(model);
  }

  TraceSection trace;
  std::string module;

  void tensor(const std::vector<std::string>& dims, const std::string& role, const std::string& param = "") {
    trace.tensors.push_back(
        TraceTensor{static_cast<int64_t>(trace.tensors.size()), dims_from_strings(dims, "test"), "bf16", parse_enum<TensorRole>(role).value(), param});
  }

  void op(const std::string& name, const std::string& kind, const std::string& phase, const std::string& tp_role,
          std::vector<TensorRef> inputs, std::vector<TensorRef> outputs, const std::string& flops,
          const std::string& bytes, std::optional<int64_t> fwd_op = std::nullopt) {
    TraceOp o;
    o.id = static_cast<int64_t>(trace.ops.size());
    o.name = name;
    o.kind = parse_enum<OpKind>(kind).value();
    o.phase = parse_enum<OpPhase>(phase).value();
    o.layer = 0;
    o.module = module;
    o.tp_role = parse_enum<TpRole>(tp_role).value();
    o.inputs = std::move(inputs);
    o.outputs = std::move(outputs);
    o.fwd_op = fwd_op;
    o.flops = Poly::parse(flops, "test");
    o.bytes = Poly::parse(bytes, "test");
    trace.ops.push_back(std::move(o));
  }
};

// The buffers of a norm, a column-parallel fc1 and a row-parallel fc2, forward and backward:
// 0 x (norm input), 1 y (norm output), 2 w1 [f,h], 3 z [s,b,f], 4 w2 [h,f], 5 out, 6 grad out,
// 7 grad z, 8 grad w2, 9 grad y, 10 grad w1.
inline void add_mlp_tensors(TraceBuilder& t) {
  t.tensor({"s", "b", "h"}, "activation");
  t.tensor({"s", "b", "h"}, "activation");
  t.tensor({"f", "h"}, "param", "fc1.weight");
  t.tensor({"s", "b", "f"}, "activation");
  t.tensor({"h", "f"}, "param", "fc2.weight");
  t.tensor({"s", "b", "h"}, "activation");
  t.tensor({"s", "b", "h"}, "activation");
  t.tensor({"s", "b", "f"}, "activation");
  t.tensor({"h", "f"}, "grad", "fc2.weight");
  t.tensor({"s", "b", "h"}, "activation");
  t.tensor({"f", "h"}, "grad", "fc1.weight");
}

}  // namespace syssim::testing
