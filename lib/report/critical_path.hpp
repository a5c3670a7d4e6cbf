// The critical path of a simulated step (docs/syssim-report.md, "Critical path"): the chain of
// op instances of the sim section's timeline, each waiting for the one before it, that ends
// with the step. Read back from the step's end through what each instance waited for.
#pragma once
#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "common/graph.hpp"

namespace syssim {

struct CriticalPath {
  std::vector<size_t> entries;  // timeline indices, first to last
  // Where its time went: busy instances by what they are, and the time between an instance and
  // the one before it on the path that nothing in the timeline explains (`waiting_ms`; the
  // time before the first instance is in it too). They sum to the step's end.
  std::map<std::string, double> compute_ms;        // by op kind: gemm, attention, ...
  std::map<std::string, double> communication_ms;  // by group: tp, ep, dp, pp, ...
  double host_ms = 0;  // the host issuing ops (docs/syssim-sim.md, "The host")
  double waiting_ms = 0;
  std::vector<double> pp_rank_ms;  // busy time on the path by pipeline rank
  // The same op of every layer together (op_label with any layer), longest first.
  std::vector<TimedOp> modules_ms;
  double length_ms() const;  // all of the above: the end of the path's last instance
};

// An instance waits for the instance before it on its stream, for the instances of its op's
// deps (of its micro-batch; a step op, for the last-finishing instance of each dep), for its
// host's issue of it, the host for the instance of `host_waits_for`, and where
// receives_after_previous_slot a pipeline receive for its rank's compute in the slots before
// its own. The path starts at the instance that ends last and goes back, each time to what the
// instance waited for that finished last before it started (ties: a dep, the stream's order,
// the receive's posting, the host).
// Needs shard and sim with a timeline (need_timeline's errors).
CriticalPath critical_path(const Graph& g);

}  // namespace syssim
