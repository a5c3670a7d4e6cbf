// The discrete-event simulator on hand-built shard and cost sections; each expected time
// is worked out by hand from the op durations. (Schedules of several pipeline ranks:
// tests/unit/test_schedule.cpp.)
#include <gtest/gtest.h>

#include <tuple>

#include "common/error.hpp"
#include "sim/section.hpp"
#include "shard/schedule.hpp"
#include "sim/sim.hpp"
#include "sim_graph.hpp"

namespace syssim {
namespace {

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
  // A cost without links or phases: collectives last time_us, no link traffic.
  EXPECT_TRUE(sim.links.empty());
  EXPECT_EQ(sim.busiest_link, "");
  EXPECT_DOUBLE_EQ(sim.collective_slowdown, 1.0);
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

// Extrapolated micro-batches (docs/syssim-sim.md): a steady state of two micro-batches. Two
// ranks, alike and independent, run their micro-batches in pairs, F F B B: f 10 us, b 20 us
// after it, and a 5 us dp collective after b. Compute never idles (f0 0-10, f1 10-20,
// b0 20-40, b1 40-60, f2 60-70, ...) and each collective runs beside the next compute op
// (d0 40-45, d1 60-65), but for the last one: 40 micro-batches end at 40 * 30 + 5 = 1205 us,
// 5 us exposed. The state at f2's start (d1 starting) comes back at f4's and every second
// micro-batch after, not at f3's (d1 over): the loop jumps whole periods of two.
TEST(Simulation, AStateRepeatingEveryTwoMicroBatchesIsJumpedOver) {
  constexpr int64_t kMicrobatches = 40;
  PipelineSchedule schedule(2);
  for (std::vector<ScheduleSlot>& slots : schedule)
    for (int64_t m = 0; m < kMicrobatches; m += 2)
      slots.insert(slots.end(), {{0, m, OpPass::forward}, {0, m + 1, OpPass::forward}, {0, m, OpPass::backward}, {0, m + 1, OpPass::backward}});
  std::vector<TestOp> ops;
  for (int64_t rank = 0; rank < 2; ++rank) {
    const int64_t first = static_cast<int64_t>(ops.size());
    ops.push_back({"f", "gemm", "fwd", "compute", 10, {}, "microbatch", 1e6, rank});
    ops.push_back({"b", "gemm", "bwd", "compute", 20, {first}, "microbatch", 2e6, rank});
    ops.push_back({"d", "collective", "bwd", "dp", 5, {first + 1}, "microbatch", 0, rank, "dp"});
  }
  Graph every = graph_of(ops, kMicrobatches, schedule);
  Graph jumped = every;
  SimOptions full;
  full.extrapolate_microbatches = false;
  const SimStats all = simulate_graph(every, full);
  const SimStats stats = simulate_graph(jumped);
  EXPECT_FALSE(all.extrapolated);
  EXPECT_EQ(all.instances, 2 * 3 * kMicrobatches);
  EXPECT_TRUE(stats.extrapolated);
  EXPECT_LT(stats.instances, all.instances / 2);
  for (const SimSection* sim : {&*every.sim, &*jumped.sim}) {
    EXPECT_NEAR(sim->step_time_ms, 1.205, 1e-12);
    EXPECT_EQ(sim->per_pp_rank_step_time_ms.size(), 2u);
    EXPECT_NEAR(sim->per_pp_rank_step_time_ms[1], 1.205, 1e-12);
    EXPECT_NEAR(sim->forward_ms, 0.4, 1e-12);
    EXPECT_NEAR(sim->backward_ms, 0.8, 1e-12);
    EXPECT_NEAR(sim->collective_total_ms, 0.2, 1e-12);
    EXPECT_NEAR(sim->collective_exposed_ms, 0.005, 1e-12);
    EXPECT_NEAR(sim->hardware_flops_per_rank, 1.2e8, 1e-4);
  }
}

// Where the collectives take longer than the compute they follow, they fall further behind
// with every micro-batch: d (40 us) after b (20 us) after f (10 us) ends at 30 + 40 i us
// for micro-batch i. No state comes back, and every micro-batch is simulated.
// A forward of fa (10 us), its dispatch fd on ep (20 us) and fm (10 us); a backward of bm
// (10 us), bd on ep (20 us) and ba (10 us); each op after the one before.
std::vector<TestOp> all_to_all_between_computes() {
  return {{"fa", "gemm", "fwd", "compute", 10},
          {"fd", "collective", "fwd", "ep", 20, {0}, "microbatch", 0, 0, "ep"},
          {"fm", "gemm", "fwd", "compute", 10, {1}},
          {"bm", "gemm", "bwd", "compute", 10, {2}},
          {"bd", "collective", "bwd", "ep", 20, {3}, "microbatch", 0, 0, "ep"},
          {"ba", "gemm", "bwd", "compute", 10, {4}}};
}

// The combined 1F1B schedule (overlap_moe_expert_parallel_comm; docs/syssim-sim.md). One
// rank, three micro-batches of all_to_all_between_computes. In order, every micro-batch takes 80 us: 240 us, 120 us of it exposed all-to-all. Combined
// (slots F0 F1 B0 F2 B1 B2), worked out event by event: fa0 0-10, fd0 10-30, fm0 30-40,
// fa1 40-50 (the forward queue goes on before bm0, which waits for the compute stream),
// fd1 50-70 beside bm0 50-60; bd0 waits for the ep stream: fm1 70-80 beside bd0 70-90,
// fa2 80-90, fd2 90-110 beside ba0 90-100 and bm1 100-110; bd1 110-130 beside fm2 110-120;
// ba1 130-140, bm2 140-150, bd2 150-170, ba2 170-180. Compute idles 10-30, 60-70, 120-130
// and 150-170, each time under an all-to-all: 60 us exposed.
TEST(Simulation, CombinedOneFOneBHidesOneSidesAllToAllUnderTheOthersCompute) {
  const std::vector<TestOp> ops = all_to_all_between_computes();
  Graph in_order = graph_of(ops, 3, make_schedule(ScheduleKind::one_f_one_b, 1, 1, 3, false));
  simulate_graph(in_order);
  EXPECT_NEAR(in_order.sim->step_time_ms, 0.240, 1e-12);
  EXPECT_NEAR(in_order.sim->collective_exposed_ms, 0.120, 1e-12);

  Graph combined = graph_of(ops, 3, make_schedule(ScheduleKind::one_f_one_b, 1, 1, 3, true));
  combined.shard->training.overlap_moe_expert_parallel_comm = true;
  simulate_graph(combined);
  EXPECT_NEAR(combined.sim->step_time_ms, 0.180, 1e-12);
  EXPECT_NEAR(combined.sim->collective_total_ms, 0.120, 1e-12);
  EXPECT_NEAR(combined.sim->collective_exposed_ms, 0.060, 1e-12);
  // The compute stream still runs one op at a time: 120 us of compute in 180 us.
  EXPECT_NEAR(combined.sim->forward_ms + combined.sim->backward_ms, 0.120, 1e-12);
  EXPECT_LE(step_time_lower_bound_ms(*combined.shard, *combined.cost), combined.sim->step_time_ms + 1e-12);
}

// The same ops over 40 micro-batches: the steady state the loop jumps over holds both sides'
// queues, and the step it gives is the one simulated micro-batch by micro-batch (plumbing:
// both are the simulator's).
TEST(Simulation, CombinedOneFOneBJumpsAsItSimulates) {
  const std::vector<TestOp> ops = all_to_all_between_computes();
  Graph every = graph_of(ops, 40, make_schedule(ScheduleKind::one_f_one_b, 1, 1, 40, true));
  every.shard->training.overlap_moe_expert_parallel_comm = true;
  Graph jumped = every;
  SimOptions full;
  full.extrapolate_microbatches = false;
  simulate_graph(every, full);
  EXPECT_TRUE(simulate_graph(jumped).extrapolated);
  EXPECT_NEAR(jumped.sim->step_time_ms, every.sim->step_time_ms, 1e-12);
  EXPECT_NEAR(jumped.sim->collective_exposed_ms, every.sim->collective_exposed_ms, 1e-12);
  // Each pair of a forward and a backward overlaps: well under 40 in-order micro-batches.
  EXPECT_LT(every.sim->step_time_ms, 0.040 * 80 * 0.8);
}

TEST(Simulation, AStepThatDriftsIsSimulatedInFull) {
  Graph g = graph_of({{"f", "gemm", "fwd", "compute", 10},
                      {"b", "gemm", "bwd", "compute", 20, {0}},
                      {"d", "collective", "bwd", "dp", 40, {1}, "microbatch", 0, 0, "dp"}},
                     40);
  const SimStats stats = simulate_graph(g);
  EXPECT_FALSE(stats.extrapolated);
  EXPECT_EQ(stats.instances, 3 * 40);
  EXPECT_NEAR(g.sim->step_time_ms, 0.03 + 0.04 * 40, 1e-12);
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

TEST(Simulation, AWeightOpRunsInTheWeightSlotOrInTheBackwardSlotOfItsMicroBatch) {
  // f 10 us, b 20 us, the weight-pass op w 30 us; micro-batch 0 has no weight slot, so its
  // backward slot runs w too; micro-batch 1 has one, last. Compute: f0 0-10, f1 10-20,
  // b0 20-40, w0 40-70, b1 70-90, w1 90-120. The dp reduce waits for w of the last
  // micro-batch, in the weight slot: 120-160 us, all exposed (had it taken micro-batch 0's
  // w, it would run 70-110 and the step end at 120).
  Graph g = graph_of({{"f", "gemm", "fwd", "compute", 10},
                      {"b", "gemm", "bwd", "compute", 20, {0}},
                      {"w", "gemm", "bwd", "compute", 30, {1}},
                      {"grad_rs", "collective", "bwd", "dp", 40, {2}, "step"}},
                     2,
                     {{{0, 0, OpPass::forward}, {0, 1, OpPass::forward}, {0, 0, OpPass::backward}, {0, 1, OpPass::backward}, {0, 1, OpPass::weight}}});
  g.shard->ops[2].pass = OpPass::weight;
  simulate_graph(g, SimOptions{true});
  EXPECT_DOUBLE_EQ(g.sim->step_time_ms, 0.16);
  EXPECT_DOUBLE_EQ(g.sim->collective_exposed_ms, 0.04);
  EXPECT_DOUBLE_EQ(g.sim->backward_ms, 0.1);
  // The timeline in issue order: f0, f1, b0 w0 (backward slot), b1, w1 (weight slot), grad_rs.
  std::vector<std::pair<int64_t, double>> started;  // op, start us
  for (const TimelineEntry& entry : *g.sim->timeline) started.emplace_back(entry.op, entry.start_ms * 1e3);
  const std::vector<std::pair<int64_t, double>> expected = {{0, 0}, {0, 10}, {1, 20}, {2, 40}, {1, 70}, {2, 90}, {3, 120}};
  ASSERT_EQ(started.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(started[i].first, expected[i].first) << "instance " << i;
    EXPECT_NEAR(started[i].second, expected[i].second, 1e-9) << "instance " << i;
  }
}

// The host (docs/syssim-sim.md, "The host"): one thread per rank issues the ops in order,
// each taking its host_us, and an op starts on its stream no earlier than its issue ends.
TEST(Host, AHostSlowerThanTheGpuBindsTheStep) {
  // Three 10 us ops, each issued in 20 us: issues end at 20, 40, 60 us, the GPU runs 20-30,
  // 40-50, 60-70 us.
  SimSection slow = simulate({{"a", "math", "fwd", "compute", 10, {}, "microbatch", 0, 0, "tp", {}, {}, 20},
                              {"b", "math", "fwd", "compute", 10, {0}, "microbatch", 0, 0, "tp", {}, {}, 20},
                              {"c", "math", "fwd", "compute", 10, {1}, "microbatch", 0, 0, "tp", {}, {}, 20}});
  EXPECT_DOUBLE_EQ(slow.step_time_ms, 0.070);
  EXPECT_DOUBLE_EQ(slow.forward_ms, 0.030);  // the ops' own time, not the host's
  // Issued in 2 us each, the host runs ahead: only the first issue shows, 2 + 3 x 10 us.
  SimSection fast = simulate({{"a", "math", "fwd", "compute", 10, {}, "microbatch", 0, 0, "tp", {}, {}, 2},
                              {"b", "math", "fwd", "compute", 10, {0}, "microbatch", 0, 0, "tp", {}, {}, 2},
                              {"c", "math", "fwd", "compute", 10, {1}, "microbatch", 0, 0, "tp", {}, {}, 2}});
  EXPECT_DOUBLE_EQ(fast.step_time_ms, 0.032);
}

TEST(Host, ASynchronizationWaitsForTheGpuBeforeTheNextIssue) {
  // Issues of 1 us: a runs 1-11 us, b 11-21 us. Without a sync c is issued at 2-3 us and runs
  // 21-31 us; when the host waits for b first, c is issued at 21-22 us and runs 22-32 us.
  auto ops = [](std::optional<int64_t> waits) {
    return std::vector<TestOp>{{"a", "math", "fwd", "compute", 10, {}, "microbatch", 0, 0, "tp", {}, {}, 1},
                               {"b", "math", "fwd", "compute", 10, {0}, "microbatch", 0, 0, "tp", {}, {}, 1},
                               {"c", "math", "fwd", "compute", 10, {1}, "microbatch", 0, 0, "tp", {}, {}, 1, waits}};
  };
  EXPECT_DOUBLE_EQ(simulate(ops(std::nullopt)).step_time_ms, 0.031);
  EXPECT_DOUBLE_EQ(simulate(ops(1)).step_time_ms, 0.032);
}

TEST(Host, TheHostIssuesInRunsUpToEachSynchronization) {
  // As above with the host waiting for b before it issues c: the host issues a 0-1 us and b
  // 1-2 us in one run, then c 21-22 us, once b has run 11-21 us; it is busy 3 us in all.
  Graph g = graph_of({{"a", "math", "fwd", "compute", 10, {}, "microbatch", 0, 0, "tp", {}, {}, 1},
                      {"b", "math", "fwd", "compute", 10, {0}, "microbatch", 0, 0, "tp", {}, {}, 1},
                      {"c", "math", "fwd", "compute", 10, {1}, "microbatch", 0, 0, "tp", {}, {}, 1, 1}});
  simulate_graph(g, SimOptions{true});
  EXPECT_DOUBLE_EQ(g.sim->host_busy_ms, 0.003);
  std::vector<std::tuple<int64_t, double, double>> issued;  // op, start and finish in us
  for (const TimelineEntry& entry : *g.sim->timeline)
    if (entry.host()) issued.emplace_back(entry.op, entry.start_ms * 1e3, entry.end_ms * 1e3);
  const std::vector<std::tuple<int64_t, double, double>> expected = {{0, 0, 1}, {1, 1, 2}, {2, 21, 22}};
  ASSERT_EQ(issued.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(std::get<0>(issued[i]), std::get<0>(expected[i])) << "issue " << i;
    EXPECT_NEAR(std::get<1>(issued[i]), std::get<1>(expected[i]), 1e-9) << "issue " << i;
    EXPECT_NEAR(std::get<2>(issued[i]), std::get<2>(expected[i]), 1e-9) << "issue " << i;
  }
}

TEST(Host, TheHostIssuesAtMostOneSlotAheadOfTheComputeStream) {
  // Two micro-batches, f0 b0 f1 b1: f runs 100 us (issued in 1 us), b 10 us (issued in 150).
  // Host: f0 0-1, b0 1-151, f1 151-152 (compute reached b0's slot at 101), b1 161-311 (once
  // compute reaches f1's slot, when b0 ends). GPU: f0 1-101, b0 151-161, f1 161-261, b1
  // 311-321. A host free to run ahead would issue b1 at 152-302 and end the step at 312 us.
  SimSection sim = simulate({{"f", "gemm", "fwd", "compute", 100, {}, "microbatch", 0, 0, "tp", {}, {}, 1},
                             {"b", "gemm", "bwd", "compute", 10, {0}, "microbatch", 0, 0, "tp", {}, {}, 150}},
                            2);
  EXPECT_DOUBLE_EQ(sim.step_time_ms, 0.321);
}

TEST(Host, AHostWaitForALaterOrAbsentOpIsRefused) {
  expect_error_containing({{"a", "math", "fwd", "compute", 10, {}, "microbatch", 0, 0, "tp", {}, {}, 1, 1},
                           {"b", "math", "fwd", "compute", 10, {0}, "microbatch", 0, 0, "tp", {}, {}, 1}},
                          "host_waits_for");
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

// 1F1B on 2 ranks, 2 micro-batches (rank 0: F0 F1 B0 B1, rank 1: F0 B0 F1 B1). Rank 0's
// forward f0 (10 us) is received by rank 1 (5 us) before its forward f1 (10 us) and
// backward b1 (20 us); b1's gradient is received by rank 0 (5 us) before b0 (20 us).
Graph two_ranks_exchanging() {
  PipelineSchedule schedule = {{{0, 0, OpPass::forward}, {0, 1, OpPass::forward}, {0, 0, OpPass::backward}, {0, 1, OpPass::backward}},
                               {{0, 0, OpPass::forward}, {0, 0, OpPass::backward}, {0, 1, OpPass::forward}, {0, 1, OpPass::backward}}};
  return graph_of({{"f0", "gemm", "fwd", "compute", 10},
                   {"recv", "collective", "fwd", "pp", 5, {0}, "microbatch", 0, 1, "pp"},
                   {"f1", "gemm", "fwd", "compute", 10, {1}, "microbatch", 0, 1},
                   {"b1", "gemm", "bwd", "compute", 20, {2}, "microbatch", 0, 1},
                   {"recv", "collective", "bwd", "pp", 5, {3}, "microbatch", 0, 0, "pp"},
                   {"b0", "gemm", "bwd", "compute", 20, {0, 4}}},
                  2, schedule);
}

TEST(Simulation, TwoPipelineRanksExchangeThroughPointToPoint) {
  // two_ranks_exchanging(). A receive starts once its data is there and its rank's compute
  // has finished the slots before it (Megatron's 1F1B posts it after the step before): rank
  // 1's second waits for b1 of micro-batch 0 (45 us), rank 0's second for its b0 of
  // micro-batch 0 (70 us) and rank 1's b1 (80 us).
  //   rank 0: f0 0-10, 10-20; recv 45-50, 80-85; b0 50-70, 85-105   -> 105 us
  //   rank 1: recv 10-15, 45-50; f1 15-25, 50-60; b1 25-45, 60-80   -> 80 us
  // Rank 0 binds; it waits 20-45 and 70-80 us: bubble 35 / 105. Its receives run while its
  // compute stream is idle: 10 us of pp communication, all exposed.
  Graph g = two_ranks_exchanging();
  simulate_graph(g);
  const SimSection& sim = *g.sim;
  EXPECT_DOUBLE_EQ(sim.step_time_ms, 0.105);
  EXPECT_EQ(sim.per_pp_rank_step_time_ms, (std::vector<double>{0.105, 0.08}));
  EXPECT_EQ(sim.binding_pp_stage, 0);
  EXPECT_DOUBLE_EQ(sim.bubble_fraction, 35.0 / 105);
  EXPECT_DOUBLE_EQ(sim.collective_by_group_ms.at("pp").total_ms, 0.01);
  EXPECT_DOUBLE_EQ(sim.collective_by_group_ms.at("pp").exposed_ms, 0.01);
  EXPECT_DOUBLE_EQ(sim.forward_ms, 0.02);  // rank 0's totals: f0 twice
  EXPECT_DOUBLE_EQ(sim.backward_ms, 0.04);
  // No flows share a link and no stream but compute waits in order here, so the lower bound
  // on the step is the step: each slot's longest path, chained along the schedule.
  EXPECT_DOUBLE_EQ(step_time_lower_bound_ms(*g.shard, *g.cost), 0.105);
}

// The same exchange where the layout has virtual stages: Megatron's interleaved schedule posts
// its receives ahead (overlap_p2p_comm), so each starts once its data is there. Rank 1's
// second receive runs 20-25 us beside its f1 of micro-batch 0, rank 0's second 75-80 us:
//   rank 0: f0 0-10, 10-20; recv 45-50, 75-80; b0 50-70, 80-100   -> 100 us
//   rank 1: recv 10-15, 20-25; f1 15-25, 45-55; b1 25-45, 55-75  -> 75 us
// Rank 0 waits 20-45 and 70-75 us: bubble 30 / 100.
TEST(Simulation, ReceivesArePostedAheadWithVirtualStages) {
  Graph g = two_ranks_exchanging();
  g.shard->parallelism.vpp = 2;
  simulate_graph(g);
  EXPECT_DOUBLE_EQ(g.sim->step_time_ms, 0.1);
  EXPECT_EQ(g.sim->per_pp_rank_step_time_ms, (std::vector<double>{0.1, 0.075}));
  EXPECT_DOUBLE_EQ(g.sim->bubble_fraction, 0.3);
  EXPECT_DOUBLE_EQ(step_time_lower_bound_ms(*g.shard, *g.cost), 0.1);
}

TEST(StepBound, DropsTheOrderOfStreamsOtherThanCompute) {
  // One rank, one micro-batch: GEMMs a and b (10 us each), a 30 us all-reduce of a's output
  // issued before a 10 us all-reduce of b's, and a GEMM c (10 us) that needs b's. The
  // simulation runs the tp stream in order: a 0-10, b 10-20, all-reduce(a) 10-40,
  // all-reduce(b) 40-50, c 50-60: 60 us. The bound keeps the compute stream's order and the
  // deps only: all-reduce(b) 20-30, c 30-40, all-reduce(a) until 40: 40 us.
  Graph g = graph_of({{"a", "gemm", "fwd", "compute", 10},
                      {"b", "gemm", "fwd", "compute", 10},
                      {"all_reduce_a", "collective", "fwd", "tp", 30, {0}},
                      {"all_reduce_b", "collective", "fwd", "tp", 10, {1}},
                      {"c", "gemm", "fwd", "compute", 10, {3}}});
  EXPECT_DOUBLE_EQ(step_time_lower_bound_ms(*g.shard, *g.cost), 0.04);
  simulate_graph(g);
  EXPECT_DOUBLE_EQ(g.sim->step_time_ms, 0.06);
}

TEST(StepBound, PartSpansHoldTheCommunicationTheirComputeWaitsFor) {
  // Forward slot, part 0: a1 (10 us), an all-gather of its output (30 us), a2 that needs it
  // (10 us), a3 (5 us): a1 0-10, all-gather 10-40, a2 40-50, a3 50-55, a span of 55 us.
  // Part 1: b1 (10 us) and b2 (10 us) after an all-reduce that waits for part 0's a1 only,
  // relaxed to have finished at any time: 20 us. Backward slot: c1 (20 us, part 1), c2
  // (10 us, part 0), c3 (10 us, part 1): part 1 comes back on the compute stream, so each part
  // gets its compute alone, 10 and 30 us.
  Graph g = graph_of({{"a1", "gemm", "fwd", "compute", 10},
                      {"all_gather", "collective", "fwd", "tp", 30, {0}},
                      {"a2", "gemm", "fwd", "compute", 10, {1}},
                      {"a3", "math", "fwd", "compute", 5},
                      {"b1", "gemm", "fwd", "compute", 10, {2}},
                      {"all_reduce", "collective", "fwd", "tp", 20, {0}},
                      {"b2", "gemm", "fwd", "compute", 10, {5}},
                      {"c1", "gemm", "bwd", "compute", 20, {6}},
                      {"c2", "gemm", "bwd", "compute", 10, {7}},
                      {"c3", "gemm", "bwd", "compute", 10, {8}}});
  const std::vector<size_t> part_of = {0, 0, 0, 0, 1, 1, 1, 1, 0, 1};
  const std::vector<std::vector<double>> spans = part_spans_ms(*g.shard, *g.cost, 0, part_of, 2);
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_DOUBLE_EQ(spans[0][0], 0.055);
  EXPECT_DOUBLE_EQ(spans[0][1], 0.02);
  EXPECT_DOUBLE_EQ(spans[1][0], 0.01);
  EXPECT_DOUBLE_EQ(spans[1][1], 0.03);
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

// Network flows (docs/syssim-sim.md, "Network flows"). Rates in GB/s are 1e3 bytes per us.

void set_phases(Graph& g, int64_t id, const std::vector<Phase>& phases) { g.cost->ops[id].phases = phases; }

// A phase loading each of its links once per byte unless `loads` says otherwise.
Phase phase(std::vector<int64_t> links, double bytes, double bandwidth_GBps, double latency_us,
            std::vector<double> loads = {}) {
  if (loads.empty()) loads.assign(links.size(), 1.0);
  return Phase{links, loads, bytes, bandwidth_GBps, latency_us};
}
const std::vector<Link> kOneLink = {{"network", 1, 50}};
const std::vector<Link> kTwoLinks = {{"nvlink", 0, 100}, {"network", 1, 50}};

// The summed duration in ms of the op named `name` (its top_ops entry).
double op_ms(const SimSection& sim, const std::string& name) {
  for (const TimedOp& op : sim.top_ops)
    if (op.name == name) return op.time_ms;
  ADD_FAILURE() << "no op " << name << " in top_ops";
  return -1;
}

// Compute beside communication (docs/syssim-sim.md): with a slowdown of 0.2 a compute op
// runs at 1 / 1.2 of its speed while a collective of its rank runs.
Graph slowed_graph(const std::vector<TestOp>& ops, int64_t num_microbatches = 1) {
  Graph g = graph_of(ops, num_microbatches);
  g.cost->hardware.compute_slowdown_under_communication = 0.2;
  return g;
}

TEST(ComputeBesideCommunication, ACollectiveSlowsTheComputeBesideIt) {
  // mm (100 us) beside ar (50 us) from 0: by 50 us mm has done 50 / 1.2 = 41.667 us of its
  // work; the other 58.333 us at full speed end it at 108.333 us.
  Graph g = slowed_graph({{"mm", "gemm", "fwd", "compute", 100}, {"ar", "collective", "fwd", "tp", 50}});
  simulate_graph(g);
  EXPECT_NEAR(g.sim->step_time_ms, (50 + 100 - 50 / 1.2) * 1e-3, 1e-12);
  EXPECT_NEAR(op_ms(*g.sim, "0_mm"), (50 + 100 - 50 / 1.2) * 1e-3, 1e-12);
  EXPECT_DOUBLE_EQ(op_ms(*g.sim, "1_ar"), 0.05);  // the collective keeps its time
}

TEST(ComputeBesideCommunication, OverlappingCollectivesSlowItOnce) {
  // ar (tp) runs 0-50 us, gr (dp) 25-75 us after a 25 us op on another stream: communication
  // runs from 0 to 75 us, slowing mm by 0.2 however many collectives run. mm does 75 / 1.2 =
  // 62.5 us of its work by then and ends at 75 + 37.5 = 112.5 us.
  Graph g = slowed_graph({{"mm", "gemm", "fwd", "compute", 100},
                          {"ar", "collective", "fwd", "tp", 50},
                          {"wait", "math", "fwd", "cp", 25},
                          {"gr", "collective", "fwd", "dp", 50, {2}, "microbatch", 0, 0, "dp"}});
  simulate_graph(g);
  EXPECT_NEAR(g.sim->step_time_ms, 0.1125, 1e-12);
}

TEST(ComputeBesideCommunication, APointToPointTransferDoesNotSlowCompute) {
  // A pipeline send_recv runs on a few of NCCL's channels: mm keeps its 100 us.
  Graph g = slowed_graph({{"mm", "gemm", "fwd", "compute", 100}, {"p2p", "collective", "fwd", "pp", 50, {}, "microbatch", 0, 0, "pp"}});
  g.shard->ops[1].collective = Collective::send_recv;
  simulate_graph(g);
  EXPECT_DOUBLE_EQ(g.sim->step_time_ms, 0.1);
}

TEST(ComputeBesideCommunication, ComputeGoesBackToFullSpeedWhenTheCollectiveEnds) {
  // a (20 us) runs beside ar (tp, 0-60 us), at 1 / 1.2 throughout: it ends at 24 us. mm
  // (100 us) then runs slowed until 60 us, doing 36 / 1.2 = 30 us of its work, and the other
  // 70 us at full speed: it ends at 130 us.
  Graph g = slowed_graph({{"a", "math", "fwd", "compute", 20},
                          {"mm", "gemm", "fwd", "compute", 100, {0}},
                          {"ar", "collective", "fwd", "tp", 60}});
  simulate_graph(g);
  EXPECT_NEAR(op_ms(*g.sim, "0_a"), 0.024, 1e-12);
  EXPECT_NEAR(g.sim->step_time_ms, 0.13, 1e-12);
}

TEST(StepBound, ALinkCarriesEveryByteItsFlowsPutOnIt) {
  // 100 MB and 50 MB on one 50 GB/s link from two streams (as in
  // NetworkFlows.TwoFlowsOnOneLinkShareItEqually, 3 ms simulated): alone they would take 2 ms
  // and 1 ms, but the link carries 1.5e8 bytes at 50e3 bytes/us at most: 3,000 us a
  // micro-batch, 12,000 us for 4, the step's bound (1e-9 short of it for the rates' rounding).
  for (int64_t microbatches : {1, 4}) {
    Graph g = graph_of({{"big", "collective", "fwd", "tp", 2000}, {"small", "collective", "fwd", "dp", 1000, {}, "microbatch", 0, 0, "dp"}},
                       microbatches);
    g.cost->links = kOneLink;
    set_phases(g, 0, {phase({0}, 1e8, 50, 0)});
    set_phases(g, 1, {phase({0}, 5e7, 50, 0)});
    const double bound_ms = step_time_lower_bound_ms(*g.shard, *g.cost);
    const double expected_ms = 3.0 * static_cast<double>(microbatches);
    EXPECT_NEAR(bound_ms, expected_ms, expected_ms * 2e-9);
    simulate_graph(g);
    EXPECT_LE(bound_ms, g.sim->step_time_ms);
  }
}

TEST(NetworkFlows, ACollectiveAloneLastsTheSumOfItsPhases) {
  // Phase 0: 2 us, then 1e6 bytes capped at 80 GB/s on the 100 GB/s nvlink: 12.5 us.
  // Phase 1: 3 us, then 4e6 bytes at 50 GB/s on the network: 80 us. Phase 2: 1.5 us, no bytes.
  // 2 + 12.5 + 3 + 80 + 1.5 = 99 us, which syssim-cost writes as time_us.
  Graph g = graph_of({{"ar", "collective", "fwd", "tp", 99}});
  g.cost->links = kTwoLinks;
  set_phases(g, 0, {phase({0}, 1e6, 80, 2), phase({1}, 4e6, 50, 3), phase({}, 0, 0, 1.5)});
  simulate_graph(g);
  EXPECT_DOUBLE_EQ(g.sim->step_time_ms, 0.099);
  EXPECT_DOUBLE_EQ(g.sim->collective_total_ms, 0.099);
  EXPECT_DOUBLE_EQ(g.sim->collective_slowdown, 1.0);
}

TEST(NetworkFlows, TwoFlowsOnOneLinkShareItEqually) {
  // 100 MB and 50 MB on a 50 GB/s link, both capped at 50 GB/s, starting together: 25 GB/s
  // each; the small one ends at 5e7 / 25e3 = 2000 us; the big one has 5e7 bytes left, alone at
  // 50 GB/s: 1000 us more, ends at 3000 us. Alone they would take 2 ms and 1 ms: slowdown 5/3.
  Graph g = graph_of({{"big", "collective", "fwd", "tp", 2000}, {"small", "collective", "fwd", "dp", 1000, {}, "microbatch", 0, 0, "dp"}});
  g.cost->links = kOneLink;
  set_phases(g, 0, {phase({0}, 1e8, 50, 0)});
  set_phases(g, 1, {phase({0}, 5e7, 50, 0)});
  simulate_graph(g);
  const SimSection& sim = *g.sim;
  EXPECT_DOUBLE_EQ(sim.step_time_ms, 3.0);
  EXPECT_DOUBLE_EQ(op_ms(sim, "0_big"), 3.0);
  EXPECT_DOUBLE_EQ(op_ms(sim, "1_small"), 2.0);
  EXPECT_DOUBLE_EQ(sim.collective_total_ms, 5.0);
  EXPECT_DOUBLE_EQ(sim.collective_by_group_ms.at("dp").total_ms, 2.0);
  EXPECT_EQ(sim.longest_collective.name, "0_big");
  EXPECT_DOUBLE_EQ(sim.collective_slowdown, 5.0 / 3.0);
  // The link is busy 3 ms and moves 1.5e8 bytes of a possible 50e3 B/us * 3000 us = 1.5e8.
  ASSERT_EQ(sim.links.size(), 1u);
  EXPECT_EQ(sim.links[0].name, "network");
  EXPECT_EQ(sim.links[0].level, 1);
  EXPECT_DOUBLE_EQ(sim.links[0].bandwidth_GBps, 50);
  EXPECT_DOUBLE_EQ(sim.links[0].busy_ms, 3.0);
  EXPECT_DOUBLE_EQ(sim.links[0].bytes, 1.5e8);
  EXPECT_DOUBLE_EQ(sim.links[0].utilization, 1.0);
  EXPECT_EQ(sim.links[0].max_flows, 2);
  EXPECT_EQ(sim.busiest_link, "network");
}

TEST(NetworkFlows, ACappedFlowLeavesTheRestOfTheLinkToTheOther) {
  // A capped at 10 GB/s, B at the link's 50 GB/s: max-min gives A 10 and B 40 GB/s. A's 1e6
  // bytes take 100 us; B moves 4e6 of its 8e6 bytes by then, the rest alone at 50 GB/s in 80 us.
  Graph g = graph_of({{"a", "collective", "fwd", "tp", 100}, {"b", "collective", "fwd", "dp", 160}});
  g.cost->links = kOneLink;
  set_phases(g, 0, {phase({0}, 1e6, 10, 0)});
  set_phases(g, 1, {phase({0}, 8e6, 50, 0)});
  simulate_graph(g);
  EXPECT_DOUBLE_EQ(op_ms(*g.sim, "0_a"), 0.1);
  EXPECT_DOUBLE_EQ(op_ms(*g.sim, "1_b"), 0.18);
}

TEST(NetworkFlows, ProgressiveFillingOverTwoLinks) {
  // Links L0 (10 GB/s) and L1 (30 GB/s); A crosses both, B uses L0, C uses L1 (caps: the
  // smallest capacity of their links). L0 fills first at 5 GB/s each for A and B; C gets the
  // 25 GB/s left on L1 (not the 15 of an equal split). A and B (5e6 bytes) end at 1000 us; C
  // (4e7 bytes) has moved 2.5e7 by then and the other 1.5e7 alone at 30 GB/s take 500 us.
  Graph g = graph_of({{"a", "collective", "fwd", "tp", 500},
                      {"b", "collective", "fwd", "cp", 500, {}, "microbatch", 0, 0, "cp"},
                      {"c", "collective", "fwd", "dp", 4e7 / 30e3, {}, "microbatch", 0, 0, "dp"}});
  g.cost->links = {{"L0", 0, 10}, {"L1", 1, 30}};
  set_phases(g, 0, {phase({0, 1}, 5e6, 10, 0)});
  set_phases(g, 1, {phase({0}, 5e6, 10, 0)});
  set_phases(g, 2, {phase({1}, 4e7, 30, 0)});
  simulate_graph(g);
  EXPECT_DOUBLE_EQ(op_ms(*g.sim, "0_a"), 1.0);
  EXPECT_DOUBLE_EQ(op_ms(*g.sim, "1_b"), 1.0);
  EXPECT_DOUBLE_EQ(op_ms(*g.sim, "2_c"), 1.5);
  EXPECT_EQ(g.sim->links[0].max_flows, 2);
  EXPECT_EQ(g.sim->links[1].max_flows, 2);
}

TEST(NetworkFlows, LoadsWeighTheLinkShares) {
  // nvlink 120 GB/s, network 50 GB/s. A (a ring across nodes) loads nvlink twice per byte and
  // the network once: its cap is min(120 / 2, 50) = 50. B uses nvlink alone (cap 120). Rising
  // together at r: nvlink carries 2r + r = 120 at r = 40. B's 2e6 bytes end at 50 us; A has
  // moved 2e6 of its 4e6 bytes, the rest alone at 50 GB/s take 40 us: 90 us. nvlink carries
  // 2 * 4e6 + 2e6 bytes.
  Graph g = graph_of({{"a", "collective", "fwd", "tp", 80}, {"b", "collective", "fwd", "dp", 2e6 / 120e3}});
  g.cost->links = {{"nvlink", 0, 120}, {"network", 1, 50}};
  set_phases(g, 0, {phase({0, 1}, 4e6, 50, 0, {2, 1})});
  set_phases(g, 1, {phase({0}, 2e6, 120, 0)});
  simulate_graph(g);
  EXPECT_DOUBLE_EQ(op_ms(*g.sim, "0_a"), 0.09);
  EXPECT_DOUBLE_EQ(op_ms(*g.sim, "1_b"), 0.05);
  EXPECT_DOUBLE_EQ(g.sim->links[0].bytes, 1e7);
  EXPECT_DOUBLE_EQ(g.sim->links[1].bytes, 4e6);
}

TEST(NetworkFlows, FlowsOfDifferentPipelineRanksDoNotShare) {
  // The same 1e8-byte flow at 50 GB/s on link 0 of rank 0 and of rank 1 at the same time:
  // each has its rank's link alone, 2000 us.
  PipelineSchedule schedule = {{{0, 0, OpPass::forward}, {0, 0, OpPass::backward}}, {{0, 0, OpPass::forward}, {0, 0, OpPass::backward}}};
  Graph g = graph_of({{"ar0", "collective", "fwd", "tp", 2000}, {"ar1", "collective", "fwd", "tp", 2000, {}, "microbatch", 0, 1}},
                     1, schedule);
  g.cost->links = kOneLink;
  set_phases(g, 0, {phase({0}, 1e8, 50, 0)});
  set_phases(g, 1, {phase({0}, 1e8, 50, 0)});
  simulate_graph(g);
  EXPECT_EQ(g.sim->per_pp_rank_step_time_ms, (std::vector<double>{2.0, 2.0}));
  EXPECT_EQ(g.sim->links[0].max_flows, 1);
  EXPECT_DOUBLE_EQ(g.sim->collective_slowdown, 1.0);
}

TEST(NetworkFlows, ComputeBesideSlowedFlowsIsUnaffectedAndExposureFollowsTheFlows) {
  // mm: 0-100 us on the compute stream. gr (dp): 4e6 bytes at 50 GB/s from 0 us. ar (tp): 10 us
  // of latency, then 4e6 bytes at 50 GB/s (90 us alone). gr moves 5e5 bytes alone by 10 us;
  // then 25 GB/s each: gr's 3.5e6 left end at 10 + 140 = 150 us; ar has moved 3.5e6 by then,
  // its last 5e5 alone at 50 GB/s take 10 us: ends at 160 us. The compute stream idles
  // 100-160 us: 60 us exposed, tp (ar, 0-160) 60 us of it, dp (gr, 0-150) 50 us.
  Graph g = graph_of({{"mm", "gemm", "fwd", "compute", 100},
                      {"ar", "collective", "fwd", "tp", 90},
                      {"gr", "collective", "fwd", "dp", 80, {}, "microbatch", 0, 0, "dp"}});
  g.cost->links = kOneLink;
  set_phases(g, 1, {phase({0}, 4e6, 50, 10)});
  set_phases(g, 2, {phase({0}, 4e6, 50, 0)});
  simulate_graph(g);
  const SimSection& sim = *g.sim;
  EXPECT_DOUBLE_EQ(sim.step_time_ms, 0.16);
  EXPECT_DOUBLE_EQ(sim.forward_ms, 0.1);
  EXPECT_DOUBLE_EQ(op_ms(sim, "0_mm"), 0.1);
  EXPECT_DOUBLE_EQ(sim.collective_total_ms, 0.31);
  EXPECT_DOUBLE_EQ(sim.collective_exposed_ms, 0.06);
  EXPECT_DOUBLE_EQ(sim.collective_by_group_ms.at("tp").total_ms, 0.16);
  EXPECT_DOUBLE_EQ(sim.collective_by_group_ms.at("tp").exposed_ms, 0.06);
  EXPECT_DOUBLE_EQ(sim.collective_by_group_ms.at("dp").total_ms, 0.15);
  EXPECT_DOUBLE_EQ(sim.collective_by_group_ms.at("dp").exposed_ms, 0.05);
  EXPECT_DOUBLE_EQ(sim.collective_slowdown, 310.0 / 170.0);
  EXPECT_DOUBLE_EQ(sim.links[0].busy_ms, 0.16);
}

TEST(NetworkFlows, LinkLoadsAndTheBusiestLink) {
  // A 100 us gemm sets the step. ar (tp): 1e6 bytes on nvlink (100 GB/s), capped at 100; gr
  // (dp): 2e6 bytes over nvlink and network (50 GB/s), capped at 50. Both start at 0: nvlink's
  // share is 50 each and gr's cap is 50: both run at 50 GB/s; ar ends at 20 us (10 alone), gr at
  // 40 us. nvlink: 3e6 bytes, busy 0-40 us, 3e6 / (100e3 * 100) = 30% utilized; network: 2e6
  // bytes, busy 40 us, 2e6 / (50e3 * 100) = 40%: the busiest. Slowdown (20 + 40) / (10 + 40).
  Graph g = graph_of({{"mm", "gemm", "fwd", "compute", 100},
                      {"ar", "collective", "fwd", "tp", 10},
                      {"gr", "collective", "fwd", "dp", 40, {}, "microbatch", 0, 0, "dp"}});
  g.cost->links = kTwoLinks;
  set_phases(g, 1, {phase({0}, 1e6, 100, 0)});
  set_phases(g, 2, {phase({0, 1}, 2e6, 50, 0)});
  simulate_graph(g);
  const SimSection& sim = *g.sim;
  EXPECT_DOUBLE_EQ(sim.step_time_ms, 0.1);
  EXPECT_DOUBLE_EQ(op_ms(sim, "1_ar"), 0.02);
  EXPECT_DOUBLE_EQ(op_ms(sim, "2_gr"), 0.04);
  ASSERT_EQ(sim.links.size(), 2u);
  EXPECT_DOUBLE_EQ(sim.links[0].bytes, 3e6);
  EXPECT_DOUBLE_EQ(sim.links[0].busy_ms, 0.04);
  EXPECT_DOUBLE_EQ(sim.links[0].utilization, 0.3);
  EXPECT_EQ(sim.links[0].max_flows, 2);
  EXPECT_DOUBLE_EQ(sim.links[1].bytes, 2e6);
  EXPECT_DOUBLE_EQ(sim.links[1].busy_ms, 0.04);
  EXPECT_DOUBLE_EQ(sim.links[1].utilization, 0.4);
  EXPECT_EQ(sim.links[1].max_flows, 1);
  EXPECT_EQ(sim.busiest_link, "network");
  EXPECT_DOUBLE_EQ(sim.collective_slowdown, 1.2);
}

TEST(NetworkFlows, APhaseOnALinkThatDoesNotExistIsRefused) {
  Graph g = graph_of({{"ar", "collective", "fwd", "tp", 1}});
  g.cost->links = kOneLink;
  set_phases(g, 0, {phase({1}, 1e6, 50, 0)});
  try {
    simulate_graph(g);
    FAIL();
  } catch (const DataError& e) {
    EXPECT_STREQ(e.what(), "/cost/ops/0/phases/0/links: link 1 does not exist (1 links in /cost/links)");
  }
}

TEST(NetworkFlows, APhaseWithoutALoadPerLinkIsRefused) {
  Graph g = graph_of({{"ar", "collective", "fwd", "tp", 1}});
  g.cost->links = kOneLink;
  set_phases(g, 0, {Phase{{0}, {}, 1e6, 50, 0}});
  EXPECT_THROW(simulate_graph(g), DataError);
}

TEST(SimSectionJson, RoundTrip) {
  SimSection sim;
  sim.step_time_ms = 3;
  sim.collective_by_group_ms["tp"] = {2, 1};
  sim.top_ops = {{"0_big", 3}};
  sim.longest_collective = {"0_big", 3};
  sim.links = {{"nvlink", 0, 370, 1.5, 3e6, 0.25, 2}, {"network", 1, 41, 0, 0, 0, 0}};
  sim.busiest_link = "nvlink";
  sim.collective_slowdown = 1.25;
  nlohmann::json j = to_json(sim);
  EXPECT_EQ(to_json(sim_from_json(j, "/sim")), j);
  EXPECT_EQ(j["links"][0]["max_flows"], 2);
  EXPECT_EQ(j["busiest_link"], "nvlink");
  // A format 1.2 sim section has none of the three: no links, no slowdown.
  j.erase("links");
  j.erase("busiest_link");
  j.erase("collective_slowdown");
  SimSection old = sim_from_json(j, "/sim");
  EXPECT_TRUE(old.links.empty());
  EXPECT_DOUBLE_EQ(old.collective_slowdown, 1.0);
}

}  // namespace
}  // namespace syssim
