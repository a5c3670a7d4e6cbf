// The "cost" section (docs/graph-format.md), owned by syssim-cost: the hardware and the
// time of every op of the shard section on one rank.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/config.hpp"

namespace syssim {

struct OpCost {
  int64_t id = 0;        // the shard op
  double time_us = 0;
  std::string bound;     // compute | memory | launch | network
};

struct CostSection {
  std::string estimator;  // roofline
  HardwareConfig hardware;
  std::vector<OpCost> ops;  // one per shard op, same order
};

nlohmann::json to_json(const CostSection& cost);
CostSection cost_from_json(const nlohmann::json& j, const std::string& path);

}  // namespace syssim
