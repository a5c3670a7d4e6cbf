// A fitted bundle at prediction time: the manifest's checks, then one booster per family.
#include <algorithm>
#include <cmath>
#include <mutex>
#include <set>
#include <unordered_map>

#include "calibrate/calibrate.hpp"
#include "calibrate/detail.hpp"
#include "common/error.hpp"
#include "common/json_util.hpp"
#include "common/io.hpp"

namespace syssim {

using namespace calibrate_detail;

namespace {

// j[key]; DataError naming the manifest and the key when it is missing.
const nlohmann::json& manifest_entry(const nlohmann::json& j, const std::string& key, const std::string& where) {
  if (!j.is_object() || !j.contains(key)) throw DataError(where + ": missing key '" + key + "'");
  return j.at(key);
}

// j[key] as T; DataError naming the manifest, the key and the value otherwise.
template <typename T>
T manifest_value(const nlohmann::json& j, const std::string& key, const std::string& where) {
  const nlohmann::json& value = manifest_entry(j, key, where);
  try {
    return value.get<T>();
  } catch (const nlohmann::json::exception&) {
    throw DataError(where + ": key '" + key + "': unexpected value " + value.dump());
  }
}

struct FamilyModel {
  Booster booster;
  std::set<std::string> dtypes;      // compute dtypes the residual applies to
  std::set<std::string> directions;  // forward, backward
  // Covered dtypes predicted with the features of the same kernel in the measured dtype.
  std::map<std::string, std::string> transferred;
  // FP8's measured speed-up over the measured dtype at increasing log10 FLOPs; empty: FP8 is
  // the measured dtype's residual over the FP8 roofline.
  std::vector<std::pair<double, double>> fp8_speedup;
};

// The speed-up at `log_flops`, linear between the table's points and constant beyond its ends.
double speedup_at(const std::vector<std::pair<double, double>>& table, double log_flops) {
  if (log_flops <= table.front().first) return table.front().second;
  for (size_t i = 1; i < table.size(); ++i)
    if (log_flops < table[i].first) {
      const auto& [x0, y0] = table[i - 1];
      const auto& [x1, y1] = table[i];
      return y0 + (y1 - y0) * (log_flops - x0) / (x1 - x0);
    }
  return table.back().second;
}

// The manifest's fp8_speedup table as (log10 FLOPs, speed-up) points; none when absent.
std::vector<std::pair<double, double>> fp8_speedup_of(const nlohmann::json& entry, const std::string& where) {
  if (!entry.contains("fp8_speedup")) return {};
  const nlohmann::json& table = entry.at("fp8_speedup");
  auto flops = manifest_value<std::vector<double>>(table, "log10_flops", where + "/fp8_speedup");
  auto speedup = manifest_value<std::vector<double>>(table, "speedup", where + "/fp8_speedup");
  if (flops.empty() || flops.size() != speedup.size() || !std::is_sorted(flops.begin(), flops.end()) ||
      std::adjacent_find(flops.begin(), flops.end()) != flops.end() ||
      std::any_of(speedup.begin(), speedup.end(), [](double s) { return !(s > 0 && std::isfinite(s)); }))
    throw DataError(where + "/fp8_speedup: expected as many positive speed-ups as increasing log10_flops");
  std::vector<std::pair<double, double>> points;
  for (size_t i = 0; i < flops.size(); ++i) points.emplace_back(flops[i], speedup[i]);
  return points;
}

// The kernel whose features the residual is read at: a transferred dtype's kernel re-expressed
// in the measured dtype (same shape and FLOPs, bytes at the measured width).
Kernel feature_kernel(const Kernel& kernel, const FamilyModel& model) {
  auto it = model.transferred.find(kernel.dtype);
  return it == model.transferred.end() ? kernel : kernel_in_dtype(kernel, it->second);
}

}  // namespace

struct CalibratedModel::Impl {
  std::string directory;
  HardwareConfig hardware;
  std::map<std::string, FamilyModel> families;
  // Predicted residuals by family and feature row: every layer's kernels are the same, and a
  // sweep prices the same kernels for many jobs. Trees predict each row on its own, so a
  // remembered residual is the one predicting again would give.
  std::mutex mutex;
  std::unordered_map<std::string, float> residual_of;
};

CalibratedModel::CalibratedModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CalibratedModel::CalibratedModel(CalibratedModel&&) noexcept = default;
CalibratedModel& CalibratedModel::operator=(CalibratedModel&&) noexcept = default;
CalibratedModel::~CalibratedModel() = default;

CalibratedModel CalibratedModel::load(const std::string& dir, const HardwareConfig& hw) {
  const std::string path = dir + "/" + kManifestFile;
  const nlohmann::json manifest = parse_json(read_input(path), path);
  auto schema = manifest_value<std::string>(manifest, "schema", path);
  if (schema != kManifestSchema)
    throw DataError(path + ": schema: expected \"" + kManifestSchema + "\", got \"" + schema + "\"");
  auto version = manifest_value<std::string>(manifest, "schema_version", path);
  if (version != kManifestSchemaVersion)
    throw DataError(path + ": schema_version: this syssim reads version " + kManifestSchemaVersion + ", got \"" +
                    version + "\"; refit the bundle with `syssim calibrate`");
  const nlohmann::json& fitted = manifest_entry(manifest, "hardware", path);
  const nlohmann::json peaks = peaks_json(hw);
  for (const auto& [key, peak] : peaks.items()) {
    auto it = fitted.find(key);
    nlohmann::json fitted_peak = it == fitted.end() ? nlohmann::json() : *it;
    if (fitted_peak != peak)
      throw DataError(path + ": hardware/" + key + ": the bundle was fitted against " + fitted_peak.dump() +
                      ", hardware " + hw.label() + " has " + peak.dump());
  }

  auto impl = std::make_unique<Impl>();
  impl->directory = dir;
  impl->hardware = hw;
  const nlohmann::json& families = manifest_entry(manifest, "families", path);
  for (const auto& [family, entry] : families.items()) {
    const std::string where = path + ": families/" + family;
    auto features = manifest_value<std::vector<std::string>>(entry, "features", where);
    if (features != feature_names(family))
      throw DataError(where + "/features: fitted on other features than this syssim computes; refit the bundle");
    auto model_file = manifest_value<std::string>(entry, "model_file", where);
    Booster booster = Booster::load(read_input(dir + "/" + model_file), dir + "/" + model_file);
    if (booster.feature_count() != features.size())
      throw DataError(dir + "/" + model_file + ": model has " + std::to_string(booster.feature_count()) +
                      " features, the manifest lists " + std::to_string(features.size()));
    impl->families.emplace(
        family, FamilyModel{std::move(booster), manifest_value<std::set<std::string>>(entry, "dtypes_covered", where),
                            manifest_value<std::set<std::string>>(entry, "directions", where),
                            manifest_value<std::map<std::string, std::string>>(entry, "dtypes_transferred", where),
                            fp8_speedup_of(entry, where)});
  }
  return CalibratedModel(std::move(impl));
}

bool CalibratedModel::covers(const Kernel& kernel) const {
  auto it = impl_->families.find(kernel.family);
  return it != impl_->families.end() && it->second.dtypes.count(kernel.dtype) > 0 &&
         it->second.directions.count(kernel.backward ? "backward" : "forward") > 0;
}

std::vector<std::string> CalibratedModel::families() const {
  std::vector<std::string> names;
  for (const auto& entry : impl_->families) names.push_back(entry.first);
  return names;
}

std::vector<double> CalibratedModel::predict_us(const std::vector<Kernel>& kernels) const {
  std::map<std::string, std::vector<size_t>> by_family;
  for (size_t i = 0; i < kernels.size(); ++i) {
    if (!covers(kernels[i]))
      throw DataError(impl_->directory + ": no fitted model for " + kernels[i].dtype + " " + kernels[i].family +
                      (kernels[i].backward ? " backward" : " forward") + " kernels");
    by_family[kernels[i].family].push_back(i);
  }
  std::vector<double> times(kernels.size());
  for (const auto& [family_key, indices] : by_family) {
    const std::string& family = family_key;  // a lambda below captures it (clang 14 cannot capture a binding)
    const FamilyModel& model = impl_->families.at(family);
    std::vector<float> features;
    for (size_t i : indices) append_features(feature_kernel(kernels[i], model), features);
    const size_t columns = feature_names(family).size();
    auto row_key = [&](size_t row) {
      return family + std::string(reinterpret_cast<const char*>(features.data() + row * columns), columns * sizeof(float));
    };
    // The rows predicted before, and the others once each.
    std::vector<float> residuals(indices.size()), unknown;
    std::vector<std::string> unknown_keys;
    std::vector<std::pair<size_t, size_t>> predicted_as;  // row, unknown row
    {
      std::unordered_map<std::string, size_t> unknown_row;
      std::lock_guard<std::mutex> lock(impl_->mutex);
      for (size_t row = 0; row < indices.size(); ++row) {
        std::string key = row_key(row);
        auto known = impl_->residual_of.find(key);
        if (known != impl_->residual_of.end()) {
          residuals[row] = known->second;
          continue;
        }
        auto [it, added] = unknown_row.emplace(key, unknown_keys.size());
        if (added) {
          unknown.insert(unknown.end(), features.begin() + static_cast<std::ptrdiff_t>(row * columns),
                         features.begin() + static_cast<std::ptrdiff_t>((row + 1) * columns));
          unknown_keys.push_back(std::move(key));
        }
        predicted_as.emplace_back(row, it->second);
      }
    }
    if (!unknown_keys.empty()) {
      std::vector<float> predicted = model.booster.predict(DMatrix(unknown, columns));
      for (const auto& [row, unknown_index] : predicted_as) residuals[row] = predicted[unknown_index];
      std::lock_guard<std::mutex> lock(impl_->mutex);
      for (size_t k = 0; k < unknown_keys.size(); ++k) impl_->residual_of.emplace(std::move(unknown_keys[k]), predicted[k]);
    }
    for (size_t row = 0; row < indices.size(); ++row) {
      const Kernel& kernel = kernels[indices[row]];
      // A transferred FP8 kernel with a measured speed-up (written only for a transfer): the
      // measured dtype's time over it.
      const bool sped_up = kernel.dtype == "fp8" && !model.fp8_speedup.empty();
      double roofline = roofline_us(sped_up ? feature_kernel(kernel, model) : kernel, impl_->hardware);
      double time = std::max(roofline, roofline * std::exp(static_cast<double>(residuals[row])));
      times[indices[row]] = sped_up ? time / speedup_at(model.fp8_speedup, std::log10(kernel.flops)) : time;
    }
  }
  return times;
}

const std::string& CalibratedModel::directory() const { return impl_->directory; }

}  // namespace syssim
