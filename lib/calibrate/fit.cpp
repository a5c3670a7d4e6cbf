// `syssim calibrate`: fits one XGBoost residual model per kernel family on measured timings
// and writes the bundle (docs/calibration.md).
#include <xgboost/c_api.h>

#include <fcntl.h>  // AT_FDCWD
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <sstream>

#include "calibrate/calibrate.hpp"
#include "calibrate/detail.hpp"
#include "common/csv.hpp"
#include "common/error.hpp"
#include "common/io.hpp"
#include "common/text.hpp"
#include "common/units.hpp"

namespace syssim {

using namespace calibrate_detail;

namespace {

namespace fs = std::filesystem;

constexpr double kSkippedMs = -1;  // t_measured_ms of a shape that was unsupported or ran out of memory
// The measurement overhead is a low percentile of the time beyond the roofline of the kernels
// whose roofline is tiny: what remains of them is launch and synchronisation.
constexpr double kTinyRooflineUs = 1.0;
constexpr size_t kMinOverheadRows = 10;  // fewer tiny kernels: the rows of the smallest rooflines
constexpr double kOverheadPercentile = 0.05;

// One CSV of the calibration data (../shared/calibration/README.md) and how its family is fitted.
struct Source {
  std::string family, file;
  std::vector<std::string> dims;  // the CSV's columns before t_measured_ms
  std::function<Kernel(const std::vector<double>& dims, const std::string& dtype, bool backward)> kernel;
  std::vector<std::string> directions;  // of the kernels the fitted residual applies to
  nlohmann::json params;                // XGBoost's, besides the seed
  int rounds = 0;
  // FP8 kernels that a 16-bit fit also covers: the residual of the same shape in the measured
  // dtype, taken over the roofline at the FP8 peak (docs/calibration.md "FP8 GEMMs").
  bool covers_fp8 = false;
  // A file of the same columns measured in FP8, fitted into the same model when present: the
  // dtype's width is a feature, so FP8 kernels are then predicted from FP8 measurements.
  std::string fp8_file;
  // A file of the same columns holding the backward kernels' times, fitted into the same model
  // when present (the direction is a feature): the bundle then covers the backward too.
  std::string backward_file;
};

nlohmann::json xgboost_params(int max_depth, double eta, double min_child_weight) {
  // nthread is fixed: the result must not depend on the machine.
  return {{"objective", "reg:squarederror"}, {"tree_method", "hist"}, {"max_depth", max_depth}, {"eta", eta},
          {"min_child_weight", min_child_weight}, {"max_bin", 256}, {"nthread", 2}};
}

// Depth, learning rate and rounds were chosen by held-out error on the GH200 data, with each
// model file kept under 2 MB (docs/calibration.md "Held-out split, parameters, determinism").
const std::vector<Source>& sources() {
  static const std::vector<Source> kSources = {
      // A GEMM's dgrad and wgrad are GEMMs too: the residual of a shape applies in both directions.
      {"gemm", "gemm.csv", {"M", "N", "K"},
       [](const std::vector<double>& d, const std::string& dtype, bool) { return gemm_kernel(d[0], d[1], d[2], dtype); },
       {"backward", "forward"}, xgboost_params(8, 0.2, 5), 150, true, "gemm_fp8.csv", ""},
      // Causal flash attention; its backward runs other kernels, so it is covered only when
      // measured (attention_backward.csv).
      {"attention", "attention.csv", {"bs", "seq", "nh", "nkv", "hd"},
       [](const std::vector<double>& d, const std::string& dtype, bool backward) {
         return attention_kernel(d[0], d[1], d[2], d[3], d[4], true, dtype, backward);
       },
       {"forward"}, xgboost_params(6, 0.2, 1), 150, false, "", "attention_backward.csv"},
      {"norm", "rmsnorm.csv", {"seq", "dim"},
       [](const std::vector<double>& d, const std::string& dtype, bool) { return norm_kernel(d[0], d[1], dtype, false); },
       {"forward"}, xgboost_params(6, 0.2, 1), 100, false, "", ""},
  };
  return kSources;
}

struct Sample {
  Kernel kernel;
  double roofline_us = 0, measured_us = 0;
  bool held_out = false;
};

struct Table {
  std::vector<Sample> samples;
  int64_t rows = 0;     // data rows of the file(s), skipped ones included
  int64_t skipped = 0;
  bool fp8 = false;       // with the source's FP8 file
  bool backward = false;  // with the source's backward file
};

// SplitMix64 (Steele, Lea, Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014;
// constants of Vigna's splitmix64.c, prng.di.unimi.it): a well-mixed hash of the row index.
uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

namespace calibrate_detail {

bool held_out(uint64_t seed, int64_t row, double holdout_share) {
  double uniform = static_cast<double>(splitmix64(seed ^ splitmix64(static_cast<uint64_t>(row))) >> 11) * 0x1.0p-53;
  return uniform < holdout_share;
}

double measurement_overhead_us(const std::vector<double>& roofline_us, const std::vector<double>& measured_us) {
  std::vector<size_t> order(roofline_us.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return roofline_us[a] < roofline_us[b]; });
  std::vector<double> excess;
  for (size_t i : order) {
    if (roofline_us[i] > kTinyRooflineUs && excess.size() >= kMinOverheadRows) break;
    excess.push_back(measured_us[i] - roofline_us[i]);
  }
  return std::max(0.0, percentile(excess, kOverheadPercentile));
}

}  // namespace calibrate_detail

namespace {

// A shape's size: a positive whole number; DataError naming file:line and the column otherwise.
double parse_size(const std::string& cell, const std::string& where, const std::string& column) {
  char* end = nullptr;
  const double value = std::strtod(cell.c_str(), &end);
  if (cell.empty() || end != cell.c_str() + cell.size() || !(value >= 1 && value < 1e18) || value != std::floor(value))
    throw DataError(where + ": column " + column + ": expected a positive whole number, got \"" + cell + "\"");
  return value;
}

// A time: a positive finite number, or -1 (skipped); DataError naming file:line and the column otherwise.
double parse_time(const std::string& cell, const std::string& where, const std::string& column) {
  char* end = nullptr;
  double value = std::strtod(cell.c_str(), &end);
  bool parsed = !cell.empty() && end == cell.c_str() + cell.size() && std::isfinite(value);
  if (!parsed || !(value > 0 || value == kSkippedMs))
    throw DataError(where + ": column " + column + ": expected a positive number or -1, got \"" + cell + "\"");
  return value;
}

// Rows are numbered from `first_row` for the held-out split, so that two files of a family
// do not share one; the rows of one shape (repeated trials) take the draw of its first row,
// so that no shape is both fitted and held out.
Table read_table(const Source& source, const std::string& path, const std::string& dtype, bool backward,
                 int64_t first_row, const CalibrateOptions& options) {
  std::vector<std::string> columns = source.dims;
  columns.push_back("t_measured_ms");
  const std::string text = read_input(path);
  if (text.empty()) throw DataError(path + ": empty file, expected the header " + join(columns, ","));
  CsvTable csv = parse_csv(text, path);
  if (csv.header != columns)
    throw DataError(path + ":1: expected the header " + join(columns, ",") + ", got \"" + join(csv.header, ",") + "\"");
  Table table;
  table.rows = static_cast<int64_t>(csv.records.size());
  std::map<std::vector<double>, int64_t> first_row_of_shape;
  for (size_t row = 0; row < csv.records.size(); ++row) {
    const std::vector<std::string>& fields = csv.records[row];
    const std::string where = path + ":" + std::to_string(csv.record_lines[row]);
    std::vector<double> dims;
    for (size_t c = 0; c < source.dims.size(); ++c) dims.push_back(parse_size(fields[c], where, columns[c]));
    const int64_t drawn_row = first_row_of_shape.try_emplace(dims, static_cast<int64_t>(row)).first->second;
    double measured_ms = parse_time(fields.back(), where, columns.back());
    if (measured_ms == kSkippedMs) {
      ++table.skipped;
      continue;
    }
    Sample sample{source.kernel(dims, dtype, backward), 0, measured_ms * kUsPerMs,
                  held_out(options.seed, first_row + drawn_row, options.holdout_share)};
    sample.roofline_us = roofline_us(sample.kernel, options.hardware);
    table.samples.push_back(std::move(sample));
  }
  return table;
}

// Appends a companion file's rows to a family's, numbered after them.
void append_table(Table& table, Table more) {
  for (Sample& s : more.samples) table.samples.push_back(std::move(s));
  table.rows += more.rows;
  table.skipped += more.skipped;
}

// A family's measurements, all from its folder: its file in the measured dtype, then its FP8
// file and its backward file where there are.
Table read_family(const Source& source, const std::string& folder, const CalibrateOptions& options) {
  Table table = read_table(source, folder + "/" + source.file, options.dtype, false, 0, options);
  const std::string fp8_path = folder + "/" + source.fp8_file;
  if (!source.fp8_file.empty() && fs::exists(fp8_path)) {
    if (!options.hardware.peak_tflops_mm_fp8)
      throw DataError(fp8_path + ": FP8 measurements, but hardware " + options.hardware.label() +
                      " has no peak_tflops_mm_fp8 to take them against");
    if (options.dtype != "bf16" && options.dtype != "fp16")
      throw DataError(fp8_path + ": FP8 measurements beside " + source.file + " need that file in bf16 or fp16, not " +
                      options.dtype);
    append_table(table, read_table(source, fp8_path, "fp8", false, table.rows, options));
    table.fp8 = true;
  }
  const std::string backward_path = folder + "/" + source.backward_file;
  if (!source.backward_file.empty() && fs::exists(backward_path)) {
    append_table(table, read_table(source, backward_path, options.dtype, true, table.rows, options));
    table.backward = true;
  }
  return table;
}

std::vector<std::string> covered_dtypes(const std::string& dtype) {
  // FP16 and BF16 run at the same tensor-core peak and the same width: one fits both.
  if (dtype == "bf16" || dtype == "fp16") return {"bf16", "fp16"};
  if (dtype == "fp8" || dtype == "fp4") return {dtype};
  throw UsageError("dtype \"" + dtype + "\": expected bf16, fp16, fp8 or fp4");
}

struct FittedFamily {
  FamilyFit fit;
  nlohmann::json manifest;
  std::string model_bytes;
};

// |prediction + overhead - measured| / measured in % of each held-out row: the error against the
// times as measured.
std::vector<double> held_out_errors_pct(const Booster& booster, const std::vector<const Sample*>& held,
                                        size_t columns, double overhead_us) {
  std::vector<float> features;
  for (const Sample* s : held) append_features(s->kernel, features);
  std::vector<float> residuals = booster.predict(DMatrix(features, columns));
  std::vector<double> errors_pct;
  for (size_t i = 0; i < held.size(); ++i) {
    double roofline = held[i]->roofline_us;
    double predicted = std::max(roofline, roofline * std::exp(static_cast<double>(residuals[i]))) + overhead_us;
    errors_pct.push_back(std::abs(predicted - held[i]->measured_us) / held[i]->measured_us * 100);
  }
  return errors_pct;
}

// FP8 GEMMs' speed-up over the same 16-bit GEMMs, measured in pairs in `dir`: per decade of
// GEMM FLOPs (2 M N K), the median log10 FLOPs and the median time ratio of its shapes, in
// increasing FLOPs. The model interpolates between them (docs/calibration.md "FP8 GEMMs").
nlohmann::json fp8_speedup(const Source& gemm, const std::string& dir, const CalibrateOptions& options) {
  Table sixteen = read_table(gemm, dir + "/" + gemm.file, "bf16", false, 0, options);
  Table fp8 = read_table(gemm, dir + "/" + gemm.fp8_file, "fp8", false, 0, options);
  std::map<KernelShape, double> sixteen_us;
  for (const Sample& s : sixteen.samples) sixteen_us[s.kernel.dims] = s.measured_us;
  std::map<int, std::pair<std::vector<double>, std::vector<double>>> by_decade;  // log10 FLOPs, ratios
  for (const Sample& s : fp8.samples) {
    auto pair = sixteen_us.find(s.kernel.dims);
    if (pair == sixteen_us.end()) continue;
    const double log_flops = std::log10(s.kernel.flops);
    auto& [flops, ratios] = by_decade[static_cast<int>(std::floor(log_flops))];
    flops.push_back(log_flops);
    ratios.push_back(pair->second / s.measured_us);
  }
  if (by_decade.empty())
    throw DataError(dir + ": no GEMM shape in both " + gemm.file + " and " + gemm.fp8_file + " to measure FP8's speed-up");
  nlohmann::json table = {{"log10_flops", nlohmann::json::array()}, {"speedup", nlohmann::json::array()},
                          {"shapes", nlohmann::json::array()}};
  for (const auto& [decade, samples] : by_decade) {
    table["log10_flops"].push_back(percentile(samples.first, 0.5));
    table["speedup"].push_back(percentile(samples.second, 0.5));
    table["shapes"].push_back(samples.second.size());
  }
  return table;
}

nlohmann::json family_manifest(const Source& source, const Table& table, const FamilyFit& fit,
                               const CalibrateOptions& options, const nlohmann::json& params) {
  std::vector<std::string> dtypes = covered_dtypes(options.dtype);
  nlohmann::json transferred = nlohmann::json::object();
  bool sixteen_bit = options.dtype == "bf16" || options.dtype == "fp16";
  if (table.fp8) {
    dtypes.push_back("fp8");
  } else if (source.covers_fp8 && sixteen_bit && options.hardware.peak_tflops_mm_fp8) {
    dtypes.push_back("fp8");
    transferred["fp8"] = options.dtype;
  }
  std::vector<std::string> directions = source.directions;
  if (table.backward) directions = {"backward", "forward"};
  nlohmann::json manifest = {{"model_file", source.family + ".ubj"},
          {"source_file", source.file},
          {"features", feature_names(source.family)},
          {"dtype_measured", options.dtype},
          {"dtypes_covered", dtypes},
          {"dtypes_transferred", transferred},
          {"directions", directions},
          {"rows_fitted", fit.rows_fitted},
          {"rows_held_out", fit.rows_held_out},
          {"rows_skipped", fit.rows_skipped},
          {"held_out_median_error_pct", fit.held_out_median_error_pct},
          {"held_out_p95_error_pct", fit.held_out_p95_error_pct},
          {"measurement_overhead_us", fit.measurement_overhead_us},
          {"xgboost_params", params},
          {"boosting_rounds", source.rounds}};
  if (table.fp8) manifest["fp8_source_file"] = source.fp8_file;
  if (table.backward) manifest["backward_source_file"] = source.backward_file;
  if (transferred.contains("fp8") && !options.fp8_speedup_dir.empty())
    manifest["fp8_speedup"] = fp8_speedup(source, options.fp8_speedup_dir, options);
  return manifest;
}

FittedFamily fit_family(const Source& source, const std::string& path, const Table& table,
                        const CalibrateOptions& options) {
  std::vector<const Sample*> fitted, held;
  for (const Sample& s : table.samples) (s.held_out ? held : fitted).push_back(&s);
  if (fitted.empty() || held.empty())
    throw DataError(path + ": " + std::to_string(table.samples.size()) + " measured rows leave " +
                    (fitted.empty() ? "none to fit" : "none to hold out") + " at a held-out share of " +
                    nlohmann::json(options.holdout_share).dump());

  std::vector<double> rooflines, measured;
  for (const Sample* s : fitted) {
    rooflines.push_back(s->roofline_us);
    measured.push_back(s->measured_us);
  }
  auto family_overhead = options.family_overhead_us.find(source.family);
  double overhead_us = family_overhead != options.family_overhead_us.end()
                           ? family_overhead->second
                           : options.measurement_overhead_us.value_or(measurement_overhead_us(rooflines, measured));

  // Target: log of the kernel's time over its roofline, the overhead taken off and the kernel
  // never faster than its roofline.
  std::vector<float> features, labels;
  for (const Sample* s : fitted) {
    append_features(s->kernel, features);
    double kernel_us = std::max(s->measured_us - overhead_us, s->roofline_us);
    labels.push_back(static_cast<float>(std::log(kernel_us / s->roofline_us)));
  }
  const size_t columns = feature_names(source.family).size();
  DMatrix train(features, columns);
  train.set_labels(labels);
  nlohmann::json params = source.params;
  params["seed"] = options.seed;
  Booster booster = Booster::train(train, params, source.rounds);

  std::vector<double> errors_pct = held_out_errors_pct(booster, held, columns, overhead_us);

  FittedFamily result;
  FamilyFit& fit = result.fit;
  fit.family = source.family;
  fit.dtype = table.fp8 ? options.dtype + "+fp8" : options.dtype;
  fit.source_file = source.file;
  fit.rows_fitted = static_cast<int64_t>(fitted.size());
  fit.rows_held_out = static_cast<int64_t>(held.size());
  fit.rows_skipped = table.skipped;
  fit.held_out_median_error_pct = percentile(errors_pct, 0.5);
  fit.held_out_p95_error_pct = percentile(errors_pct, 0.95);
  fit.measurement_overhead_us = overhead_us;
  result.manifest = family_manifest(source, table, fit, options, params);
  result.model_bytes = booster.save_ubjson();
  return result;
}

// Whether a folder may be replaced by a new bundle: it is empty or holds one.
bool replaceable(const fs::path& dir) {
  if (fs::is_empty(dir)) return true;
  try {
    return nlohmann::json::parse(read_input((dir / kManifestFile).string())).value("schema", "") == kManifestSchema;
  } catch (const std::exception&) {
    return false;
  }
}

// Writes the files into a folder beside output_dir, then renames it into place, so an existing
// bundle is replaced only once the new one is complete.
void write_bundle(const std::string& output_dir, const std::map<std::string, std::string>& files) {
  fs::path out = fs::path(output_dir).lexically_normal();
  if (!out.has_filename()) out = out.parent_path();
  std::error_code error;
  bool exists = fs::exists(out);
  if (exists && (!fs::is_directory(out) || !replaceable(out)))
    throw DataError(output_dir + ": exists and is not a calibration bundle; not replacing it");
  const std::string suffix = "." + std::to_string(::getpid());
  fs::path temp = out.string() + ".tmp" + suffix, old = out.string() + ".old" + suffix;
  try {
    fs::remove_all(temp);
    fs::create_directories(temp);
    for (const auto& [name, bytes] : files) write_output((temp / name).string(), bytes);
    if (!exists) {
      fs::rename(temp, out);
    } else if (::renameat2(AT_FDCWD, temp.c_str(), AT_FDCWD, out.c_str(), RENAME_EXCHANGE) == 0) {
      fs::remove_all(temp);  // the old bundle, swapped out in one step: out always held a bundle
    } else {  // a file system without the exchange: out is briefly missing
      fs::rename(out, old);
      fs::rename(temp, out);
      fs::remove_all(old);
    }
  } catch (const fs::filesystem_error& e) {
    fs::remove_all(temp, error);
    throw DataError(output_dir + ": cannot write the bundle: " + e.what());
  } catch (...) {
    fs::remove_all(temp, error);
    throw;
  }
}

std::string xgboost_version() {
  int major = 0, minor = 0, patch = 0;
  XGBoostVersion(&major, &minor, &patch);
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

}  // namespace

std::vector<FamilyFit> calibrate(const CalibrateOptions& options) {
  if (!(options.holdout_share > 0 && options.holdout_share < 1))
    throw UsageError("holdout share " + nlohmann::json(options.holdout_share).dump() + ": expected a value in (0, 1)");
  covered_dtypes(options.dtype);  // rejects an unknown dtype before any work
  if (!fs::is_directory(options.data_dir)) throw DataError(options.data_dir + ": no such folder");

  nlohmann::json hardware = peaks_json(options.hardware);
  hardware["name"] = options.hardware.name;
  nlohmann::json manifest = {{"schema", kManifestSchema},
                             {"schema_version", kManifestSchemaVersion},
                             {"hardware", hardware},
                             {"xgboost_version", xgboost_version()},
                             {"holdout_share", options.holdout_share},
                             {"seed", options.seed},
                             {"families", nlohmann::json::object()}};
  std::map<std::string, std::string> files;
  std::vector<FamilyFit> fits;
  std::vector<std::string> known;
  auto require_family = [](const std::string& family, const std::string& flag) {
    if (std::none_of(sources().begin(), sources().end(), [&](const Source& s) { return s.family == family; }))
      throw UsageError(flag + " family \"" + family + "\": expected gemm, attention or norm");
  };
  for (const auto& [family, folder] : options.family_data_dirs) {
    require_family(family, "--family-data");
    if (!fs::is_directory(folder)) throw DataError(folder + ": no such folder");
  }
  for (const auto& [family, overhead] : options.family_overhead_us) require_family(family, "--family-overhead-us");
  if (!options.fp8_speedup_dir.empty() && !fs::is_directory(options.fp8_speedup_dir))
    throw DataError(options.fp8_speedup_dir + ": no such folder");
  for (const Source& source : sources()) {
    known.push_back(source.file);
    auto folder_for = options.family_data_dirs.find(source.family);
    const std::string folder = folder_for == options.family_data_dirs.end() ? options.data_dir : folder_for->second;
    const std::string path = folder + "/" + source.file;
    if (!fs::exists(path)) continue;
    FittedFamily family = fit_family(source, path, read_family(source, folder, options), options);
    files[source.family + ".ubj"] = std::move(family.model_bytes);
    manifest["families"][source.family] = std::move(family.manifest);
    fits.push_back(family.fit);
  }
  if (fits.empty()) throw DataError(options.data_dir + ": none of the calibration files " + join(known, ","));
  // A folder given for a family that holds none of its files would leave the family out unsaid.
  for (const auto& [family, folder] : options.family_data_dirs)
    if (!manifest["families"].contains(family)) {
      std::vector<std::string> files_of_family;
      for (const Source& source : sources())
        if (source.family == family) files_of_family.push_back(source.file);
      throw DataError(folder + ": --family-data " + family + " names a folder holding none of " + join(files_of_family, ","));
    }
  if (!options.fp8_speedup_dir.empty() &&
      !(manifest["families"].contains("gemm") && manifest["families"]["gemm"].contains("fp8_speedup")))
    throw UsageError("--fp8-speedup-data: this bundle does not transfer FP8 GEMMs from 16-bit ones (it measures "
                     "them, or has no 16-bit GEMM data or no FP8 peak)");
  files[kManifestFile] = manifest.dump(2) + "\n";
  write_bundle(options.output_dir, files);
  return fits;
}

std::map<std::string, double> parse_family_overheads(const std::vector<std::string>& assignments) {
  std::map<std::string, double> overheads;
  for (const auto& [family, text] : parse_assignments(assignments, "--family-overhead-us", "FAMILY=US")) {
    char* end = nullptr;
    double us = std::strtod(text.c_str(), &end);
    if (end != text.c_str() + text.size() || !std::isfinite(us) || us < 0)
      throw UsageError("--family-overhead-us=" + family + "=" + text + ": expected a number of us >= 0");
    overheads[family] = us;
  }
  return overheads;
}

std::string render_calibration(const std::vector<FamilyFit>& fits) {
  std::ostringstream out;
  char line[160];
  std::snprintf(line, sizeof line, "%-10s %-5s %8s %8s %8s %11s %9s %9s\n", "family", "dtype", "fitted", "held_out",
                "skipped", "overhead_us", "median_%", "p95_%");
  out << line;
  for (const FamilyFit& f : fits) {
    std::snprintf(line, sizeof line, "%-10s %-5s %8lld %8lld %8lld %11.2f %9.2f %9.2f\n", f.family.c_str(),
                  f.dtype.c_str(), static_cast<long long>(f.rows_fitted), static_cast<long long>(f.rows_held_out),
                  static_cast<long long>(f.rows_skipped), f.measurement_overhead_us, f.held_out_median_error_pct,
                  f.held_out_p95_error_pct);
    out << line;
  }
  return out.str();
}

}  // namespace syssim
