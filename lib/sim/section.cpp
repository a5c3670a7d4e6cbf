#include "sim/section.hpp"

#include <cmath>

#include "common/json_util.hpp"

namespace syssim {
namespace {

json timed(const TimedOp& t) { return {{"name", t.name}, {"time_ms", t.time_ms}}; }
TimedOp timed_from(const json& j, const std::string& path) {
  return TimedOp{require_as<std::string>(j, "name", path), require_as<double>(j, "time_ms", path)};
}

std::vector<TimedOp> timed_list(const json& j, const std::string& key, const std::string& path) {
  const json& list = require_array(j, key, path);
  std::vector<TimedOp> timed;
  for (size_t i = 0; i < list.size(); ++i) timed.push_back(timed_from(list[i], path + "/" + key + "/" + std::to_string(i)));
  return timed;
}

LinkLoad link_load_from(const json& j, const std::string& path) {
  return LinkLoad{require_as<std::string>(j, "name", path),  require_as<int64_t>(j, "level", path),
                  require_as<double>(j, "bandwidth_GBps", path), require_as<double>(j, "busy_ms", path),
                  require_as<double>(j, "bytes", path),        require_as<double>(j, "utilization", path),
                  require_as<int64_t>(j, "max_flows", path)};
}

// Rows [rank, stream, op, microbatch, start_ms, end_ms] (docs/graph-format.md).
std::vector<TimelineEntry> timeline_from(const json& rows, const std::string& path) {
  if (!rows.is_array()) throw DataError("graph: " + path + ": expected an array, got " + rows.dump());
  std::vector<TimelineEntry> timeline;
  timeline.reserve(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    const json& row = rows[i];
    auto bad_row = [&] {
      return DataError("graph: " + path + "/" + std::to_string(i) +
                       ": expected [rank, stream, op, microbatch, start_ms, end_ms], got " + row.dump());
    };
    if (!row.is_array() || row.size() != 6) throw bad_row();
    try {
      const std::optional<Stream> stream = parse_enum<Stream>(row[1].get<std::string>());
      if (!stream) throw bad_row();
      timeline.push_back(TimelineEntry{row[0].get<int64_t>(), *stream, row[2].get<int64_t>(), row[3].get<int64_t>(),
                                       row[4].get<double>(), row[5].get<double>()});
      const TimelineEntry& entry = timeline.back();
      if (!(entry.start_ms >= 0 && entry.end_ms >= entry.start_ms && std::isfinite(entry.end_ms)))
        throw DataError("graph: " + path + "/" + std::to_string(i) + ": an instance ends before it starts or at no time, " +
                        row.dump());
    } catch (const json::exception&) {
      throw bad_row();
    }
  }
  return timeline;
}

}  // namespace

json to_json(const LinkLoad& l) {
  return {{"name", l.name},       {"level", l.level},           {"bandwidth_GBps", l.bandwidth_GBps},
          {"busy_ms", l.busy_ms}, {"bytes", l.bytes},           {"utilization", l.utilization},
          {"max_flows", l.max_flows}};
}

json to_json(const SimSection& s) {
  auto timed_array = [](const std::vector<TimedOp>& list) {
    json array = json::array();
    for (const TimedOp& t : list) array.push_back(timed(t));
    return array;
  };
  json links = json::array();
  for (const auto& l : s.links) links.push_back(to_json(l));
  json groups = json::object();
  for (const auto& [group, time] : s.collective_by_group_ms)
    groups[group] = {{"total_ms", time.total_ms}, {"exposed_ms", time.exposed_ms}};
  json section = {{"step_time_ms", s.step_time_ms},
                  {"forward_ms", s.forward_ms},
                  {"backward_ms", s.backward_ms},
                  {"optimizer_ms", s.optimizer_ms},
                  {"collective_total_ms", s.collective_total_ms},
                  {"collective_exposed_ms", s.collective_exposed_ms},
                  {"by_op_type_ms", s.by_op_type_ms},
                  {"collective_by_group_ms", groups},
                  {"bubble_fraction", s.bubble_fraction},
                  {"per_pp_rank_step_time_ms", s.per_pp_rank_step_time_ms},
                  {"top_ops", timed_array(s.top_ops)},
                  {"top_modules", timed_array(s.top_modules)},
                  {"dominant_op_type", s.dominant_op_type},
                  {"longest_collective", timed(s.longest_collective)},
                  {"binding_pp_stage", s.binding_pp_stage},
                  {"hardware_flops_per_rank", s.hardware_flops_per_rank},
                  {"links", links},
                  {"busiest_link", s.busiest_link},
                  {"collective_slowdown", s.collective_slowdown}};
  if (s.host_busy_ms > 0) section["host_busy_ms"] = s.host_busy_ms;
  if (s.timeline) {
    json rows = json::array();
    for (const TimelineEntry& e : *s.timeline)
      rows.push_back({e.rank, to_string(e.stream), e.op, e.microbatch, e.start_ms, e.end_ms});
    section["timeline"] = std::move(rows);
  }
  return section;
}

SimSection sim_from_json(const json& j, const std::string& path) {
  SimSection s;
  s.step_time_ms = require_at_least(j, "step_time_ms", path, 0);
  s.forward_ms = require_at_least(j, "forward_ms", path, 0);
  s.backward_ms = require_at_least(j, "backward_ms", path, 0);
  s.optimizer_ms = require_at_least(j, "optimizer_ms", path, 0);
  s.collective_total_ms = require_at_least(j, "collective_total_ms", path, 0);
  s.collective_exposed_ms = require_at_least(j, "collective_exposed_ms", path, 0);
  s.by_op_type_ms = require_as<std::map<std::string, double>>(j, "by_op_type_ms", path);
  for (const auto& [type, ms] : s.by_op_type_ms)
    check_at_least(ms, 0, "graph: " + path + "/by_op_type_ms/" + type, j["by_op_type_ms"][type]);
  const json& groups = require(j, "collective_by_group_ms", path);
  if (!groups.is_object()) throw DataError("graph: " + path + "/collective_by_group_ms: expected an object");
  for (const auto& [group, time] : groups.items()) {
    std::string p = path + "/collective_by_group_ms/" + group;
    s.collective_by_group_ms[group] = GroupTime{require_at_least(time, "total_ms", p, 0), require_at_least(time, "exposed_ms", p, 0)};
  }
  s.bubble_fraction = require_at_least(j, "bubble_fraction", path, 0);
  s.per_pp_rank_step_time_ms = require_all_at_least(j, "per_pp_rank_step_time_ms", path, 0);
  s.top_ops = timed_list(j, "top_ops", path);
  // Format 1.7 added the module totals.
  if (j.contains("top_modules")) s.top_modules = timed_list(j, "top_modules", path);
  s.dominant_op_type = require_as<std::string>(j, "dominant_op_type", path);
  s.longest_collective = timed_from(require(j, "longest_collective", path), path + "/longest_collective");
  s.binding_pp_stage = require_as<int64_t>(j, "binding_pp_stage", path);
  s.hardware_flops_per_rank = require_at_least(j, "hardware_flops_per_rank", path, 0);
  if (j.contains("host_busy_ms")) s.host_busy_ms = require_at_least(j, "host_busy_ms", path, 0);  // new in 1.8
  // Format 1.2 graphs simulated no flows: no links, collectives as long as alone.
  if (!j.contains("links")) return s;
  const json& links = require_array(j, "links", path);
  for (size_t i = 0; i < links.size(); ++i) s.links.push_back(link_load_from(links[i], path + "/links/" + std::to_string(i)));
  s.busiest_link = require_as<std::string>(j, "busiest_link", path);
  s.collective_slowdown = require_at_least(j, "collective_slowdown", path, 0);
  if (j.contains("timeline")) s.timeline = timeline_from(require(j, "timeline", path), path + "/timeline");
  return s;
}

}  // namespace syssim
