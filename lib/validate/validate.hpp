// syssim validate: predicts every row of a table of measured training runs (the layout of
// ../shared/validation/measured.csv) and compares step time and memory (docs/validation.md).
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/csv.hpp"
#include "config/config.hpp"
#include "report/band.hpp"
#include "shard/shard.hpp"

namespace syssim {


using MeasuredRow = std::map<std::string, std::string>;  // column -> cell ("" when empty)

// What syssim simulates for one measured row, or why it cannot.
struct RowPlan {
  std::string skip_reason;  // non-empty: the row is not simulated
  ModelConfig model;
  std::string hardware_path;
  ShardOptions options;
  std::vector<std::string> assumptions;  // defaults taken for cells the source leaves empty
  double measured_step_s = 0;
  std::string measured_from;  // the column the measured step time comes from (docs/validation.md)
  std::optional<double> measured_peak_mem_gb;
  bool measured_oom = false;  // the measured_oom column; without it the run is taken to have run
};

// Maps a row's columns onto a model, a hardware preset (a file of hardware_dir, or what
// hardware_map names for the row's gpu) and a layout.
RowPlan plan_row(const MeasuredRow& row, const std::string& hardware_dir,
                 const std::map<std::string, std::string>& hardware_map = {});

struct RowResult {
  int64_t line = 0;
  std::string source_id, model, layout, skip_reason;
  std::string gpu, dtype;  // the row's cells as written (the preset and recipe are in assumptions)
  int64_t gpus = 0;
  double predicted_mfu = 0;  // of the dense peak in the run's precision (docs/metrics.md)
  double measured_step_s = 0, predicted_step_s = 0, step_error_pct = 0;  // signed: (pred - meas) / meas
  std::optional<double> measured_peak_mem_gb;
  double predicted_peak_mem_gb = 0;
  bool predicted_oom = false;
  bool measured_oom = false;  // the measured_oom column; without it the run is taken to have run
  bool moe = false;           // the model has experts
  BandClass band_class = BandClass::dense_16bit;  // the class its step-time error counts in
  // The step-time band fitted on the other runs of its class (report/band.hpp): the measured /
  // predicted ratios that held 80% of them; none for a class of fewer than 3 runs.
  std::optional<ClassBand> held_out_band;
  // measured_step_s, or the throughput column it was derived from, or measured_oom for a run
  // that failed for memory before it gave a step time (simulated for its OOM verdict only).
  std::string measured_from;
  std::vector<std::string> assumptions;
  bool expressed() const { return skip_reason.empty(); }
  bool timed() const { return expressed() && measured_from != kOutOfMemoryOnly; }
  static constexpr const char* kOutOfMemoryOnly = "measured_oom";
};


struct ErrorStats {
  std::string group;  // a source_id, "MoE <model>" and "MoE" over the mixtures of experts, or "all"
  int64_t rows = 0;
  double median = 0, p90 = 0, max = 0;  // of the absolute % step-time error
};
// One entry per source_id (sorted) with at least one expressed row, one per mixture-of-experts
// model ("MoE DeepSeek-V3") and one over them ("MoE"), then "all".
std::vector<ErrorStats> step_error_stats(const std::vector<RowResult>& rows);

// The share of each class's runs a step-time band holds (report/band.hpp).
constexpr double kStepTimeBandCoverage = 0.8;

struct ValidationResult {
  std::vector<RowResult> rows;
  StepTimeBands bands;  // fitted on every simulated row (syssim validate --bands-out)
  std::vector<std::string> warnings;  // for the tool to print (unknown columns, --hardware-map gpus no row has)
};

struct ValidateOptions {
  std::string hardware_dir;  // folder of the hardware presets; empty: the data folder's hardware/
  std::map<std::string, std::string> hardware_map;  // gpu cell -> preset name or YAML path
};

// --hardware-map values "GPU=PRESET_OR_YAML"; throws UsageError naming a malformed one.
std::map<std::string, std::string> parse_hardware_map(const std::vector<std::string>& assignments);

// Plans and simulates every row; rows that cannot be simulated carry their reason.
ValidationResult validate_measured(const std::string& csv_text, const std::string& source,
                                   const ValidateOptions& options);

// format: table | csv | json.
std::string render_validation(const ValidationResult& result, const std::string& format);

// `syssim validate` as the tool runs it (docs/validation.md).
struct ValidateRequest {
  std::string measured;  // the CSV's path
  std::string format = "table";
  std::string output = "-";
  std::string bands_out;  // also the step-time bands to this file; empty: not
  std::vector<std::string> hardware_map;  // --hardware-map assignments, GPU=PRESET_OR_YAML
  ValidateOptions options;
};
struct ValidateRun {
  std::vector<std::pair<std::string, std::string>> outputs;  // (path, text) to write, all or none
  std::vector<std::string> warnings;
  std::optional<std::string> failure;  // bad data to report after the outputs: no row simulated (then no file is written)
};
ValidateRun validate_command(ValidateRequest request);

}  // namespace syssim
