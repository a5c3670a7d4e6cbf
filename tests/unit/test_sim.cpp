// The discrete-event simulator on hand-built shard and cost sections; each expected time
// is worked out by hand from the op durations.
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
};

// A graph whose op i is ops[i], costed with the given durations.
Graph graph_of(const std::vector<TestOp>& ops, int64_t num_microbatches = 1) {
  Graph g;
  g.shard = ShardSection{};
  g.shard->num_microbatches = num_microbatches;
  g.cost = CostSection{"roofline", HardwareConfig{}, {}};
  for (size_t i = 0; i < ops.size(); ++i) {
    ShardOp op;
    op.id = static_cast<int64_t>(i);
    op.name = ops[i].name;
    op.kind = ops[i].kind;
    op.phase = ops[i].phase;
    op.stream = ops[i].stream;
    op.scope = ops[i].scope;
    op.deps = ops[i].deps;
    op.flops = ops[i].flops;
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

TEST(Simulation, NeedsACostForEveryShardOp) {
  Graph g = graph_of({{"a", "math", "fwd", "compute", 1}});
  g.cost->ops.clear();
  EXPECT_THROW(simulate_graph(g), DataError);
  g.cost.reset();
  EXPECT_THROW(simulate_graph(g), DataError);
}

}  // namespace
}  // namespace syssim
