// The calibrated cost estimator (docs/calibration.md): time = roofline x a learned residual,
// fitted per op family with XGBoost on measured kernel timings.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/kernel_shape.hpp"
#include "config/config.hpp"

namespace syssim {

// One kernel as the estimators see it. `dims` keys by family:
//   gemm:                     m, n, k (output m x n, reduction over k)
//   attention:                b, s_q, s_kv, heads, kv_heads, head_dim, causal (1 or 0)
//   norm, elementwise, reduction: rows, dim (dim = the last, contiguous dimension)
struct Kernel {
  std::string family;  // gemm | attention | norm | elementwise | reduction
  std::string dtype;   // compute dtype: bf16 | fp16 | fp8 | fp4 | fp32
  bool backward = false;
  KernelShape dims;
  double flops = 0;  // counted as the trace counts them (docs/syssim-trace.md)
  double bytes = 0;  // read plus written in device memory
};

// Kernels of the calibration CSV schemas (../shared/calibration/README.md), with FLOPs and
// bytes counted exactly as syssim-trace counts the matching ops, so that a residual fitted on
// measurements applies to traced ops.
Kernel gemm_kernel(double m, double n, double k, const std::string& dtype);
Kernel attention_kernel(double b, double s, double heads, double kv_heads, double head_dim, bool causal,
                        const std::string& dtype, bool backward);
Kernel norm_kernel(double rows, double dim, const std::string& dtype, bool backward);
// The same kernel in another dtype: its shape and FLOPs, its bytes at that dtype's width.
Kernel kernel_in_dtype(const Kernel& kernel, const std::string& dtype);

// Roofline time in microseconds at the hardware's dense peaks, no launch floor:
// max(flops / peak for the family and dtype, bytes / peak memory bandwidth). GEMM and
// attention run at the tensor-core peak of their dtype, the rest at peak_tflops_math.
// Throws DataError when the hardware lacks the peak of the dtype (fp8, fp4).
double roofline_us(const Kernel& kernel, const HardwareConfig& hw);

// A fitted bundle: MODEL_DIR/manifest.json plus one XGBoost model file per family.
class CalibratedModel {
 public:
  // Loads a bundle. Throws DataError naming the manifest, the key and both values when its
  // schema version is not this one or the hardware peaks it was fitted against differ from hw's.
  static CalibratedModel load(const std::string& dir, const HardwareConfig& hw);
  CalibratedModel(CalibratedModel&&) noexcept;
  CalibratedModel& operator=(CalibratedModel&&) noexcept;
  ~CalibratedModel();

  // Whether the bundle has a fitted model for the kernel's family and dtype.
  bool covers(const Kernel& kernel) const;
  // The families it has a fitted model for, in name order.
  std::vector<std::string> families() const;
  // Predicted times in microseconds of covered kernels: roofline x exp(residual), never below
  // the roofline. Batched because one XGBoost call per kernel is slow.
  std::vector<double> predict_us(const std::vector<Kernel>& kernels) const;
  const std::string& directory() const;

 private:
  struct Impl;
  explicit CalibratedModel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

struct CalibrateOptions {
  std::string data_dir;      // CSVs in the schemas of docs/calibration.md
  // Families whose files are read from another folder than data_dir: family -> folder.
  std::map<std::string, std::string> family_data_dirs;
  HardwareConfig hardware;   // the peaks the residuals are taken against
  std::string output_dir;    // written whole or not at all; an existing bundle there is replaced
  std::string dtype = "bf16";  // the dtype the data was measured in: bf16 | fp16 | fp8 | fp4
  double holdout_share = 0.2;  // share of rows held out of the fit to measure its error, in (0, 1)
  uint64_t seed = 1;           // of the held-out split and of XGBoost
  // Launch and synchronisation time in every measured row; estimated from the tiny kernels
  // when not given (wall-clock data), 0 for kernel times taken by a profiler.
  std::optional<double> measurement_overhead_us;
  // That time for some families, over measurement_overhead_us: family -> us (a family read
  // from other data, timed otherwise).
  std::map<std::string, double> family_overhead_us;
  // A folder of 16-bit and FP8 GEMM times (gemm.csv, gemm_fp8.csv) measured on the same
  // tensor cores: a bundle that transfers FP8 GEMMs from its 16-bit data takes their measured
  // speed-up instead of the peaks' ratio (docs/calibration.md "FP8 GEMMs").
  std::string fp8_speedup_dir;
};

// The --family-overhead-us assignments FAMILY=US as a map; UsageError for a bad one.
std::map<std::string, double> parse_family_overheads(const std::vector<std::string>& assignments);

struct FamilyFit {
  std::string family, dtype, source_file;
  int64_t rows_fitted = 0, rows_held_out = 0, rows_skipped = 0;  // skipped: t_measured_ms = -1
  // |predicted + overhead - measured| / measured on the held-out rows (docs/calibration.md)
  double held_out_median_error_pct = 0, held_out_p95_error_pct = 0;
  double measurement_overhead_us = 0;  // launch and synchronisation time in every measured row
};

// Fits one model per family found in data_dir and writes the bundle. Deterministic: the same
// data, hardware and options give the same bytes.
std::vector<FamilyFit> calibrate(const CalibrateOptions& options);

// A header and one line per family: rows fitted, held out and skipped, the overhead taken off,
// and the held-out median and p95 error.
std::string render_calibration(const std::vector<FamilyFit>& fits);

}  // namespace syssim
