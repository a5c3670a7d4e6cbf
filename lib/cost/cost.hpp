// The roofline cost model (docs/syssim-cost.md): the time of every op of one rank.
#pragma once
#include "common/graph.hpp"

namespace syssim {

// Sets g.cost from g.shard: one OpCost per shard op, in order. Throws DataError when the
// hardware lacks a value the graph needs (an fp8 peak, the inter-node bandwidth).
void cost_graph(Graph& g, const HardwareConfig& hw);

}  // namespace syssim
