// `syssim calibrate`: fits the calibrated cost estimator on measured kernel times
// (docs/calibration.md).
#include <memory>

#include "calibrate/calibrate.hpp"
#include "common/io.hpp"
#include "common/text.hpp"
#include "subcommands.hpp"
#include "tool.hpp"

namespace syssim::tool {

Subcommand add_calibrate(CLI::App& app) {
  struct Settings {
    CalibrateOptions options;
    std::string hardware;
    std::vector<std::string> family_data, family_overheads;
  };
  auto settings = std::make_shared<Settings>();
  CalibrateOptions& options = settings->options;
  CLI::App* calibrate = app.add_subcommand("calibrate", "Fit the calibrated cost estimator on measured kernel times");
  calibrate->add_option("--data", options.data_dir,
                        "Folder of gemm.csv, attention.csv, rmsnorm.csv (gemm_fp8.csv, attention_backward.csv beside them)")
      ->required();
  calibrate->add_option("--family-data", settings->family_data,
                        "FAMILY=DIR: read that family's files (gemm, attention, norm) from DIR instead (repeatable)");
  calibrate->add_option("--family-overhead-us", settings->family_overheads,
                        "FAMILY=US: that family's measurement overhead, over --overhead-us (repeatable)");
  calibrate->add_option("--fp8-speedup-data", options.fp8_speedup_dir,
                        "DIR of gemm.csv and gemm_fp8.csv measured on the same tensor cores: transferred FP8 GEMMs "
                        "take their measured speed-up over 16-bit ones");
  calibrate->add_option("--hardware", settings->hardware, "Hardware YAML whose peaks the residuals are taken against")
      ->required();
  calibrate->add_option("-o,--output", options.output_dir, "Bundle folder, written whole or not at all")->required();
  calibrate->add_option("--dtype", options.dtype, "The dtype the data was measured in (default bf16)")
      ->check(CLI::IsMember({"bf16", "fp16", "fp8", "fp4"}));
  calibrate->add_option("--holdout", options.holdout_share, "Share of rows held out to measure the error")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            double share = 0;
            return CLI::detail::lexical_cast(text, share) && share > 0 && share < 1
                       ? ""
                       : "expected a share between 0 and 1, both excluded, got '" + text + "'";
          },
          "(0, 1)"));
  calibrate->add_option("--seed", options.seed, "Seed of the held-out split and of XGBoost")->check(kNonNegative);
  calibrate->add_option("--overhead-us", options.measurement_overhead_us,
                        "Launch and synchronisation time in every measured row (default: estimated; 0 for kernel "
                        "times from a profiler)")
      ->check(kNonNegative);
  return {calibrate, [settings] {
            CalibrateOptions& options = settings->options;
            options.hardware = load_hardware_yaml(settings->hardware);
            options.family_data_dirs = parse_assignments(settings->family_data, "--family-data", "FAMILY=DIR");
            options.family_overhead_us = parse_family_overheads(settings->family_overheads);
            write_output("-", render_calibration(syssim::calibrate(options)));
          }};
}

}  // namespace syssim::tool
