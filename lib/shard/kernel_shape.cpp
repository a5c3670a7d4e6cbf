// The shape of the kernel a traced op runs, on one rank (ShardOp::shape, docs/graph-format.md):
// what the calibrated cost estimator's features are made of. The operand layouts are those of
// the syssim:: ops (lib/trace/ops.cpp) and of aten's matmuls.
#include "shard/passes.hpp"

#include <algorithm>
#include <string_view>

#include "common/error.hpp"

namespace syssim {
namespace {

double value(const Poly& p, const AxisValues& axes, const std::string& where) { return p.evaluate(axes, where); }
double first(const TensorRef& ref, const AxisValues& axes, const std::string& where) {
  return value(ref.dims.front(), axes, where);
}
double last(const TensorRef& ref, const AxisValues& axes, const std::string& where) {
  return value(ref.dims.back(), axes, where);
}
double elements(const TensorRef& ref, const AxisValues& axes, const std::string& where) {
  return numel_at(ref.dims, axes, where);
}

std::string count_of(size_t n, std::string_view noun) {
  return std::to_string(n) + " " + std::string(noun) + (n == 1 ? "" : "s");
}

// One operand list of a traced op ("inputs" or "outputs") as a rule below reads it: the rule
// names how many operands it reads and how many dims of each; a traced op with fewer (an
// edited trace) is bad data that names the JSON path, not a read past the end.
class Operands {
 public:
  Operands(const TraceOp& op, std::string_view list, size_t count, const std::string& where)
      : op_(op), list_(list), refs_(list == "inputs" ? op.inputs : op.outputs), where_(where) {
    if (refs_.size() < count)
      throw DataError(path() + ": " + op.name + " needs " + count_of(count, list.substr(0, list.size() - 1)) +
                      ", got " + std::to_string(refs_.size()));
  }
  // Operand i, of at least `rank` dims.
  const TensorRef& operator()(size_t i, size_t rank) const {
    const TensorRef& ref = refs_[i];
    if (ref.dims.size() < rank)
      throw DataError(path() + "/" + std::to_string(i) + "/dims: " + op_.name + " needs at least " +
                      count_of(rank, "dim") + ", got " + std::to_string(ref.dims.size()));
    return ref;
  }
  size_t size() const { return refs_.size(); }

 private:
  std::string path() const { return where_ + "/" + std::string(list_); }

  const TraceOp& op_;
  std::string_view list_;  // a literal
  const std::vector<TensorRef>& refs_;
  const std::string& where_;  // the rule's: outlives the operands
};

// The experts' grouped GEMM: `groups` GEMMs of one local expert each, m x n reduced over k
// (the expert's tokens are m of the forward and dgrad GEMMs, k of the wgrad GEMM), with the
// tokens shared equally; syssim-shard then gives the busiest expert its share (docs/syssim-cost.md).
KernelShape grouped_gemm_shape(const TraceOp& op, const AxisValues& axes, double flops, const std::string& where) {
  const Operands in(op, "inputs", 2, where);
  double groups = 0, n = 0, k = 0, tokens = 0;
  const NamedOp name = op.name.named_op();
  if (name == NamedOp::grouped_linear) {  // x [T, K], weight [E, N, K] -> [T, N]
    const Dims& weight = in(1, 3).dims;
    groups = value(weight[0], axes, where);
    n = value(weight[1], axes, where);
    k = last(in(0, 1), axes, where);
  } else if (name == NamedOp::grouped_linear_dgrad) {  // grad [T, N], weight [E, N, K] -> [T, K]
    const Dims& weight = in(1, 3).dims;
    groups = value(weight[0], axes, where);
    n = value(weight[2], axes, where);
    k = value(weight[1], axes, where);
  } else {  // grad [T, N]^T x x [T, K] -> [E, N, K]: per expert an N x K output over its tokens
    groups = value(Operands(op, "outputs", 1, where)(0, 3).dims[0], axes, where);
    n = last(in(1, 1), axes, where);
    const double m = last(in(0, 1), axes, where);  // read, not divided out: a weight's dim is exact
    tokens = elements(in(1, 1), axes, where) / n / groups;
    if (groups <= 0 || n <= 0 || m <= 0 || tokens <= 0) return {};
    return {{"groups", groups}, {"m", m}, {"n", n}, {"k", tokens}};
  }
  if (groups <= 0 || n <= 0 || k <= 0) return {};
  return {{"groups", groups}, {"m", flops / (2 * n * k * groups)}, {"n", n}, {"k", k}};
}

// A GEMM's output is m x n with a reduction over k; m*n*k = flops/2, so each rule names the two
// sizes it can read off its operands and m follows. A rule reads the inputs its op's schema
// requires (lib/trace/ops.cpp): the count it gives Operands.
KernelShape gemm_shape(const TraceOp& op, const AxisValues& axes, double flops, const std::string& where) {
  auto inputs = [&](size_t count) { return Operands(op, "inputs", count, where); };
  double n = 0, k = 0;
  const NamedOp name = op.name.named_op();
  if (name == NamedOp::linear) {  // x [.., K], weight [N, K]
    const Operands in = inputs(2);
    n = first(in(1, 2), axes, where);
    k = last(in(0, 1), axes, where);
  } else if (name == NamedOp::linear_dgrad) {  // grad [.., N], weight [N, K] -> [.., K]
    const Operands in = inputs(2);
    n = last(in(1, 1), axes, where);
    k = last(in(0, 1), axes, where);
  } else if (name == NamedOp::linear_wgrad) {  // grad [T, N]^T x [T, K] -> [N, K]
    const Operands in = inputs(2);
    n = last(in(1, 1), axes, where);
    k = elements(in(1, 1), axes, where) / n;
  } else if (name == NamedOp::qkv_linear) {  // x [.., K], wq/wk/wv [N_i, K]
    const Operands in = inputs(4);
    for (int w = 1; w <= 3; ++w) n += first(in(w, 2), axes, where);
    k = last(in(0, 1), axes, where);
  } else if (name == NamedOp::qkv_linear_dgrad) {  // grads [.., N_i], weights [N_i, K] -> [.., K]
    const Operands in = inputs(6);
    n = last(in(3, 2), axes, where);
    for (int w = 3; w <= 5; ++w) k += first(in(w, 2), axes, where);
  } else if (name == NamedOp::qkv_linear_wgrad) {  // grads^T x x [T, K] -> [N_i, K]
    const Operands in = inputs(4);
    n = last(in(3, 1), axes, where);
    k = elements(in(3, 1), axes, where) / n;
  } else if (name == NamedOp::stacked_linear) {  // x [.., K], w1/w2 [N_i, K]
    const Operands in = inputs(3);
    n = first(in(1, 2), axes, where) + first(in(2, 2), axes, where);
    k = last(in(0, 1), axes, where);
  } else if (name == NamedOp::stacked_linear_dgrad) {  // grads [.., N_i], weights [N_i, K] -> [.., K]
    const Operands in = inputs(4);
    n = last(in(2, 2), axes, where);
    k = first(in(2, 2), axes, where) + first(in(3, 2), axes, where);
  } else if (name == NamedOp::stacked_linear_wgrad) {  // grads^T x x [T, K] -> [N_i, K]
    const Operands in = inputs(3);
    n = last(in(2, 1), axes, where);
    k = elements(in(2, 1), axes, where) / n;
  } else if (name == NamedOp::grouped_linear || name == NamedOp::grouped_linear_dgrad ||
             name == NamedOp::grouped_linear_wgrad) {
    return grouped_gemm_shape(op, axes, flops, where);
  } else {  // aten::mm / bmm / baddbmm: [.., M, K] x [.., K, N]
    const Operands in = inputs(2);
    const Dims& right = in(in.size() - 1, 2).dims;
    n = value(right.back(), axes, where);
    k = value(right[right.size() - 2], axes, where);
  }
  if (n <= 0 || k <= 0) return {};
  return {{"m", flops / (2 * n * k)}, {"n", n}, {"k", k}};
}

// Flash attention's q is [s, b, heads, d] and k [s, b, kv_heads, d] (backward: after the
// output gradient; inputs q, k, v, or grad, q, k, v, out). The trace's attention is causal.
// A sliding window is taken as each query attending to the window's keys unmasked. A rank with
// less than one query group (tp above the groups) runs its kernel on one whole KV head.
KernelShape attention_shape(const TraceOp& op, const AxisValues& axes, const std::string& where) {
  const bool backward = op.outputs.size() > 1;
  const bool window = op.name.named_op() == NamedOp::flash_attn_window ||
                      op.name.named_op() == NamedOp::flash_attn_window_backward;
  const size_t query = backward ? 1 : 0;
  const Operands in(op, "inputs", backward ? 5 : 3, where);
  const Dims& q = in(query, 4).dims;
  const Dims& k = in(query + 1, 4).dims;
  return {{"b", value(q[1], axes, where)},
          {"s_q", value(q[0], axes, where)},
          {"s_kv", value(window ? Poly::axis("x") : k[0], axes, where)},
          {"heads", value(q[2], axes, where)},
          {"kv_heads", std::max(1.0, value(k[2], axes, where))},
          {"head_dim", value(q[3], axes, where)},
          {"causal", window ? 0.0 : 1.0}};
}

// Row-wise kernels: rows x dim, dim the last (contiguous) dimension of the tensor they sweep.
KernelShape rows_shape(const TensorRef& ref, const AxisValues& axes, const std::string& where) {
  if (ref.dims.empty()) return {};
  double dim = last(ref, axes, where);
  return {{"rows", elements(ref, axes, where) / dim}, {"dim", dim}};
}

}  // namespace

KernelShape kernel_shape(const TraceOp& op, const AxisValues& axes, double flops, const std::string& where) {
  if (op.kind == OpKind::gemm) return gemm_shape(op, axes, flops, where);
  if (op.kind == OpKind::attention) return attention_shape(op, axes, where);
  // Reductions sweep their input; every other kernel its output.
  const bool reduction = op.name.named_op() == NamedOp::sum || op.name.named_op() == NamedOp::cross_entropy;
  const auto& refs = reduction || op.outputs.empty() ? op.inputs : op.outputs;
  return refs.empty() ? KernelShape{} : rows_shape(refs.front(), axes, where);
}

void split_tokens(ShardOp& op, double share) {
  op.flops *= share;
  op.bytes *= share;
  // Tokens are a weight gradient's reduction and every other kernel's rows.
  const bool weight_gradient = op.shape.count("k") && op.pass == OpPass::weight;
  for (const char* tokens : {"m", "rows"})
    if (op.shape.count(tokens) && !weight_gradient) op.shape[tokens] *= share;
  if (weight_gradient) op.shape["k"] *= share;
}

}  // namespace syssim
