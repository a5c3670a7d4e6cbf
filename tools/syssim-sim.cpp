// syssim-sim: simulates one training step on the rank's streams (docs/syssim-sim.md).
#include "sim/sim.hpp"
#include "tool.hpp"

int main(int argc, char** argv) {
  return syssim::tool::run_filter(
      {"syssim-sim", "Simulate one training step of the costed graph with a discrete-event simulation"}, argc, argv,
      [](CLI::App&) {}, syssim::simulate_graph);
}
