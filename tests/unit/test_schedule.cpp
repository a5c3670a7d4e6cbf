// Pipeline schedules: the slot order of each rank against the published figures, and what
// the simulator and the memory accounting make of them on hand-built pipelines whose step
// times and bubbles have closed forms.
#include <gtest/gtest.h>

#include "common/error.hpp"
#include "mem/mem.hpp"
#include "shard/schedule.hpp"
#include "sim/sim.hpp"

namespace syssim {
namespace {

// "F0 F1 B0 ...": pass initial and micro-batch, with the chunk after a dot when asked.
std::string text(const std::vector<ScheduleSlot>& slots, bool chunks = false) {
  std::string out;
  for (const ScheduleSlot& s : slots) {
    out += (out.empty() ? "" : " ") + std::string(1, static_cast<char>(std::toupper(to_string(s.pass)[0]))) +
           std::to_string(s.microbatch);
    if (chunks) out += "." + std::to_string(s.chunk);
  }
  return out;
}

TEST(Schedule, OneFOneBIsNarayananFigure4Top) {
  // Narayanan et al. 2021, Fig. 4 (top): 4 devices, 8 micro-batches, numbered from 0 here.
  PipelineSchedule s = make_schedule(ScheduleKind::one_f_one_b, 4, 1, 8, false);
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(text(s[0]), "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7");
  EXPECT_EQ(text(s[1]), "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7");
  EXPECT_EQ(text(s[2]), "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 B7");
  EXPECT_EQ(text(s[3]), "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7");
}

TEST(Schedule, OneFOneBWithFewerMicroBatchesThanStagesWarmsUpWithAll) {
  PipelineSchedule s = make_schedule(ScheduleKind::one_f_one_b, 4, 1, 2, false);
  EXPECT_EQ(text(s[0]), "F0 F1 B0 B1");
  EXPECT_EQ(text(s[3]), "F0 B0 F1 B1");
}

TEST(Schedule, CombinedOneFOneBWarmsUpWithOneMoreForward) {
  // Megatron-Core's combined 1F1B without a pipeline (combined_1f1b_schedule_for_no_pipelining):
  // F0, then each forward beside the backward of the micro-batch before it, then the last backward.
  PipelineSchedule s = make_schedule(ScheduleKind::one_f_one_b, 1, 1, 3, true);
  EXPECT_EQ(text(s[0]), "F0 F1 B0 F2 B1 B2");
  // With the interleaved schedule: one more warm-up forward on each rank.
  PipelineSchedule plain = make_schedule(ScheduleKind::interleaved, 2, 2, 4, false);
  PipelineSchedule combined = make_schedule(ScheduleKind::interleaved, 2, 2, 4, true);
  EXPECT_EQ(text(plain[1], true), "F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 F2.0 B0.0 F3.0 B1.0 F2.1 B2.1 F3.1 B3.1 B2.0 B3.0");
  EXPECT_EQ(text(combined[1], true), "F0.0 F1.0 F0.1 F1.1 B0.1 F2.0 B1.1 F3.0 B0.0 F2.1 B1.0 F3.1 B2.1 B3.1 B2.0 B3.0");
  EXPECT_THROW(make_schedule(ScheduleKind::gpipe, 2, 1, 4, true), UsageError);
}

TEST(Schedule, GPipeIsNarayananFigure3) {
  // Every forward, then every backward, on every device.
  PipelineSchedule s = make_schedule(ScheduleKind::gpipe, 4, 1, 4, false);
  for (const auto& rank : s) EXPECT_EQ(text(rank), "F0 F1 F2 F3 B0 B1 B2 B3");
}

TEST(Schedule, InterleavedIsNarayananFigure4Bottom) {
  // Fig. 4 (bottom): 4 devices, 2 chunks, 8 micro-batches. Device 1 warms up with 10
  // forwards: micro-batches 0-3 through chunk 0, 0-3 through chunk 1, then 4 and 5 through
  // chunk 0 ((pp - 1) * 2 + (vpp - 1) * pp = 10); then forward 6 of chunk 0 and the first
  // backward, micro-batch 0 of chunk 1.
  PipelineSchedule s = make_schedule(ScheduleKind::interleaved, 4, 2, 8, false);
  std::vector<ScheduleSlot> start(s[0].begin(), s[0].begin() + 12);
  EXPECT_EQ(text(start, true), "F0.0 F1.0 F2.0 F3.0 F0.1 F1.1 F2.1 F3.1 F4.0 F5.0 F6.0 B0.1");
  // The last device warms up with (vpp - 1) * pp = 4 forwards.
  std::vector<ScheduleSlot> last(s[3].begin(), s[3].begin() + 6);
  EXPECT_EQ(text(last, true), "F0.0 F1.0 F2.0 F3.0 F0.1 B0.1");
}

TEST(Schedule, InterleavedTwoRanksTwoChunksByHand) {
  // pp 2, vpp 2, 4 micro-batches. Rank 0 warms up with (2-0-1)*2 + (2-1)*2 = 4 forwards; the
  // k-th forward runs micro-batch (k / 4) * 2 + k % 2 through chunk k % 4 / 2, the k-th
  // backward the same micro-batch through the other chunk.
  PipelineSchedule s = make_schedule(ScheduleKind::interleaved, 2, 2, 4, false);
  EXPECT_EQ(text(s[0], true), "F0.0 F1.0 F0.1 F1.1 F2.0 B0.1 F3.0 B1.1 F2.1 B0.0 F3.1 B1.0 B2.1 B3.1 B2.0 B3.0");
  EXPECT_EQ(text(s[1], true), "F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 F2.0 B0.0 F3.0 B1.0 F2.1 B2.1 F3.1 B3.1 B2.0 B3.0");
}

TEST(Schedule, InterleavedWithAsManyMicroBatchesAsStagesRunsAllForwardsFirst) {
  // Megatron-LM: num_microbatches == pp makes every forward a warm-up forward.
  PipelineSchedule s = make_schedule(ScheduleKind::interleaved, 2, 2, 2, false);
  EXPECT_EQ(text(s[1], true), "F0.0 F1.0 F0.1 F1.1 B0.1 B1.1 B0.0 B1.0");
}

TEST(Schedule, ZeroBubbleH1IsQiFigure3) {
  // Qi et al. 2023, "Zero Bubble Pipeline Parallelism", Fig. 3 (ZB-H1), 4 stages, 8
  // micro-batches: the warm-up of 1F1B; stage i defers the weight pass of its first i
  // backwards and runs the deferred ones last.
  PipelineSchedule s = make_schedule(ScheduleKind::zb_h1, 4, 1, 8, false);
  EXPECT_EQ(text(s[0]), "F0 F1 F2 F3 B0 W0 F4 B1 W1 F5 B2 W2 F6 B3 W3 F7 B4 W4 B5 W5 B6 W6 B7 W7");
  EXPECT_EQ(text(s[1]), "F0 F1 F2 B0 F3 B1 W0 F4 B2 W1 F5 B3 W2 F6 B4 W3 F7 B5 W4 B6 W5 B7 W6 W7");
  EXPECT_EQ(text(s[3]), "F0 B0 F1 B1 F2 B2 F3 B3 W0 F4 B4 W1 F5 B5 W2 F6 B6 W3 F7 B7 W4 W5 W6 W7");
}

TEST(Schedule, ImpossibleCombinationsAreUsageErrors) {
  auto message = [](ScheduleKind kind, int64_t pp, int64_t vpp, int64_t m) -> std::string {
    try {
      make_schedule(kind, pp, vpp, m, false);
    } catch (const UsageError& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_EQ(message(ScheduleKind::interleaved, 4, 2, 6),
            "pipeline_schedule=interleaved needs num_microbatches a multiple of pp, as Megatron-LM does: "
            "num_microbatches=6, pp=4");
  EXPECT_EQ(message(ScheduleKind::interleaved, 4, 2, 2),
            "pipeline_schedule=interleaved needs num_microbatches a multiple of pp, as Megatron-LM does: "
            "num_microbatches=2, pp=4");
  EXPECT_EQ(message(ScheduleKind::interleaved, 4, 1, 8), "pipeline_schedule=interleaved needs vpp > 1 (got vpp=1)");
  EXPECT_EQ(message(ScheduleKind::zb_h1, 4, 2, 8),
            "pipeline_schedule=zb-h1 runs one model chunk per rank: vpp=2 needs pipeline_schedule=interleaved");
  EXPECT_EQ(message(ScheduleKind::gpipe, 4, 2, 8),
            "pipeline_schedule=gpipe runs one model chunk per rank: vpp=2 needs pipeline_schedule=interleaved");
}

// A hand-built pipeline of pp ranks and vpp chunks with no communication: virtual stage v
// has a forward op (tf us) waiting for v - 1's, a backward op (tb us) waiting for v + 1's and
// its own forward, and with split_weight a weight-gradient op (tw us) after its backward.
// Each forward writes `activation_bytes` that its backward (or weight op) reads last.
// rank_scale, when given, multiplies the times of each pipeline rank's ops.
struct Pipeline {
  int64_t pp = 4, vpp = 1, microbatches = 8;
  double tf = 1, tb = 1, tw = 0;
  double activation_bytes = 100;
  std::vector<double> rank_scale;
};

Graph pipeline_graph(const Pipeline& p, const std::string& schedule) {
  Graph g;
  ShardSection s;
  s.parallelism.pp = p.pp;
  s.parallelism.vpp = p.vpp;
  s.num_microbatches = p.microbatches;
  s.schedule = make_schedule(*parse_enum<ScheduleKind>(schedule), p.pp, p.vpp, p.microbatches, false);
  s.stage_params_local.assign(p.pp, 0.0);
  g.cost = CostSection{"roofline", HardwareConfig{}, {}, {}};
  const int64_t stages = p.pp * p.vpp;
  auto add = [&](const std::string& name, const std::string& phase, const std::string& pass, int64_t v, double us,
                 std::vector<int64_t> deps, std::vector<int64_t> reads, std::vector<int64_t> writes) {
    ShardOp op;
    op.id = static_cast<int64_t>(s.ops.size());
    op.name = name;
    op.kind = OpKind::gemm;
    op.phase = parse_enum<OpPhase>(phase).value();
    op.pass = parse_enum<OpPass>(pass).value();
    op.module = name;
    op.scope = OpScope::microbatch;
    op.stream = Stream::compute;
    op.stage = v % p.pp;
    op.chunk = v / p.pp;
    op.deps = std::move(deps);
    op.reads = std::move(reads);
    op.writes = std::move(writes);
    s.ops.push_back(op);
    if (!p.rank_scale.empty()) us *= p.rank_scale[op.stage];
    g.cost->ops.push_back(OpCost{op.id, us, OpBound::compute, {}});
    return op.id;
  };
  std::vector<int64_t> forward(stages), backward(stages);
  for (int64_t v = 0; v < stages; ++v) {
    s.buffers.push_back(ShardBuffer{v, p.activation_bytes, TensorRole::activation, "", std::nullopt});
    forward[v] = add("f" + std::to_string(v), "fwd", "forward", v, p.tf, v ? std::vector<int64_t>{forward[v - 1]}
                                                                               : std::vector<int64_t>{},
                     {}, {v});
  }
  for (int64_t v = stages; v-- > 0;) {
    std::vector<int64_t> deps = {forward[v]};
    if (v + 1 < stages) deps.push_back(backward[v + 1]);
    std::vector<int64_t> reads;
    if (p.tw == 0) reads = {v};
    backward[v] = add("b" + std::to_string(v), "bwd", "backward", v, p.tb, deps, reads, {});
    if (p.tw > 0) add("w" + std::to_string(v), "bwd", "weight", v, p.tw, {backward[v]}, {v}, {});
  }
  g.shard = s;
  return g;
}

SimSection simulate(const Pipeline& p, const std::string& schedule) {
  Graph g = pipeline_graph(p, schedule);
  simulate_graph(g);
  return *g.sim;
}

TEST(SimulatedSchedule, OneFOneBBubbleIsPpMinusOneOverMPlusPpMinusOne) {
  // Uniform stages: the step is (m + pp - 1) (tf + tb) and every rank idles (pp - 1)(tf + tb)
  // of it: bubble (pp - 1) / (m + pp - 1) = 3 / 11.
  Pipeline p;
  p.tb = 2;
  SimSection sim = simulate(p, "1f1b");
  EXPECT_DOUBLE_EQ(sim.step_time_ms, 11 * 3 * 1e-3);
  EXPECT_EQ(sim.binding_pp_stage, 0);  // the first rank runs the last backward
  EXPECT_NEAR(sim.bubble_fraction, 3.0 / 11.0, 1e-12);
  // Rank i ends after the last backward reached it: i backwards (2 us) before the first's end.
  ASSERT_EQ(sim.per_pp_rank_step_time_ms.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_DOUBLE_EQ(sim.per_pp_rank_step_time_ms[i], (33 - 2 * i) * 1e-3);
}

TEST(SimulatedSchedule, TheBusiestRankBindsThoughTheFirstEndsLast) {
  // 1F1B on 2 ranks, 4 micro-batches; rank 1's ops take 2 us, rank 0's 1 us. By hand:
  //   rank 0: F0 0-1, F1 1-2, B0 5-6, F2 6-7, B1 9-10, F3 10-11, B2 13-14, B3 17-18
  //   rank 1: F0 1-3, B0 3-5, F1 5-7, B1 7-9, F2 9-11, B2 11-13, F3 13-15, B3 15-17
  // Rank 0 ends last but idles 10 of the 18 us, waiting for rank 1, which idles 2 (0-1 and
  // 17-18): rank 1 sets the pace, and the report's breakdown is its own.
  Pipeline p;
  p.pp = 2;
  p.microbatches = 4;
  p.rank_scale = {1, 2};
  SimSection sim = simulate(p, "1f1b");
  EXPECT_DOUBLE_EQ(sim.step_time_ms, 18e-3);
  ASSERT_EQ(sim.per_pp_rank_step_time_ms.size(), 2u);
  EXPECT_DOUBLE_EQ(sim.per_pp_rank_step_time_ms[0], 18e-3);
  EXPECT_DOUBLE_EQ(sim.per_pp_rank_step_time_ms[1], 17e-3);
  EXPECT_EQ(sim.binding_pp_stage, 1);
  EXPECT_NEAR(sim.bubble_fraction, 2.0 / 18.0, 1e-12);
  EXPECT_DOUBLE_EQ(sim.forward_ms, 8e-3);  // rank 1's four forwards of 2 us
  EXPECT_DOUBLE_EQ(sim.backward_ms, 8e-3);
}

TEST(SimulatedSchedule, GPipeHasTheSameBubbleAsOneFOneB) {
  Pipeline p;
  p.tb = 2;
  SimSection sim = simulate(p, "gpipe");
  EXPECT_DOUBLE_EQ(sim.step_time_ms, 33e-3);
  EXPECT_NEAR(sim.bubble_fraction, 3.0 / 11.0, 1e-12);
}

TEST(SimulatedSchedule, InterleavingDividesTheBubbleByVpp) {
  // Narayanan et al. 2021, Sec. 2.2.2: with v chunks of a v-th of the work each, the bubble
  // is (pp - 1)(tf + tb) / v of rank work m (tf + tb): here chunks of tf = 1, tb = 2, so the
  // step is m v (tf + tb) + (pp - 1)(tf + tb) = 48 + 9 = 57 us, bubble 9 / 57.
  Pipeline p;
  p.vpp = 2;
  p.tb = 2;
  SimSection sim = simulate(p, "interleaved");
  EXPECT_DOUBLE_EQ(sim.step_time_ms, 57e-3);
  EXPECT_NEAR(sim.bubble_fraction, 9.0 / 57.0, 1e-12);
}

TEST(SimulatedSchedule, ZeroBubbleH1ShrinksTheBubbleToTfPlusTbMinusTw) {
  // Qi et al. 2023, Sec. 3: ZB-H1's bubble is (p - 1)(TF + TB - TW), against 1F1B's
  // (p - 1)(TF + TB + TW). With TF = TB = TW = 1 us, p = 4, m = 8: 24 us of work and 3 us of
  // bubble, a 27 us step.
  Pipeline p;
  p.tw = 1;
  SimSection zb = simulate(p, "zb-h1");
  EXPECT_DOUBLE_EQ(zb.step_time_ms, 27e-3);
  EXPECT_NEAR(zb.bubble_fraction, 3.0 / 27.0, 1e-12);
}

MemSection account(const Pipeline& p, const std::string& schedule) {
  Graph g = pipeline_graph(p, schedule);
  account_memory(g);
  return *g.mem;
}

TEST(ScheduleMemory, OneFOneBHoldsPpMinusIMicroBatchesOnStageI) {
  MemSection mem = account(Pipeline{}, "1f1b");
  EXPECT_EQ(mem.pp_stage_microbatches_in_flight, (std::vector<int64_t>{4, 3, 2, 1}));
  // 100 bytes of activations per micro-batch in flight.
  for (int i = 0; i < 4; ++i) EXPECT_DOUBLE_EQ(mem.pp_stage_memory_gb[i], (4 - i) * 100 / 1e9);
  EXPECT_EQ(mem.peak_pp_stage, 0);
  EXPECT_DOUBLE_EQ(mem.activation_bytes, 400);
}

TEST(ScheduleMemory, GPipeHoldsEveryMicroBatch) {
  MemSection mem = account(Pipeline{}, "gpipe");
  EXPECT_EQ(mem.pp_stage_microbatches_in_flight, (std::vector<int64_t>{8, 8, 8, 8}));
}

TEST(ScheduleMemory, ZeroBubbleH1KeepsTheFirstStagesPeak) {
  // Stage i holds 1F1B's pp - i micro-batches plus the i whose weight pass it deferred:
  // pp on every stage, the peak of 1F1B's first stage (Qi et al. 2023, Sec. 3.1).
  Pipeline p;
  p.tw = 1;
  MemSection mem = account(p, "zb-h1");
  EXPECT_EQ(mem.pp_stage_microbatches_in_flight, (std::vector<int64_t>{4, 4, 4, 4}));
  EXPECT_DOUBLE_EQ(mem.activation_bytes, 400);
}

TEST(SimulatedSchedule, AScheduleMissingASlotIsRefused) {
  Graph g = pipeline_graph(Pipeline{}, "1f1b");
  g.shard->schedule[2].pop_back();  // rank 2's last backward
  try {
    simulate_graph(g);
    FAIL();
  } catch (const DataError& e) {
    EXPECT_STREQ(e.what(), "/shard/schedule/2: no backward slot of chunk 0, micro-batch 7, which op 5 needs");
  }
}

}  // namespace
}  // namespace syssim
