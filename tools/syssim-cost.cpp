// syssim-cost: attaches a roofline time to every op of the shard section (docs/syssim-cost.md).
#include "config/config.hpp"
#include "cost/cost.hpp"
#include "tool.hpp"

int main(int argc, char** argv) {
  std::string hardware_path;
  return syssim::tool::run_filter(
      {"syssim-cost", "Estimate the time of every op of the shard section with the roofline model"}, argc, argv,
      [&](CLI::App& app) { app.add_option("--hardware", hardware_path, "Hardware YAML file")->required(); },
      [&](syssim::Graph& graph) { syssim::cost_graph(graph, syssim::load_hardware_yaml(hardware_path)); });
}
