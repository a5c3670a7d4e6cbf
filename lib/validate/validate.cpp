#include "validate/validate.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "common/csv.hpp"
#include "common/io.hpp"
#include "common/error.hpp"
#include "common/text.hpp"
#include "common/units.hpp"
#include "config/presets.hpp"
#include "driver/driver.hpp"
#include "report/report.hpp"
#include "validate/plan.hpp"
#include "validate/spellings.hpp"

namespace syssim {
namespace {

// Columns of ../shared/validation/README.md, then the optional ones this tool honours.
const std::vector<std::string> kKnownColumns = {
    "source_id", "model", "params_b", "layers", "hidden", "ffn_hidden", "heads", "kv_heads", "vocab",
    "seq_length", "gpu", "num_gpus", "tp", "pp", "vpp", "cp", "ep", "dp", "sp", "micro_batch",
    "global_batch", "dtype", "recompute", "distributed_optimizer", "measured_step_s",
    "measured_tokens_per_s_per_gpu", "measured_tflops_per_gpu", "measured_mfu", "measured_peak_mem_gb",
    "notes", "attention_backend", "measured_oom", "overlap_grad_reduce", "overlap_param_gather", "grad_reduce_in_bf16", "tp_comm_overlap", "overlap_moe_expert_parallel_comm", "decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers", "hardware",
    "model_config", "etp", "cpu_offloading_num_layers", "moe_token_dispatcher_type"};
const std::vector<std::string> kRequiredColumns = {"source_id", "model", "layers", "hidden", "heads",
                                                   "seq_length", "gpu", "num_gpus", "tp", "pp",
                                                   "micro_batch", "global_batch", "dtype", "measured_step_s"};

constexpr double kPercent = 100.0;

std::string fixed(double value, int digits) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(digits) << value;
  return out.str();
}

std::string signed_pct(double value) { return (value >= 0 ? "+" : "") + fixed(value, 1); }

// Skipped rows grouped by reason, most frequent first (ties by reason).
std::vector<std::pair<std::string, int64_t>> skip_counts(const std::vector<RowResult>& rows) {
  std::map<std::string, int64_t> counts;
  for (const RowResult& r : rows)
    if (!r.expressed()) ++counts[r.skip_reason];
  std::vector<std::pair<std::string, int64_t>> sorted(counts.begin(), counts.end());
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  return sorted;
}

std::string oom_text(const RowResult& r) {
  std::string verdict = std::string(r.predicted_oom ? "oom" : "fits") + "/" + (r.measured_oom ? "oom" : "ran");
  return r.predicted_oom == r.measured_oom ? verdict : verdict + " MISMATCH";
}

// A step time the source did not give itself (derived from its throughput) is marked with '*'.
std::string measured_text(const RowResult& r) {
  if (!r.timed()) return "-";
  return fixed(r.measured_step_s, 3) + (r.measured_from == "measured_step_s" ? "" : "*");
}

std::string render_table(const ValidationResult& result) {
  std::ostringstream out;
  std::vector<std::vector<std::string>> lines = {{"source_id", "model", "gpu", "dtype", "gpus", "layout", "measured_s",
                                                  "predicted_s", "error_%", "mfu_%", "mem_pred/meas_GB", "oom"}};
  for (const RowResult& r : result.rows) {
    if (!r.expressed()) continue;
    std::string mem = fixed(r.predicted_peak_mem_gb, 1) + "/" +
                      (r.measured_peak_mem_gb ? fixed(*r.measured_peak_mem_gb, 1) : std::string("-"));
    lines.push_back({r.source_id, r.model, r.gpu, r.dtype, std::to_string(r.gpus),
                     r.layout, measured_text(r), fixed(r.predicted_step_s, 3),
                     r.timed() ? signed_pct(r.step_error_pct) : "-", fixed(r.predicted_mfu * kPercent, 1), mem,
                     oom_text(r)});
  }
  // Numbers right-aligned; names, the layout and the verdict left.
  out << aligned_columns(lines, {false, false, false, false, true, false, true, true, true, true, true, false});
  int64_t expressed = std::count_if(result.rows.begin(), result.rows.end(), [](const RowResult& r) { return r.expressed(); });
  int64_t mismatches = std::count_if(result.rows.begin(), result.rows.end(),
                                     [](const RowResult& r) { return r.expressed() && r.predicted_oom != r.measured_oom; });
  if (std::any_of(result.rows.begin(), result.rows.end(),
                  [](const RowResult& r) { return r.timed() && r.measured_from != "measured_step_s"; }))
    out << "(* measured step time derived from the source's tokens/s, TFLOP/s or MFU)\n";
  out << "\nSummary\n";
  out << "  rows: " << result.rows.size() << ", expressed: " << expressed
      << ", skipped: " << result.rows.size() - expressed << ", OOM verdict mismatches: " << mismatches << "\n";
  out << "  skipped by reason:\n";
  for (const auto& [reason, count] : skip_counts(result.rows)) out << "    " << std::setw(4) << count << "  " << reason << "\n";
  out << "  absolute step-time error (%):\n";
  // Columns at least as wide as their headers say, wider for wider values.
  std::vector<std::vector<std::string>> stats = {{"group" + std::string(15, ' '), "  rows", "median", "   p90", "   max"}};
  for (const ErrorStats& s : step_error_stats(result.rows))
    stats.push_back({s.group, std::to_string(s.rows), fixed(s.median, 1), fixed(s.p90, 1), fixed(s.max, 1)});
  out << indented(aligned_columns(stats, {false, true, true, true, true}), "    ");
  if (result.bands.classes.empty()) return out.str();  // no class of two timed runs
  out << "  step-time band (measured / predicted, " << fixed(result.bands.coverage * kPercent, 0)
      << "% of each class; held out: each run against the band of its class's other runs):\n";
  std::vector<std::vector<std::string>> classes = {
      {"class" + std::string(15, ' '), "  runs", "   low", "  high", "held-out coverage"}};
  int64_t runs = 0;
  double covered = 0;
  for (const ClassBand& band : result.bands.classes) {
    classes.push_back({to_string(band.job_class), std::to_string(band.runs), fixed(band.low, 3), fixed(band.high, 3),
                       band.held_out_coverage ? fixed(*band.held_out_coverage * kPercent, 1) + "%" : "-"});
    if (!band.held_out_coverage) continue;  // nothing held out: no band without the run
    runs += band.runs;
    covered += *band.held_out_coverage * static_cast<double>(band.runs);
  }
  if (runs > 0)
    classes.push_back({"all", std::to_string(runs), "", "", fixed(covered / static_cast<double>(runs) * kPercent, 1) + "%"});
  out << indented(aligned_columns(classes, {false, true, true, true, true}), "    ");
  return out.str();
}

std::string render_csv(const ValidationResult& result) {
  std::ostringstream out;
  out << "line,source_id,model,gpu,dtype,gpus,layout,measured_step_s,predicted_step_s,step_error_pct,predicted_mfu,"
         "measured_peak_mem_gb,predicted_peak_mem_gb,predicted_oom,measured_oom,measured_from,skip_reason\n";
  for (const RowResult& r : result.rows) {
    out << r.line << "," << csv_field(r.source_id) << "," << csv_field(r.model) << "," << csv_field(r.gpu) << ","
        << csv_field(r.dtype) << "," << r.gpus << "," << csv_field(r.layout) << ",";
    if (r.expressed())
      out << (r.timed() ? fixed(r.measured_step_s, 4) : "") << "," << fixed(r.predicted_step_s, 4) << ","
          << (r.timed() ? fixed(r.step_error_pct, 2) : "")
          << "," << fixed(r.predicted_mfu, 4) << "," << (r.measured_peak_mem_gb ? fixed(*r.measured_peak_mem_gb, 2) : "") << ","
          << fixed(r.predicted_peak_mem_gb, 2) << "," << r.predicted_oom << "," << r.measured_oom << ","
          << r.measured_from << ",\n";
    else
      out << ",,,,,,,,," << csv_field(r.skip_reason) << "\n";
  }
  return out.str();
}

std::string render_json(const ValidationResult& result) {
  nlohmann::json rows = nlohmann::json::array();
  for (const RowResult& r : result.rows) {
    nlohmann::json j = {{"line", r.line}, {"source_id", r.source_id}, {"model", r.model},
                        {"gpu", r.gpu},   {"dtype", r.dtype},           {"gpus", r.gpus}};
    if (!r.expressed()) {
      j["skip_reason"] = r.skip_reason;
    } else {
      j.update({{"layout", r.layout},
                {"measured_step_s", r.timed() ? nlohmann::json(r.measured_step_s) : nullptr},
                {"measured_from", r.measured_from},
                {"predicted_step_s", r.predicted_step_s},
                {"step_error_pct", r.timed() ? nlohmann::json(r.step_error_pct) : nullptr},
                {"predicted_mfu", r.predicted_mfu},
                {"measured_peak_mem_gb", r.measured_peak_mem_gb ? nlohmann::json(*r.measured_peak_mem_gb) : nullptr},
                {"predicted_peak_mem_gb", r.predicted_peak_mem_gb},
                {"predicted_oom", r.predicted_oom},
                {"measured_oom", r.measured_oom},
                {"band_class", to_string(r.band_class)},
                {"assumptions", r.assumptions}});
      if (r.held_out_band)
        j.update({{"held_out_band_s", {r.predicted_step_s * r.held_out_band->low, r.predicted_step_s * r.held_out_band->high}},
                  {"inside_held_out_band", inside(*r.held_out_band, r.measured_step_s / r.predicted_step_s)}});
    }
    rows.push_back(j);
  }
  nlohmann::json skipped = nlohmann::json::array();
  for (const auto& [reason, count] : skip_counts(result.rows)) skipped.push_back({{"reason", reason}, {"rows", count}});
  nlohmann::json stats = nlohmann::json::array();
  for (const ErrorStats& s : step_error_stats(result.rows))
    stats.push_back({{"group", s.group}, {"rows", s.rows}, {"median_abs_pct", s.median}, {"p90_abs_pct", s.p90},
                     {"max_abs_pct", s.max}});
  return nlohmann::json{{"rows", rows},
                        {"skipped", skipped},
                        {"step_error", stats},
                        {"step_time_bands", to_json(result.bands)}}
             .dump(2) +
         "\n";
}

// The step-time bands of the simulated rows, and each row's held-out band (report/band.hpp).
void fit_bands(ValidationResult& result, const std::string& source) {
  std::vector<StepTimeRatio> runs;
  std::vector<RowResult*> simulated;
  for (RowResult& r : result.rows)
    if (r.timed()) {
      runs.push_back({r.band_class, r.measured_step_s / r.predicted_step_s});
      simulated.push_back(&r);
    }
  result.bands = fit_step_time_bands(runs, kStepTimeBandCoverage, source);
  const std::vector<std::optional<ClassBand>> held_out = held_out_bands(runs, kStepTimeBandCoverage);
  for (size_t i = 0; i < runs.size(); ++i) simulated[i]->held_out_band = held_out[i];
}

}  // namespace

std::map<std::string, std::string> parse_hardware_map(const std::vector<std::string>& assignments) {
  return parse_assignments(assignments, "--hardware-map", "GPU=PRESET_OR_YAML", same_gpu_spelling);
}

std::vector<ErrorStats> step_error_stats(const std::vector<RowResult>& rows) {
  std::map<std::string, std::vector<double>> by_source, by_moe_model;
  std::vector<double> all, moe;
  for (const RowResult& r : rows) {
    if (!r.timed()) continue;
    by_source[r.source_id].push_back(std::abs(r.step_error_pct));
    all.push_back(std::abs(r.step_error_pct));
    if (r.moe) {
      by_moe_model["MoE " + r.model].push_back(std::abs(r.step_error_pct));
      moe.push_back(std::abs(r.step_error_pct));
    }
  }
  auto stats_of = [](const std::string& group, const std::vector<double>& values) {
    return ErrorStats{group, static_cast<int64_t>(values.size()), percentile(values, 0.5), percentile(values, 0.9),
                      *std::max_element(values.begin(), values.end())};
  };
  std::vector<ErrorStats> stats;
  for (const auto& [source, values] : by_source) stats.push_back(stats_of(source, values));
  for (const auto& [model, values] : by_moe_model) stats.push_back(stats_of(model, values));
  if (!moe.empty()) stats.push_back(stats_of("MoE", moe));
  if (!all.empty()) stats.push_back(stats_of("all", all));
  return stats;
}

// Column names as users write them: " model" (a space after the comma) or "GPU" is model or
// gpu; two that read the same are refused.
void normalize_header(CsvTable& table, const std::string& source) {
  for (std::string& name : table.header) name = lowercase(trimmed(name));
  if (const auto repeat = repeated_column(table.header))
    throw DataError(source + ":1: fields " + std::to_string(repeat->first + 1) + " and " +
                    std::to_string(repeat->second + 1) + " both name column '" + table.header[repeat->first] + "'");
}

ValidationResult validate_measured(const std::string& csv_text, const std::string& source,
                                   const ValidateOptions& options) {
  CsvTable table = parse_csv(csv_text, source);
  normalize_header(table, source);
  ValidationResult result;
  std::vector<std::string> unknown;
  for (const std::string& column : table.header)
    if (std::find(kKnownColumns.begin(), kKnownColumns.end(), column) == kKnownColumns.end()) unknown.push_back(column);
  for (const std::string& column : kRequiredColumns)
    if (std::find(table.header.begin(), table.header.end(), column) == table.header.end())
      throw DataError(source + ": no column '" + column + "'");
  if (!unknown.empty()) result.warnings.push_back(source + ": ignoring unknown columns: " + join(unknown));
  std::string hardware_dir = options.hardware_dir.empty() ? preset_dir(PresetKind::kHardware) : options.hardware_dir;
  // What the user named must exist: a typo would otherwise skip every row it touches.
  if (!std::filesystem::is_directory(hardware_dir))
    throw UsageError("--hardware-dir=" + hardware_dir + ": no such folder");
  for (const auto& [gpu, chosen] : options.hardware_map)
    if (const std::string path = preset_path(chosen, hardware_dir); !std::filesystem::is_regular_file(path))
      throw UsageError("--hardware-map=" + gpu + "=" + chosen + ": no such file " + path);
  std::map<std::string, CostEstimator> estimators;  // by hardware path: each bundle loaded once
  // A relative path in a row is taken from the table's folder, as a YAML's relative paths are.
  const std::filesystem::path table_folder = is_stdout(source) || source == "<stdin>"
                                                 ? std::filesystem::path()
                                                 : std::filesystem::path(source).parent_path();
  for (size_t r = 0; r < table.records.size(); ++r) {
    MeasuredRow row;
    for (size_t c = 0; c < table.header.size(); ++c) row[table.header[c]] = trimmed(table.records[r][c]);
    for (const char* column : {"model_config", "hardware"}) {
      auto named = row.find(column);
      std::error_code error;
      if (named != row.end() && !named->second.empty() && std::filesystem::path(named->second).is_relative() &&
          std::filesystem::exists(table_folder / named->second, error))
        named->second = (table_folder / named->second).lexically_normal().string();
    }
    RowResult out;
    out.line = table.record_lines[r];
    out.source_id = cell(row, "source_id");
    out.model = cell(row, "model");
    out.gpu = cell(row, "gpu");
    out.dtype = cell(row, "dtype");
    RowPlan plan = plan_row(row, hardware_dir, options.hardware_map);
    out.skip_reason = plan.skip_reason;
    out.assumptions = plan.assumptions;
    if (plan.skip_reason.empty()) {
      try {
        out.gpus = *plan.options.gpus;
        out.layout = layout_text(plan.options.parallelism, plan.options.training);
        out.measured_step_s = plan.measured_step_s;
        out.measured_from = plan.measured_from;
        out.measured_peak_mem_gb = plan.measured_peak_mem_gb;
        out.measured_oom = plan.measured_oom;
        validate(plan.model, source + ":" + std::to_string(out.line));
        if (!estimators.count(plan.hardware_path))
          estimators.emplace(plan.hardware_path, CostEstimator(load_hardware_yaml(plan.hardware_path)));
        Graph graph = simulate(plan.model, trace_of(plan.model, plan.options.training.seq_length),
                               estimators.at(plan.hardware_path), plan.options, {}, nullptr, MemOptions{true});
        out.predicted_step_s = graph.sim->step_time_ms / kMsPerS;
        if (out.timed())
          out.step_error_pct = (out.predicted_step_s - out.measured_step_s) / out.measured_step_s * kPercent;
        // Frameworks log the allocator's reserved memory (torchtitan's max_reserved).
        out.predicted_peak_mem_gb = graph.mem->reserved_memory_gb.value_or(graph.mem->peak_memory_gb);
        out.predicted_oom = graph.mem->oom.has_value();
        out.predicted_mfu = throughput(graph).mfu;
        out.moe = plan.model.is_moe();
        out.band_class = band_class_of(out.moe, plan.options.training.dtype);
      } catch (const std::runtime_error& error) {  // syssim refuses the row: say why
        out.skip_reason = error.what();
      }
    } else {
      try {
        out.gpus = int_cell(row, "num_gpus").value_or(0);
      } catch (const DataError&) {  // already the reason the row is skipped
      }
    }
    result.rows.push_back(out);
  }
  // A gpu the map names and no row has is most likely a typo of one that some row has.
  std::set<std::string> gpus;
  for (const RowResult& row : result.rows) gpus.insert(row.gpu);
  for (const auto& [gpu, chosen] : options.hardware_map)
    if (std::none_of(gpus.begin(), gpus.end(), [&](const std::string& cell) { return same_gpu_spelling(gpu, cell); }))
      result.warnings.push_back("--hardware-map=" + gpu + "=" + chosen + ": no row of " + source + " has gpu '" + gpu + "'");
  fit_bands(result, source);
  return result;
}

ValidateRun validate_command(ValidateRequest request) {
  request.options.hardware_map = parse_hardware_map(request.hardware_map);
  const ValidationResult result = validate_measured(read_input(request.measured), request.measured, request.options);
  ValidateRun run;
  run.warnings = result.warnings;
  run.outputs = {{request.output, render_validation(result, request.format)}};
  if (!request.bands_out.empty()) run.outputs.emplace_back(request.bands_out, write_step_time_bands(result.bands));
  if (std::none_of(result.rows.begin(), result.rows.end(), [](const RowResult& row) { return row.expressed(); })) {
    // A failed run replaces no file: the table of skip reasons goes to standard output only.
    run.outputs.resize(is_stdout(request.output) ? 1 : 0);
    run.failure = request.measured + ": no row could be simulated (" +
                  (!run.outputs.empty()   ? std::string("the skip reasons are in the output")
                   : result.rows.empty() ? std::string("it has no rows; no file written")
                                         : "the first row: " + result.rows.front().skip_reason + "; no file written") +
                  ")";
  }
  return run;
}

std::string render_validation(const ValidationResult& result, const std::string& format) {
  if (format == "table") return render_table(result);
  if (format == "csv") return render_csv(result);
  if (format == "json") return render_json(result);
  throw UsageError("--format=" + format + ": expected table, csv or json");
}

}  // namespace syssim
