// The "cost" section (docs/graph-format.md), owned by syssim-cost: the hardware and the
// time of every op of the shard section on one rank.
#pragma once
#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/op_kinds.hpp"
#include "config/config.hpp"
#include "network/network.hpp"

namespace syssim {

// What sets an op's time: the tensor cores or vector units, memory bandwidth, the kernel launch
// floor, the network (collectives) or the host link (host copies).
enum class OpBound : uint8_t { compute, memory, launch, network, host_link };
template <>
struct EnumNames<OpBound> {
  static constexpr std::array<const char*, 5> kNames = {"compute", "memory", "launch", "network", "host_link"};
};

struct OpCost {
  int64_t id = 0;        // the shard op
  double time_us = 0;    // alone: for a collective, the sum of its phases' times
  OpBound bound = OpBound::compute;
  std::vector<Phase> phases;  // collectives only, in order (docs/network.md)
  double host_us = 0;  // the host's time to issue it (docs/syssim-sim.md, "The host"); 0: not simulated
};

struct CostSection {
  std::string estimator;  // roofline
  HardwareConfig hardware;
  std::vector<Link> links;  // the topology's links (network_links), which phases index
  std::vector<OpCost> ops;  // one per shard op, same order
};

// Refuses links without a positive bandwidth and phases the simulator cannot run (on links that
// do not exist, without one positive load per link, moving bytes at no bandwidth, negative
// sizes); throws DataError naming the path under `path` (e.g. "/cost").
void check_network(const CostSection& cost, const std::string& path);

// A cost section describes the shard section beside it: one cost per shard op, in order, and
// network phases on collectives only (a copy to or from host memory has none either). Throws
// DataError naming the path under `path` (e.g. "/cost").
void check_matches_shard(const CostSection& cost, const ShardSection& shard, const std::string& path);

nlohmann::json to_json(const CostSection& cost);
CostSection cost_from_json(const nlohmann::json& j, const std::string& path);

}  // namespace syssim
