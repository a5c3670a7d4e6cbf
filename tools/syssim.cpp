// syssim: the driver. `run` and `memory` run every stage in one process (docs/syssim.md);
// `calibrate` fits the calibrated cost estimator (docs/calibration.md); `sweep` simulates many
// layouts of one model (docs/syssim-sweep.md).

#include <unistd.h>

#include <chrono>
#include <iostream>

#include "calibrate/calibrate.hpp"
#include "common/io.hpp"
#include "common/version.hpp"
#include "driver/driver.hpp"
#include "layout_flags.hpp"
#include "network/network.hpp"
#include "report/pictures.hpp"
#include "report/report.hpp"
#include "sweep/sweep.hpp"
#include "tool.hpp"
#include "validate/validate.hpp"

namespace {

// Flags of the default job that the user did not set take the default job's values.
void apply_default_job(const CLI::App& command, syssim::ShardOptions& options) {
  const syssim::ShardOptions job = syssim::default_job_options();
  auto unset = [&](const char* flag) { return command.count(flag) == 0; };
  if (unset("--tp")) options.parallelism.tp = job.parallelism.tp;
  if (unset("--sp") && unset("--tp")) options.parallelism.sp = job.parallelism.sp;
  if (unset("--dp")) options.parallelism.dp = job.parallelism.dp;
  if (unset("--micro-batch")) options.training.micro_batch = job.training.micro_batch;
  if (unset("--global-batch")) options.training.global_batch = job.training.global_batch;
  if (unset("--distributed-optimizer")) options.training.distributed_optimizer = job.training.distributed_optimizer;
}

// Points done, rate and time left of a sweep, on one rewritten line of a terminal's stderr.
syssim::SweepProgress terminal_progress() {
  if (!isatty(STDERR_FILENO)) return {};
  auto start = std::chrono::steady_clock::now();
  return [start](int64_t done, int64_t total) {
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    double rate = seconds > 0 ? done / seconds : 0;
    std::cerr << "\rsyssim sweep: " << done << "/" << total << " points, " << static_cast<int64_t>(rate)
              << " points/s, ETA " << (rate > 0 ? static_cast<int64_t>((total - done) / rate) : 0) << " s   "
              << (done == total ? "\n" : "") << std::flush;
  };
}

}  // namespace

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
    command->add_option("model", model, "Model YAML (default: embedded Llama-3-8B)");
    command->add_option("--hardware", hardware, "Hardware YAML (default: embedded H100 SXM node)");
    command->add_option("--format", request.format, "Report format")->check(CLI::IsMember({"text", "json"}));
    command->add_option("-o,--output", output, "Output file, written atomically (default: standard output)");
    syssim::tool::add_layout_flags(*command, request.options);
  }
  std::string timeline;
  commands[0]->add_option("--timeline", timeline,
                          "Also write the simulated timeline as a Chrome trace (Perfetto, chrome://tracing) to FILE");
  CLI::App* validate = app.add_subcommand("validate", "Compare predictions with a table of measured runs");
  std::string measured, validate_format = "table";
  syssim::ValidateOptions validate_options;
  validate->add_option("measured", measured, "CSV of measured runs (docs/validation.md)")->required();
  validate->add_option("--format", validate_format, "Output format")->check(CLI::IsMember({"table", "csv", "json"}));
  validate->add_option("--hardware-dir", validate_options.hardware_dir, "Folder of the hardware presets");
  std::vector<std::string> hardware_map;
  validate->add_option("--hardware-map", hardware_map,
                       "GPU=PRESET_OR_YAML: the hardware of rows with that gpu cell (repeatable)");
  validate->add_option("-o,--output", output, "Output file, written atomically (default: standard output)");
  CLI::App* calibrate = app.add_subcommand("calibrate", "Fit the calibrated cost estimator on measured kernel times");
  syssim::CalibrateOptions calibrate_options;
  std::string calibrate_hardware;
  calibrate->add_option("--data", calibrate_options.data_dir, "Folder of gemm.csv, attention.csv, rmsnorm.csv")
      ->required();
  calibrate->add_option("--hardware", calibrate_hardware, "Hardware YAML whose peaks the residuals are taken against")
      ->required();
  calibrate->add_option("-o,--output", calibrate_options.output_dir, "Bundle folder, written whole or not at all")
      ->required();
  calibrate->add_option("--dtype", calibrate_options.dtype, "The dtype the data was measured in (default bf16)")
      ->check(CLI::IsMember({"bf16", "fp16", "fp8", "fp4"}));
  calibrate->add_option("--holdout", calibrate_options.holdout_share, "Share of rows held out to measure the error")
      ->check(CLI::Range(0.0, 1.0));
  calibrate->add_option("--seed", calibrate_options.seed, "Seed of the held-out split and of XGBoost");
  CLI::App* collective = app.add_subcommand("collective", "Predict nccl-tests' table for one collective (docs/network.md)");
  syssim::CollectiveRequest collective_request;
  std::string collective_hardware;
  collective->add_option("--hardware", collective_hardware, "Hardware YAML")->required();
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
  std::string plot;
  bool no_cache = false;
  sweep->add_option("model", model, "Model YAML");
  sweep->add_option("--hardware", hardware, "Hardware YAML");
  syssim::tool::add_layout_flags(*sweep, sweep_request.options);
  sweep->get_option("--gpus")->excludes("--dp");  // with --gpus, each point's dp is derived (or swept)
  sweep->add_option("--over", sweep_request.over, "PATH=V1,V2,...: a config key and its values (repeatable)")
      ->allow_extra_args(false);
  sweep->add_option("--metric", sweep_request.metric, "What best means: mfu (highest), step_time_ms or peak_memory_gb (lowest)")
      ->check(CLI::IsMember({"mfu", "step_time_ms", "peak_memory_gb"}));
  sweep->add_option("--top", sweep_request.top, "Print only the K best points that fit, best first")
      ->check(CLI::PositiveNumber);
  sweep->add_option("--format", sweep_request.format, "Output format")->check(CLI::IsMember({"table", "csv", "json"}));
  sweep->add_option("-o,--output", output, "Output file, written atomically (default: standard output)");
  sweep->add_flag("--no-cache", no_cache, "Simulate every point, neither reading nor writing the result cache");
  sweep->add_flag("--search", sweep_request.search, "Search every layout of --gpus N and print the Pareto front");
  sweep->add_option("--emit-jobs", sweep_request.emit_jobs_dir,
                    "Print one single-point syssim sweep command per point, writing DIR/point-NNNN.json");
  sweep->add_option("--merge", sweep_request.merge_files, "Join the JSON results of sweeps (--emit-jobs jobs)")
      ->expected(1, -1);
  sweep->add_option("--plot", plot, "Also draw the sweep (or the search's Pareto front) as an SVG file");
  return syssim::tool::guarded_main("syssim", app, argc, argv, [&] {
    if (sweep->parsed()) {
      sweep_request.model_path = model;
      sweep_request.hardware_path = hardware;
      sweep_request.use_cache = !no_cache;
      sweep_request.plot = !plot.empty();
      sweep_request.command_line.assign(argv, argv + argc);
      syssim::SweepOutput result = syssim::sweep_command(sweep_request, terminal_progress());
      syssim::write_output(output, result.text);
      if (!plot.empty()) syssim::write_output(plot, result.plot_svg);
      return;
    }
    if (collective->parsed()) {
      syssim::write_output(output, syssim::collective_report(collective_request,
                                                             syssim::load_hardware_yaml(collective_hardware)));
      return;
    }
    if (calibrate->parsed()) {
      calibrate_options.hardware = syssim::load_hardware_yaml(calibrate_hardware);
      syssim::write_output("-", syssim::render_calibration(syssim::calibrate(calibrate_options)));
      return;
    }
    if (validate->parsed()) {
      validate_options.hardware_map = syssim::parse_hardware_map(hardware_map);
      syssim::ValidationResult result =
          syssim::validate_measured(syssim::read_input(measured), measured, validate_options);
      for (const std::string& warning : result.warnings) std::cerr << "syssim: warning: " << warning << "\n";
      syssim::write_output(output, syssim::render_validation(result, validate_format));
      return;
    }
    CLI::App* command = commands[0]->parsed() ? commands[0] : commands[1];
    if (!model.empty()) request.model_path = model;
    if (!hardware.empty()) request.hardware_path = hardware;
    if (model.empty() && hardware.empty()) apply_default_job(*command, request.options);
    if (command == commands[0] && !timeline.empty()) {
      request.sim.record_timeline = true;
      syssim::Graph graph = syssim::run_graph(request);
      std::string trace = syssim::render_chrome_trace(graph), report = syssim::render_report(graph, request.format);
      syssim::write_output(timeline, trace);
      syssim::write_output(output, report);
      return;
    }
    syssim::write_output(output, command == commands[0] ? syssim::run_report(request) : syssim::memory_report(request));
  });
}
