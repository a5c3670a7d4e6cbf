// The network flows of one pipeline rank (docs/syssim-sim.md, "Network flows"): the links a
// rank's collectives and transfers use, the flows on them, and their max-min fair rates.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/graph.hpp"

namespace syssim::sim_detail {

// The phases of the instance running on one queue whose cost has phases, and the flow of the
// current one. One per queue, indexed like the queues: a queue runs one instance at a time.
struct Flow {
  int64_t rank = 0;
  const std::vector<Phase>* phases = nullptr;
  size_t phase = 0;           // the current one
  double remaining_bytes = 0;
  double cap = 0;             // bytes/us: the phase's bandwidth_GBps
  double rate = 0;            // bytes/us, while on its links
  uint32_t version = 0;       // bumped on every rate change: older finish events are stale
  double next_rate = 0;       // water-filling scratch
  bool frozen = false;        // water-filling scratch
};

// One cost link of one pipeline rank.
struct LinkState {
  double capacity = 0;  // bytes/us
  int64_t flows = 0;    // on it now
  int64_t max_flows = 0;
  double busy_us = 0;   // wall time with at least one flow on it
  double bytes = 0;     // moved on it: load times bytes, summed over flows
  double spare = 0;        // water-filling scratch: capacity left
  int64_t unfrozen = 0;    // water-filling scratch: flows not yet given a rate
  double weight = 0;       // water-filling scratch: their summed loads on the link
  bool saturated = false;  // water-filling scratch
};

// The links of one pipeline rank and its flows on them.
struct RankNetwork {
  std::vector<LinkState> links;
  std::vector<size_t> active;  // Flow indices (queues), in the order they started
  double updated_us = 0;       // remaining bytes and busy times are up to this time
};

// Max-min fair rates by progressive filling: all flows not yet given a rate grow together; a
// flow at rate r puts loads[k] * r on its link k; it stops growing at its cap, or when one of
// its links is full. Sets next_rate of the network's active flows.
void fill_rates(RankNetwork& network, std::vector<Flow>& flows);

}  // namespace syssim::sim_detail
