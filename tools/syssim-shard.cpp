// syssim-shard: applies parallelism and training settings to a traced graph.
#include "layout_flags.hpp"
#include "tool.hpp"

int main(int argc, char** argv) {
  syssim::ShardOptions options;
  return syssim::tool::run_filter(
      {"syssim-shard", "Instantiate a traced step for one rank under a parallel layout (docs/syssim-shard.md)"}, argc,
      argv,
      [&](CLI::App& app) {
        syssim::tool::add_layout_flags(app, options);
        app.parse_complete_callback([&app, &options] { syssim::tool::derive_unset_sizes(app, options); });
      },
      [&](syssim::Graph& graph) { syssim::shard_graph(graph, options); });
}
