// syssim-cost: attaches a time to every op of the shard section (docs/syssim-cost.md).
#include "config/config.hpp"
#include "cost/cost.hpp"
#include "estimator_flags.hpp"
#include "tool.hpp"

int main(int argc, char** argv) {
  std::string hardware_path;
  syssim::CostOptions options;
  return syssim::tool::run_filter(
      {"syssim-cost", "Estimate the time of every op of the shard section"}, argc, argv,
      [&](CLI::App& app) {
        app.add_option("--hardware", hardware_path, "Hardware YAML file or preset (syssim presets)")->required();
        syssim::tool::add_estimator_flags(app, options);
      },
      [&](syssim::Graph& graph) {
        syssim::cost_graph(graph, syssim::load_hardware_yaml(hardware_path), options);
      });
}
