// The XGBoost C API behind RAII handles. Every return code is checked.
#include <xgboost/c_api.h>

#include <cmath>
#include <optional>
#include <utility>

#include "calibrate/detail.hpp"
#include "common/cache.hpp"
#include "common/error.hpp"

namespace syssim::calibrate_detail {
namespace {

// XGBoost's message on one line: its first, without the stack trace under it; nor the
// "[time] file:line: " XGBoost puts first.
void check(int rc, const std::string& what) {
  if (rc == 0) return;
  std::string message = XGBGetLastError();
  message = message.substr(0, message.find('\n'));
  if (const size_t failed = message.find("Check failed: "); failed != std::string::npos) message = message.substr(failed);
  while (!message.empty() && (message.back() == ' ' || message.back() == ':')) message.pop_back();
  throw DataError("XGBoost: " + what + ": " + message);
}

}  // namespace

DMatrix::DMatrix(const std::vector<float>& features, size_t columns) {
  check(XGDMatrixCreateFromMat(features.data(), features.size() / columns, columns, NAN, &handle_),
        "creating a data matrix");
}

DMatrix::~DMatrix() { XGDMatrixFree(handle_); }

void DMatrix::set_labels(const std::vector<float>& labels) {
  check(XGDMatrixSetFloatInfo(handle_, "label", labels.data(), labels.size()), "setting labels");
}

Booster::Booster(const std::vector<void*>& cached) {
  check(XGBoosterCreate(cached.data(), cached.size(), &handle_), "creating a booster");
  // XGBoost logs warnings to stderr by default; library code never prints.
  check(XGBoosterSetParam(handle_, "verbosity", "0"), "setting verbosity");
}

Booster::Booster(Booster&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}

Booster& Booster::operator=(Booster&& other) noexcept {
  std::swap(handle_, other.handle_);
  return *this;
}

Booster::~Booster() {
  if (handle_) XGBoosterFree(handle_);
}

Booster Booster::train(const DMatrix& train, const nlohmann::json& params, int rounds) {
  Booster booster({train.handle()});
  for (const auto& [key, value] : params.items()) {
    std::string text = value.is_string() ? value.get<std::string>() : value.dump();
    check(XGBoosterSetParam(booster.handle_, key.c_str(), text.c_str()), "setting " + key + "=" + text);
  }
  for (int round = 0; round < rounds; ++round)
    check(XGBoosterUpdateOneIter(booster.handle_, round, train.handle()), "boosting round " + std::to_string(round));
  return booster;
}

// XGBoost reads its legacy binary form of a model forty times faster than UBJSON (the H100
// GEMM model: 0.5 ms against 20 ms, on the development machine), and a run loads three
// models. So the first load keeps that form in the cache (kind "booster", keyed by the
// XGBoost version and the model's bytes), and later loads read it; they predict the same.
Booster Booster::load(const std::string& bytes, const std::string& source) {
  int major = 0, minor = 0, patch = 0;
  XGBoostVersion(&major, &minor, &patch);
  const std::string key = "xgboost " + std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch) +
                          " binary form of a model of " + std::to_string(bytes.size()) + " bytes, checksum " + content_checksum(bytes);
  if (std::optional<std::string> binary = cache_get("booster", key)) {
    Booster booster({});
    if (XGBoosterLoadModelFromBuffer(booster.handle_, binary->data(), binary->size()) == 0) {
      booster.use_one_thread(source);
      return booster;
    }
  }
  Booster booster({});
  check(XGBoosterLoadModelFromBuffer(booster.handle_, bytes.data(), bytes.size()), "loading " + source);
  booster.use_one_thread(source);
  bst_ulong length = 0;
  const char* data = nullptr;
  check(XGBoosterSaveModelToBuffer(booster.handle_, R"({"format": "deprecated"})", &length, &data),
        "saving " + source + " in binary form");
  cache_put("booster", key, std::string(data, length));
  return booster;
}

// A graph's kernels are predicted in one small batch: a second OpenMP thread only spins (a
// third of a sweep's time on two cores). Predictions do not depend on the count.
void Booster::use_one_thread(const std::string& source) {
  check(XGBoosterSetParam(handle_, "nthread", "1"), "setting nthread of " + source);
}

std::string Booster::save_ubjson() const {
  bst_ulong length = 0;
  const char* data = nullptr;
  check(XGBoosterSaveModelToBuffer(handle_, R"({"format": "ubj"})", &length, &data), "saving a model");
  return std::string(data, length);
}

size_t Booster::feature_count() const {
  bst_ulong count = 0;
  check(XGBoosterGetNumFeature(handle_, &count), "reading the feature count");
  return count;
}

std::vector<float> Booster::predict(const DMatrix& data) const {
  const char* config = R"({"type": 0, "training": false, "iteration_begin": 0, "iteration_end": 0,
                           "strict_shape": false})";
  const bst_ulong* shape = nullptr;
  bst_ulong dims = 0;
  const float* result = nullptr;
  check(XGBoosterPredictFromDMatrix(handle_, data.handle(), config, &shape, &dims, &result), "predicting");
  bst_ulong rows = 0;
  check(XGDMatrixNumRow(data.handle(), &rows), "counting rows");
  return std::vector<float>(result, result + rows);
}

}  // namespace syssim::calibrate_detail
