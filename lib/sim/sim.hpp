// The discrete-event simulator (docs/syssim-sim.md): one training step on in-order streams.
#pragma once
#include "common/graph.hpp"

namespace syssim {

struct SimOptions {
  bool record_timeline = false;  // keep every op instance's times in g.sim->timeline
};

// Sets g.sim from g.shard and g.cost. Throws DataError on cyclic dependencies, on ops that
// can never start (waiting, through deps and stream order, for ops issued after them) and
// on a cost section that does not match the shard section.
void simulate_graph(Graph& g, const SimOptions& options = {});

}  // namespace syssim
