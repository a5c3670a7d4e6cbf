// The feature vector of a kernel: shape dims, their logs and power-of-two alignment, FLOPs,
// bytes and arithmetic intensity, and the dtype's width. The same function serves fitting and
// prediction, so a bundle is always queried with the features it was fitted on.
#include <cmath>
#include <map>

#include "calibrate/detail.hpp"
#include "common/error.hpp"

namespace syssim::calibrate_detail {
namespace {

// Alignments above 256 elements no longer change which tiles (64..256 wide) a library picks.
constexpr double kMaxAlignment = 256;

// The largest power of two dividing a dim, capped: 1 for odd sizes, 8 for 4104, 256 for 4096.
double pow2_alignment(double dim) {
  double alignment = 1;
  while (alignment < kMaxAlignment && std::fmod(dim, 2 * alignment) == 0) alignment *= 2;
  return alignment;
}

double dim_of(const Kernel& kernel, const std::string& name) {
  auto it = kernel.dims.find(name);
  if (it == kernel.dims.end()) throw DataError(kernel.family + " kernel: missing dim '" + name + "'");
  return it->second;
}

// Logs need positive values.
double positive(double value, const Kernel& kernel, const std::string& name) {
  if (!(value > 0)) throw DataError(kernel.family + " kernel: " + name + " must be positive, got " + std::to_string(value));
  return value;
}

// The dims whose log2 and alignment a family's features hold, then its plain dims.
struct FamilyDims {
  std::vector<std::string> shape;  // log2 and pow2 alignment of each
  std::vector<std::string> plain;  // the value as is (small counts and flags)
  bool direction = false;          // a `backward` feature (0 or 1): the family's directions run different kernels
};

const std::map<std::string, FamilyDims>& family_dims() {
  static const std::map<std::string, FamilyDims> kDims = {
      {"gemm", {{"m", "n", "k"}, {}}},
      {"attention", {{"b", "s_q", "s_kv"}, {"heads", "kv_heads", "head_dim", "causal"}, true}},
      {"norm", {{"rows", "dim"}, {}}},
  };
  return kDims;
}

const FamilyDims& dims_of(const std::string& family) {
  auto it = family_dims().find(family);
  if (it == family_dims().end()) throw DataError("kernel family \"" + family + "\": no calibrated features");
  return it->second;
}

}  // namespace

const std::vector<std::string>& feature_names(const std::string& family) {
  static const std::map<std::string, std::vector<std::string>> kNames = [] {
    std::map<std::string, std::vector<std::string>> names;
    for (const auto& [name, dims] : family_dims()) {
      std::vector<std::string>& list = names[name];
      for (const std::string& d : dims.shape) list.push_back("log2_" + d);
      for (const std::string& d : dims.shape) list.push_back(d + "_pow2_alignment");
      for (const std::string& d : dims.plain) list.push_back(d);
      if (dims.direction) list.push_back("backward");
      list.insert(list.end(), {"log2_flops", "log2_bytes", "log2_intensity", "dtype_bytes"});
    }
    return names;
  }();
  dims_of(family);
  return kNames.at(family);
}

void append_features(const Kernel& kernel, std::vector<float>& row) {
  const FamilyDims& dims = dims_of(kernel.family);
  for (const std::string& d : dims.shape) row.push_back(static_cast<float>(std::log2(positive(dim_of(kernel, d), kernel, d))));
  for (const std::string& d : dims.shape) row.push_back(static_cast<float>(pow2_alignment(dim_of(kernel, d))));
  for (const std::string& d : dims.plain) row.push_back(static_cast<float>(dim_of(kernel, d)));
  if (dims.direction) row.push_back(kernel.backward ? 1.0f : 0.0f);
  double flops = positive(kernel.flops, kernel, "flops"), bytes = positive(kernel.bytes, kernel, "bytes");
  row.push_back(static_cast<float>(std::log2(flops)));
  row.push_back(static_cast<float>(std::log2(bytes)));
  row.push_back(static_cast<float>(std::log2(flops / bytes)));
  row.push_back(static_cast<float>(dtype_bytes(kernel.dtype)));
}

}  // namespace syssim::calibrate_detail
