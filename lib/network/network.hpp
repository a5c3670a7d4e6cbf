// Collective pricing (docs/network.md): NCCL's algorithms on the links of the hardware's
// topology, the algorithm chosen the way NCCL's tuner does (the lowest predicted time), and
// `syssim collective`, nccl-tests' table for one collective.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "common/graph.hpp"
#include "config/config.hpp"

namespace syssim {

// Where a group's ranks lie: `size` ranks, `ranks_per_node` of them in each node they use
// (size when the group stays in one node).
struct GroupPlacement {
  int64_t size = 1;
  int64_t ranks_per_node = 1;
  int64_t nodes() const { return size / ranks_per_node; }
};

struct CollectiveTime {
  double time_us = 0;
  std::string algorithm;
};

// The time of one collective (nccl-tests names: all_reduce, all_gather, reduce_scatter,
// alltoall, broadcast, sendrecv) of `bytes` per rank (nccl-tests' size). The hardware's
// collective_algorithm forces an algorithm; otherwise the fastest applicable one is taken.
// Throws DataError when the hardware lacks a link the group needs or the forced algorithm
// does not apply, UsageError for an unknown collective.
CollectiveTime collective_time(const std::string& collective, double bytes, const GroupPlacement& group,
                               const HardwareConfig& hw);

// The time of a collective op of the shard section (its group placed in Megatron's rank order)
// on the hardware; throws DataError naming the op when it cannot be priced.
CollectiveTime shard_collective_time(const ShardOp& op, const ParallelismConfig& p, const HardwareConfig& hw);

// nccl-tests' bus-bandwidth factor (doc/PERFORMANCE.md): busbw = algbw * factor.
double bus_bandwidth_factor(const std::string& collective, int64_t ranks);

struct CollectiveRequest {
  std::string collective;
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
