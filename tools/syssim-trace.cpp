// syssim-trace: traces one training step of a model architecture into a new graph (docs/syssim-trace.md).
#include "common/version.hpp"
#include "config/config.hpp"
#include "tool.hpp"
#include "trace/trace.hpp"

int main(int argc, char** argv) {
  std::string model_path;
  return syssim::tool::run_command(
      {"syssim-trace", "Trace one training step (forward and backward) of a model into a graph"}, argc, argv,
      [&](CLI::App& app) { app.add_option("model", model_path, "Model YAML file or preset (syssim presets)")->required(); },
      [&](const syssim::tool::Tool& tool) {
        syssim::Graph graph;
        graph.model = syssim::load_model_yaml(model_path);
        graph.trace = syssim::trace_model(*graph.model);
        graph.provenance.push_back({tool.name, syssim::kSyssimVersion, tool.args});
        return syssim::write_graph(graph);
      });
}
