// Collective pricing (docs/network.md): NCCL's algorithms as phases of traffic over the links of
// the hardware's topology, the algorithm chosen the way NCCL's tuner does (the lowest predicted
// time), rank placement in Megatron's order, and `syssim collective`, nccl-tests' table for one
// collective.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "shard/section.hpp"

namespace syssim {

// The share of one network link (a topology level) that one rank gets when every GPU of its
// domain sends at once: per GPU, one direction, after the protocol efficiency and the
// oversubscription. Level 0 is the NVLink of a node, level 1 the GPU's share of the node's NICs,
// level 2 and above its share of the uplinks of the switches below that level.
struct Link {
  std::string name;  // the topology level's kind
  int64_t level = 0;
  double bandwidth_GBps = 0;
};

// One step of a collective's algorithm on one rank: `latency_us` of fixed per-hop latency, then
// a flow of `bytes` at up to `bandwidth_GBps`, which puts loads[k] * bytes on the rank's link
// links[k] (a ring across nodes loads the NVLink with its intra-node hops too). syssim-sim
// shares each link among the flows on it.
struct Phase {
  std::vector<int64_t> links;  // indices into the topology's links (network_links)
  std::vector<double> loads;   // one per link, > 0
  double bytes = 0;
  double bandwidth_GBps = 0;   // alone on its links: min over k of capacity / loads[k]
  double latency_us = 0;
};

// The links of the hardware's topology, innermost first: levels[1..] of `topology`, or the
// shorthand inter_node_bandwidth_GBps / inter_node_latency_us as one scale-out level.
std::vector<Link> network_links(const HardwareConfig& hw);

// Where a group's ranks lie: `size` ranks over `nodes` nodes, `ranks_per_node` of them in each
// (in the node that holds the fewest where they are spread unevenly: its NICs carry the most of
// the node's share of the traffic), and for each scale-out level above the first the number of
// that level's domains below it they span (outer_domains[0]: leaf groups of level 1, ...);
// empty: one.
struct GroupPlacement {
  int64_t size = 1;
  int64_t ranks_per_node = 1;
  int64_t nodes = 1;
  std::vector<int64_t> outer_domains;
};

// The placement of the group of these global ranks on the hardware's levels.
GroupPlacement place_ranks(const std::vector<int64_t>& ranks, const HardwareConfig& hw);

// The global ranks of a shard section's collective op's group (the one holding the simulated
// rank of its stage, in the parallelism's rank order): a pipeline send_recv's two ranks, its
// own and its neighbour's.
std::vector<int64_t> collective_ranks(const ShardOp& op, const ParallelismConfig& p);

struct CollectiveTime {
  double time_us = 0;
  std::optional<CollectiveAlgorithm> algorithm;  // none: a group of one rank, which moves nothing
  std::vector<Phase> phases;  // in order; time_us is the sum of their times alone
};

// The time of one collective of `bytes` per rank (nccl-tests' size). The hardware's
// collective_algorithm forces an algorithm; otherwise the fastest applicable one is taken.
// Throws DataError when the hardware lacks a link the group needs or the forced algorithm
// does not apply.
CollectiveTime collective_time(NcclCollective collective, double bytes, const GroupPlacement& group,
                               const HardwareConfig& hw);

// The time of a collective op of the shard section (its group placed in the parallelism's rank
// order) on the hardware; throws DataError naming the op when it cannot be priced.
CollectiveTime shard_collective_time(const ShardOp& op, const ParallelismConfig& p, const HardwareConfig& hw);

// nccl-tests' bus-bandwidth factor (doc/PERFORMANCE.md): busbw = algbw * factor.
double bus_bandwidth_factor(NcclCollective collective, int64_t ranks);

struct CollectiveRequest {
  std::string collective;  // nccl-tests' name; collective_report refuses another
  int64_t gpus = 0;
  std::string bytes;  // one size (8, 1K, 16M, 1G: powers of two as nccl-tests' -b/-e) ...
  std::string sweep;  // ... or MIN:MAX, doubling from MIN
  std::string format = "table";  // table | csv | json
};

// Sizes of a --bytes or --sweep value; throws UsageError naming the flag and the value.
std::vector<int64_t> parse_sizes(const std::string& value, const std::string& flag);

// nccl-tests' columns for the request on `gpus` consecutive ranks (gpus_per_node per node, as
// Megatron places ranks): size, time_us, algbw_GBps, busbw_GBps, algorithm.
std::string collective_report(const CollectiveRequest& request, const HardwareConfig& hw);

}  // namespace syssim
