// Internals shared by the fitting (fit.cpp) and the prediction (model.cpp) of calibrated
// bundles: the feature vectors, the XGBoost handles and the manifest's fixed parts.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "calibrate/calibrate.hpp"

namespace syssim::calibrate_detail {

inline const char* const kManifestSchema = "syssim-calibration";
inline const char* const kManifestSchemaVersion = "1";
inline const char* const kManifestFile = "manifest.json";

// Bytes per element of a compute dtype: fp32 4, bf16/fp16 2, fp8 1, fp4 0.5.
double dtype_bytes(const std::string& dtype);

// The names of the features of a family, in the order append_features writes them.
const std::vector<std::string>& feature_names(const std::string& family);
// The features of one kernel, appended to `row` (fitting and prediction use this one function).
void append_features(const Kernel& kernel, std::vector<float>& row);

// Whether data row `row` (0-based, counting skipped rows) is held out of the fit: a seeded hash
// of the index, so the split does not depend on the order rows are read in or the platform.
bool held_out(uint64_t seed, int64_t row, double holdout_share);


// The launch and synchronisation time in every measured row: the 5th percentile of measured
// minus roofline over the rows whose roofline is at most 1 us (at least the 10 smallest), >= 0.
double measurement_overhead_us(const std::vector<double>& roofline_us, const std::vector<double>& measured_us);

// The peaks a bundle is fitted against, as the manifest records them (absent peaks are null).
nlohmann::json peaks_json(const HardwareConfig& hw);

// Owning handles of the XGBoost C API; every call's return code is checked and turned into
// a DataError carrying XGBGetLastError().
class DMatrix {
 public:
  // A dense row-major matrix of `features.size() / columns` rows.
  DMatrix(const std::vector<float>& features, size_t columns);
  DMatrix(const DMatrix&) = delete;
  DMatrix& operator=(const DMatrix&) = delete;
  ~DMatrix();
  void set_labels(const std::vector<float>& labels);
  void* handle() const { return handle_; }

 private:
  void* handle_ = nullptr;
};

class Booster {
 public:
  Booster(const Booster&) = delete;
  Booster& operator=(const Booster&) = delete;
  Booster(Booster&& other) noexcept;
  Booster& operator=(Booster&& other) noexcept;
  ~Booster();
  // Fits `rounds` boosting rounds on `train` with the given string parameters.
  static Booster train(const DMatrix& train, const nlohmann::json& params, int rounds);
  // Loads a model file (UBJSON or JSON), through its binary form in the cache when there is
  // one; `source` names it in errors.
  static Booster load(const std::string& bytes, const std::string& source);
  std::string save_ubjson() const;
  size_t feature_count() const;
  std::vector<float> predict(const DMatrix& data) const;

 private:
  // A new booster that caches the given matrices (train() passes its training matrix).
  explicit Booster(const std::vector<void*>& cached);
  void use_one_thread(const std::string& source);
  void* handle_ = nullptr;
};

}  // namespace syssim::calibrate_detail
