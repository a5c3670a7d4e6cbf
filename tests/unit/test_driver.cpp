// The driver runs the stages in one process; its graph must be the one the pipe carries.
#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>

#include "common/error.hpp"
#include "config/config.hpp"
#include "cost/cost.hpp"
#include "sim/sim.hpp"
#include "driver/driver.hpp"
#include "report/report.hpp"

namespace syssim {
namespace {

ModelConfig llama3_8b() { return load_model_yaml(std::string(SYSSIM_SOURCE_DIR) + "/configs/models/llama3-8b.yaml"); }
HardwareConfig h100() {
  return load_hardware_yaml(std::string(SYSSIM_SOURCE_DIR) + "/configs/hardware/h100-sxm-80gb.yaml");
}

TEST(Driver, InMemoryGraphSurvivesTheJsonBetweenStages) {
  ShardOptions options;
  options.parallelism.tp = 2;
  options.parallelism.sp = true;
  options.parallelism.dp = 2;
  options.training.global_batch = 4;
  options.training.seq_length = 2048;
  Graph graph = simulate(llama3_8b(), h100(), options);
  Graph reread = read_graph(write_graph(graph), "<memory>");
  EXPECT_EQ(write_graph(reread), write_graph(graph));
  EXPECT_EQ(render_report(reread, "json"), render_report(graph, "json"));
}

// The unfused attention's softmax changes kernels past 4096 keys: a job there gets the trace
// of its own length, and a trace of another length is refused rather than priced wrongly.
TEST(Driver, UnfusedAttentionIsTracedAtTheJobsSequenceLength) {
  ModelConfig model = llama3_8b();
  model.num_layers = 1;
  model.attention_backend = "unfused";
  ShardOptions options;
  options.training.seq_length = 8192;
  auto has_op = [](const TraceSection& trace, std::string_view name) {
    return std::any_of(trace.ops.begin(), trace.ops.end(), [&](const TraceOp& op) { return op.name == name; });
  };
  EXPECT_TRUE(has_op(trace_of(model, 8192), "aten::_softmax"));
  EXPECT_TRUE(has_op(trace_of(model, 2048), "syssim::scale_mask_softmax"));
  EXPECT_EQ(&trace_of(model, 2048), &trace_of(model, 4096));  // one trace for every length of one kernel
  EXPECT_NO_THROW(simulate(model, h100(), options));
  EXPECT_THROW(shard_trace(model, trace_of(model, 2048), options), DataError);
}

TEST(Driver, MemoryEstimateEqualsTheFullRunsMemory) {
  ShardOptions options;
  options.parallelism.tp = 4;
  options.training.seq_length = 4096;
  Graph full = simulate(llama3_8b(), h100(), options);
  Graph memory = estimate_memory(llama3_8b(), h100(), options);
  EXPECT_FALSE(memory.sim.has_value());
  EXPECT_DOUBLE_EQ(memory.mem->peak_memory_gb, full.mem->peak_memory_gb);
  // Model state at tp 4 without the distributed optimizer: 18 bytes per local parameter.
  double params = memory.shard->params_local;
  EXPECT_DOUBLE_EQ(memory.mem->param_bytes + memory.mem->grad_bytes + memory.mem->optimizer_state_bytes, 18 * params);
}

TEST(Driver, DefaultJobIsEightGpusOfOneNode) {
  ShardOptions job = default_job_options();
  EXPECT_EQ(job.parallelism.world_size(), 8);
  RunRequest request;
  request.options = job;
  EXPECT_NE(run(request).report.find("SimulationReport("), std::string::npos);
}

// Replayed slots (docs/syssim-sim.md) give the timeline of simulating every instance, up to
// rounding, for every schedule and overlap; the cases that can replay do replay most of the
// step, and a layout whose pipeline flows share the tensor-parallel links stays exact too.
struct ReplayCase {
  const char* name;
  ShardOptions options;
  double replayed_at_least;  // share of the instances
};

ShardOptions small_job(int64_t tp, int64_t pp, int64_t dp, int64_t global_batch) {
  ShardOptions options;
  options.parallelism.tp = tp;
  options.parallelism.sp = tp > 1;
  options.parallelism.pp = pp;
  options.parallelism.dp = dp;
  options.training.global_batch = global_batch;
  options.training.seq_length = 2048;
  return options;
}

// Llama-3-8B cut to 4 layers: the model of the replay cases.
ModelConfig four_layer_llama() {
  ModelConfig model = llama3_8b();
  model.num_layers = 4;
  return model;
}

std::vector<ReplayCase> replay_cases() {
  std::vector<ReplayCase> cases;
  ShardOptions one_f_one_b = small_job(8, 2, 2, 16);  // pp across nodes: its flows leave NVLink to tp
  cases.push_back({"1f1b", one_f_one_b, 0.5});
  // Fewer slots replay where a tp collective of the next slot waits only for a pipeline
  // receive: it may start beside the slot's compute and slow it (docs/syssim-sim.md, "Compute
  // beside communication"), which a replay cannot know in advance.
  ShardOptions interleaved = one_f_one_b;
  interleaved.parallelism.vpp = 2;
  cases.push_back({"interleaved", interleaved, 0.35});
  ShardOptions gpipe = one_f_one_b;
  gpipe.pipeline_schedule = ScheduleKind::gpipe;
  cases.push_back({"gpipe", gpipe, 0.5});
  ShardOptions zero_bubble = one_f_one_b;
  zero_bubble.pipeline_schedule = ScheduleKind::zb_h1;
  cases.push_back({"zb-h1", zero_bubble, 0.2});
  ShardOptions overlapped = small_job(8, 1, 4, 32);
  overlapped.training.distributed_optimizer = true;
  overlapped.training.overlap_grad_reduce = true;
  overlapped.training.overlap_param_gather = true;
  overlapped.training.tp_comm_overlap = true;
  cases.push_back({"overlapped dp and tp", overlapped, 0.5});
  // Neither replays: the ring's flows share the links of the dp flows (across nodes), and the
  // pipeline's those of tp (inside a node), and compute waits for them inside a slot.
  ShardOptions context = small_job(8, 1, 2, 16);
  context.parallelism.cp = 2;
  cases.push_back({"cp across nodes", context, 0});
  cases.push_back({"pp inside a node", small_job(2, 4, 1, 8), 0});
  return cases;
}

// Simulates `options` instance by instance and with replayed slots: the two agree up to
// rounding, and at least `replayed_at_least` of the instances were replayed.
void expect_replay_exact(const ModelConfig& model, const ShardOptions& options, double replayed_at_least) {
  const CostEstimator estimator(h100());
  Graph full = simulate(model, trace_of(model), estimator, options, SimOptions{true, false});
  Graph replayed = full;
  replayed.sim.reset();
  SimStats stats = simulate_graph(replayed, SimOptions{true, true});
  EXPECT_GE(static_cast<double>(stats.replayed), replayed_at_least * static_cast<double>(stats.instances));
  const double step_ms = full.sim->step_time_ms;
  EXPECT_NEAR(replayed.sim->step_time_ms, step_ms, 1e-9 * step_ms);
  EXPECT_NEAR(replayed.sim->collective_exposed_ms, full.sim->collective_exposed_ms, 1e-9 * step_ms);
  EXPECT_NEAR(replayed.sim->bubble_fraction, full.sim->bubble_fraction, 1e-9);
  ASSERT_EQ(replayed.sim->links.size(), full.sim->links.size());
  for (size_t l = 0; l < full.sim->links.size(); ++l) {
    EXPECT_NEAR(replayed.sim->links[l].busy_ms, full.sim->links[l].busy_ms, 1e-9 * step_ms);
    EXPECT_NEAR(replayed.sim->links[l].bytes, full.sim->links[l].bytes, 1e-9 * full.sim->links[l].bytes);
    EXPECT_EQ(replayed.sim->links[l].max_flows, full.sim->links[l].max_flows);
  }
  const std::vector<TimelineEntry>& a = *full.sim->timeline;
  const std::vector<TimelineEntry>& b = *replayed.sim->timeline;
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(std::tie(a[i].rank, a[i].stream, a[i].op, a[i].microbatch),
              std::tie(b[i].rank, b[i].stream, b[i].op, b[i].microbatch));
    ASSERT_NEAR(b[i].start_ms, a[i].start_ms, 1e-9 * step_ms) << "instance " << i;
    ASSERT_NEAR(b[i].end_ms, a[i].end_ms, 1e-9 * step_ms) << "instance " << i;
  }
}

TEST(Driver, ReplayedSlotsGiveTheFullSimulationsTimeline) {
  for (const ReplayCase& c : replay_cases()) {
    SCOPED_TRACE(c.name);
    expect_replay_exact(four_layer_llama(), c.options, c.replayed_at_least);
  }
}

// With tied embeddings the first and last pipeline ranks all-reduce the embedding's gradient
// in the step's end, after the data-parallel all-reduce, which waits for the last backward.
// That collective cannot start beside any micro-batch slot's compute, so those ranks' slots
// replay as the others' do.
TEST(Driver, ReplayedSlotsSeeThatTheEmbeddingAllReduceWaitsForTheLastBackward) {
  ModelConfig model = four_layer_llama();
  model.tie_word_embeddings = true;
  expect_replay_exact(model, small_job(8, 2, 2, 16), 0.5);
}

// A sweep over the batch simulates each job again on the graph of another batch: the result
// is the graph of simulating it afresh, byte for byte; a batch the schedule refuses leaves
// the graph as it was.
TEST(Driver, ResimulatingWithAnotherGlobalBatchEqualsSimulatingIt) {
  ModelConfig model = four_layer_llama();
  const TraceSection& trace = trace_of(model);
  const CostEstimator estimator(h100());
  ShardOptions one_f_one_b = small_job(8, 2, 2, 16), interleaved = one_f_one_b;
  interleaved.parallelism.vpp = 2;
  for (const ShardOptions& options : {one_f_one_b, interleaved}) {
    Graph graph = simulate(model, trace, estimator, options);
    ShardOptions larger = options;
    larger.training.global_batch = 40;
    resimulate_with_global_batch(graph, larger.training.global_batch);
    EXPECT_EQ(write_graph(graph), write_graph(simulate(model, trace, estimator, larger)));
  }
  Graph graph = simulate(model, trace, estimator, interleaved);
  const std::string before = write_graph(graph);
  // 18 samples over dp 2: 9 micro-batches, not whole rounds of pp 2.
  EXPECT_THROW(resimulate_with_global_batch(graph, 18), UsageError);
  EXPECT_THROW(resimulate_with_global_batch(graph, 15), DataError);  // not a multiple of micro_batch * dp
  graph.sim.reset();
  graph.mem.reset();
  Graph fresh = simulate(model, trace, estimator, interleaved);
  fresh.sim.reset();
  fresh.mem.reset();
  EXPECT_EQ(write_graph(graph), write_graph(fresh));
}

// Extrapolated micro-batches (docs/syssim-sim.md): every schedule, overlapped data-parallel
// traffic, context parallelism and pipeline flows inside a node settle into a steady state
// that two shorter steps show, and the report of the long step is the one of simulating
// every micro-batch, up to rounding.
void expect_same_report(const SimSection& a, const SimSection& b) {
  const double step_ms = a.step_time_ms, tolerance = 1e-9 * step_ms;
  EXPECT_NEAR(b.step_time_ms, step_ms, tolerance);
  EXPECT_NEAR(b.forward_ms, a.forward_ms, tolerance);
  EXPECT_NEAR(b.backward_ms, a.backward_ms, tolerance);
  EXPECT_NEAR(b.optimizer_ms, a.optimizer_ms, tolerance);
  EXPECT_NEAR(b.collective_total_ms, a.collective_total_ms, tolerance);
  EXPECT_NEAR(b.collective_exposed_ms, a.collective_exposed_ms, tolerance);
  EXPECT_NEAR(b.bubble_fraction, a.bubble_fraction, 1e-9);
  EXPECT_NEAR(b.collective_slowdown, a.collective_slowdown, 1e-9);
  EXPECT_NEAR(b.hardware_flops_per_rank, a.hardware_flops_per_rank, 1e-9 * a.hardware_flops_per_rank);
  EXPECT_EQ(b.binding_pp_stage, a.binding_pp_stage);
  EXPECT_EQ(b.dominant_op_type, a.dominant_op_type);
  EXPECT_EQ(b.busiest_link, a.busiest_link);
  ASSERT_EQ(b.per_pp_rank_step_time_ms.size(), a.per_pp_rank_step_time_ms.size());
  for (size_t r = 0; r < a.per_pp_rank_step_time_ms.size(); ++r)
    EXPECT_NEAR(b.per_pp_rank_step_time_ms[r], a.per_pp_rank_step_time_ms[r], tolerance);
  ASSERT_EQ(b.by_op_type_ms.size(), a.by_op_type_ms.size());
  for (const auto& [kind, ms] : a.by_op_type_ms) EXPECT_NEAR(b.by_op_type_ms.at(kind), ms, tolerance) << kind;
  ASSERT_EQ(b.collective_by_group_ms.size(), a.collective_by_group_ms.size());
  for (const auto& [group, times] : a.collective_by_group_ms) {
    EXPECT_NEAR(b.collective_by_group_ms.at(group).total_ms, times.total_ms, tolerance) << group;
    EXPECT_NEAR(b.collective_by_group_ms.at(group).exposed_ms, times.exposed_ms, tolerance) << group;
  }
  // Times only: ops whose times are equal up to rounding may rank in either order.
  ASSERT_EQ(b.top_ops.size(), a.top_ops.size());
  for (size_t i = 0; i < a.top_ops.size(); ++i) EXPECT_NEAR(b.top_ops[i].time_ms, a.top_ops[i].time_ms, tolerance);
  EXPECT_NEAR(b.longest_collective.time_ms, a.longest_collective.time_ms, tolerance);
  ASSERT_EQ(b.links.size(), a.links.size());
  for (size_t l = 0; l < a.links.size(); ++l) {
    EXPECT_NEAR(b.links[l].busy_ms, a.links[l].busy_ms, tolerance);
    EXPECT_NEAR(b.links[l].bytes, a.links[l].bytes, 1e-9 * a.links[l].bytes);
    EXPECT_NEAR(b.links[l].utilization, a.links[l].utilization, 1e-9);
    EXPECT_EQ(b.links[l].max_flows, a.links[l].max_flows);
  }
}

// Simulates the job with and without extrapolation: the same report, and where it was
// extrapolated, fewer instances simulated than the long step has.
SimStats expect_extrapolation_exact(const ModelConfig& model, const TraceSection& trace, const CostEstimator& estimator,
                                    const ShardOptions& options) {
  SimOptions every_microbatch;
  every_microbatch.extrapolate_microbatches = false;
  Graph full = simulate(model, trace, estimator, options, every_microbatch);
  Graph extrapolated = full;
  extrapolated.sim.reset();
  SimStats stats = simulate_graph(extrapolated, SimOptions{});
  expect_same_report(*full.sim, *extrapolated.sim);
  if (stats.extrapolated) {
    EXPECT_LT(stats.instances, simulate_graph(full, every_microbatch).instances);
  }
  return stats;
}

TEST(Driver, ExtrapolatedMicroBatchesGiveTheFullSimulationsReport) {
  ModelConfig model = four_layer_llama();
  const TraceSection& trace = trace_of(model);
  const CostEstimator estimator(h100());
  for (ReplayCase c : replay_cases()) {
    SCOPED_TRACE(c.name);
    // Eight times the micro-batches of the replay cases: long past the pipeline's settling.
    c.options.training.global_batch *= 8;
    // GPipe's forward phases drift here (the last rank's forward, with the loss, is slower than
    // the first's, and nothing holds the first back): no steady state, simulated in full.
    EXPECT_EQ(expect_extrapolation_exact(model, trace, estimator, c.options).extrapolated,
              std::string(c.name) != "gpipe");
  }
}

// 1f1b settles within three pipeline lengths: at 6 pp + 4 micro-batches every case jumps over
// periods of its steady state, and the report is still the full simulation's.
TEST(Driver, OneFOneBSettlesWithinThreePipelineLengths) {
  ModelConfig model = four_layer_llama();
  const TraceSection& trace = trace_of(model);
  const CostEstimator estimator(h100());
  int extrapolated_cases = 0;
  for (ReplayCase c : replay_cases()) {
    if (c.options.pipeline_schedule || c.options.parallelism.vpp) continue;  // 1f1b only
    SCOPED_TRACE(c.name);
    const int64_t pp = c.options.parallelism.pp;
    c.options.training.global_batch = (6 * pp + 4) * c.options.parallelism.dp;
    extrapolated_cases += expect_extrapolation_exact(model, trace, estimator, c.options).extrapolated;
  }
  EXPECT_EQ(extrapolated_cases, 4);  // every 1f1b case settles that soon
}

// The search's bound (docs/syssim-sim.md) never exceeds the simulated step: every schedule,
// overlap, context parallelism, recomputation and fp8, with few and many micro-batches.
TEST(Driver, StepBoundIsNeverAboveTheSimulatedStep) {
  ModelConfig model = four_layer_llama();
  const TraceSection& trace = trace_of(model);
  const CostEstimator estimator(h100());
  std::vector<ReplayCase> cases = replay_cases();
  ShardOptions recomputed = small_job(4, 2, 2, 16);
  recomputed.training.recompute = "full";
  cases.push_back({"full recompute", recomputed, 0});
  recomputed.training.recompute = "selective";
  recomputed.training.dtype = "fp8";
  cases.push_back({"selective recompute, fp8", recomputed, 0});
  ShardOptions gathered = small_job(2, 2, 1, 8);
  gathered.parallelism.cp = 4;
  gathered.cp_comm_type = "all_gather";
  cases.push_back({"cp all-gather", gathered, 0});
  for (ReplayCase c : cases)
    for (int64_t times : {1, 8}) {
      SCOPED_TRACE(std::string(c.name) + " x" + std::to_string(times));
      c.options.training.global_batch *= times;
      Graph graph = simulate(model, trace, estimator, c.options);
      EXPECT_LE(step_time_lower_bound_ms(*graph.shard, *graph.cost), graph.sim->step_time_ms);
    }
}

// The search prunes a recomputing layout by the bound of its sibling without recompute
// (docs/syssim-sweep.md): recomputation only adds work, so the bound never falls, from none
// to selective to full, in every case of the replay tests (schedules, overlap, cp, dp).
TEST(Driver, RecomputationNeverLowersTheStepBound) {
  ModelConfig model = four_layer_llama();
  const TraceSection& trace = trace_of(model);
  const CostEstimator estimator(h100());
  for (ReplayCase c : replay_cases()) {
    SCOPED_TRACE(c.name);
    std::vector<double> bounds;
    for (const char* recompute : {"none", "selective", "full"}) {
      c.options.training.recompute = recompute;
      Graph graph = estimate_memory(model, trace, estimator, c.options);
      bounds.push_back(step_time_lower_bound_ms(*graph.shard, *graph.cost));
    }
    EXPECT_GE(bounds[1], bounds[0]);
    EXPECT_GE(bounds[2], bounds[1]);
    EXPECT_GT(bounds[2], bounds[0]);  // a whole forward again per layer: strictly more
  }
}

TEST(Driver, ASchedulerOtherThanTheNamedOneIsSimulatedInFull) {
  ModelConfig model = four_layer_llama();
  ShardOptions options = small_job(8, 2, 2, 64);
  Graph graph = simulate(model, trace_of(model), CostEstimator(h100()), options);
  // The 1f1b slot lists put in GPipe's order, every forward first: a valid schedule, not 1f1b's.
  for (std::vector<ScheduleSlot>& slots : graph.shard->schedule)
    std::stable_partition(slots.begin(), slots.end(), [](const ScheduleSlot& s) { return s.pass == OpPass::forward; });
  graph.sim.reset();
  EXPECT_FALSE(simulate_graph(graph).extrapolated);
}

}  // namespace
}  // namespace syssim
