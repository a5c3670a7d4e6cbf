// syssim-trace: traces one training step of a model architecture into a new graph (docs/syssim-trace.md).
#include "common/version.hpp"
#include "config/config.hpp"
#include "tool.hpp"
#include "trace/trace.hpp"

int main(int argc, char** argv) {
  std::string model_path;
  std::optional<int64_t> seq_length;
  return syssim::tool::run_command(
      {"syssim-trace", "Trace one training step (forward and backward) of a model into a graph"}, argc, argv,
      [&](CLI::App& app) {
        app.add_option("model", model_path,
                       "Model YAML or preset, or a Hugging Face id or config.json with --seq-length")
            ->required();
        app.add_option("--seq-length", seq_length,
                       "The training sequence length: needed by a Hugging Face model, whose config.json does not "
                       "hold one; replaces a model YAML's seq_length (syssim-shard --seq-length overrides either)")
            ->check(syssim::tool::kPositive);
      },
      [&](const syssim::tool::Tool& tool) {
        syssim::Graph graph;
        graph.model = syssim::load_model(model_path, seq_length);
        if (seq_length) graph.model->seq_length = *seq_length;  // a model YAML's own
        graph.trace = syssim::trace_model(syssim::traced_at(*graph.model, graph.model->seq_length));
        graph.provenance.push_back({tool.name, syssim::kSyssimVersion, tool.args});
        return syssim::write_graph(graph);
      });
}
