// Tests of the trace stage: symbolic shapes, parameter counts and FLOPs worked out by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "common/error.hpp"
#include "common/symbol.hpp"
#include "trace/op_rules.hpp"
#include "trace/recorder.hpp"
#include "trace/trace.hpp"
#include "trace_builder.hpp"

namespace syssim {
namespace {

ModelConfig llama3_8b() { return testing::dense_model("llama3-8b", 32, 4096, 32, 8, 14336, 8192, 128256); }

ModelConfig gpt3_175b() {
  return testing::megatron_gpt(testing::dense_model("gpt3-175b", 96, 12288, 96, 96, 49152, 2048, 50257));
}

// NeMo's Nemotron4Config15B (nemo/collections/llm/gpt/model/nemotron.py): LayerNorm, squared-ReLU
// MLP, RoPE, GQA with 8 groups, no biases, untied; the 256000-token vocabulary of the paper.
ModelConfig nemotron4_15b() {
  ModelConfig m = testing::dense_model("nemotron4-15b", 32, 6144, 48, 8, 24576, 4096, 256000);
  m.swiglu = false;
  m.activation = "squared_relu";
  m.normalization = "LayerNorm";
  return m;
}

// A small GPT with Megatron's unfused attention path.
ModelConfig small_unfused_gpt() {
  ModelConfig m = gpt3_175b();
  m.name = "gpt-small-unfused";
  m.num_layers = 3;
  m.hidden_size = 768;
  m.num_attention_heads = 12;
  m.num_query_groups = 12;
  m.kv_channels = 64;
  m.ffn_hidden_size = 3072;
  m.seq_length = 1024;
  m.max_position_embeddings = 1024;
  m.attention_backend = "unfused";
  return m;
}

// Grouped-query attention on the unfused path, with q/k norms and q/k/v biases.
ModelConfig small_unfused_gqa() {
  ModelConfig m = llama3_8b();
  m.name = "gqa-small-unfused";
  m.num_layers = 2;
  m.qk_layernorm = true;
  m.add_qkv_bias = true;
  m.tie_word_embeddings = true;
  m.attention_backend = "unfused";
  return m;
}

// Megatron-Core's default dropout (NeMo's GPT configs keep it).
ModelConfig with_dropout(ModelConfig m) {
  m.hidden_dropout = 0.1;
  m.attention_dropout = 0.1;
  return m;
}

AxisValues with_batch(const TraceSection& trace, double b, double s) {
  AxisValues values = trace.axes;
  values["b"] = b;
  values["s"] = s;
  return values;
}

double parameter_count(const TraceSection& trace) {
  double total = 0;
  for (const TraceTensor& t : trace.tensors)
    if (t.role == TensorRole::param) total += numel(t.dims).evaluate(trace.axes, "param " + t.param);
  return total;
}

const TraceOp& find_op(const TraceSection& trace, const std::string& module, const std::string& name,
                       const std::string& phase) {
  for (const TraceOp& op : trace.ops)
    if (op.module == module && op.name == name && to_string(op.phase) == phase) return op;
  throw std::runtime_error("no " + phase + " op " + name + " in " + module);
}

class LlamaTrace : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { trace_ = new TraceSection(trace_model(llama3_8b())); }
  static void TearDownTestSuite() { delete trace_; }
  static const TraceSection* trace_;
};
const TraceSection* LlamaTrace::trace_ = nullptr;

// The ops a stage treats apart by name (common/op_kinds.hpp) are known to their symbols; each
// name is one the tracer's rules know, or one syssim-shard inserts (the gradient norm, the copy
// of bf16 gradients to fp32, Transformer Engine's amax and casts, torchao's casts), so a misspelt
// entry cannot go unnoticed.
TEST(NamedOp, EachNameIsAnOpTheStagesMake) {
  const std::set<std::string> inserted = {"optimizer::grad_norm", "optimizer::copy_grads_to_fp32", "te::amax",
                                          "te::quantize",         "te::transpose",                   "torchao::quantize"};
  const std::vector<std::string> names = names_of<NamedOp>();
  for (size_t i = 1; i < names.size(); ++i) {
    EXPECT_EQ(Symbol(names[i]).named_op(), static_cast<NamedOp>(i)) << names[i];
    EXPECT_TRUE(inserted.count(names[i]) || trace_detail::find_op_rule(names[i])) << names[i];
  }
  EXPECT_EQ(Symbol("aten::mm").named_op(), NamedOp::other);
  EXPECT_EQ(Symbol("syssim::linear_").named_op(), NamedOp::other);
  EXPECT_EQ(Symbol().named_op(), NamedOp::other);
}

TEST_F(LlamaTrace, ParameterCountIsTheClosedForm) {
  const double h = 4096, heads = 32, groups = 8, d = 128, f = 14336, v = 128256, layers = 32;
  const double per_layer = h * heads * d         // q
                           + 2 * h * groups * d  // k, v
                           + heads * d * h       // attention output projection
                           + 3 * h * f           // gate, up, down
                           + 2 * h;              // two RMSNorms
  const double closed_form = 2 * v * h + layers * per_layer + h;
  EXPECT_EQ(closed_form, 8030261248.0);
  EXPECT_EQ(parameter_count(*trace_), closed_form);
}

TEST_F(LlamaTrace, AxesAreTheArchitecture) {
  const AxisValues expected = {{"h", 4096}, {"g", 8}, {"r", 4}, {"d", 128}, {"f", 14336}, {"v", 128256}, {"p", 8192}};
  EXPECT_EQ(trace_->axes, expected);
}

TEST_F(LlamaTrace, EveryLayerHasTheSameOps) {
  std::map<std::pair<int64_t, std::string>, int> per_layer;
  for (const TraceOp& op : trace_->ops)
    if (op.layer) ++per_layer[{*op.layer, to_string(op.phase)}];
  ASSERT_EQ(per_layer.size(), 64u);
  for (int64_t layer = 0; layer < 32; ++layer) {
    // fwd: 2 norms, qkv, 2 rope, attention, proj, 2 residual adds, fc1, swiglu, fc2.
    EXPECT_EQ((per_layer[{layer, "fwd"}]), 12) << "layer " << layer;
    // bwd: dgrad + wgrad for 4 GEMMs, 2 norms, 2 rope, attention, swiglu, 2 gradient accumulations.
    EXPECT_EQ((per_layer[{layer, "bwd"}]), 16) << "layer " << layer;
  }
}

TEST_F(LlamaTrace, RmsNormKeepsItsFp32ReciprocalStandardDeviation) {
  const TraceOp& norm = find_op(*trace_, "decoder.layers.0.pre_mlp_layernorm", "syssim::rms_norm", "fwd");
  ASSERT_EQ(norm.outputs.size(), 2u);
  EXPECT_EQ(norm.outputs[1].dtype, "fp32");
  EXPECT_EQ(dims_to_strings(norm.outputs[1].dims), (std::vector<std::string>{"s", "b"}));
}

TEST_F(LlamaTrace, Fc1IsAColumnParallelGemmOverTheFusedGateAndUp) {
  const TraceOp& fc1 = find_op(*trace_, "decoder.layers.0.mlp.linear_fc1", "syssim::linear", "fwd");
  EXPECT_EQ(fc1.kind, OpKind::gemm);
  EXPECT_EQ(fc1.tp_role, TpRole::column);
  EXPECT_EQ(fc1.layer, 0);
  ASSERT_EQ(fc1.inputs.size(), 2u);
  EXPECT_EQ(dims_to_strings(fc1.inputs[0].dims), (std::vector<std::string>{"s", "b", "h"}));
  EXPECT_EQ(dims_to_strings(fc1.inputs[1].dims), (std::vector<std::string>{"2*f", "h"}));
  const AxisValues at = with_batch(*trace_, 1, 8192);
  EXPECT_EQ(fc1.flops.evaluate(at, "fc1"), 2.0 * 8192 * 4096 * 28672);
  // bf16 reads of x and the weight plus the write of the output.
  EXPECT_EQ(fc1.bytes.evaluate(at, "fc1"), 2.0 * (8192.0 * 4096 + 28672.0 * 4096 + 8192.0 * 28672));
}

TEST_F(LlamaTrace, BackwardOpsPointAtTheirForwardOp) {
  const TraceOp& fc2 = find_op(*trace_, "decoder.layers.5.mlp.linear_fc2", "syssim::linear", "fwd");
  const TraceOp& dgrad = find_op(*trace_, "decoder.layers.5.mlp.linear_fc2", "syssim::linear_dgrad", "bwd");
  const TraceOp& wgrad = find_op(*trace_, "decoder.layers.5.mlp.linear_fc2", "syssim::linear_wgrad", "bwd");
  EXPECT_EQ(dgrad.fwd_op, fc2.id);
  EXPECT_EQ(wgrad.fwd_op, fc2.id);
  EXPECT_EQ(dgrad.tp_role, TpRole::row);
  EXPECT_EQ(dgrad.flops.to_string(), fc2.flops.to_string());
  for (const TraceOp& op : trace_->ops) {
    if (op.phase == OpPhase::fwd) {
      EXPECT_FALSE(op.fwd_op) << op.id;
    }
    if (!op.fwd_op) continue;
    const TraceOp& forward = trace_->ops.at(*op.fwd_op);
    EXPECT_EQ(forward.phase, OpPhase::fwd);
    EXPECT_EQ(forward.module, op.module);
  }
}

TEST_F(LlamaTrace, FlashAttentionCountsHalfTheCausalBlocks) {
  const TraceOp& fwd = find_op(*trace_, "decoder.layers.0.self_attention.core_attention", "syssim::flash_attn", "fwd");
  const TraceOp& bwd =
      find_op(*trace_, "decoder.layers.0.self_attention.core_attention", "syssim::flash_attn_backward", "bwd");
  const AxisValues at = with_batch(*trace_, 2, 4096);
  const double forward = 4.0 * 2 * 4096 * 4096 * 32 * 128 / 2;
  EXPECT_EQ(fwd.flops.evaluate(at, "fwd"), forward);
  EXPECT_EQ(bwd.flops.evaluate(at, "bwd"), 2.5 * forward);
}

TEST_F(LlamaTrace, DepsAreEarlierWritersOfTheInputs) {
  std::map<int64_t, int64_t> last_writer;
  for (const TraceOp& op : trace_->ops) {
    std::set<int64_t> expected;
    for (const TensorRef& input : op.inputs)
      if (last_writer.count(input.tensor)) expected.insert(last_writer[input.tensor]);
    EXPECT_EQ(op.deps, std::vector<int64_t>(expected.begin(), expected.end())) << "op " << op.id;
    for (const TensorRef& output : op.outputs) last_writer[output.tensor] = op.id;
  }
}

TEST_F(LlamaTrace, EveryParameterHasAGradientOfItsShape) {
  std::map<std::string, std::vector<std::string>> params, grads;
  for (const TraceTensor& t : trace_->tensors) {
    if (t.role == TensorRole::param) params[t.param] = dims_to_strings(t.dims);
    if (t.role == TensorRole::grad) grads[t.param] = dims_to_strings(t.dims);
  }
  EXPECT_EQ(params.size(),
            2 + 32 * 8 + 1u);  // embedding, output; per layer q, k, v, proj, fc1, fc2, 2 norms; final norm
  EXPECT_EQ(grads, params);
  EXPECT_EQ(params["decoder.layers.3.self_attention.linear_qkv.weight_k"], (std::vector<std::string>{"d*g", "h"}));
}

TEST(Trace, Gpt3ParameterCountIsWithinHalfAPercentOf175B) {
  TraceSection trace = trace_model(gpt3_175b());
  const double layers = 96, h = 12288, v = 50257, p = 2048;
  const double closed_form = 12 * layers * h * h + 13 * layers * h + (v + p) * h + 2 * h;
  EXPECT_EQ(trace.axes.at("v"), v);
  EXPECT_EQ(parameter_count(trace), closed_form);
  EXPECT_LT(std::fabs(closed_form - 175e9) / 175e9, 0.005);
  for (const TraceTensor& t : trace.tensors) EXPECT_NE(t.param, "output_layer.weight");  // tied
}

TEST(Trace, SameModelGivesIdenticalTrace) {
  EXPECT_EQ(to_json(trace_model(small_unfused_gpt())).dump(), to_json(trace_model(small_unfused_gpt())).dump());
}

std::vector<int64_t> evaluate(const Dims& dims, const AxisValues& at, const std::string& where) {
  std::vector<int64_t> shape;
  for (const Poly& dim : dims) shape.push_back(static_cast<int64_t>(dim.evaluate(at, where)));
  return shape;
}

// trace_model factors sizes traced at small primes into axes: tracing at real sizes must give the
// same ops with the symbolic shapes evaluated.
void expect_symbolic_matches_concrete(const ModelConfig& model, int64_t b, int64_t s) {
  const TraceSection symbolic = trace_model(model);
  std::map<std::string, int64_t> sizes = {{"b", b}, {"s", s}};
  for (const auto& [axis, value] : symbolic.axes) sizes[axis] = static_cast<int64_t>(value);
  const ConcreteTrace concrete = trace_concrete(model, sizes);
  const AxisValues at = with_batch(symbolic, b, s);

  ASSERT_EQ(concrete.ops.size(), symbolic.ops.size());
  for (size_t i = 0; i < concrete.ops.size(); ++i) {
    const ConcreteOp& c = concrete.ops[i];
    const TraceOp& op = symbolic.ops[i];
    const std::string where = model.name + " op " + std::to_string(i) + " " + c.name;
    ASSERT_EQ(c.name, op.name) << where;
    EXPECT_EQ(c.module, op.module) << where;
    EXPECT_EQ(c.deps, op.deps) << where;
    EXPECT_EQ(c.fwd_op, op.fwd_op) << where;
    ASSERT_EQ(c.inputs.size(), op.inputs.size()) << where;
    ASSERT_EQ(c.outputs.size(), op.outputs.size()) << where;
    for (size_t k = 0; k < c.inputs.size(); ++k) {
      EXPECT_EQ(c.inputs[k].tensor, op.inputs[k].tensor) << where;
      EXPECT_EQ(c.inputs[k].shape, evaluate(op.inputs[k].dims, at, where)) << where << " input " << k;
    }
    for (size_t k = 0; k < c.outputs.size(); ++k)
      EXPECT_EQ(c.outputs[k].shape, evaluate(op.outputs[k].dims, at, where)) << where << " output " << k;
  }
  ASSERT_EQ(concrete.tensors.size(), symbolic.tensors.size());
  for (size_t i = 0; i < concrete.tensors.size(); ++i) {
    EXPECT_EQ(concrete.tensors[i].role, symbolic.tensors[i].role);
    EXPECT_EQ(concrete.tensors[i].shape, evaluate(symbolic.tensors[i].dims, at, "tensor"));
  }
}

TEST(Trace, SymbolicShapesAreExactForLlama) { expect_symbolic_matches_concrete(llama3_8b(), 2, 4096); }

TEST(Trace, SymbolicShapesAreExactForUnfusedGpt) { expect_symbolic_matches_concrete(small_unfused_gpt(), 2, 1024); }

TEST(Trace, SymbolicShapesAreExactForUnfusedGroupedQueryAttention) {
  expect_symbolic_matches_concrete(small_unfused_gqa(), 3, 512);
}

TEST(Trace, SymbolicShapesAreExactWithDropout) {
  expect_symbolic_matches_concrete(with_dropout(small_unfused_gpt()), 2, 1024);
  ModelConfig flash = with_dropout(small_unfused_gpt());
  flash.attention_backend = "flash";
  expect_symbolic_matches_concrete(flash, 3, 512);
}

std::vector<const TraceOp*> ops_named(const TraceSection& trace, const std::string& name,
                                      std::optional<int64_t> layer) {
  std::vector<const TraceOp*> found;
  for (const TraceOp& op : trace.ops)
    if (op.name == name && op.layer == layer) found.push_back(&op);
  return found;
}

TEST(Trace, DropoutKeepsAOneByteMaskForBackward) {
  TraceSection trace = trace_model(with_dropout(small_unfused_gpt()));
  std::vector<const TraceOp*> forward = ops_named(trace, "syssim::dropout", 1);
  std::vector<const TraceOp*> backward = ops_named(trace, "syssim::dropout_backward", 1);
  // On the attention probabilities, after attention and after the MLP (bias-dropout-add).
  ASSERT_EQ(forward.size(), 3u);
  ASSERT_EQ(backward.size(), 3u);
  std::vector<std::string> modules, mask_dims;
  for (const TraceOp* op : forward) {
    modules.push_back(op->module);
    ASSERT_EQ(op->outputs.size(), 2u);
    EXPECT_EQ(op->outputs[1].dtype, "bool");
    mask_dims.push_back(numel(op->outputs[1].dims).to_string());
  }
  EXPECT_EQ(modules, (std::vector<std::string>{"decoder.layers.1.self_attention.core_attention",
                                               "decoder.layers.1.self_attn_bda", "decoder.layers.1.mlp_bda"}));
  EXPECT_EQ(mask_dims, (std::vector<std::string>{"b*g*s^2", "b*h*s", "b*h*s"}));
  // Each backward reads its forward's mask, not the dropped-out tensor.
  for (const TraceOp* op : backward) {
    const TraceOp& fwd = trace.ops.at(*op->fwd_op);
    ASSERT_EQ(op->inputs.size(), 2u);
    EXPECT_EQ(op->inputs[1].tensor, fwd.outputs[1].tensor);
  }
  // The embedding's output is dropped out too (Megatron's embedding_dropout).
  EXPECT_EQ(ops_named(trace, "syssim::dropout", std::nullopt).size(), 1u);
}

TEST(Trace, FlashAttentionRegeneratesItsDropoutMask) {
  ModelConfig flash = with_dropout(small_unfused_gpt());
  flash.attention_backend = "flash";
  EXPECT_EQ(ops_named(trace_model(flash), "syssim::dropout", 0).size(), 2u);
  EXPECT_TRUE(ops_named(trace_model(small_unfused_gpt()), "syssim::dropout", 0).empty());  // p = 0
}

TEST(Trace, NormsKeepTheirFp32StatisticsForBackward) {
  TraceSection trace = trace_model(small_unfused_gpt());
  const TraceOp& norm = find_op(trace, "decoder.layers.0.input_layernorm", "syssim::layer_norm", "fwd");
  const TraceOp& grad = find_op(trace, "decoder.layers.0.input_layernorm", "syssim::layer_norm_backward", "bwd");
  ASSERT_EQ(norm.outputs.size(), 3u);  // output, mean, reciprocal standard deviation
  for (size_t i : {1, 2}) {
    EXPECT_EQ(norm.outputs[i].dtype, "fp32");
    EXPECT_EQ(dims_to_strings(norm.outputs[i].dims), (std::vector<std::string>{"s", "b"}));
  }
  std::set<int64_t> read;
  for (const TensorRef& r : grad.inputs) read.insert(r.tensor);
  EXPECT_TRUE(read.count(norm.outputs[1].tensor) && read.count(norm.outputs[2].tensor));
}

TEST(Trace, CrossEntropyKeepsAnFp32SoftmaxInsteadOfTheLogits) {
  TraceSection trace = trace_model(small_unfused_gpt());
  const TraceOp& loss = find_op(trace, "loss", "syssim::cross_entropy", "fwd");
  const TraceOp& grad = find_op(trace, "loss", "syssim::cross_entropy_backward", "bwd");
  ASSERT_EQ(loss.outputs.size(), 2u);
  EXPECT_EQ(loss.outputs[1].dtype, "fp32");
  EXPECT_EQ(dims_to_strings(loss.outputs[1].dims), (std::vector<std::string>{"s", "b", "v"}));
  EXPECT_EQ(grad.inputs[1].tensor, loss.outputs[1].tensor);
  for (const TensorRef& r : grad.inputs) EXPECT_NE(r.tensor, loss.inputs[0].tensor);  // the bf16 logits die
  EXPECT_EQ(grad.outputs[0].dtype, "bf16");  // the gradient in the logits' dtype
  // Read 2 bytes and write 4 per logit (plus 4 per token for the loss); backward reads 4, writes 2.
  const AxisValues at = with_batch(trace, 1, 1024);
  const double logits = 1024.0 * 50257;
  EXPECT_EQ(loss.bytes.evaluate(at, "loss"), logits * 6 + 1024 * (8 + 4));
  EXPECT_EQ(grad.bytes.evaluate(at, "grad"), logits * 6 + 1024 * (4 + 8));
}

TEST(Trace, UnfusedGroupedQueryAttentionCopiesKeysAndValues) {
  TraceSection trace = trace_model(small_unfused_gqa());
  int copies = 0, batched_matmuls = 0;
  for (const TraceOp& op : trace.ops) {
    if (op.layer != 0 || op.phase != OpPhase::fwd) continue;
    if (op.name == "aten::clone") ++copies;  // k, v to g*r heads; the context back to [s, b, ...]
    if (op.name == "aten::bmm") ++batched_matmuls;
  }
  EXPECT_EQ(copies, 3);
  EXPECT_EQ(batched_matmuls, 2);
}

// The ops of layer 0's core attention in one phase, in order.
std::vector<const TraceOp*> core_attention_ops(const TraceSection& trace, OpPhase phase) {
  std::vector<const TraceOp*> found;
  for (const TraceOp& op : trace.ops)
    if (op.module == "decoder.layers.0.self_attention.core_attention" && op.phase == phase) found.push_back(&op);
  return found;
}

std::vector<std::string> names_of(const std::vector<const TraceOp*>& ops) {
  std::vector<std::string> names;
  for (const TraceOp* op : ops) names.push_back(op->name);
  return names;
}

TEST(Trace, FusedSoftmaxKernelRunsWhereMegatronsShapeConditionsHold) {
  ModelConfig m = small_unfused_gpt();
  for (int64_t seq : {20, 2048, 4096}) EXPECT_TRUE(runs_fused_softmax_kernel(m, seq)) << seq;
  for (int64_t seq : {16, 2050, 4100, 8192}) EXPECT_FALSE(runs_fused_softmax_kernel(m, seq)) << seq;
  m.masked_softmax_fusion = false;
  EXPECT_FALSE(runs_fused_softmax_kernel(m, 2048));
  m.attention_backend = "flash";
  m.masked_softmax_fusion = true;
  EXPECT_FALSE(runs_fused_softmax_kernel(m, 2048));
}

TEST(Trace, UnfusedAttentionKeepsTheFusedSoftmaxUpTo4096Keys) {
  ModelConfig m = small_unfused_gpt();
  m.seq_length = m.max_position_embeddings = 4096;
  TraceSection trace = trace_model(m);
  EXPECT_EQ(names_of(core_attention_ops(trace, OpPhase::fwd)),
            (std::vector<std::string>{"aten::bmm", "syssim::scale_mask_softmax", "aten::bmm", "aten::clone"}));
  EXPECT_TRUE(ops_named(trace, "aten::_softmax", 0).empty());
}

// Multi-latent attention on the unfused path, as Transformer Engine's UnfusedDotProductAttention
// runs it where no fused kernel takes MLA's head dimensions: the scores over the query/key head
// dimension (no-RoPE part + RoPE part), the context over the value head dimension.
ModelConfig small_unfused_mla() {
  ModelConfig m = small_unfused_gpt();
  m.name = "mla-small-unfused";
  m.rope = true;
  m.add_bias_linear = false;
  m.swiglu = true;
  m.normalization = "RMSNorm";
  m.multi_latent_attention = true;
  m.q_lora_rank = 96;
  m.kv_lora_rank = 64;
  m.qk_head_dim = 48;
  m.qk_pos_emb_head_dim = 16;
  m.v_head_dim = 32;
  m.kv_channels = m.qk_head_dim + m.qk_pos_emb_head_dim;
  return m;
}

TEST(Trace, SymbolicShapesAreExactForUnfusedMultiLatentAttention) {
  expect_symbolic_matches_concrete(small_unfused_mla(), 2, 1024);
}

TEST(Trace, UnfusedMultiLatentAttentionMultipliesOverEachHeadDimension) {
  TraceSection trace = trace_model(small_unfused_mla());
  std::vector<const TraceOp*> fwd = core_attention_ops(trace, OpPhase::fwd);
  ASSERT_EQ(names_of(fwd), (std::vector<std::string>{"aten::bmm", "syssim::scale_mask_softmax", "aten::bmm", "aten::clone"}));
  // b = 2, s = 1024, 12 heads: scores 2 b h s^2 (16 + 48), context 2 b h s^2 32.
  const AxisValues at = with_batch(trace, 2, 1024);
  const double per_head_dim = 2.0 * 2 * 12 * 1024 * 1024;
  EXPECT_EQ(fwd[0]->flops.evaluate(at, "scores"), per_head_dim * 64);
  EXPECT_EQ(fwd[2]->flops.evaluate(at, "context"), per_head_dim * 32);
  EXPECT_EQ(numel(fwd[3]->outputs[0].dims).evaluate(at, "context"), 1024.0 * 2 * 12 * 32);
}

// Past 4096 keys (or with masked_softmax_fusion off) Megatron runs forward_torch_softmax: the
// scores cast to fp32, the causal mask filled in place, softmax, the cast back to bf16.
TEST(Trace, UnfusedAttentionPastTheFusedKernelRunsPyTorchsFp32Softmax) {
  ModelConfig m = small_unfused_gpt();
  m.seq_length = m.max_position_embeddings = 8192;
  TraceSection trace = trace_model(m);
  std::vector<const TraceOp*> fwd = core_attention_ops(trace, OpPhase::fwd);
  std::vector<const TraceOp*> bwd = core_attention_ops(trace, OpPhase::bwd);
  EXPECT_EQ(names_of(fwd), (std::vector<std::string>{"aten::bmm", "aten::_to_copy", "aten::masked_fill_",
                                                     "aten::_softmax", "aten::_to_copy", "aten::bmm", "aten::clone"}));
  EXPECT_EQ(names_of(bwd), (std::vector<std::string>{"aten::bmm", "aten::bmm", "aten::_to_copy",
                                                     "aten::_softmax_backward_data", "aten::masked_fill",
                                                     "aten::_to_copy", "aten::bmm", "aten::bmm"}));
  ASSERT_EQ(fwd.size(), 7u);
  ASSERT_EQ(bwd.size(), 8u);
  // Bytes at b = 2, 12 heads, s = 8192: n scores of [b, heads, s, s], 2 bytes in bf16 and 4
  // in fp32, and the one-byte [s, s] causal mask.
  const AxisValues at = with_batch(trace, 2, 8192);
  const double s = 8192, n = 2 * 12 * s * s, mask = s * s;
  auto bytes = [&](const TraceOp* op) { return op->bytes.evaluate(at, op->name); };
  EXPECT_EQ(bytes(fwd[1]), 2 * n + 4 * n);         // bf16 scores read, fp32 copy written
  EXPECT_EQ(bytes(fwd[2]), 4 * n + mask + 4 * n);  // in place: read with the mask, written back
  EXPECT_EQ(bytes(fwd[3]), 4 * n + 4 * n);         // fp32 in, fp32 out
  EXPECT_EQ(bytes(fwd[4]), 4 * n + 2 * n);         // back to bf16
  EXPECT_EQ(bytes(bwd[2]), 2 * n + 4 * n);         // the bf16 gradient to fp32
  EXPECT_EQ(bytes(bwd[3]), 4 * n + 4 * n + 4 * n);  // gradient and saved output in, gradient out
  EXPECT_EQ(bytes(bwd[4]), 4 * n + mask + 4 * n);
  EXPECT_EQ(bytes(bwd[5]), 4 * n + 2 * n);
  EXPECT_EQ(fwd[3]->outputs[0].dtype, "fp32");
  // The softmax backward reads the fp32 output autograd saved; the mask's backward the mask.
  EXPECT_EQ(bwd[3]->inputs[1].tensor, fwd[3]->outputs[0].tensor);
  EXPECT_EQ(bwd[4]->inputs[1].tensor, fwd[2]->inputs[1].tensor);
  EXPECT_EQ(*bwd[3]->fwd_op, fwd[3]->id);
}

TEST(Trace, MaskedSoftmaxFusionOffRunsPyTorchsSoftmaxAtAnyLength) {
  ModelConfig m = small_unfused_gpt();
  m.masked_softmax_fusion = false;
  TraceSection trace = trace_model(m);
  EXPECT_EQ(ops_named(trace, "aten::_softmax", 0).size(), 1u);
  EXPECT_TRUE(ops_named(trace, "syssim::scale_mask_softmax", 0).empty());
  expect_symbolic_matches_concrete(with_dropout(m), 2, 256);
}

// With the fusions off (torchtitan's eager Llama), the forward of the RMSNorm is PyTorch's
// chain: cast to fp32, square, mean, + epsilon, reciprocal root, scale, cast back, weight. At
// b = 2, s = 4096, h = 4096 (n elements of [s, b, h], r = n / h rows) its bytes are the cast's
// 2n + 4n, the square's 4n + 4n, the mean's 4n + 4r, the epsilon's 4r + 4r, the root's 4r + 4r,
// the scaling's 4n + 4r + 4n, the cast back's 4n + 2n and the weight's 2n + 2h + 2n: 36n + 24r
// + 2h, where the fused kernel reads x and writes y, 4n.
TEST(Trace, UnfusedKernelsRunPyTorchsEagerChains) {
  ModelConfig m = llama3_8b();
  m.rms_norm_fusion = m.apply_rope_fusion = m.bias_swiglu_fusion = false;
  const TraceSection trace = trace_model(m);
  for (const char* fused : {"syssim::rms_norm", "syssim::rope", "syssim::swiglu"})
    EXPECT_TRUE(ops_named(trace, fused, 0).empty()) << fused;
  EXPECT_EQ(ops_named(trace, "aten::silu", 0).size(), 1u);
  EXPECT_EQ(ops_named(trace, "syssim::rotate_half", 0).size(), 2u);  // queries and keys
  const AxisValues at = with_batch(trace, 2, 4096);
  const double h = 4096, n = 2 * 4096 * h, r = n / h;
  double forward_bytes = 0;
  std::vector<std::string> names;
  for (const TraceOp& op : trace.ops)
    if (op.layer == 0 && op.phase == OpPhase::fwd && op.module.str() == "decoder.layers.0.input_layernorm") {
      forward_bytes += op.bytes.evaluate(at, op.name);
      names.push_back(op.name);
    }
  EXPECT_EQ(names, (std::vector<std::string>{"aten::_to_copy", "aten::pow", "aten::mean", "aten::add", "aten::rsqrt",
                                             "aten::mul", "aten::_to_copy", "aten::mul"}));
  EXPECT_EQ(forward_bytes, 36 * n + 24 * r + 2 * h);
  expect_symbolic_matches_concrete(m, 2, 4096);
}

// torchtitan's Llama: wq, wk, wv and w1, w3 separate linears, column-parallel each. A layer
// keeps the fused model's parameters and GEMM FLOPs (2 x tokens x h x (q + 2 kv + o + 3 f)
// forward), now as seven GEMMs: q, k, v, projection, gate, up, down.
TEST(Trace, ProjectionFusionOffSplitsQkvAndTheGateIntoSeparateLinears) {
  ModelConfig m = llama3_8b();
  m.projection_fusion = false;
  const TraceSection trace = trace_model(m);
  EXPECT_EQ(parameter_count(trace), parameter_count(trace_model(llama3_8b())));
  const double h = 4096, kv = 8 * 128, f = 14336, tokens = 2 * 4096;
  const AxisValues at = with_batch(trace, 2, 4096);
  std::vector<std::string> modules;
  double flops = 0;
  for (const TraceOp& op : trace.ops)
    if (op.layer == 0 && op.phase == OpPhase::fwd && op.kind == OpKind::gemm) {
      modules.push_back(op.module.str());
      flops += op.flops.evaluate(at, op.name);
      EXPECT_EQ(op.name, "syssim::linear") << op.module.str();
    }
  const std::string layer = "decoder.layers.0.";
  EXPECT_EQ(modules, (std::vector<std::string>{
                         layer + "self_attention.linear_q", layer + "self_attention.linear_k",
                         layer + "self_attention.linear_v", layer + "self_attention.linear_proj",
                         layer + "mlp.linear_fc1_gate", layer + "mlp.linear_fc1_up", layer + "mlp.linear_fc2"}));
  EXPECT_EQ(flops, 2 * tokens * h * (h + 2 * kv + h + 3 * f));
  EXPECT_EQ(find_op(trace, layer + "self_attention.linear_k", "syssim::linear", "fwd").tp_role, TpRole::column);
  // SiLU of the gate times the up projection: one kernel with the fusion, two without.
  EXPECT_EQ(ops_named(trace, "syssim::silu_mul", 0).size(), 1u);
  m.bias_swiglu_fusion = false;
  const TraceSection eager = trace_model(m);
  EXPECT_TRUE(ops_named(eager, "syssim::silu_mul", 0).empty());
  EXPECT_EQ(ops_named(eager, "aten::silu", 0).size(), 1u);
  expect_symbolic_matches_concrete(m, 2, 4096);
}

// torch.nn.functional.cross_entropy of the logits cast to fp32 (torchtitan's loss): the fp32
// copy, the log-softmax autograd keeps (fp32), the NLL; backward the NLL's whole fp32 [s, b, v]
// gradient, the log-softmax's and the cast back to bf16.
TEST(Trace, TorchCrossEntropyKeepsTheFp32LogSoftmaxAndWritesFp32Gradients) {
  ModelConfig m = small_unfused_gpt();
  m.cross_entropy = "torch_fp32";
  const TraceSection trace = trace_model(m);
  std::vector<std::string> forward, backward;
  for (const TraceOp& op : trace.ops)
    if (op.module == "loss") (op.phase == OpPhase::fwd ? forward : backward).push_back(op.name + " " + op.outputs[0].dtype);
  EXPECT_EQ(forward, (std::vector<std::string>{"aten::_to_copy fp32", "aten::_log_softmax fp32",
                                               "syssim::nll_loss fp32", "aten::sum fp32"}));
  EXPECT_EQ(backward, (std::vector<std::string>{"aten::fill_ fp32", "syssim::nll_loss_backward fp32",
                                                "aten::_log_softmax_backward_data fp32", "aten::_to_copy bf16"}));
  const TraceOp& log_softmax = find_op(trace, "loss", "aten::_log_softmax", "fwd");
  const TraceOp& grad = find_op(trace, "loss", "aten::_log_softmax_backward_data", "bwd");
  EXPECT_EQ(grad.inputs[1].tensor, log_softmax.outputs[0].tensor);
  EXPECT_EQ(dims_to_strings(find_op(trace, "loss", "syssim::nll_loss_backward", "bwd").outputs[0].dims),
            (std::vector<std::string>{"s", "b", "v"}));
  EXPECT_EQ(find_op(trace, "loss", "syssim::nll_loss", "fwd").tp_role, TpRole::vocab_loss);
  expect_symbolic_matches_concrete(m, 2, 1024);
}

TEST(Trace, Nemotron4ParameterCountIsThePublishedSplit) {
  // Nemotron-4 15B (arXiv 2402.16819, Section 2): 3.2B embedding and 12.5B non-embedding parameters.
  const double h = 6144, heads = 48, groups = 8, d = 128, f = 24576, v = 256000, layers = 32;
  const double per_layer = h * heads * d + 2 * h * groups * d + heads * d * h  // q, k, v, projection
                           + 2 * h * f                                          // fc1, fc2: not gated
                           + 2 * 2 * h;                                         // two LayerNorms
  const double embedding = 2 * v * h, non_embedding = layers * per_layer + 2 * h;
  EXPECT_EQ(parameter_count(trace_model(nemotron4_15b())), embedding + non_embedding);
  EXPECT_NEAR(embedding / 1e9, 3.2, 0.1);
  EXPECT_NEAR(non_embedding / 1e9, 12.5, 0.05);
}

// Two layers of Nemotron-4 15B at real sizes: the same ops as the symbolic trace.
TEST(Trace, SymbolicShapesAreExactForSquaredRelu) {
  ModelConfig m = nemotron4_15b();
  m.num_layers = 2;
  expect_symbolic_matches_concrete(m, 2, 4096);
}

// The bytes per token of the activations a layer-0 MLP op writes in the forward pass and a
// backward op reads: what the MLP keeps for backward.
double mlp_bytes_kept_per_token(const TraceSection& trace) {
  const std::string mlp = "decoder.layers.0.mlp";
  std::set<int64_t> written_forward, kept;
  for (const TraceOp& op : trace.ops) {
    if (op.phase == OpPhase::fwd)
      for (const TensorRef& out : op.outputs) written_forward.insert(out.tensor);
    if (op.phase == OpPhase::bwd && op.module.starts_with(mlp))
      for (const TensorRef& in : op.inputs)
        if (written_forward.count(in.tensor)) kept.insert(in.tensor);
  }
  const AxisValues at = with_batch(trace, 1, 1);
  double bytes = 0;
  for (int64_t t : kept) bytes += 2 * numel(trace.tensors.at(t).dims).evaluate(at, "kept");  // all bf16
  return bytes;
}

TEST(Trace, SquaredReluRunsAsNemoEagerKernelsAndKeepsTheReluOutput) {
  ModelConfig m = nemotron4_15b();
  m.num_layers = 1;
  TraceSection trace = trace_model(m);
  std::vector<std::string> forward, backward;
  for (const TraceOp& op : trace.ops)
    if (op.module == "decoder.layers.0.mlp") (op.phase == OpPhase::fwd ? forward : backward).push_back(op.name);
  // torch.pow(relu(x), 2); autograd: x^1 * 2 * grad (PowBackward0), then relu's threshold_backward.
  EXPECT_EQ(forward, (std::vector<std::string>{"syssim::relu", "aten::pow"}));
  EXPECT_EQ(backward, (std::vector<std::string>{"aten::pow", "aten::mul", "aten::mul", "syssim::relu_backward"}));
  const TraceOp& relu = find_op(trace, "decoder.layers.0.mlp", "syssim::relu", "fwd");
  const TraceOp& relu_grad = find_op(trace, "decoder.layers.0.mlp", "syssim::relu_backward", "bwd");
  EXPECT_EQ(relu_grad.inputs[1].tensor, relu.outputs[0].tensor);  // its output, not fc1's
  // fc1's input (2h), the ReLU output (2f, read by both backward kernels) and fc2's input (2f):
  // as much as a GELU MLP keeps (fc1's output instead of the ReLU's), Korthikanti's 2sbh + 16sbh.
  const double h = 6144, f = 24576;
  EXPECT_EQ(mlp_bytes_kept_per_token(trace), 2 * h + 4 * f);
  m.activation = "gelu";
  EXPECT_EQ(mlp_bytes_kept_per_token(trace_model(m)), 2 * h + 4 * f);
}

TEST(Trace, OpWithoutCostRuleFails) {
  trace_detail::Recorder recorder;
  {
    trace_detail::ModuleScope scope("decoder.layers.0.mlp", TpRole::none);
    at::exp(at::empty({2, 3}, at::TensorOptions().device(at::kMeta)));
  }
  try {
    recorder.finish();
    FAIL() << "expected a DataError";
  } catch (const DataError& e) {
    EXPECT_STREQ(e.what(), "no cost rule for aten op 'aten::exp' in module 'decoder.layers.0.mlp'");
  }
}

TEST(Trace, MissingAxisSizeFails) { EXPECT_THROW(trace_concrete(llama3_8b(), {{"b", 1}, {"s", 16}}), DataError); }

}  // namespace
}  // namespace syssim
