// The shape of the kernel a traced op runs, on one rank (ShardOp::shape, docs/graph-format.md):
// what the calibrated cost estimator's features are made of. The operand layouts are those of
// the syssim:: ops (lib/trace/ops.cpp) and of aten's matmuls.
#include "shard/passes.hpp"

namespace syssim {
namespace {

double value(const Poly& p, const AxisValues& axes, const std::string& where) { return p.evaluate(axes, where); }
double last(const TensorRef& ref, const AxisValues& axes, const std::string& where) {
  return value(ref.dims.back(), axes, where);
}
double elements(const TensorRef& ref, const AxisValues& axes, const std::string& where) {
  return numel_at(ref.dims, axes, where);
}

// A GEMM's output is m x n with a reduction over k; m*n*k = flops/2, so each rule names the two
// sizes it can read off its operands and m follows.
KernelShape gemm_shape(const TraceOp& op, const AxisValues& axes, double flops, const std::string& where) {
  const auto& in = op.inputs;
  double n = 0, k = 0;
  if (op.name == "syssim::linear") {  // x [.., K], weight [N, K]
    n = value(in[1].dims.front(), axes, where);
    k = last(in[0], axes, where);
  } else if (op.name == "syssim::linear_dgrad") {  // grad [.., N], weight [N, K] -> [.., K]
    n = last(in[1], axes, where);
    k = last(in[0], axes, where);
  } else if (op.name == "syssim::linear_wgrad") {  // grad [T, N]^T x [T, K] -> [N, K]
    n = last(in[1], axes, where);
    k = elements(in[1], axes, where) / n;
  } else if (op.name == "syssim::qkv_linear") {  // x [.., K], wq/wk/wv [N_i, K]
    for (int w = 1; w <= 3; ++w) n += value(in[w].dims.front(), axes, where);
    k = last(in[0], axes, where);
  } else if (op.name == "syssim::qkv_linear_dgrad") {  // grads [.., N_i], weights [N_i, K] -> [.., K]
    n = last(in[3], axes, where);
    for (int w = 3; w <= 5; ++w) k += value(in[w].dims.front(), axes, where);
  } else if (op.name == "syssim::qkv_linear_wgrad") {  // grads^T x x [T, K] -> [N_i, K]
    n = last(in[3], axes, where);
    k = elements(in[3], axes, where) / n;
  } else {  // aten::mm / bmm / baddbmm: [.., M, K] x [.., K, N]
    const Dims& right = in.back().dims;
    n = value(right.back(), axes, where);
    k = value(right[right.size() - 2], axes, where);
  }
  if (n <= 0 || k <= 0) return {};
  return {{"m", flops / (2 * n * k)}, {"n", n}, {"k", k}};
}

// Flash attention's q is [s, b, heads, d] and k [s, b, kv_heads, d] (backward: after the
// output gradient). The trace's attention is causal.
KernelShape attention_shape(const TraceOp& op, const AxisValues& axes, const std::string& where) {
  const size_t query = op.name == "syssim::flash_attn" ? 0 : 1;
  const Dims& q = op.inputs.at(query).dims;
  const Dims& k = op.inputs.at(query + 1).dims;
  return {{"b", value(q[1], axes, where)},        {"s_q", value(q[0], axes, where)},
          {"s_kv", value(k[0], axes, where)},     {"heads", value(q[2], axes, where)},
          {"kv_heads", value(k[2], axes, where)}, {"head_dim", value(q[3], axes, where)},
          {"causal", 1}};
}

// Row-wise kernels: rows x dim, dim the last (contiguous) dimension of the tensor they sweep.
KernelShape rows_shape(const TensorRef& ref, const AxisValues& axes, const std::string& where) {
  if (ref.dims.empty()) return {};
  double dim = last(ref, axes, where);
  return {{"rows", elements(ref, axes, where) / dim}, {"dim", dim}};
}

}  // namespace

KernelShape kernel_shape(const TraceOp& op, const AxisValues& axes, double flops, const std::string& where) {
  if (op.kind == "gemm") return gemm_shape(op, axes, flops, where);
  if (op.kind == "attention") return attention_shape(op, axes, where);
  // Reductions sweep their input; every other kernel its output.
  const bool reduction = op.name == "aten::sum" || op.name == "syssim::cross_entropy";
  const auto& refs = reduction || op.outputs.empty() ? op.inputs : op.outputs;
  return refs.empty() ? KernelShape{} : rows_shape(refs.front(), axes, where);
}

void split_tokens(ShardOp& op, double share) {
  op.flops *= share;
  op.bytes *= share;
  // Tokens are a weight gradient's reduction and every other kernel's rows.
  const bool weight_gradient = op.shape.count("k") && op.pass == "weight";
  for (const char* tokens : {"m", "rows"})
    if (op.shape.count(tokens) && !weight_gradient) op.shape[tokens] *= share;
  if (weight_gradient) op.shape["k"] *= share;
}

}  // namespace syssim
