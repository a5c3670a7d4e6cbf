// syssim-sim: simulates one training step on the rank's streams (docs/syssim-sim.md).
#include "sim/sim.hpp"
#include "tool.hpp"

int main(int argc, char** argv) {
  syssim::SimOptions options;
  bool every_microbatch = false;
  return syssim::tool::run_filter(
      {"syssim-sim", "Simulate one training step of the costed graph with a discrete-event simulation"}, argc, argv,
      [&](CLI::App& app) {
        app.add_flag("--timeline", options.record_timeline,
                     "Keep every op instance's start and end in the sim section (for syssim-report's pictures)");
        app.add_flag("--every-microbatch", every_microbatch,
                     "Simulate every micro-batch instead of jumping over steady-state periods");
      },
      [&](syssim::Graph& g) {
        options.extrapolate_microbatches = !every_microbatch;
        syssim::simulate_graph(g, options);
      });
}
