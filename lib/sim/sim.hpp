// The discrete-event simulator (docs/syssim-sim.md): one training step on in-order streams.
#pragma once
#include "common/graph.hpp"

namespace syssim {

struct SimOptions {
  bool record_timeline = false;  // keep every op instance's times in g.sim->timeline
  // Replay repeated schedule slots from one simulation of each kind where that is exact
  // (docs/syssim-sim.md, "Replayed slots"); off simulates every op instance.
  bool replay_slots = true;
  // Where the step's state repeats every few micro-batches, jump over whole periods of them
  // instead of simulating each (docs/syssim-sim.md, "Extrapolated micro-batches"); off, or with
  // record_timeline, simulates every micro-batch.
  bool extrapolate_microbatches = true;
};

// How much of a step the simulator replayed instead of simulating.
struct SimStats {
  int64_t instances = 0;  // op instances of the step, all ranks
  int64_t replayed = 0;   // of them, replayed from a slot kind's simulation
  // Steady-state periods were jumped over (docs/syssim-sim.md, "Extrapolated micro-batches"):
  // instances and replayed count those simulated.
  bool extrapolated = false;
};

// A lower bound on the step time simulate_graph gives for these sections, in ms, found
// without simulating each op instance (docs/syssim-sim.md, "A lower bound on the step"):
// the longest path through each slot's ops, their deps and the compute stream's order, at
// each op's least duration, chained slot by slot along the schedule. Throws DataError
// where the schedule's slots wait for each other.
double step_time_lower_bound_ms(const ShardSection& shard, const CostSection& cost);

// Per slot kind of pipeline rank `stage` (rank_program's kinds) and per part of the model
// (part_of[op id] < parts: a decoder layer, the embedding, ...): a lower bound in ms on the
// time from the part's first compute op's start to its last compute op's finish in every slot
// of that kind, the longest path between them over the deps among the part's ops and the
// compute stream's order, at each op's least duration; so it holds the communication of the
// part that its compute waits for. Where a kind's compute stream leaves a part and comes back
// to it, that kind's parts get their compute time alone, so that in every kind the spans of
// the parts add up to a lower bound on the kind's slot. 0 for a part without compute ops.
std::vector<std::vector<double>> part_spans_ms(const ShardSection& shard, const CostSection& cost, int64_t stage,
                                               const std::vector<size_t>& part_of, size_t parts);

// Sets g.sim from g.shard and g.cost. Throws DataError on cyclic dependencies, on ops that
// can never start (waiting, through deps and stream order, for ops issued after them) and
// on a cost section that does not match the shard section.
SimStats simulate_graph(Graph& g, const SimOptions& options = {});

}  // namespace syssim
