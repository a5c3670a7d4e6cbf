// syssim: the driver. `run` and `memory` run every stage in one process (docs/syssim.md);
// `calibrate` fits the calibrated cost estimator (docs/calibration.md); `sweep` simulates many
// layouts of one model (docs/syssim-sweep.md); `presets` lists the presets (docs/configs.md).

#include <algorithm>
#include <iostream>

#include "calibrate/calibrate.hpp"
#include "common/error.hpp"
#include "common/io.hpp"
#include "common/text.hpp"
#include "common/version.hpp"
#include "config/presets.hpp"
#include "default_job.hpp"
#include "driver/driver.hpp"
#include "layout_flags.hpp"
#include "report_flags.hpp"
#include "network/network.hpp"
#include "sweep_flags.hpp"
#include "tool.hpp"
#include "validate/validate.hpp"

int main(int argc, char** argv) {
  CLI::App app("syssim: predict step time, MFU and memory of LLM training (docs/syssim.md)", "syssim");
  app.set_version_flag("--version", std::string("syssim ") + syssim::kSyssimVersion + " (graph format " +
                                        syssim::kGraphFormatVersion + ")");
  app.require_subcommand(1);
  syssim::RunRequest request;
  std::string model, hardware, output = "-";
  std::vector<CLI::App*> commands = {app.add_subcommand("run", "Simulate one training step and print the report"),
                                     app.add_subcommand("memory", "Print the per-GPU memory only")};
  for (CLI::App* command : commands) {
    command->add_option("model", model, "Model YAML or preset, or a Hugging Face id or config.json with --seq-length (default: llama3-8b)");
    command->add_option("--hardware", hardware, "Hardware YAML or preset (default: h100-sxm-80gb)");
    command->add_option("--format", request.format, "Report format")->check(CLI::IsMember({"text", "json"}));
    command->add_option("-o,--output", output, "Output file, written atomically (default: standard output)");
    syssim::tool::add_layout_flags(*command, request.options);
  }
  bool fail_on_oom = false;
  for (CLI::App* command : commands)
    command->add_flag("--fail-on-oom", fail_on_oom, "Exit with status 3 when the job does not fit (after the report)");
  syssim::tool::add_report_flags(*commands[0], request.report_options);
  std::string timeline;
  commands[0]->add_option("--timeline", timeline,
                          "Also write the simulated timeline as a Chrome trace (Perfetto, chrome://tracing) to FILE");
  CLI::App* validate = app.add_subcommand("validate", "Compare predictions with a table of measured runs");
  syssim::ValidateRequest validation;
  validate->add_option("measured", validation.measured, "CSV of measured runs (docs/validation.md)")->required();
  validate->add_option("--format", validation.format, "Output format")->check(CLI::IsMember({"table", "csv", "json"}));
  validate->add_option("--hardware-dir", validation.options.hardware_dir, "Folder of the hardware presets");
  validate->add_option("--hardware-map", validation.hardware_map,
                       "GPU=PRESET_OR_YAML: the hardware of rows with that gpu cell (repeatable)");
  validate->add_option("-o,--output", validation.output, "Output file, written atomically (default: standard output)");
  validate->add_option("--bands-out", validation.bands_out,
                       "Also write the step-time bands fitted on the rows, as the report reads them (docs/validation.md)");
  CLI::App* calibrate = app.add_subcommand("calibrate", "Fit the calibrated cost estimator on measured kernel times");
  syssim::CalibrateOptions calibrate_options;
  std::string calibrate_hardware;
  calibrate->add_option("--data", calibrate_options.data_dir,
                        "Folder of gemm.csv, attention.csv, rmsnorm.csv (gemm_fp8.csv, attention_backward.csv beside them)")
      ->required();
  std::vector<std::string> family_data, family_overheads;
  calibrate->add_option("--family-data", family_data,
                        "FAMILY=DIR: read that family's files (gemm, attention, norm) from DIR instead (repeatable)");
  calibrate->add_option("--family-overhead-us", family_overheads,
                        "FAMILY=US: that family's measurement overhead, over --overhead-us (repeatable)");
  calibrate->add_option("--hardware", calibrate_hardware, "Hardware YAML whose peaks the residuals are taken against")
      ->required();
  calibrate->add_option("-o,--output", calibrate_options.output_dir, "Bundle folder, written whole or not at all")
      ->required();
  calibrate->add_option("--dtype", calibrate_options.dtype, "The dtype the data was measured in (default bf16)")
      ->check(CLI::IsMember({"bf16", "fp16", "fp8", "fp4"}));
  calibrate->add_option("--holdout", calibrate_options.holdout_share, "Share of rows held out to measure the error")
      ->check(CLI::Range(0.0, 1.0));
  calibrate->add_option("--seed", calibrate_options.seed, "Seed of the held-out split and of XGBoost");
  calibrate->add_option("--overhead-us", calibrate_options.measurement_overhead_us,
                        "Launch and synchronisation time in every measured row (default: estimated; 0 for kernel "
                        "times from a profiler)")
      ->check(CLI::NonNegativeNumber);
  CLI::App* collective = app.add_subcommand("collective", "Predict nccl-tests' table for one collective (docs/network.md)");
  syssim::CollectiveRequest collective_request;
  std::string collective_hardware;
  collective->add_option("--hardware", collective_hardware, "Hardware YAML or preset")->required();
  collective->add_option("--op", collective_request.collective,
                         "all_reduce|all_gather|reduce_scatter|alltoall|broadcast|sendrecv")->required();
  collective->add_option("--gpus", collective_request.gpus, "GPUs, placed consecutively, gpus_per_node per node")
      ->required();
  collective->add_option("--bytes", collective_request.bytes, "Size per rank (8, 64K, 16M, 1G)");
  collective->add_option("--sweep", collective_request.sweep, "MIN:MAX, doubling (8B:16G)");
  collective->add_option("--format", collective_request.format, "table, csv or json");
  collective->add_option("-o,--output", output, "Output file, written atomically (default: standard output)");
  CLI::App* sweep = app.add_subcommand("sweep", "Simulate many layouts of one model (docs/syssim-sweep.md)");
  syssim::SweepRequest sweep_request;
  syssim::tool::SweepFlags sweep_flags;
  syssim::tool::add_sweep_flags(*sweep, sweep_request, sweep_flags);
  CLI::App* presets = app.add_subcommand("presets", "List the hardware and model presets, by name");
  return syssim::tool::guarded_main("syssim", app, argc, argv, [&] {
    if (presets->parsed()) {
      syssim::write_output("-", syssim::render_presets());
      return;
    }
    if (sweep->parsed()) {
      sweep_request.use_cache = !sweep_flags.no_cache;
      sweep_request.plot = !sweep_flags.plot.empty();
      sweep_request.command_line.assign(argv, argv + argc);
      syssim::SweepOutput result = syssim::sweep_command(sweep_request, syssim::tool::terminal_progress());
      std::vector<std::pair<std::string, std::string>> outputs = {{sweep_flags.output, result.text}};
      if (sweep_request.plot) outputs.emplace_back(sweep_flags.plot, result.plot_svg);
      syssim::write_outputs(outputs);
      return;
    }
    if (collective->parsed()) {
      syssim::write_output(output, syssim::collective_report(collective_request,
                                                             syssim::load_hardware_yaml(collective_hardware)));
      return;
    }
    if (calibrate->parsed()) {
      calibrate_options.hardware = syssim::load_hardware_yaml(calibrate_hardware);
      calibrate_options.family_data_dirs = syssim::parse_assignments(family_data, "--family-data", "FAMILY=DIR");
      calibrate_options.family_overhead_us = syssim::parse_family_overheads(family_overheads);
      syssim::write_output("-", syssim::render_calibration(syssim::calibrate(calibrate_options)));
      return;
    }
    if (validate->parsed()) {
      const syssim::ValidateRun run = syssim::validate_command(validation);
      for (const std::string& warning : run.warnings) std::cerr << "syssim: warning: " << warning << "\n";
      syssim::write_outputs(run.outputs);
      if (run.failure) throw syssim::DataError(*run.failure);
      return;
    }
    CLI::App* command = commands[0]->parsed() ? commands[0] : commands[1];
    if (!model.empty()) request.model_path = model;
    if (!hardware.empty()) request.hardware_path = hardware;
    if (model.empty() && hardware.empty()) syssim::tool::apply_default_job(*command, request.options);
    request.memory_only = command == commands[1];
    request.timeline = !request.memory_only && !timeline.empty();
    syssim::RunOutput run = syssim::run(request);
    std::vector<std::pair<std::string, std::string>> outputs = {{output, run.report}};
    if (request.timeline) outputs.emplace_back(timeline, run.chrome_trace);
    syssim::write_outputs(outputs);
    if (fail_on_oom && run.out_of_memory) throw syssim::OutOfMemory(*run.out_of_memory);
  });
}
