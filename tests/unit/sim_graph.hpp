// Hand-built shard and cost sections for the simulator's tests and the pictures' tests: op i
// of the graph is ops[i], lasting time_us.
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/graph.hpp"

namespace syssim {

struct TestOp {
  std::string name;
  std::string kind;
  std::string phase;
  std::string stream;
  double time_us;
  std::vector<int64_t> deps = {};
  std::string scope = "microbatch";
  double flops = 0;
  int64_t stage = 0;
  std::string group = "tp";
  std::vector<int64_t> reads = {};
  std::vector<int64_t> writes = {};
  double host_us = 0;                      // the host's time to issue it
  std::optional<int64_t> host_waits_for = {};  // an op whose end the host waits for before issuing it
};

// A graph whose op i is ops[i], costed with the given durations; `schedule` holds each
// pipeline rank's slots, by default one rank running the micro-batches back to back;
// `buffers` the shard buffers' (role, bytes), buffer i having id i.
inline Graph graph_of(const std::vector<TestOp>& ops, int64_t num_microbatches = 1, PipelineSchedule schedule = {},
                      const std::vector<std::pair<std::string, double>>& buffers = {}) {
  Graph g;
  g.shard = ShardSection{};
  g.shard->num_microbatches = num_microbatches;
  if (schedule.empty()) {
    schedule.emplace_back();
    for (int64_t m = 0; m < num_microbatches; ++m)
      schedule[0].insert(schedule[0].end(), {{0, m, OpPass::forward}, {0, m, OpPass::backward}});
  }
  g.shard->parallelism.pp = static_cast<int64_t>(schedule.size());
  g.shard->schedule = schedule;
  for (size_t i = 0; i < buffers.size(); ++i)
    g.shard->buffers.push_back(ShardBuffer{static_cast<int64_t>(i), buffers[i].second, parse_enum<TensorRole>(buffers[i].first).value(), "", {}});
  g.cost = CostSection{"roofline", HardwareConfig{}, {}, {}};
  for (size_t i = 0; i < ops.size(); ++i) {
    ShardOp op;
    op.id = static_cast<int64_t>(i);
    op.name = ops[i].name;
    op.kind = parse_enum<OpKind>(ops[i].kind).value();
    op.phase = parse_enum<OpPhase>(ops[i].phase).value();
    op.stream = parse_enum<Stream>(ops[i].stream).value();
    op.scope = parse_enum<OpScope>(ops[i].scope).value();
    op.pass = op.scope != OpScope::microbatch ? OpPass::step : op.phase == OpPhase::fwd ? OpPass::forward : OpPass::backward;
    op.deps = ops[i].deps;
    op.flops = ops[i].flops;
    op.stage = ops[i].stage;
    op.reads = ops[i].reads;
    op.writes = ops[i].writes;
    if (op.kind == OpKind::collective) op.group = parse_enum<CommGroup>(ops[i].group).value();
    op.host_waits_for = ops[i].host_waits_for;
    g.shard->ops.push_back(op);
    g.cost->ops.push_back(OpCost{op.id, ops[i].time_us, OpBound::compute, {}});
    g.cost->ops.back().host_us = ops[i].host_us;
  }
  return g;
}

}  // namespace syssim
