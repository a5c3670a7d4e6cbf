// The discrete-event simulator on hand-built shard and cost sections; each expected time
// is worked out by hand from the op durations. (Schedules of several pipeline ranks:
// tests/unit/test_schedule.cpp.)
#include <gtest/gtest.h>

#include "common/error.hpp"
#include "sim/sim.hpp"

namespace syssim {
namespace {

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
};

// A graph whose op i is ops[i], costed with the given durations; `schedule` holds each
// pipeline rank's slots, by default one rank running the micro-batches back to back.
Graph graph_of(const std::vector<TestOp>& ops, int64_t num_microbatches = 1, PipelineSchedule schedule = {}) {
  Graph g;
  g.shard = ShardSection{};
  g.shard->num_microbatches = num_microbatches;
  if (schedule.empty()) {
    schedule.emplace_back();
    for (int64_t m = 0; m < num_microbatches; ++m)
      schedule[0].insert(schedule[0].end(), {{0, m, "forward"}, {0, m, "backward"}});
  }
  g.shard->parallelism.pp = static_cast<int64_t>(schedule.size());
  g.shard->schedule = schedule;
  g.cost = CostSection{"roofline", HardwareConfig{}, {}};
  for (size_t i = 0; i < ops.size(); ++i) {
    ShardOp op;
    op.id = static_cast<int64_t>(i);
    op.name = ops[i].name;
    op.kind = ops[i].kind;
    op.phase = ops[i].phase;
    op.stream = ops[i].stream;
    op.scope = ops[i].scope;
    op.pass = op.scope != "microbatch" ? "step" : op.phase == "fwd" ? "forward" : "backward";
    op.deps = ops[i].deps;
    op.flops = ops[i].flops;
    op.stage = ops[i].stage;
    if (op.kind == "collective") op.group = ops[i].group;
    g.shard->ops.push_back(op);
    g.cost->ops.push_back(OpCost{op.id, ops[i].time_us, "compute"});
  }
  return g;
}

SimSection simulate(const std::vector<TestOp>& ops, int64_t num_microbatches = 1) {
  Graph g = graph_of(ops, num_microbatches);
  simulate_graph(g);
  return *g.sim;
}

void expect_error_containing(const std::vector<TestOp>& ops, const std::string& text) {
  Graph g = graph_of(ops);
  try {
    simulate_graph(g);
    FAIL() << "expected DataError containing '" << text << "'";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

TEST(Simulation, IndependentOpsOnTwoStreamsOverlap) {
  // 100 us of compute and a 60 us tp collective at the same time: the step is the longer one.
  SimSection sim = simulate({{"mm", "gemm", "fwd", "compute", 100}, {"ar", "collective", "fwd", "tp", 60}});
  EXPECT_DOUBLE_EQ(sim.step_time_ms, 0.1);
  EXPECT_DOUBLE_EQ(sim.collective_total_ms, 0.06);
  EXPECT_DOUBLE_EQ(sim.collective_exposed_ms, 0.0);
  EXPECT_DOUBLE_EQ(sim.forward_ms, 0.1);  // collectives are not counted in a phase
}

TEST(Simulation, DependentOpsSerialize) {
  // The collective waits for the gemm: 100 + 60 us, all 60 us of it exposed.
  SimSection sim = simulate({{"mm", "gemm", "fwd", "compute", 100}, {"ar", "collective", "fwd", "tp", 60, {0}}});
  EXPECT_DOUBLE_EQ(sim.step_time_ms, 0.16);
  EXPECT_DOUBLE_EQ(sim.collective_exposed_ms, 0.06);
}

TEST(Simulation, ExposedTimeIsCollectiveTimeWithTheComputeStreamIdle) {
  // mm 0-40 us; then the collective 40-140 us and the independent add 40-70 us:
  // exposed 70-140 us = 70 us.
  SimSection sim = simulate({{"mm", "gemm", "fwd", "compute", 40},
                             {"ar", "collective", "fwd", "tp", 100, {0}},
                             {"add", "math", "fwd", "compute", 30, {0}}});
  EXPECT_DOUBLE_EQ(sim.step_time_ms, 0.14);
  EXPECT_DOUBLE_EQ(sim.collective_exposed_ms, 0.07);
}

TEST(Simulation, MicroBatchesRunBackToBack) {
  // A 10 us forward and a 20 us backward op, three micro-batches: 3 * 30 us.
  SimSection sim = simulate({{"f", "gemm", "fwd", "compute", 10, {}, "microbatch", 1e6},
                             {"b", "gemm", "bwd", "compute", 20, {0}, "microbatch", 2e6}},
                            3);
  EXPECT_DOUBLE_EQ(sim.step_time_ms, 0.09);
  EXPECT_DOUBLE_EQ(sim.forward_ms, 0.03);
  EXPECT_DOUBLE_EQ(sim.backward_ms, 0.06);
  EXPECT_DOUBLE_EQ(sim.hardware_flops_per_rank, 9e6);
  ASSERT_EQ(sim.top_ops.size(), 2u);
  EXPECT_EQ(sim.top_ops[0].name, "1_b");
  EXPECT_DOUBLE_EQ(sim.top_ops[0].time_ms, 0.06);
  EXPECT_EQ(sim.per_pp_rank_step_time_ms, std::vector<double>{0.09});
}

TEST(Simulation, StepOpsWaitForTheLastMicroBatch) {
  // Two micro-batches of f (10 us) and b (20 us) end at 60 us. The dp all-reduce depends on b
  // of the last micro-batch: 60-110 us; the optimizer then runs 110-140 us. Had the all-reduce
  // followed the first micro-batch's b (30 us), the step would end at 110 us.
  SimSection sim = simulate({{"f", "gemm", "fwd", "compute", 10},
                             {"b", "gemm", "bwd", "compute", 20, {0}},
                             {"grad_ar", "collective", "bwd", "dp", 50, {1}, "step"},
                             {"adam", "optimizer", "optimizer", "compute", 30, {2}, "step"}},
                            2);
  EXPECT_DOUBLE_EQ(sim.step_time_ms, 0.14);
  EXPECT_DOUBLE_EQ(sim.optimizer_ms, 0.03);
  EXPECT_DOUBLE_EQ(sim.collective_exposed_ms, 0.05);
  EXPECT_EQ(sim.longest_collective.name, "2_grad_ar");
  EXPECT_DOUBLE_EQ(sim.longest_collective.time_ms, 0.05);
  EXPECT_DOUBLE_EQ(sim.by_op_type_ms.at("gemm"), 0.06);
  EXPECT_EQ(sim.dominant_op_type, "gemm");
}

TEST(Simulation, TopOpsAreTheTenLongestWithTiesByOpId) {
  std::vector<TestOp> ops;
  for (int i = 0; i < 12; ++i) ops.push_back({"op", "math", "fwd", "compute", i == 11 ? 5.0 : 1.0});
  SimSection sim = simulate(ops);
  ASSERT_EQ(sim.top_ops.size(), 10u);
  EXPECT_EQ(sim.top_ops[0].name, "11_op");
  EXPECT_EQ(sim.top_ops[1].name, "0_op");
  EXPECT_EQ(sim.top_ops[9].name, "8_op");
  EXPECT_EQ(sim.longest_collective.name, "");
  EXPECT_DOUBLE_EQ(sim.longest_collective.time_ms, 0.0);
}

TEST(Simulation, CyclicDepsAreRefused) {
  expect_error_containing({{"a", "math", "fwd", "compute", 1, {1}}, {"b", "math", "fwd", "compute", 1, {0}}}, "cycle");
}

TEST(Simulation, DepQueuedBehindOnItsOwnStreamIsRefused) {
  // Acyclic, but op 0 heads the compute stream waiting for op 1 queued behind it.
  expect_error_containing({{"a", "math", "fwd", "compute", 1, {1}}, {"b", "math", "fwd", "compute", 1}},
                          "/shard/ops/0");
}

TEST(Simulation, MicroBatchOpCannotDependOnAStepOp) {
  expect_error_containing({{"adam", "optimizer", "optimizer", "compute", 1, {}, "step"},
                           {"f", "gemm", "fwd", "compute", 1, {0}}},
                          "/shard/ops/1/deps");
}

TEST(Simulation, CollectiveTimeIsReportedPerGroup) {
  // mm 0-40 us; the tp all-reduce 40-100 us beside the add (40-70 us): 30 us exposed; the dp
  // all-reduce 100-120 us after both: all exposed.
  SimSection sim = simulate({{"mm", "gemm", "fwd", "compute", 40},
                             {"ar", "collective", "fwd", "tp", 60, {0}},
                             {"add", "math", "fwd", "compute", 30, {0}},
                             {"grad_ar", "collective", "bwd", "dp", 20, {1, 2}, "microbatch", 0, 0, "dp"}});
  ASSERT_EQ(sim.collective_by_group_ms.size(), 2u);
  EXPECT_DOUBLE_EQ(sim.collective_by_group_ms.at("tp").total_ms, 0.06);
  EXPECT_DOUBLE_EQ(sim.collective_by_group_ms.at("tp").exposed_ms, 0.03);
  EXPECT_DOUBLE_EQ(sim.collective_by_group_ms.at("dp").total_ms, 0.02);
  EXPECT_DOUBLE_EQ(sim.collective_by_group_ms.at("dp").exposed_ms, 0.02);
  EXPECT_DOUBLE_EQ(sim.collective_exposed_ms, 0.05);
  EXPECT_DOUBLE_EQ(sim.bubble_fraction, 0.0);  // one pipeline rank never waits for another
}

TEST(Simulation, EveryMicroBatchWaitsForTheSingleStepStartInstance) {
  // A 50 us dp all-gather once before the step; each of 3 micro-batches' 10 us forward waits
  // for it: 50 + 3 * 10 us. Were it run per micro-batch, the step would take 3 * 60 us.
  SimSection sim = simulate({{"gather", "collective", "optimizer", "dp", 50, {}, "step_start"},
                             {"f", "gemm", "fwd", "compute", 10, {0}}},
                            3);
  EXPECT_DOUBLE_EQ(sim.step_time_ms, 0.08);
  EXPECT_DOUBLE_EQ(sim.collective_total_ms, 0.05);
}

TEST(Simulation, AStepStartOpCannotWaitForAMicroBatchOp) {
  expect_error_containing({{"f", "gemm", "fwd", "compute", 1},
                           {"gather", "collective", "optimizer", "dp", 1, {0}, "step_start"}},
                          "/shard/ops/1/deps: step_start op depends on microbatch op 0");
}

TEST(Simulation, TwoPipelineRanksExchangeThroughPointToPoint) {
  // 1F1B on 2 ranks, 2 micro-batches (rank 0: F0 F1 B0 B1, rank 1: F0 B0 F1 B1). Rank 0's
  // forward f0 (10 us) is received by rank 1 (5 us) before its forward f1 (10 us) and
  // backward b1 (20 us); b1's gradient is received by rank 0 (5 us) before b0 (20 us).
  //   rank 0: f0 0-10, 10-20; recv 45-50, 75-80; b0 50-70, 80-100   -> 100 us
  //   rank 1: recv 10-15, 20-25; f1 15-25, 45-55; b1 25-45, 55-75  -> 75 us
  // Rank 0 binds; it waits 20-45 and 70-75 us: bubble 30 / 100. Its receives run while its
  // compute stream is idle: 10 us of pp communication, all exposed.
  PipelineSchedule schedule = {{{0, 0, "forward"}, {0, 1, "forward"}, {0, 0, "backward"}, {0, 1, "backward"}},
                               {{0, 0, "forward"}, {0, 0, "backward"}, {0, 1, "forward"}, {0, 1, "backward"}}};
  Graph g = graph_of({{"f0", "gemm", "fwd", "compute", 10},
                      {"recv", "collective", "fwd", "pp", 5, {0}, "microbatch", 0, 1, "pp"},
                      {"f1", "gemm", "fwd", "compute", 10, {1}, "microbatch", 0, 1},
                      {"b1", "gemm", "bwd", "compute", 20, {2}, "microbatch", 0, 1},
                      {"recv", "collective", "bwd", "pp", 5, {3}, "microbatch", 0, 0, "pp"},
                      {"b0", "gemm", "bwd", "compute", 20, {0, 4}}},
                     2, schedule);
  simulate_graph(g);
  const SimSection& sim = *g.sim;
  EXPECT_DOUBLE_EQ(sim.step_time_ms, 0.1);
  EXPECT_EQ(sim.per_pp_rank_step_time_ms, (std::vector<double>{0.1, 0.075}));
  EXPECT_EQ(sim.binding_pp_stage, 0);
  EXPECT_DOUBLE_EQ(sim.bubble_fraction, 0.3);
  EXPECT_DOUBLE_EQ(sim.collective_by_group_ms.at("pp").total_ms, 0.01);
  EXPECT_DOUBLE_EQ(sim.collective_by_group_ms.at("pp").exposed_ms, 0.01);
  EXPECT_DOUBLE_EQ(sim.forward_ms, 0.02);  // rank 0's totals: f0 twice
  EXPECT_DOUBLE_EQ(sim.backward_ms, 0.04);
}

TEST(Simulation, OpsOfAPipelineRankWithoutSlotsAreRefused) {
  Graph g = graph_of({{"f", "gemm", "fwd", "compute", 1, {}, "microbatch", 0, 1}});
  try {
    simulate_graph(g);
    FAIL();
  } catch (const DataError& e) {
    EXPECT_STREQ(e.what(), "/shard/ops/0/stage: pipeline rank 1 does not exist (pp=1)");
  }
}

TEST(Simulation, NeedsACostForEveryShardOp) {
  Graph g = graph_of({{"a", "math", "fwd", "compute", 1}});
  g.cost->ops.clear();
  EXPECT_THROW(simulate_graph(g), DataError);
  g.cost.reset();
  EXPECT_THROW(simulate_graph(g), DataError);
}

}  // namespace
}  // namespace syssim
