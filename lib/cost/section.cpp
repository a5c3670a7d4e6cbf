#include "cost/section.hpp"

#include "common/json_util.hpp"

namespace syssim {

json to_json(const CostSection& c) {
  json ops = json::array();
  for (const auto& op : c.ops) ops.push_back({{"id", op.id}, {"time_us", op.time_us}, {"bound", op.bound}});
  return {{"estimator", c.estimator}, {"hardware", to_json(c.hardware)}, {"ops", ops}};
}

CostSection cost_from_json(const json& j, const std::string& path) {
  CostSection c;
  c.estimator = require_as<std::string>(j, "estimator", path);
  c.hardware = hardware_from_json(require(j, "hardware", path), path + "/hardware");
  const json& ops = require(j, "ops", path);
  for (size_t i = 0; i < ops.size(); ++i) {
    std::string p = path + "/ops/" + std::to_string(i);
    OpCost op{require_as<int64_t>(ops[i], "id", p), require_as<double>(ops[i], "time_us", p),
              require_as<std::string>(ops[i], "bound", p)};
    if (op.id != static_cast<int64_t>(i)) throw DataError("graph: " + p + "/id: expected " + std::to_string(i));
    if (op.time_us < 0) throw DataError("graph: " + p + "/time_us: negative time " + std::to_string(op.time_us));
    c.ops.push_back(op);
  }
  return c;
}

}  // namespace syssim
