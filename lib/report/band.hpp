// The step-time band (docs/validation.md, "How far to trust a step time"): the range that the
// measured step times of published runs fell in around syssim's predictions, by class of job.
// syssim validate fits it from a table of measured runs; the report scales a prediction by it.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/op_kinds.hpp"

namespace syssim {

// The classes a job's error is taken from: dense or mixture of experts, 16-bit or 8/4-bit GEMMs.
enum class BandClass : uint8_t { dense_16bit, dense_8bit_or_less, moe_16bit, moe_8bit_or_less };
template <>
struct EnumNames<BandClass> {
  static constexpr std::array<const char*, 4> kNames = {"dense_16bit", "dense_8bit_or_less", "moe_16bit",
                                                         "moe_8bit_or_less"};
};
BandClass band_class_of(bool moe, const std::string& dtype);  // dtype: bf16 | fp16 | fp8 | fp4

// The measured / predicted step-time ratios of one class: `low` and `high` are its quantiles at
// (1 - coverage) / 2 and (1 + coverage) / 2, so that `coverage` of the runs fell between them.
struct ClassBand {
  BandClass job_class = BandClass::dense_16bit;
  int64_t runs = 0;
  double low = 1, high = 1;
  // Share of the runs inside the band fitted on the class's other runs; none for a class of
  // fewer than 3 runs, where nothing is held out.
  std::optional<double> held_out_coverage;
};

struct StepTimeBands {
  double coverage = 0.8;
  std::string source;  // the table the ratios came from
  std::vector<ClassBand> classes;
  // The band of a class; throws DataError naming the class when the bands have none for it.
  const ClassBand& of(BandClass job_class) const;
};

// One measured run: its class and measured / predicted step time.
struct StepTimeRatio {
  BandClass job_class = BandClass::dense_16bit;
  double ratio = 1;
};

// The band of each class with at least two runs, quantiles as common/csv.hpp's percentile.
StepTimeBands fit_step_time_bands(const std::vector<StepTimeRatio>& runs, double coverage, const std::string& source);

// The band of each run's class fitted on the class's other runs: none where fewer than two
// others remain. A run inside its held-out band counts towards the band's held-out coverage.
std::vector<std::optional<ClassBand>> held_out_bands(const std::vector<StepTimeRatio>& runs, double coverage);
bool inside(const ClassBand& band, double ratio);

// The JSON file syssim validate --bands-out writes and the report reads (docs/validation.md).
nlohmann::json to_json(const StepTimeBands& bands);
std::string write_step_time_bands(const StepTimeBands& bands);
StepTimeBands parse_step_time_bands(const std::string& text, const std::string& source);

// The bands the data folder ships: <data>/uncertainty/step_time_bands.json.
std::string default_step_time_bands_path();
// `given`, else the data folder's bands.
StepTimeBands load_step_time_bands(const std::optional<StepTimeBands>& given = std::nullopt);

// The range around a predicted step time that the measured step times of its class fell in.
struct StepTimeRange {
  double low_ms = 0, high_ms = 0;
};
StepTimeRange step_time_range(double step_time_ms, const ClassBand& band);

}  // namespace syssim
