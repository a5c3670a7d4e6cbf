// The report flags shared by syssim-report and `syssim run`.
#pragma once
#include <CLI/CLI.hpp>

#include "report/report.hpp"
#include "tool.hpp"

namespace syssim::tool {

inline void add_report_flags(CLI::App& app, ReportOptions& options) {
  app.add_option_function<std::string>(
         "--mfu-convention", [&options](const std::string& name) { options.mfu_convention = *parse_mfu_convention(name); },
         "FLOPs MFU counts: megatron (Megatron-LM's, attention over the whole s x s matrix; default) or causal "
         "(half of attention's score and context FLOPs)")
      ->check(CLI::IsMember({"megatron", "causal"}));
  app.add_option_function<double>(
         "--train-tokens", [&options](double tokens) { options.train_tokens = tokens; },
         "Also report the days and GPU-hours to train on this many tokens at the simulated step")
      ->check(kPositive);
  app.add_option_function<std::string>(
      "--timeline-microbatches",
      [&options](const std::string& text) {
        options.timeline_window.microbatches = parse_microbatch_window(text, "--timeline-microbatches");
      },
      "Timelines (chrome-trace, svg, --timeline) draw only micro-batches FIRST:LAST (from 0) and the step's own ops");
  app.add_option_function<std::string>(
      "--timeline-window",
      [&options](const std::string& text) { options.timeline_window.time_ms = parse_time_window(text, "--timeline-window"); },
      "Timelines draw only the op instances that overlap START:END ms");
}

}  // namespace syssim::tool
