// Kernels of the calibration data and their roofline: FLOPs and bytes counted as syssim-trace
// counts the same ops (lib/trace/op_rules.cpp, docs/syssim-trace.md "FLOPs" and "Recording rules").
#include <algorithm>
#include <optional>

#include "calibrate/calibrate.hpp"
#include "calibrate/detail.hpp"
#include "common/dtype.hpp"
#include "common/error.hpp"
#include "common/json_util.hpp"
#include "common/units.hpp"

namespace syssim {
namespace {

constexpr double kStatisticBytes = 4;  // the norm's per-row reciprocal standard deviation is fp32

DataError unknown_dtype(const std::string& dtype) {
  return DataError("kernel dtype \"" + dtype + "\": expected bf16, fp16, fp8, fp4 or fp32");
}

}  // namespace

Kernel gemm_kernel(double m, double n, double k, const std::string& dtype) {
  double elt = calibrate_detail::dtype_bytes(dtype);
  return Kernel{"gemm", dtype, false, {{"m", m}, {"n", n}, {"k", k}}, 2 * m * n * k, elt * (m * k + k * n + m * n)};
}

Kernel attention_kernel(double b, double s, double heads, double kv_heads, double head_dim, bool causal,
                        const std::string& dtype, bool backward) {
  double elt = calibrate_detail::dtype_bytes(dtype);
  // Two matmuls of 2*s*s*d per head forward, half the blocks when causal; backward 5 (x2.5).
  double forward_flops = 4 * b * s * s * heads * head_dim * (causal ? 0.5 : 1.0);
  // Forward reads q, k, v and writes the output; backward reads the output gradient, q, k, v and
  // the output and writes dq, dk, dv.
  double q_elements = b * s * heads * head_dim, kv_elements = b * s * kv_heads * head_dim;
  double elements = backward ? 4 * q_elements + 4 * kv_elements : 2 * q_elements + 2 * kv_elements;
  return Kernel{"attention",
                dtype,
                backward,
                {{"b", b}, {"s_q", s}, {"s_kv", s}, {"heads", heads}, {"kv_heads", kv_heads},
                 {"head_dim", head_dim}, {"causal", causal ? 1.0 : 0.0}},
                forward_flops * (backward ? 2.5 : 1.0),
                elt * elements};
}

Kernel norm_kernel(double rows, double dim, const std::string& dtype, bool backward) {
  double elt = calibrate_detail::dtype_bytes(dtype);
  // RMSNorm: 4 FLOPs per output element forward, 8 backward. Forward reads x and the weight and
  // writes y and the statistic; backward reads the gradient, x, the weight and the statistic and
  // writes dx and the weight gradient.
  double bytes = backward ? elt * (3 * rows * dim + 2 * dim) : elt * (2 * rows * dim + dim);
  return Kernel{"norm",
                dtype,
                backward,
                {{"rows", rows}, {"dim", dim}},
                (backward ? 8 : 4) * rows * dim,
                bytes + kStatisticBytes * rows};
}

Kernel kernel_in_dtype(const Kernel& kernel, const std::string& dtype) {
  Kernel other = kernel;
  other.dtype = dtype;
  other.bytes = kernel.bytes * calibrate_detail::dtype_bytes(dtype) / calibrate_detail::dtype_bytes(kernel.dtype);
  return other;
}

double roofline_us(const Kernel& kernel, const HardwareConfig& hw) {
  bool tensor_core = kernel.family == "gemm" || kernel.family == "attention";
  double peak_tflops = tensor_core ? tensor_core_peak_tflops(hw, kernel.dtype) : hw.peak_tflops_math;
  double compute_us = kernel.flops / (peak_tflops * kFlopsPerTflop) * kUsPerS;
  double memory_us = kernel.bytes / (hw.peak_memory_bandwidth_GBps * kBytesPerGB) * kUsPerS;
  return std::max(compute_us, memory_us);
}

namespace calibrate_detail {

double dtype_bytes(const std::string& dtype) {
  const std::optional<double> bytes = element_bytes(dtype);
  if (!bytes || dtype == "i64" || dtype == "bool") throw unknown_dtype(dtype);  // not a kernel's dtype
  return *bytes;
}

nlohmann::json peaks_json(const HardwareConfig& hw) {
  return {{"peak_tflops_mm", hw.peak_tflops_mm},
          {"peak_tflops_mm_fp8", nullable_to_json(hw.peak_tflops_mm_fp8)},
          {"peak_tflops_mm_fp4", nullable_to_json(hw.peak_tflops_mm_fp4)},
          {"peak_tflops_math", hw.peak_tflops_math},
          {"peak_memory_bandwidth_GBps", hw.peak_memory_bandwidth_GBps}};
}

}  // namespace calibrate_detail
}  // namespace syssim
