// syssim-cost: attaches a time to every op of the shard section (docs/syssim-cost.md).
#include "config/config.hpp"
#include "cost/cost.hpp"
#include "tool.hpp"

int main(int argc, char** argv) {
  std::string hardware_path;
  syssim::CostOptions options;
  bool roofline = false;
  return syssim::tool::run_filter(
      {"syssim-cost", "Estimate the time of every op of the shard section"}, argc, argv,
      [&](CLI::App& app) {
        app.add_option("--hardware", hardware_path, "Hardware YAML file or preset (syssim presets)")->required();
        auto* calibrated = app.add_option("--calibrated", options.calibrated_model,
                                          "Calibrated model bundle (default: the hardware's calibrated_model)");
        app.add_flag("--roofline", roofline, "Compute ops at the bare roofline of the peaks: no calibrated model, no efficiency shares")
            ->excludes(calibrated);
      },
      [&](syssim::Graph& graph) {
        if (roofline) options.estimator = "roofline";
        if (!options.calibrated_model.empty()) options.estimator = "calibrated";
        syssim::cost_graph(graph, syssim::load_hardware_yaml(hardware_path), options);
      });
}
