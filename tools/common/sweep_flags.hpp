// The flags of `syssim sweep` (docs/syssim-sweep.md), and its progress line on a terminal.
#pragma once
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <iostream>

#include "layout_flags.hpp"
#include "sweep/sweep.hpp"

namespace syssim::tool {

// What the flags set besides the request.
struct SweepFlags {
  std::string output = "-";
  std::string plot;  // --plot FILE.svg
  bool no_cache = false;
};

inline void add_sweep_flags(CLI::App& sweep, SweepRequest& request, SweepFlags& flags) {
  sweep.add_option("model", request.model_path, "Model YAML or preset, or a Hugging Face id or config.json with --seq-length");
  sweep.add_option("--hardware", request.hardware_path, "Hardware YAML or preset");
  add_layout_flags(sweep, request.options);
  sweep.get_option("--gpus")->excludes("--dp")->description("GPU count: each point's dp is gpus/(tp*cp*pp)");
  // Points compare at one global batch: it is not derived per point as a run's is.
  sweep.get_option("--global-batch")
      ->description("Global batch size of every point (default: the base job's micro-batch x dp, dp from --gpus)");
  sweep.add_option("--over", request.over, "PATH=V1,V2,...: a config key and its values (repeatable)")
      ->allow_extra_args(false);
  sweep.add_option("--metric", request.metric, "What best means: mfu (highest), step_time_ms or peak_memory_gb (lowest); not with --search")
      ->check(CLI::IsMember({"mfu", "step_time_ms", "peak_memory_gb"}));
  sweep.add_option("--top", request.top, "Print only the K best points that fit, best first")
      ->check(kPositive);
  sweep.add_option("--format", request.format, "Output format")->check(CLI::IsMember({"table", "csv", "json"}));
  sweep.add_option("-o,--output", flags.output, "Output file, written atomically (default: standard output)");
  sweep.add_flag("--no-cache", flags.no_cache, "Simulate every point, neither reading nor writing the result cache");
  sweep.add_option("-j,--jobs", request.threads, "Points simulated at once (default: one per core)")
      ->check(kPositive);
  sweep.add_flag("--search", request.search, "Search every layout of --gpus N and print the Pareto front");
  sweep.add_option("--emit-jobs", request.emit_jobs_dir,
                    "Print one single-point syssim sweep command per point, writing DIR/point-NNNN.json");
  sweep.add_option("--merge", request.merge_files, "Join the JSON results of sweeps (--emit-jobs jobs)")
      ->expected(1, -1);
  sweep.add_option("--plot", flags.plot, "Also draw the sweep (or the search's Pareto front) as an SVG file");
}

// Points done, rate and time left of a sweep, on one rewritten line of a terminal's stderr.
inline SweepProgress terminal_progress() {
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

}  // namespace syssim::tool
