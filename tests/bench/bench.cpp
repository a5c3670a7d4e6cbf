// syssim's speed benchmarks (docs/performance.md): `build/tests/syssim-bench`. Benchmarks, not
// timed tests: they print figures for the docs and never fail a build.
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "common/graph.hpp"
#include "common/heap.hpp"
#include "cost/cost.hpp"
#include "driver/driver.hpp"
#include "mem/mem.hpp"
#include "shard/shard.hpp"
#include "sim/sim.hpp"
#include "sweep/sweep.hpp"

namespace syssim {
namespace {

const std::string kSource = SYSSIM_SOURCE_DIR;

ModelConfig model_named(const std::string& name) { return load_model_yaml(kSource + "/configs/models/" + name + ".yaml"); }
HardwareConfig hardware_named(const std::string& name) {
  return load_hardware_yaml(kSource + "/configs/hardware/" + name + ".yaml");
}

// The sweeps' setting: the on-disk result cache off, a thread per core.
const SweepSettings kUncached{false, {}, 0};

const ModelConfig& llama3_70b() {
  static const ModelConfig model = model_named("llama3-70b");
  return model;
}

// The process's peak resident set so far, in MB.
double peak_resident_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // KB on Linux
}

// Made per benchmark, never static: XGBoost 1.6 frees its per-thread prediction state before
// the static destructors run, and a booster freed after that crashes at exit.
CostEstimator h100() { return CostEstimator(hardware_named("h100-sxm-80gb")); }

// GPT-3 175B on 1,024 A100 as the search meets it: global batch 1536, micro-batch 1, the
// distributed optimizer, SP with tp, recomputing `recompute`; dp fills the GPUs.
ShardOptions layout_175b(int64_t tp, int64_t pp, int64_t cp, const std::string& recompute) {
  ShardOptions options;
  ParallelismConfig& p = options.parallelism;
  p.tp = tp, p.pp = pp, p.cp = cp, p.sp = tp > 1;
  p.dp = 1024 / (tp * pp * cp);
  options.training.micro_batch = 1;
  options.training.global_batch = 1536;
  options.training.distributed_optimizer = true;
  options.training.recompute = recompute;
  return options;
}

// Llama-3-70B as Megatron-LM trains it on H100: tp 8 with SP, pp 8, the distributed optimizer,
// micro-batch 1; dp fills the GPUs and the global batch gives each pipeline `microbatches`.
ShardOptions layout_70b(int64_t gpus, int64_t microbatches) {
  ShardOptions options;
  options.parallelism.tp = 8;
  options.parallelism.sp = true;
  options.parallelism.pp = 8;
  options.parallelism.dp = gpus / 64;
  options.training.micro_batch = 1;
  options.training.global_batch = microbatches * options.parallelism.dp;
  options.training.distributed_optimizer = true;
  return options;
}

// The trace of Llama 3.1 405B (126 layers), or of it cut to range(0) layers, by the trace
// stage the driver loads (LibTorch's start-up, paid once per process, aside).
void BM_Trace(benchmark::State& state) {
  ModelConfig model = model_named("llama3.1-405b");
  model.num_layers = state.range(0);
  for (auto _ : state) benchmark::DoNotOptimize(trace_afresh(model));
  state.SetLabel(std::to_string(model.num_layers) + " layers");
}
BENCHMARK(BM_Trace)->Arg(126)->Arg(32)->Unit(benchmark::kMillisecond);

// Shard, cost, simulate and account memory in one process, the trace already made: what one
// point of a sweep costs. Args: GPUs, micro-batches per pipeline, layers.
void BM_Run70B(benchmark::State& state) {
  ModelConfig model = llama3_70b();
  model.num_layers = state.range(2);
  const TraceSection trace = trace_of(model);
  const ShardOptions options = layout_70b(state.range(0), state.range(1));
  const CostEstimator estimator = h100();
  for (auto _ : state) benchmark::DoNotOptimize(simulate(model, trace, estimator, options));
}
BENCHMARK(BM_Run70B)
    ->Args({1024, 64, 80})
    ->Args({1024, 8, 80})->Args({1024, 16, 80})->Args({1024, 32, 80})->Args({1024, 128, 80})
    ->Args({64, 64, 80})->Args({256, 64, 80})->Args({4096, 64, 80})->Args({16384, 64, 80})
    ->Args({1024, 64, 40})->Args({1024, 64, 160})
    ->ArgNames({"gpus", "microbatches", "layers"})
    ->Unit(benchmark::kMillisecond);

// One sweep point of GPT-3 175B on 1,024 A100 (tp 8 with SP, pp 8, vpp 2, dp 16, full
// recompute, micro-batch 1, global batch 1536), the trace made and its instantiation kept as
// a sweep keeps it (ShardReuse). Args: the stages run, 0 shard, 1 shard and cost, 2 shard,
// cost and simulation, 3 all four (memory too): the differences split a point by stage; 4
// with the caching allocator's replay (`--replay-allocator`).
void BM_Point175B(benchmark::State& state) {
  const ModelConfig model = model_named("gpt3-175b");
  const TraceSection& trace = trace_of(model);
  const CostEstimator estimator(hardware_named("a100-sxm-80gb"));
  ShardOptions options = layout_175b(8, 8, 1, "full");
  options.parallelism.vpp = 2;
  const int64_t stages = state.range(0);
  SimStats stats;
  size_t ops = 0;
  ShardReuse reuse(trace);
  for (auto _ : state) {
    Graph graph;
    graph.model = model;
    graph.shard = shard_trace(model, trace, options, &reuse);
    ops = graph.shard->ops.size();
    if (stages >= 1) estimator.cost_graph(graph);
    if (stages >= 2) stats = simulate_graph(graph);
    if (stages >= 3) account_memory(graph, MemOptions{stages >= 4});
    benchmark::DoNotOptimize(graph);
  }
  state.counters["ops"] = static_cast<double>(ops);
  state.counters["instances"] = static_cast<double>(stats.instances);
  state.counters["replayed"] = static_cast<double>(stats.replayed);
}
BENCHMARK(BM_Point175B)->DenseRange(0, 4)->ArgName("stages")->Unit(benchmark::kMillisecond);

// The simulation alone of a step that is simulated micro-batch by micro-batch (GPipe, whose
// ranks of unequal speed never settle), Llama-3-70B on 1,024 GPUs as BM_Run70B. Arg:
// micro-batches per pipeline. Counters: op instances simulated, of them replayed, and how far the simulation
// raised the process's peak resident set above what the graph already took (MB): the
// simulator keeps no per-instance list, so it stays flat as the step grows
// (docs/syssim-sim.md, "Memory").
void BM_SimulateGPipe70B(benchmark::State& state) {
  Graph g;
  g.model = llama3_70b();
  g.trace = trace_of(*g.model);
  ShardOptions options = layout_70b(1024, state.range(0));
  options.pipeline_schedule = ScheduleKind::gpipe;
  shard_graph(g, options);
  h100().cost_graph(g);
  const double peak_before_mb = peak_resident_mb();
  SimStats stats;
  for (auto _ : state) stats = simulate_graph(g);
  state.counters["instances"] = static_cast<double>(stats.instances);
  state.counters["replayed"] = static_cast<double>(stats.replayed);
  state.counters["peak_rise_MB"] = peak_resident_mb() - peak_before_mb;
}
BENCHMARK(BM_SimulateGPipe70B)->Arg(64)->Arg(512)->Arg(2048)->ArgName("microbatches")->Unit(benchmark::kMillisecond);

// The same stages through the pipe's format: each stage reads the graph the previous one
// wrote, as syssim-shard | syssim-cost | syssim-sim | syssim-mem do (process start aside).
void BM_Pipe70B(benchmark::State& state) {
  Graph traced;
  traced.model = llama3_70b();
  traced.trace = trace_of(*traced.model);
  const std::string trace_text = write_graph(traced);
  const ShardOptions options = layout_70b(1024, 64);
  const CostEstimator estimator = h100();
  for (auto _ : state) {
    Graph g = read_graph(trace_text, "trace");
    shard_graph(g, options);
    g = read_graph(write_graph(g), "shard");
    estimator.cost_graph(g);
    g = read_graph(write_graph(g), "cost");
    simulate_graph(g);
    g = read_graph(write_graph(g), "sim");
    account_memory(g);
    benchmark::DoNotOptimize(write_graph(g));
  }
}
BENCHMARK(BM_Pipe70B)->Unit(benchmark::kMillisecond);

// The search's unit of work: the memory estimate (shard, cost, memory; no simulation) and the
// lower bound on the step of one layout of GPT-3 175B on 1,024 A100 with global batch 1536,
// micro-batch 1, the distributed optimizer and selective recompute. Args: tp, pp, cp (dp
// fills the GPUs).
void BM_Estimate175B(benchmark::State& state) {
  const ModelConfig model = model_named("gpt3-175b");
  const TraceSection& trace = trace_of(model);
  const CostEstimator estimator(hardware_named("a100-sxm-80gb"));
  const ShardOptions options = layout_175b(state.range(0), state.range(1), state.range(2), "selective");
  for (auto _ : state) {
    Graph graph = estimate_memory(model, trace, estimator, options);
    benchmark::DoNotOptimize(step_time_lower_bound_ms(*graph.shard, *graph.cost));
  }
  state.SetLabel(std::to_string(1536 / options.parallelism.dp) + " micro-batches");
}
BENCHMARK(BM_Estimate175B)
    ->Args({8, 8, 1})->Args({2, 8, 4})->Args({2, 8, 32})->Args({8, 2, 64})
    ->ArgNames({"tp", "pp", "cp"})
    ->Unit(benchmark::kMillisecond);

// A 1,000-point sweep of Llama-3-8B on 64 H100 with the trace made once (warm) and the point
// cache off: 4 tp x 2 distributed optimizer x 5 pp x 5 micro-batch x 5 global batch. Layouts
// the shard stage refuses (tp*pp over 64 GPUs, a batch that does not divide) count as points.
void BM_Sweep1000(benchmark::State& state) {
  const ModelConfig model = model_named("llama3-8b");
  const HardwareConfig hardware = hardware_named("h100-sxm-80gb");
  trace_of(model);
  ShardOptions base;
  base.gpus = 64;
  const std::vector<SweepAxis> axes = {
      parse_sweep_axis("parallelism.tp=1,2,4,8"), parse_sweep_axis("training.distributed_optimizer=true,false"),
      parse_sweep_axis("parallelism.pp=1,2,4,8,16"), parse_sweep_axis("training.micro_batch=1,2,4,8,16"),
      parse_sweep_axis("training.global_batch=256,512,768,1024,2048")};
  int64_t ok = 0;
  for (auto _ : state) {
    std::vector<SweepRow> rows = run_sweep(model, hardware, base, axes, kUncached);
    ok = std::count_if(rows.begin(), rows.end(), [](const SweepRow& row) { return row.status == "ok"; });
  }
  state.counters["points"] = benchmark::Counter(1000, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::to_string(ok) + " of 1000 points simulated, the rest refused");
}
BENCHMARK(BM_Sweep1000)->Unit(benchmark::kSecond)->Iterations(1)->UseRealTime();

// A layout search of `model` on `gpus` GPUs with global batch `global_batch`, the trace made
// once (warm), the result cache off, a thread per core.
void search(benchmark::State& state, const std::string& model_name, const std::string& hardware_name, int64_t gpus,
            int64_t global_batch, DataParallelSharding sharding = DataParallelSharding::no_shard) {
  const ModelConfig model = model_named(model_name);
  const HardwareConfig hardware = hardware_named(hardware_name);
  trace_of(model);
  ShardOptions base;
  base.gpus = gpus;
  base.training.global_batch = global_batch;
  base.training.data_parallel_sharding = sharding;
  SearchResult result;
  for (auto _ : state) result = search_layouts(model, hardware, base, true, kUncached);
  state.SetLabel(std::to_string(result.simulated) + " simulated of " + std::to_string(result.enumerated) +
                 " layouts, front of " + std::to_string(result.front.size()));
}

// The search target: every layout of GPT-3 175B on 1,024 A100 with global batch 1536.
void BM_Search175B(benchmark::State& state) { search(state, "gpt3-175b", "a100-sxm-80gb", 1024, 1536); }
BENCHMARK(BM_Search175B)->Unit(benchmark::kSecond)->Iterations(1)->UseRealTime();

// The mixture-of-experts search target: every layout of DeepSeek-V3 on 256 H100 (ep and etp
// among the axes) with global batch 1024.
void BM_SearchDeepSeekV3(benchmark::State& state) { search(state, "deepseek-v3", "h100-sxm-80gb", 256, 1024); }
BENCHMARK(BM_SearchDeepSeekV3)->Unit(benchmark::kSecond)->Iterations(1)->UseRealTime();

// Issue 24's mixture-of-experts search: DeepSeek-V3 on 2,048 H100 with global batch 8192, over
// tp, pp, vpp, cp, ep, etp, dp, micro-batch and recompute, and data-parallel sharding up to
// the distributed optimizer (zero 0) or also ZeRO-2 and ZeRO-3 (zero 1; the base job asks for
// them, as `--data-parallel-sharding-strategy optim_grads_params` does).
void BM_SearchDeepSeekV3On2048(benchmark::State& state) {
  search(state, "deepseek-v3", "h100-sxm-80gb", 2048, 8192,
         state.range(0) ? DataParallelSharding::optim_grads_params : DataParallelSharding::no_shard);
}
BENCHMARK(BM_SearchDeepSeekV3On2048)->Arg(0)->Arg(1)->ArgName("zero")->Unit(benchmark::kSecond)->Iterations(1)->UseRealTime();

// `syssim run` as a user starts it: a new process, the trace from the on-disk cache (warm,
// filled by the first run) or traced afresh (cold, cache off). Llama-3-70B on 1,024 H100, and
// DeepSeek-V3 on 1,024 H100 as DGX Cloud runs it (tp 2, pp 16 in Megatron-Bridge's layout,
// ep 64, global batch 8192).
const std::string kRun70B = kSource + "/configs/models/llama3-70b.yaml --tp 8 --sp --pp 8 --dp 16 --micro-batch 1 "
                            "--global-batch 1024 --distributed-optimizer";
const std::string kRunDeepSeekV3 =
    kSource + "/configs/models/deepseek-v3.yaml --tp 2 --sp --pp 16 --dp 32 --ep 64 --etp 1 --global-batch 8192 "
    "--pp-layout 4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,1 --distributed-optimizer --overlap-grad-reduce --overlap-param-gather";
void run_command(benchmark::State& state, const std::string& cache, const std::string& job) {
  const std::string command = "SYSSIM_CACHE_DIR=" + cache + " " SYSSIM_BIN_DIR "/syssim run " + job +
                              " --hardware " + kSource + "/configs/hardware/h100-sxm-80gb.yaml > /dev/null";
  if (std::system(command.c_str()) != 0) state.SkipWithError("syssim run failed");
  for (auto _ : state)
    if (std::system(command.c_str()) != 0) state.SkipWithError("syssim run failed");
}
std::string bench_cache() {
  return std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") + "/syssim-bench-cache";
}
void BM_RunCommandCached(benchmark::State& state) { run_command(state, bench_cache(), kRun70B); }
void BM_RunCommandCold(benchmark::State& state) { run_command(state, "off", kRun70B); }
void BM_RunDeepSeekV3Cached(benchmark::State& state) { run_command(state, bench_cache(), kRunDeepSeekV3); }
void BM_RunDeepSeekV3Cold(benchmark::State& state) { run_command(state, "off", kRunDeepSeekV3); }
// `syssim run` of Llama-3-70B cut or grown to range(0) layers (tp 8 with SP, dp 8 on 64 H100,
// 8 micro-batches, every layer on the one pipeline rank), the trace cached: how the cost of a
// run grows with the model's depth (issue 24 asks 640 layers within 2x of 80).
void BM_RunCommandLayers(benchmark::State& state) {
  const std::string model = bench_cache() + "-llama3-70b-" + std::to_string(state.range(0)) + "-layers.yaml";
  const std::string make = "mkdir -p " + bench_cache() + " && sed 's/^num_layers: 80$/num_layers: " +
                           std::to_string(state.range(0)) + "/' " + kSource + "/configs/models/llama3-70b.yaml > " + model;
  if (std::system(make.c_str()) != 0) {
    state.SkipWithError(("cannot write " + model).c_str());
    return;
  }
  run_command(state, bench_cache(), model + " --tp 8 --sp --dp 8 --micro-batch 1 --global-batch 64 --distributed-optimizer");
}
BENCHMARK(BM_RunCommandLayers)->Arg(80)->Arg(640)->ArgName("layers")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_RunCommandCached)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_RunCommandCold)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);
BENCHMARK(BM_RunDeepSeekV3Cached)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_RunDeepSeekV3Cold)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);

}  // namespace
}  // namespace syssim

// As the tools do (tools/common/tool.cpp): the heap set up first.
int main(int argc, char** argv) {
  syssim::prepare_heap();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
