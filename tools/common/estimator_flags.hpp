// The flags choosing the cost stage's estimator, shared by syssim-cost and `syssim run`
// (docs/syssim-cost.md).
#pragma once
#include <CLI/CLI.hpp>

#include "cost/cost.hpp"

namespace syssim::tool {

inline void add_estimator_flags(CLI::App& app, CostOptions& options) {
  auto* calibrated = app.add_option("--calibrated", options.calibrated_model,
                                    "Calibrated model bundle (default: the hardware's calibrated_model)")
                         ->each([&options](const std::string&) { options.estimator = "calibrated"; });
  app.add_flag_callback("--roofline", [&options] { options.estimator = "roofline"; },
                        "Compute ops at the bare roofline of the peaks: no calibrated model, no efficiency shares")
      ->excludes(calibrated);
}

}  // namespace syssim::tool
