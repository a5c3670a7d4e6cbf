#include "cost/section.hpp"

#include <cmath>

#include "common/json_util.hpp"

namespace syssim {

json to_json(const CostSection& c) {
  json links = json::array();
  for (const Link& link : c.links)
    links.push_back({{"name", link.name}, {"level", link.level}, {"bandwidth_GBps", link.bandwidth_GBps}});
  json ops = json::array();
  for (const auto& op : c.ops) {
    ops.push_back({{"id", op.id}, {"time_us", op.time_us}, {"bound", to_string(op.bound)}});
    if (op.host_us > 0) ops.back()["host_us"] = op.host_us;
    if (op.phases.empty()) continue;
    json phases = json::array();
    for (const Phase& phase : op.phases)
      phases.push_back({{"links", phase.links}, {"loads", phase.loads}, {"bytes", phase.bytes},
                        {"bandwidth_GBps", phase.bandwidth_GBps}, {"latency_us", phase.latency_us}});
    ops.back()["phases"] = phases;
  }
  return {{"estimator", c.estimator}, {"hardware", to_json(c.hardware)}, {"links", links}, {"ops", ops}};
}

void check_matches_shard(const CostSection& cost, const ShardSection& shard, const std::string& path) {
  if (cost.ops.size() != shard.ops.size())
    throw DataError(path + "/ops: " + std::to_string(cost.ops.size()) + " ops for " + std::to_string(shard.ops.size()) +
                    " shard ops; rerun syssim-cost on this shard section");
  for (size_t i = 0; i < cost.ops.size(); ++i)
    if (!cost.ops[i].phases.empty() && shard.ops[i].kind != OpKind::collective)
      throw DataError(path + "/ops/" + std::to_string(i) + "/phases: shard op " + std::to_string(i) + " is a " +
                      to_string(shard.ops[i].kind) + " op; only collectives have network phases");
}

void check_network(const CostSection& c, const std::string& path) {
  for (size_t i = 0; i < c.links.size(); ++i)
    if (!(c.links[i].bandwidth_GBps > 0))
      throw DataError(path + "/links/" + std::to_string(i) + "/bandwidth_GBps: expected a positive number, got " +
                      std::to_string(c.links[i].bandwidth_GBps));
  for (size_t i = 0; i < c.ops.size(); ++i)
    for (size_t k = 0; k < c.ops[i].phases.size(); ++k) {
      const Phase& phase = c.ops[i].phases[k];
      const std::string p = path + "/ops/" + std::to_string(i) + "/phases/" + std::to_string(k);
      for (int64_t link : phase.links)
        if (link < 0 || link >= static_cast<int64_t>(c.links.size()))
          throw DataError(p + "/links: link " + std::to_string(link) + " does not exist (" +
                          std::to_string(c.links.size()) + " links in " + path + "/links)");
      if (phase.loads.size() != phase.links.size())
        throw DataError(p + "/loads: " + std::to_string(phase.loads.size()) + " loads for " +
                        std::to_string(phase.links.size()) + " links");
      for (double load : phase.loads)
        if (!(load > 0)) throw DataError(p + "/loads: expected positive numbers, got " + std::to_string(load));
      if (!(phase.bytes >= 0) || !(phase.latency_us >= 0))
        throw DataError(p + ": expected non-negative bytes and latency_us, got " + std::to_string(phase.bytes) + " and " +
                        std::to_string(phase.latency_us));
      if (phase.bytes > 0 && (phase.links.empty() || !(phase.bandwidth_GBps > 0)))
        throw DataError(p + ": a phase that moves bytes needs links and a positive bandwidth_GBps");
    }
}

CostSection cost_from_json(const json& j, const std::string& path) {
  CostSection c;
  c.estimator = require_as<std::string>(j, "estimator", path);
  if (c.estimator != "roofline" && c.estimator != "calibrated")
    throw DataError("graph: " + path + "/estimator: expected roofline or calibrated, got '" + c.estimator + "'");
  c.hardware = hardware_from_json(require(j, "hardware", path), path + "/hardware");
  // Format 1.2 graphs have no links and no phases: their collectives take time_us.
  if (j.contains("links")) {
    const json& links = require(j, "links", path);
    for (size_t i = 0; i < links.size(); ++i) {
      std::string p = path + "/links/" + std::to_string(i);
      c.links.push_back(Link{require_as<std::string>(links[i], "name", p), require_as<int64_t>(links[i], "level", p),
                             require_as<double>(links[i], "bandwidth_GBps", p)});
    }
  }
  const json& ops = require(j, "ops", path);
  for (size_t i = 0; i < ops.size(); ++i) {
    std::string p = path + "/ops/" + std::to_string(i);
    OpCost op{require_position_id(ops[i], i, p), require_at_least(ops[i], "time_us", p, 0),
              require_enum<OpBound>(ops[i], "bound", p), {}};
    if (ops[i].contains("host_us")) {  // new in graph format 1.8
      op.host_us = require_at_least(ops[i], "host_us", p, 0);
    }
    if (ops[i].contains("phases")) {
      const json& phases = require(ops[i], "phases", p);
      for (size_t k = 0; k < phases.size(); ++k) {
        const std::string pk = p + "/phases/" + std::to_string(k);
        Phase phase{require_as<std::vector<int64_t>>(phases[k], "links", pk), {}, require_at_least(phases[k], "bytes", pk, 0),
                    require_as<double>(phases[k], "bandwidth_GBps", pk), require_at_least(phases[k], "latency_us", pk, 0)};
        phase.loads = phases[k].contains("loads") ? require_as<std::vector<double>>(phases[k], "loads", pk)
                                                  : std::vector<double>(phase.links.size(), 1.0);
        op.phases.push_back(std::move(phase));
      }
    }
    c.ops.push_back(op);
  }
  check_network(c, "graph: " + path);
  return c;
}

}  // namespace syssim
