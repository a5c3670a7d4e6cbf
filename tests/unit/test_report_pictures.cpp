// The pictures of a simulated step (lib/report/pictures.hpp) and the SVG writer they use, on
// hand-built pipelines whose timelines are worked out by hand from the op durations.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/svg.hpp"
#include "report/critical_path.hpp"
#include "report/pictures.hpp"
#include "report/report.hpp"
#include "sim/sim.hpp"
#include "sim_graph.hpp"

namespace syssim {
namespace {

using nlohmann::json;

// A simulated graph (timeline kept): graph_of (sim_graph.hpp) under a GPipe-named schedule.
Graph simulated(const std::vector<TestOp>& ops, const PipelineSchedule& schedule, int64_t num_microbatches,
                const std::vector<std::pair<std::string, double>>& buffers = {}) {
  Graph g = graph_of(ops, num_microbatches, schedule, buffers);
  g.shard->pipeline_schedule = ScheduleKind::gpipe;
  simulate_graph(g, SimOptions{true});
  return g;
}

// One rank, two micro-batches back to back: f (10 us), its tp all-reduce (4 us), b (20 us).
// Compute stream f0 0-10, b0 14-34, f1 34-44, b1 48-68; tp stream ar0 10-14, ar1 44-48.
// Buffers: 0 the input (8 B, nobody writes it), 1 f's output saved for b (100 B), 2 a weight,
// 3 the all-reduced copy (comm, 50 B) that b reads: a forward op writes it, so it is saved too.
Graph one_rank() {
  return simulated({{"f", "gemm", "fwd", "compute", 10, {}, "microbatch", 0, 0, "tp", {0, 2}, {1}},
                    {"ar", "collective", "fwd", "tp", 4, {0}, "microbatch", 0, 0, "tp", {1}, {3}},
                    {"b", "gemm", "bwd", "compute", 20, {1}, "microbatch", 0, 0, "tp", {1, 2, 3}, {}}},
                   {{{0, 0, OpPass::forward}, {0, 0, OpPass::backward}, {0, 1, OpPass::forward}, {0, 1, OpPass::backward}}}, 2,
                   {{"input", 8}, {"activation", 100}, {"param", 1000}, {"comm", 50}});
}

// GPipe on two ranks, two micro-batches, a 10 us forward and a 20 us backward per rank:
// rank 0 F0 0-10, F1 10-20, B0 50-70, B1 70-90; rank 1 F0 10-20, F1 20-30, B0 30-50, B1 50-70.
Graph two_rank_gpipe() {
  PipelineSchedule gpipe(2, {{0, 0, OpPass::forward}, {0, 1, OpPass::forward}, {0, 0, OpPass::backward}, {0, 1, OpPass::backward}});
  return simulated({{"f0", "gemm", "fwd", "compute", 10, {}, "microbatch", 0, 0},
                    {"f1", "gemm", "fwd", "compute", 10, {0}, "microbatch", 0, 1},
                    {"b1", "gemm", "bwd", "compute", 20, {1}, "microbatch", 0, 1},
                    {"b0", "gemm", "bwd", "compute", 20, {2}, "microbatch", 0, 0}},
                   gpipe, 2);
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

TEST(Timeline, RecordsEveryInstanceWhenAsked) {
  Graph g = one_rank();
  ASSERT_TRUE(g.sim->timeline);
  const std::vector<TimelineEntry>& t = *g.sim->timeline;
  // Issue order: f0 b0 f1 b1 on compute, ar0 ar1 on tp; made slot by slot.
  ASSERT_EQ(t.size(), 6u);
  struct Row {
    std::string stream;
    int64_t op, microbatch;
    double start_us, end_us;
  };
  std::vector<Row> expected = {{"compute", 0, 0, 0, 10},  {"tp", 1, 0, 10, 14},      {"compute", 2, 0, 14, 34},
                               {"compute", 0, 1, 34, 44}, {"tp", 1, 1, 44, 48},      {"compute", 2, 1, 48, 68}};
  for (size_t i = 0; i < t.size(); ++i) {
    EXPECT_EQ(t[i].rank, 0);
    EXPECT_EQ(to_string(t[i].stream), expected[i].stream) << i;
    EXPECT_EQ(t[i].op, expected[i].op) << i;
    EXPECT_EQ(t[i].microbatch, expected[i].microbatch) << i;
    EXPECT_NEAR(t[i].start_ms, expected[i].start_us * 1e-3, 1e-15) << i;
    EXPECT_NEAR(t[i].end_ms, expected[i].end_us * 1e-3, 1e-15) << i;
  }
}

TEST(Timeline, OffByDefaultAndRoundTripsThroughJson) {
  Graph g = one_rank();
  Graph plain = g;
  simulate_graph(plain);
  EXPECT_FALSE(plain.sim->timeline);
  EXPECT_FALSE(to_json(*plain.sim).contains("timeline"));

  json j = to_json(*g.sim);
  EXPECT_EQ(j["timeline"][1], json::parse(R"([0, "tp", 1, 0, 0.01, 0.014])"));
  SimSection back = sim_from_json(j, "/sim");
  ASSERT_TRUE(back.timeline);
  EXPECT_EQ(back.timeline->size(), 6u);
  EXPECT_EQ((*back.timeline)[5].op, 2);
  j["timeline"][2] = json::parse(R"([0, "compute", 2])");
  try {
    sim_from_json(j, "/sim");
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("/sim/timeline/2"), std::string::npos) << e.what();
  }
}

TEST(Timeline, PicturesNeedIt) {
  Graph g = one_rank();
  g.sim->timeline.reset();
  for (std::string format : {"chrome-trace", "svg"}) {
    try {
      render_report(g, format);
      FAIL() << "expected DataError for " << format;
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find("syssim-sim --timeline"), std::string::npos) << e.what();
    }
  }
  g = one_rank();
  (*g.sim->timeline)[0].op = 7;
  EXPECT_THROW(render_chrome_trace(g), DataError);
}

// The path of one_rank, by hand: b1 waits for ar1 (ends 48) more than for f1 (44), ar1 for f1,
// f1 for b0 (the stream's order), b0 for ar0 (14, not f0's 10), ar0 for f0: every instance.
TEST(CriticalPath, FollowsWhatEachInstanceWaitedFor) {
  Graph g = one_rank();
  const CriticalPath path = critical_path(g);
  EXPECT_EQ(path.entries, (std::vector<size_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_NEAR(path.compute_ms.at("gemm"), 0.060, 1e-12);  // 10 + 20 + 10 + 20 us
  EXPECT_NEAR(path.communication_ms.at("tp"), 0.008, 1e-12);
  EXPECT_EQ(path.host_ms, 0);
  EXPECT_NEAR(path.waiting_ms, 0, 1e-12);
  EXPECT_NEAR(path.length_ms(), g.sim->step_time_ms, 1e-12);
  EXPECT_NEAR(path.length_ms(), 0.068, 1e-12);
}

// GPipe on two ranks (two_rank_gpipe's times). Back from rank 0's B1 (70-90): rank 1's B1
// (50-70; a dep, ending with rank 0's B0, wins the tie), rank 1's B0 (30-50, later than F1's
// 30), rank 1's F1 (20-30), rank 0's F1 (10-20; the dep again, tied with rank 1's F0), rank 0's
// F0 (0-10). Rank 0 holds 10 + 10 + 20 us of it, rank 1 10 + 20 + 20 us.
TEST(CriticalPath, CrossesPipelineRanks) {
  Graph g = two_rank_gpipe();
  const CriticalPath path = critical_path(g);
  ASSERT_EQ(path.entries.size(), 6u);
  const std::vector<std::tuple<int64_t, int64_t, int64_t>> expected = {{0, 0, 0}, {0, 0, 1}, {1, 1, 1},
                                                                      {1, 2, 0}, {1, 2, 1}, {0, 3, 1}};
  for (size_t i = 0; i < expected.size(); ++i) {
    const TimelineEntry& e = (*g.sim->timeline)[path.entries[i]];
    EXPECT_EQ(std::tuple(e.rank, e.op, e.microbatch), expected[i]) << i;
  }
  EXPECT_NEAR(path.pp_rank_ms[0], 0.040, 1e-12);
  EXPECT_NEAR(path.pp_rank_ms[1], 0.050, 1e-12);
  EXPECT_NEAR(path.length_ms(), 0.090, 1e-12);
  EXPECT_NEAR(g.sim->step_time_ms, 0.090, 1e-12);
}

// Two ranks, two micro-batches; rank 1 runs 1F1B (F0 B0 F1 B1), its forward receive (2 us) on
// the pp stream, posted only once its compute stream has run the slot before (docs/syssim-sim.md,
// "Pipeline receives"). Rank 0: F0 0-10, F1 10-20, B0 52-62, B1 94-104. Rank 1: recv0 10-12,
// F0 12-22, B0 22-52, recv1 52-54 (posted when B0 ends, although rank 0's F1 ended at 20),
// F1 54-64, B1 64-94. Back from rank 0's B1: rank 1's B1, F1, recv1, then B0 (the posting, not
// rank 0's F1), F0, recv0 and rank 0's F0: no waiting; rank 0 holds 20 us, rank 1 84.
TEST(CriticalPath, APipelineReceiveWaitsForTheSlotBeforeIt) {
  PipelineSchedule schedule = {
      {{0, 0, OpPass::forward}, {0, 1, OpPass::forward}, {0, 0, OpPass::backward}, {0, 1, OpPass::backward}},
      {{0, 0, OpPass::forward}, {0, 0, OpPass::backward}, {0, 1, OpPass::forward}, {0, 1, OpPass::backward}}};
  Graph g = graph_of({{"f", "gemm", "fwd", "compute", 10, {}, "microbatch", 0, 0},
                      {"recv", "collective", "fwd", "pp", 2, {0}, "microbatch", 0, 1, "pp"},
                      {"f", "gemm", "fwd", "compute", 10, {1}, "microbatch", 0, 1},
                      {"b", "gemm", "bwd", "compute", 30, {2}, "microbatch", 0, 1},
                      {"b", "gemm", "bwd", "compute", 10, {3}, "microbatch", 0, 0}},
                     2, schedule);
  g.shard->pipeline_schedule = ScheduleKind::one_f_one_b;
  simulate_graph(g, SimOptions{true});
  EXPECT_NEAR(g.sim->step_time_ms, 0.104, 1e-12);
  const CriticalPath path = critical_path(g);
  const std::vector<std::tuple<int64_t, int64_t, int64_t>> expected = {{0, 0, 0}, {1, 1, 0}, {1, 2, 0}, {1, 3, 0},
                                                                      {1, 1, 1}, {1, 2, 1}, {1, 3, 1}, {0, 4, 1}};
  ASSERT_EQ(path.entries.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    const TimelineEntry& e = (*g.sim->timeline)[path.entries[i]];
    EXPECT_EQ(std::tuple(e.rank, e.op, e.microbatch), expected[i]) << i;
  }
  EXPECT_NEAR(path.waiting_ms, 0, 1e-12);
  EXPECT_NEAR(path.pp_rank_ms[0], 0.020, 1e-12);
  EXPECT_NEAR(path.pp_rank_ms[1], 0.084, 1e-12);
  EXPECT_NEAR(path.communication_ms.at("pp"), 0.004, 1e-12);
}

// A host-bound rank: each op takes the host 30 us to issue and the GPU 10 us to run. The host
// issues a0 (0-30), b0 (30-60), a1 (60-90), b1 (90-120); b1 runs 120-130. The path is the host's
// four issues and b1: 120 us of host, 10 of GPU.
TEST(CriticalPath, HoldsTheHostWhenItIssuesTooSlowly) {
  Graph g = graph_of({{"a", "gemm", "fwd", "compute", 10, {}, "microbatch", 0, 0, "tp", {}, {}, 30},
                      {"b", "gemm", "bwd", "compute", 10, {0}, "microbatch", 0, 0, "tp", {}, {}, 30}},
                     2);
  simulate_graph(g, SimOptions{true});
  const CriticalPath path = critical_path(g);
  EXPECT_NEAR(path.host_ms, 0.120, 1e-12);
  EXPECT_NEAR(path.compute_ms.at("gemm"), 0.010, 1e-12);
  EXPECT_NEAR(path.waiting_ms, 0, 1e-12);
  EXPECT_NEAR(g.sim->step_time_ms, 0.130, 1e-12);
  EXPECT_EQ(path.entries.size(), 5u);
}

TEST(CriticalPath, NeedsTheTimelineAndPrintsAsAReport) {
  Graph g = one_rank();
  const std::string text = render_report(g, "critical-path");
  EXPECT_NE(text.find("path_ms             = 0.0680"), std::string::npos) << text;
  EXPECT_NE(text.find("communication_ms    = tp 0.0080"), std::string::npos) << text;
  g.sim->timeline.reset();
  EXPECT_THROW(render_report(g, "critical-path"), DataError);
}

TEST(LiveBuffers, FollowTheMemoryStagesRuleInTime) {
  // Micro-batch 0: input 0-10 us (to the end of f), activation 0-34 (f's start to b's end),
  // comm copy 10-34 (ar's start to b's end). Micro-batch 1 the same from its start at 34 us:
  // input 34-44, activation 34-68, comm 44-68. The weight is a model state: not counted.
  // Saved for backward: the activation and the comm copy; the input only feeds f.
  std::vector<std::vector<MemorySample>> live = live_buffers(one_rank());
  ASSERT_EQ(live.size(), 1u);
  struct Expected {
    double time_us, activation, other;
  };
  std::vector<Expected> expected = {{0, 100, 8}, {10, 150, 0}, {34, 100, 8}, {44, 150, 0}, {68, 0, 0}};
  ASSERT_EQ(live[0].size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(live[0][i].time_ms, expected[i].time_us * 1e-3, 1e-15) << i;
    EXPECT_DOUBLE_EQ(live[0][i].activation_bytes, expected[i].activation) << i;
    EXPECT_DOUBLE_EQ(live[0][i].other_bytes, expected[i].other) << i;
  }
}

TEST(ChromeTrace, OneTrackPerRankAndStream) {
  json trace = json::parse(render_chrome_trace(one_rank()));
  std::vector<json> complete, counters;
  std::map<std::string, json> names;  // "process_name/pid/tid" -> name
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] == "X") complete.push_back(e);
    if (e["ph"] == "C") counters.push_back(e);
    if (e["ph"] == "M" && e["args"].contains("name"))
      names[e["name"].get<std::string>() + "/" + e["pid"].dump() + "/" + e.value("tid", json(-1)).dump()] =
          e["args"]["name"];
  }
  EXPECT_EQ(names["process_name/0/-1"], "pp rank 0");
  EXPECT_EQ(names["thread_name/0/0"], "compute");
  EXPECT_EQ(names["thread_name/0/1"], "tp");
  ASSERT_EQ(complete.size(), 6u);
  // ar of micro-batch 1: 44-48 us on the tp track, colored as a tp collective.
  const json& ar1 = complete[4];
  EXPECT_EQ(ar1["name"], "ar");
  EXPECT_EQ(ar1["tid"], 1);
  EXPECT_NEAR(ar1["ts"].get<double>(), 44, 1e-9);
  EXPECT_NEAR(ar1["dur"].get<double>(), 4, 1e-9);
  EXPECT_EQ(ar1["cname"], "thread_state_iowait");
  EXPECT_EQ(ar1["args"]["microbatch"], 1);
  EXPECT_EQ(ar1["args"]["group"], "tp");
  EXPECT_FALSE(complete[0].contains("cname"));
  // The counter track: the five samples of LiveBuffers, in GB.
  ASSERT_EQ(counters.size(), 5u);
  EXPECT_NEAR(counters[1]["ts"].get<double>(), 10, 1e-9);
  EXPECT_DOUBLE_EQ(counters[1]["args"]["activations"].get<double>(), 150e-9);
  EXPECT_DOUBLE_EQ(counters[1]["args"]["other"].get<double>(), 0);
  EXPECT_EQ(trace["displayTimeUnit"], "ms");
}

TEST(ChromeTrace, TracksAreInTimeOrderAndSumToTheBusyTime) {
  // GPipe, two ranks: each rank's compute track holds 2 x 10 + 2 x 20 = 60 us of ops.
  json trace = json::parse(render_chrome_trace(two_rank_gpipe()));
  std::map<std::pair<int64_t, int64_t>, std::vector<std::pair<double, double>>> tracks;
  for (const json& e : trace["traceEvents"])
    if (e["ph"] == "X") tracks[{e["pid"], e["tid"]}].emplace_back(e["ts"], e["dur"]);
  ASSERT_EQ(tracks.size(), 2u);
  for (const auto& [track, events] : tracks) {
    EXPECT_EQ(events.size(), 4u);
    double busy = 0;
    for (size_t i = 0; i < events.size(); ++i) {
      busy += events[i].second;
      if (i > 0) {
        EXPECT_GE(events[i].first, events[i - 1].first + events[i - 1].second - 1e-9);
      }
    }
    EXPECT_NEAR(busy, 60, 1e-9);
  }
}

// one_rank's micro-batch 1: f1 34-44, ar1 44-48, b1 48-68 us.
TEST(TimelineWindow, KeepsTheMicroBatchesAsked) {
  TimelineWindow window;
  window.microbatches = {1, 1};
  std::vector<TimelineEntry> kept = timeline_in_window(one_rank(), window);
  ASSERT_EQ(kept.size(), 3u);
  for (const TimelineEntry& e : kept) EXPECT_EQ(e.microbatch, 1);
  EXPECT_NEAR(kept.front().start_ms, 0.034, 1e-12);
}

// The window 40-46 us overlaps f1 (34-44) and ar1 (44-48) only; the memory samples in effect
// over 34-48 us are LiveBuffers' samples at 34 and 44 us.
TEST(TimelineWindow, KeepsTheInstancesOverlappingATimeWindowAndTheirMemory) {
  TimelineWindow window;
  window.time_ms = {0.040, 0.046};
  json trace = json::parse(render_chrome_trace(one_rank(), window));
  std::vector<std::string> names;
  std::vector<double> counter_times;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] == "X") names.push_back(e["name"].get<std::string>() + "@" + e["ts"].dump());
    if (e["ph"] == "C") counter_times.push_back(e["ts"].get<double>());
  }
  EXPECT_EQ(names, (std::vector<std::string>{"f@34.0", "ar@44.0"}));
  ASSERT_EQ(counter_times.size(), 2u);
  EXPECT_NEAR(counter_times[0], 34, 1e-9);
  EXPECT_NEAR(counter_times[1], 44, 1e-9);
  EXPECT_EQ(trace["otherData"]["time_window_ms"], json({0.040, 0.046}));
}

// GPipe's micro-batch 1: rank 0 F 10-20 and B 70-90 us, rank 1 F 20-30 and B 50-70 us; the
// axis spans 10-90 us.
TEST(TimelineWindow, TheScheduleShowsTheWindowOnly) {
  TimelineWindow window;
  window.microbatches = {1, 1};
  std::string svg = render_schedule_svg(two_rank_gpipe(), window);
  EXPECT_EQ(count(svg, ", micro-batch 1: "), 4u);
  EXPECT_EQ(count(svg, ", micro-batch 0: "), 0u);
  EXPECT_NE(svg.find("step 0.09 ms · "), std::string::npos);
  EXPECT_NE(svg.find(" · shown 0.01-0.09 ms"), std::string::npos);
  window.time_ms = {1, 2};  // after the step: nothing to draw, a window the user mistook
  EXPECT_THROW(render_schedule_svg(two_rank_gpipe(), window), UsageError);
}

// One rank, 40 micro-batches of a 10 us forward and a 20 us backward, back to back: a 1.2 ms
// step. More than 32 micro-batches: folded, keeping 2 pp + 2 = 4 micro-batches' time at each
// end, 0-0.12 ms (micro-batches 0-3) and 1.08-1.2 ms (36-39).
TEST(ScheduleSvg, ALongStepIsFoldedToItsEnds) {
  std::vector<ScheduleSlot> slots;
  for (int64_t m = 0; m < 40; ++m) slots.insert(slots.end(), {{0, m, OpPass::forward}, {0, m, OpPass::backward}});
  Graph g = simulated({{"f", "gemm", "fwd", "compute", 10, {}, "microbatch", 0, 0},
                       {"b", "gemm", "bwd", "compute", 20, {0}, "microbatch", 0, 0}},
                      PipelineSchedule{slots}, 40);
  ASSERT_NEAR(g.sim->step_time_ms, 1.2, 1e-12);
  std::string svg = render_schedule_svg(g);
  EXPECT_EQ(count(svg, ": forward, micro-batch "), 8u);
  EXPECT_EQ(count(svg, ": backward, micro-batch "), 8u);
  EXPECT_NE(svg.find("pp rank 0: forward, micro-batch 3: 0.090-0.100 ms"), std::string::npos);
  EXPECT_NE(svg.find("pp rank 0: backward, micro-batch 36: 1.090-1.110 ms"), std::string::npos);
  EXPECT_EQ(svg.find("micro-batch 20:"), std::string::npos);
  EXPECT_NE(svg.find(" · folded 0.12-1.08 ms"), std::string::npos);
  // A window draws what it is asked, unfolded.
  TimelineWindow window;
  window.microbatches = {10, 29};
  std::string part = render_schedule_svg(g, window);
  EXPECT_EQ(count(part, ": forward, micro-batch "), 20u);
  EXPECT_EQ(part.find("folded"), std::string::npos);
}

TEST(TimelineWindow, ParsesItsFlags) {
  EXPECT_EQ(parse_microbatch_window("2:5", "--w"), (std::pair<int64_t, int64_t>{2, 5}));
  EXPECT_EQ(parse_time_window("0.5:12", "--w"), (std::pair<double, double>{0.5, 12}));
  for (const char* bad : {"5:2", "2", "-1:3", "a:b", "1:", ":2", "1:2:3"})
    EXPECT_THROW(parse_microbatch_window(bad, "--w"), UsageError) << bad;
  for (const char* bad : {"3:1", "nan:1", "0:inf", "-1:2", "1"}) EXPECT_THROW(parse_time_window(bad, "--w"), UsageError) << bad;
}

TEST(ScheduleSvg, DrawsEveryPassOfEveryRank) {
  std::string svg = render_schedule_svg(two_rank_gpipe());
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_NE(svg.find("xmlns=\"http://www.w3.org/2000/svg\""), std::string::npos);
  // A row per rank; a forward and a backward box per rank and micro-batch.
  EXPECT_EQ(count(svg, ">pp rank 0</text>"), 1u);
  EXPECT_EQ(count(svg, ">pp rank 1</text>"), 1u);
  EXPECT_EQ(count(svg, ": forward, micro-batch "), 4u);
  EXPECT_EQ(count(svg, ": backward, micro-batch "), 4u);
  // Rank 0 waits 20-50 us for rank 1's backward: its boxes end and start around the bubble.
  EXPECT_NE(svg.find("pp rank 0: forward, micro-batch 1: 0.010-0.020 ms"), std::string::npos);
  EXPECT_NE(svg.find("pp rank 0: backward, micro-batch 0: 0.050-0.070 ms"), std::string::npos);
  EXPECT_NE(svg.find("pp rank 1: backward, micro-batch 1: 0.050-0.070 ms"), std::string::npos);
  // No communication streams: no lanes, no collectives in the legend.
  EXPECT_EQ(svg.find("collectives"), std::string::npos);
}

TEST(ScheduleSvg, CommunicationGetsALane) {
  std::string svg = render_schedule_svg(one_rank());
  EXPECT_EQ(count(svg, ">tp</text>"), 1u);
  // ar0 10-14 and ar1 44-48 us are far more than a pixel apart: two boxes.
  EXPECT_EQ(count(svg, "pp rank 0: tp collectives: "), 2u);
  EXPECT_NE(svg.find("tp collectives: 0.044-0.048 ms, 1 ops"), std::string::npos);
}

TEST(SvgWriter, EscapesTextAndPrintsShortFixedNumbers) {
  SvgWriter svg(200, 100.5);
  svg.rect(1.004, 2.5, 3.126, -0.001, "#ff0000", "a < b & \"c\"");
  svg.text(10, 20, "x > y", 12, "middle");
  svg.line(0, 0, 1.0 / 3, 2, "black");
  svg.circle(5, 5, 2, "blue");
  svg.polyline({{0, 0}, {1.5, 2.25}}, "green");
  std::string text = svg.str();
  EXPECT_NE(text.find("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"200\" height=\"100.5\""), std::string::npos);
  // Two decimals, trailing zeros dropped, never "-0".
  EXPECT_NE(text.find("<rect x=\"1\" y=\"2.5\" width=\"3.13\" height=\"0\" fill=\"#ff0000\">"
                      "<title>a &lt; b &amp; &quot;c&quot;</title></rect>"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(">x &gt; y</text>"), std::string::npos);
  EXPECT_NE(text.find("x2=\"0.33\" y2=\"2\" stroke=\"black\" stroke-width=\"1\"/>"), std::string::npos);
  EXPECT_NE(text.find("<circle cx=\"5\" cy=\"5\" r=\"2\" fill=\"blue\"></circle>"), std::string::npos);
  EXPECT_NE(text.find("points=\"0,0 1.5,2.25\" fill=\"none\" stroke=\"green\""), std::string::npos);
  EXPECT_EQ(text.substr(text.size() - 7), "</svg>\n");
  EXPECT_EQ(xml_escape("'&'"), "&apos;&amp;&apos;");
}

}  // namespace
}  // namespace syssim
