#include "report/band.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "common/csv.hpp"
#include "common/error.hpp"
#include "common/install.hpp"
#include "common/io.hpp"
#include "common/json_util.hpp"

namespace syssim {
namespace {

// The class's band: its ratios' quantiles either side of the median that hold `coverage` of them.
ClassBand band_of(BandClass job_class, const std::vector<double>& ratios, double coverage) {
  ClassBand band;
  band.job_class = job_class;
  band.runs = static_cast<int64_t>(ratios.size());
  band.low = percentile(ratios, (1 - coverage) / 2);
  band.high = percentile(ratios, (1 + coverage) / 2);
  return band;
}

std::map<BandClass, std::vector<size_t>> runs_by_class(const std::vector<StepTimeRatio>& runs) {
  std::map<BandClass, std::vector<size_t>> by_class;
  for (size_t i = 0; i < runs.size(); ++i) by_class[runs[i].job_class].push_back(i);
  return by_class;
}

}  // namespace

BandClass band_class_of(bool moe, const std::string& dtype) {
  const bool low_precision = dtype == "fp8" || dtype == "fp4";
  if (moe) return low_precision ? BandClass::moe_8bit_or_less : BandClass::moe_16bit;
  return low_precision ? BandClass::dense_8bit_or_less : BandClass::dense_16bit;
}

const ClassBand& StepTimeBands::of(BandClass job_class) const {
  for (const ClassBand& band : classes)
    if (band.job_class == job_class) return band;
  throw DataError(source + ": no step-time band for class " + to_string(job_class));
}

std::vector<std::optional<ClassBand>> held_out_bands(const std::vector<StepTimeRatio>& runs, double coverage) {
  std::vector<std::optional<ClassBand>> bands(runs.size());
  for (const auto& [job_class, members] : runs_by_class(runs)) {
    if (members.size() < 3) continue;
    for (size_t held_out : members) {
      std::vector<double> others;
      for (size_t i : members)
        if (i != held_out) others.push_back(runs[i].ratio);
      bands[held_out] = band_of(job_class, others, coverage);
    }
  }
  return bands;
}

bool inside(const ClassBand& band, double ratio) { return ratio >= band.low && ratio <= band.high; }

StepTimeBands fit_step_time_bands(const std::vector<StepTimeRatio>& runs, double coverage, const std::string& source) {
  StepTimeBands bands;
  bands.coverage = coverage;
  bands.source = source;
  const std::vector<std::optional<ClassBand>> held_out = held_out_bands(runs, coverage);
  for (const auto& [job_class, members] : runs_by_class(runs)) {
    if (members.size() < 2) continue;
    std::vector<double> ratios;
    int64_t held_out_hits = 0;
    for (size_t i : members) {
      ratios.push_back(runs[i].ratio);
      held_out_hits += held_out[i] && inside(*held_out[i], runs[i].ratio);
    }
    ClassBand band = band_of(job_class, ratios, coverage);
    if (held_out[members.front()])  // held out alike for every run of a class, or for none
      band.held_out_coverage = static_cast<double>(held_out_hits) / static_cast<double>(members.size());
    bands.classes.push_back(band);
  }
  return bands;
}

json to_json(const StepTimeBands& bands) {
  json classes = json::array();
  for (const ClassBand& band : bands.classes)
    classes.push_back({{"class", to_string(band.job_class)},
                       {"runs", band.runs},
                       {"ratio_low", band.low},
                       {"ratio_high", band.high},
                       {"held_out_coverage", band.held_out_coverage ? json(*band.held_out_coverage) : json()}});
  return json{{"coverage", bands.coverage}, {"source", bands.source}, {"classes", classes}};
}

std::string write_step_time_bands(const StepTimeBands& bands) { return to_json(bands).dump(2) + "\n"; }

StepTimeBands parse_step_time_bands(const std::string& text, const std::string& source) {
  const json j = parse_json(text, source);
  StepTimeBands bands;
  bands.coverage = require_as<double>(j, "coverage", "", source);
  if (!(bands.coverage > 0 && bands.coverage < 1))
    throw DataError(source + ": /coverage: expected a share between 0 and 1, got " + j["coverage"].dump());
  bands.source = require_as<std::string>(j, "source", "", source);
  const json& classes = require_array(j, "classes", "", source);
  for (size_t i = 0; i < classes.size(); ++i) {
    const std::string at = "/classes/" + std::to_string(i);
    const std::string name = require_as<std::string>(classes[i], "class", at, source);
    const std::optional<BandClass> job_class = parse_enum<BandClass>(name);
    if (!job_class)
      throw DataError(source + ": " + at + "/class: expected " + either_of(names_of<BandClass>()) + ", got \"" + name +
                      "\"");
    ClassBand band;
    band.job_class = *job_class;
    band.runs = require_as<int64_t>(classes[i], "runs", at, source);
    band.low = require_as<double>(classes[i], "ratio_low", at, source);
    band.high = require_as<double>(classes[i], "ratio_high", at, source);
    if (!classes[i].contains("held_out_coverage") || !classes[i]["held_out_coverage"].is_null())
      band.held_out_coverage = require_as<double>(classes[i], "held_out_coverage", at, source);
    if (!(band.low > 0 && band.low <= band.high && std::isfinite(band.high)))
      throw DataError(source + ": " + at + ": expected 0 < ratio_low <= ratio_high, got " +
                      classes[i]["ratio_low"].dump() + " and " + classes[i]["ratio_high"].dump());
    bands.classes.push_back(band);
  }
  return bands;
}

std::string default_step_time_bands_path() { return data_dir() + "/uncertainty/step_time_bands.json"; }

StepTimeBands load_step_time_bands(const std::optional<StepTimeBands>& given) {
  if (given) return *given;
  const std::string path = default_step_time_bands_path();
  return parse_step_time_bands(read_input(path), path);
}

StepTimeRange step_time_range(double step_time_ms, const ClassBand& band) {
  return {step_time_ms * band.low, step_time_ms * band.high};
}

}  // namespace syssim
