// `syssim sweep`: the axes and their product, config paths, ranking by a metric, the
// exclusions, merging job results, and the pruned layout search against the exhaustive one.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/error.hpp"
#include "common/io.hpp"
#include "config/config.hpp"
#include "driver/driver.hpp"
#include "sim/sim.hpp"
#include "sweep/detail.hpp"
#include "sweep/sweep.hpp"

namespace syssim {
namespace {

using Points = std::vector<std::vector<std::string>>;

// The golden tests' tiny Llama (2 layers, 4 heads in 2 groups, ffn 512, sequence 128), with
// `layers` layers.
ModelConfig tiny(int64_t layers = 2) {
  ModelConfig model = load_model_yaml(std::string(SYSSIM_SOURCE_DIR) + "/tests/golden/tiny.yaml");
  model.num_layers = layers;
  return model;
}

HardwareConfig a100() {
  return load_hardware_yaml(std::string(SYSSIM_SOURCE_DIR) + "/configs/hardware/a100-sxm-80gb.yaml");
}

SweepRow row(const std::string& status, double step_time_ms, double mfu, double peak_memory_gb) {
  SweepRow r;
  r.status = status;
  r.step_time_ms = step_time_ms;
  r.mfu = mfu;
  r.peak_memory_gb = peak_memory_gb;
  return r;
}

TEST(Sweep, AxisFlagIsAPathAndItsValues) {
  SweepAxis axis = parse_sweep_axis("parallelism.tp=1,2,4");
  EXPECT_EQ(axis.path, "parallelism.tp");
  EXPECT_EQ(axis.values, (std::vector<std::string>{"1", "2", "4"}));
  EXPECT_THROW(parse_sweep_axis("parallelism.tp"), UsageError);
  EXPECT_THROW(parse_sweep_axis("parallelism.tp=1,,2"), UsageError);
  EXPECT_THROW(parse_sweep_axis("parallelism.tp="), UsageError);
  EXPECT_THROW(parse_sweep_axis("parallelism.tpp=1"), UsageError);
  EXPECT_THROW(parse_sweep_axis("tp=1"), UsageError);
  EXPECT_THROW(parse_sweep_axis("parallelism.world_size=8"), UsageError);  // derived, not a setting
  EXPECT_THROW(parse_sweep_axis("training.recompute_modules=[mlp]"), UsageError);  // a list, not a scalar
}

TEST(Sweep, CartesianProductVariesTheLastAxisFastest) {
  std::vector<SweepAxis> axes = {{"parallelism.tp", {"1", "2", "4"}}, {"training.micro_batch", {"1", "2"}}};
  EXPECT_EQ(cartesian_product(axes),
            (Points{{"1", "1"}, {"1", "2"}, {"2", "1"}, {"2", "2"}, {"4", "1"}, {"4", "2"}}));
  EXPECT_EQ(cartesian_product({}), (Points{{}}));  // no axis: the base job alone
}

TEST(Sweep, PathsSetTheJobThroughTheConfigReader) {
  ShardOptions options;
  apply_config_path(options, "parallelism.tp", "4");
  apply_config_path(options, "parallelism.sp", "yes");  // a YAML boolean
  apply_config_path(options, "parallelism.vpp", "2");
  apply_config_path(options, "parallelism.order", "tp-pp-dp");
  apply_config_path(options, "training.recompute", "full");
  apply_config_path(options, "training.clip_grad", "0");  // an integer read as a float
  apply_config_path(options, "training.seq_length", "4096");
  EXPECT_EQ(options.parallelism.tp, 4);
  EXPECT_TRUE(options.parallelism.sp);
  EXPECT_EQ(options.parallelism.vpp, 2);
  EXPECT_EQ(options.parallelism.order, "tp-pp-dp");
  EXPECT_EQ(options.training.recompute, "full");
  EXPECT_EQ(options.training.clip_grad, 0.0);
  EXPECT_EQ(options.training.seq_length, 4096);
  apply_config_path(options, "parallelism.vpp", "null");
  EXPECT_FALSE(options.parallelism.vpp.has_value());
  // Wrong types are refused, a float is not truncated into an integer, and the job is unchanged.
  EXPECT_THROW(apply_config_path(options, "parallelism.tp", "x"), DataError);
  EXPECT_THROW(apply_config_path(options, "parallelism.tp", "2.5"), DataError);
  EXPECT_THROW(apply_config_path(options, "parallelism.tp", "\"2\""), DataError);  // a quoted YAML string
  EXPECT_THROW(apply_config_path(options, "training.distributed_optimizer", "2"), DataError);
  EXPECT_EQ(options.parallelism.tp, 4);
  EXPECT_THROW(apply_config_path(options, "training.micro_batches", "2"), UsageError);
}

TEST(Sweep, TheSpecsNameOfTheDistributedOptimizerIsTheJobs) {
  EXPECT_EQ(parse_sweep_axis("training.use_distributed_optimizer=true,false").path, "training.distributed_optimizer");
}

TEST(Sweep, DigitsAreADecimalNumberAsOnTheCommandLine) {
  ShardOptions options;
  apply_config_path(options, "training.global_batch", "032");  // YAML 1.1 alone would read octal 26
  EXPECT_EQ(options.training.global_batch, 32);
  apply_config_path(options, "parallelism.tp", "+08");
  EXPECT_EQ(options.parallelism.tp, 8);
}

TEST(Sweep, ShardingStrategyTakesEveryNameAndSetsTheDistributedOptimizer) {
  ShardOptions options;
  const std::pair<const char*, DataParallelSharding> names[] = {
      {"optim_grads_params", DataParallelSharding::optim_grads_params}, {"no_shard", DataParallelSharding::no_shard},
      {"zero2", DataParallelSharding::optim_grads},  {"optim", DataParallelSharding::optim},
      {"full_shard", DataParallelSharding::optim_grads_params}, {"zero1", DataParallelSharding::optim}};
  for (const auto& [name, sharding] : names) {
    apply_config_path(options, "training.data_parallel_sharding_strategy", name);
    EXPECT_EQ(options.training.data_parallel_sharding, sharding) << name;
    EXPECT_EQ(options.training.distributed_optimizer, sharding != DataParallelSharding::no_shard) << name;
  }
  // The job's FSDP implementation stays with the strategies that shard gradients.
  apply_config_path(options, "training.data_parallel_sharding_strategy", "optim_grads");
  options.training.fsdp_implementation = FsdpImplementation::fsdp2;
  apply_config_path(options, "training.data_parallel_sharding_strategy", "zero3");
  EXPECT_EQ(options.training.fsdp_implementation, FsdpImplementation::fsdp2);
  try {
    apply_config_path(options, "training.data_parallel_sharding_strategy", "zero4");
    FAIL() << "zero4 was taken";
  } catch (const DataError& e) {
    EXPECT_STREQ(e.what(), "training.data_parallel_sharding_strategy=zero4: expected no_shard, optim, optim_grads or "
                           "optim_grads_params (or zero1, zero2, zero3, shard_grad_op, full_shard)");
  }
  EXPECT_EQ(options.training.data_parallel_sharding, DataParallelSharding::optim_grads_params);
}

TEST(Sweep, ListKeysTakeOneNameAndUnsetKeysTheReadersWord) {
  ShardOptions options;
  options.training.recompute = "selective";
  apply_config_path(options, "training.recompute_modules", "mlp");
  EXPECT_EQ(options.training.recompute_modules, std::vector<std::string>{"mlp"});
  try {
    apply_config_path(options, "training.optimizer_state_dtype", "int8");  // unset: fp32, not null
    FAIL() << "int8 was taken";
  } catch (const DataError& e) {
    EXPECT_STREQ(e.what(), "training.optimizer_state_dtype=int8: graph: training/optimizer_state_dtype: expected fp32, "
                           "bf16 or fp16, got \"int8\"");
  }
}

TEST(Sweep, MfuIsMaximizedTimeAndMemoryMinimized) {
  EXPECT_TRUE(metric_is_maximized("mfu"));
  EXPECT_FALSE(metric_is_maximized("step_time_ms"));
  EXPECT_FALSE(metric_is_maximized("peak_memory_gb"));
  EXPECT_THROW(metric_is_maximized("tflops"), UsageError);
  // Row 1 is fastest and has the best MFU; row 2 uses the least memory; row 3 (oom) and row 4
  // (invalid) would win every metric but never rank.
  std::vector<SweepRow> rows = {row("ok", 20, 0.4, 30), row("ok", 10, 0.5, 40), row("ok", 30, 0.3, 20),
                                row("oom", 1, 0.9, 1), row("invalid", 0, 0, 0)};
  EXPECT_EQ(rank_rows(rows, "mfu"), (std::vector<size_t>{1, 0, 2}));
  EXPECT_EQ(rank_rows(rows, "step_time_ms"), (std::vector<size_t>{1, 0, 2}));
  EXPECT_EQ(rank_rows(rows, "peak_memory_gb"), (std::vector<size_t>{2, 0, 1}));
  // Ties keep the sweep's order.
  EXPECT_EQ(rank_rows({row("ok", 5, 0.5, 1), row("ok", 5, 0.5, 1)}, "mfu"), (std::vector<size_t>{0, 1}));
}

TEST(Sweep, TopKListsTheBestValidPointsBestFirst) {
  std::vector<SweepRow> rows = {row("ok", 20, 0.4, 30), row("ok", 10, 0.5, 40), row("oom", 1, 0.9, 1),
                                row("ok", 30, 0.3, 20)};
  for (size_t i = 0; i < rows.size(); ++i) rows[i].inputs["parallelism.tp"] = static_cast<int64_t>(i);
  auto shown = nlohmann::json::parse(render_sweep(rows, "peak_memory_gb", 2, "json"));
  ASSERT_EQ(shown["points"].size(), 2u);
  EXPECT_EQ(shown["points"][0]["inputs"]["parallelism.tp"], 3);
  EXPECT_EQ(shown["points"][1]["inputs"]["parallelism.tp"], 0);
  EXPECT_EQ(shown["best"], 0);
  auto all = nlohmann::json::parse(render_sweep(rows, "mfu", std::nullopt, "json"));
  EXPECT_EQ(all["points"].size(), 4u);
  EXPECT_EQ(all["best"], 1);
  // Without an ok point there is no best.
  EXPECT_TRUE(nlohmann::json::parse(render_sweep({row("oom", 1, 1, 1)}, "mfu", std::nullopt, "json"))["best"].is_null());
  EXPECT_THROW(render_sweep(rows, "mfu", 0, "json"), UsageError);
  EXPECT_THROW(render_sweep(rows, "mfu", std::nullopt, "yaml"), UsageError);
}

TEST(Sweep, GpusGiveEachPointItsDataParallelSize) {
  ShardOptions base;
  base.gpus = 8;
  base.training.global_batch = 8;
  std::vector<SweepRow> rows = run_sweep(tiny(), a100(), base, {{"parallelism.tp", {"1", "2", "3"}}}, {false, {}});
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].inputs["parallelism.dp"], 8);  // 8 / 1
  EXPECT_EQ(rows[1].inputs["parallelism.dp"], 4);  // 8 / 2
  EXPECT_EQ(rows[0].status, "ok");
  EXPECT_EQ(rows[2].status, "invalid");
  EXPECT_EQ(rows[2].reason, "tp*cp*pp=3 does not divide --gpus 8");
  EXPECT_FALSE(rows[2].inputs.contains("parallelism.dp"));
}

TEST(Sweep, InvalidAndOutOfMemoryPointsAreListedButNeverBest) {
  ShardOptions base;
  base.training.global_batch = 4;
  // tp 2 splits the 4 heads in 2 groups (fine); tp 8 has more ranks than heads.
  std::vector<SweepAxis> axes = {{"parallelism.tp", {"8", "1", "2"}}, {"training.micro_batch", {"1", "4"}}};
  std::vector<SweepRow> roomy = run_sweep(tiny(), a100(), base, axes, {false, {}});
  ASSERT_EQ(roomy.size(), 6u);
  EXPECT_EQ(roomy[0].status, "invalid");
  EXPECT_EQ(roomy[0].reason, "tp=8 does not divide num_attention_heads=4");
  // A GPU between the two tp=1 points' peaks: micro-batch 4 no longer fits (the rows' peaks are
  // the tensors': nothing outside the allocator on this GPU).
  HardwareConfig small = a100();
  small.cuda_context_GB = 0;
  small.gpu_memory_GB = (roomy[2].peak_memory_gb + roomy[3].peak_memory_gb) / 2;
  std::vector<SweepRow> rows = run_sweep(tiny(), small, base, axes, {false, {}});
  EXPECT_EQ(rows[2].status, "ok");
  EXPECT_EQ(rows[3].status, "oom");
  EXPECT_EQ(rows[3].step_time_ms, roomy[3].step_time_ms);  // still simulated and listed
  for (size_t best : rank_rows(rows, "mfu")) EXPECT_EQ(rows[best].status, "ok");
  EXPECT_EQ(rank_rows(rows, "mfu").size(), 3u);  // 6 points less 2 invalid, less 1 oom
}

TEST(Sweep, EachSimulatedRowCarriesItsClassBand) {
  ShardOptions base;
  base.training.global_batch = 4;
  const HardwareConfig h100 =
      load_hardware_yaml(std::string(SYSSIM_SOURCE_DIR) + "/configs/hardware/h100-sxm-80gb.yaml");  // runs fp8
  std::vector<SweepRow> rows =
      run_sweep(tiny(), h100, base, {{"parallelism.tp", {"8", "1"}}, {"training.dtype", {"bf16", "fp8"}}}, {false, {}});
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_FALSE(rows[0].step_time_band);  // tp 8 is invalid
  const StepTimeBands bands = load_step_time_bands();
  // The tiny Llama is dense: bf16 takes dense_16bit's ratios, fp8 dense_8bit_or_less's.
  const ClassBand& bf16 = bands.of(BandClass::dense_16bit);
  const ClassBand& fp8 = bands.of(BandClass::dense_8bit_or_less);
  ASSERT_TRUE(rows[2].step_time_band && rows[3].step_time_band);
  EXPECT_DOUBLE_EQ(rows[2].step_time_band->low_ms, rows[2].step_time_ms * bf16.low);
  EXPECT_DOUBLE_EQ(rows[2].step_time_band->high_ms, rows[2].step_time_ms * bf16.high);
  EXPECT_DOUBLE_EQ(rows[3].step_time_band->low_ms, rows[3].step_time_ms * fp8.low);
  EXPECT_DOUBLE_EQ(rows[3].step_time_band->high_ms, rows[3].step_time_ms * fp8.high);
}

TEST(Sweep, RowsReadBackWithOrWithoutTheirBand) {
  SweepRow banded = row("ok", 100, 0.5, 10);
  banded.step_time_band = StepTimeRange{90, 130};
  SweepRow back = sweep_row_from_json(to_json(banded), "test");
  ASSERT_TRUE(back.step_time_band);
  EXPECT_EQ(back.step_time_band->low_ms, 90);
  EXPECT_EQ(back.step_time_band->high_ms, 130);
  nlohmann::ordered_json older = to_json(banded);  // a sweep file from before sweeps carried the band
  older.erase("step_time_band_ms");
  EXPECT_FALSE(sweep_row_from_json(older, "test").step_time_band);
  nlohmann::ordered_json reversed = to_json(banded);
  reversed["step_time_band_ms"] = {130, 90};
  try {
    sweep_row_from_json(reversed, "f.json: /points/0");
    FAIL() << "a band whose low is above its high was read";
  } catch (const DataError& e) {
    EXPECT_STREQ(e.what(), "f.json: /points/0/step_time_band_ms: expected [low, high] in ms, got [130,90]");
  }
}

TEST(Sweep, ProgressCountsEveryPoint) {
  std::vector<std::pair<int64_t, int64_t>> calls;
  SweepSettings settings{false, [&](int64_t done, int64_t total) { calls.push_back({done, total}); }};
  run_sweep(tiny(), a100(), {}, {{"training.micro_batch", {"1", "2"}}, {"parallelism.tp", {"1", "2"}}}, settings);
  EXPECT_EQ(calls, (std::vector<std::pair<int64_t, int64_t>>{{1, 4}, {2, 4}, {3, 4}, {4, 4}}));
}

// Points run on several threads land in their own rows: the result is the one-thread result.
TEST(Sweep, ThreadsDoNotChangeTheRows) {
  std::vector<SweepAxis> axes = {{"parallelism.tp", {"1", "2", "3", "4"}}, {"training.micro_batch", {"1", "2", "4"}}};
  SweepSettings one{false, {}, 1}, three{false, {}, 3};
  std::vector<SweepRow> serial = run_sweep(tiny(), a100(), {}, axes, one);
  std::vector<SweepRow> parallel = run_sweep(tiny(), a100(), {}, axes, three);
  ASSERT_EQ(serial.size(), 12u);
  for (size_t i = 0; i < serial.size(); ++i) EXPECT_EQ(to_json(parallel[i]).dump(), to_json(serial[i]).dump()) << i;
}

// Points that differ only in the global batch share one graph (resimulate_with_global_batch):
// each row is the row of sweeping that point alone, refused batches included.
TEST(Sweep, PointsOfOneJobWithOtherBatchesEqualTheirSinglePointSweeps) {
  ShardOptions base;
  base.gpus = 4;
  std::vector<SweepAxis> axes = {{"parallelism.tp", {"1", "2"}}, {"training.global_batch", {"8", "6", "16", "4"}}};
  std::vector<SweepRow> whole = run_sweep(tiny(), a100(), base, axes, {false, {}});
  const Points points = cartesian_product(axes);
  ASSERT_EQ(whole.size(), points.size());
  for (size_t i = 0; i < points.size(); ++i) {
    std::vector<SweepAxis> single = {{axes[0].path, {points[i][0]}}, {axes[1].path, {points[i][1]}}};
    EXPECT_EQ(to_json(whole[i]).dump(), to_json(run_sweep(tiny(), a100(), base, single, {false, {}}).at(0)).dump()) << i;
  }
  EXPECT_EQ(whole[1].status, "invalid");  // 6 samples over dp 4
}

// Points that share an instantiation of the trace but not the routing balance: without expert
// parallelism the skew changes only the grouped GEMMs' shapes (the busiest expert's tokens).
TEST(Sweep, RoutingSkewsWithoutExpertParallelismEqualTheirSinglePointSweeps) {
  ModelConfig model = tiny(2);
  model.num_moe_experts = 4, model.moe_router_topk = 2, model.moe_ffn_hidden_size = 16384;
  model.moe_layer_pattern = {1, 1};
  ShardOptions base;
  base.gpus = 2;
  base.training.global_batch = 2;
  base.training.micro_batch = 1;
  base.training.seq_length = 4096;  // experts' GEMMs long enough for the skew to show
  std::vector<SweepAxis> axes = {{"training.moe_imbalance", {"1", "2"}}};
  std::vector<SweepRow> whole = run_sweep(model, a100(), base, axes, {false, {}});
  ASSERT_EQ(whole.size(), 2u);
  EXPECT_GT(whole[1].step_time_ms, whole[0].step_time_ms);  // the busiest expert sets the pace
  for (size_t i = 0; i < whole.size(); ++i)
    EXPECT_EQ(to_json(whole[i]).dump(),
              to_json(run_sweep(model, a100(), base, {{axes[0].path, {axes[0].values[i]}}}, {false, {}}).at(0)).dump());
}

TEST(Sweep, MergedSinglePointResultsEqualTheSweepInOneProcess) {
  ShardOptions base;
  base.gpus = 4;
  base.training.global_batch = 8;
  std::vector<SweepAxis> axes = {{"parallelism.tp", {"1", "2", "3"}}, {"training.recompute", {"none", "full"}}};
  std::vector<SweepRow> whole = run_sweep(tiny(), a100(), base, axes, {false, {}});
  // What each --emit-jobs job does: a sweep of one point, written as JSON.
  std::filesystem::path dir = std::filesystem::temp_directory_path() / "syssim-test-sweep-merge";
  std::filesystem::create_directories(dir);
  std::vector<std::string> files;
  for (const auto& point : cartesian_product(axes)) {
    std::vector<SweepAxis> single = {{axes[0].path, {point[0]}}, {axes[1].path, {point[1]}}};
    files.push_back((dir / ("point-" + std::to_string(files.size()) + ".json")).string());
    write_output(files.back(), render_sweep(run_sweep(tiny(), a100(), base, single, {false, {}}), "mfu", std::nullopt, "json"));
  }
  std::vector<SweepRow> merged = merge_sweep_files(files);
  for (const char* format : {"table", "csv", "json"})
    for (const char* metric : {"mfu", "step_time_ms"})
      EXPECT_EQ(render_sweep(merged, metric, std::nullopt, format), render_sweep(whole, metric, std::nullopt, format));
  EXPECT_EQ(render_sweep(merged, "mfu", 2, "table"), render_sweep(whole, "mfu", 2, "table"));
  std::filesystem::remove_all(dir);
}

TEST(Sweep, EmittedJobsRepeatTheCommandWithOnePointEach) {
  std::filesystem::path dir = std::filesystem::temp_directory_path() / "syssim-test-sweep-jobs";
  std::vector<std::string> command = {"syssim", "sweep", "m.yaml", "--hardware", "h w.yaml", "--over",
                                      "parallelism.tp=1,2", "--over=training.micro_batch=1", "--top", "3",
                                      "--format=csv", "-o", "out.txt", "--gpus", "8", "--emit-jobs", dir.string()};
  std::string jobs = emit_sweep_jobs(command, {{"parallelism.tp", {"1", "2"}}, {"training.micro_batch", {"1"}}},
                                     dir.string());
  std::string prefix = "syssim sweep m.yaml --hardware 'h w.yaml' --gpus 8";
  EXPECT_EQ(jobs, prefix + " --over parallelism.tp=1 --over training.micro_batch=1 --format json -o " + dir.string() +
                      "/point-0000.json\n" + prefix + " --over parallelism.tp=2 --over training.micro_batch=1 --format json -o " +
                      dir.string() + "/point-0001.json\n");
  EXPECT_TRUE(std::filesystem::is_directory(dir));
  std::filesystem::remove_all(dir);
}

// `model` on `gpus` GPUs: the pruned search and the exhaustive one.
void expect_same_front(const ModelConfig& model, int64_t gpus, int64_t global_batch) {
  ShardOptions base;
  base.gpus = gpus;
  base.training.global_batch = global_batch;
  HardwareConfig hardware = a100();
  SearchResult roomy = search_layouts(model, hardware, base, false);
  // A GPU that holds only the leaner layouts of the front, so that memory prunes too (the rows'
  // peaks are the tensors': nothing outside the allocator on this GPU).
  hardware.cuda_context_GB = 0;
  hardware.gpu_memory_GB = (roomy.front.front().peak_memory_gb + roomy.front.back().peak_memory_gb) / 2;
  SearchResult exhaustive = search_layouts(model, hardware, base, false);
  SearchResult pruned = search_layouts(model, hardware, base, true);
  EXPECT_EQ(render_sweep(pruned.front, "mfu", std::nullopt, "json"), render_sweep(exhaustive.front, "mfu", std::nullopt, "json"));
  EXPECT_GT(pruned.pruned_by_memory, 0);
  EXPECT_GT(pruned.pruned_by_bound, 0);
  EXPECT_LT(pruned.simulated, exhaustive.simulated);
  EXPECT_EQ(pruned.enumerated, pruned.invalid + pruned.pruned_by_memory + pruned.pruned_by_bound + pruned.simulated);
  EXPECT_EQ(exhaustive.pruned_by_bound, 0);
  // Along the front, each layout is faster and needs more memory than the next.
  for (size_t i = 1; i < pruned.front.size(); ++i) {
    EXPECT_LT(pruned.front[i - 1].step_time_ms, pruned.front[i].step_time_ms);
    EXPECT_GT(pruned.front[i - 1].peak_memory_gb, pruned.front[i].peak_memory_gb);
  }
}

// The search's compute bound: one shard of the model cut to two layers gives a layer's,
// the embedding's and the output layer's compute; the bound is worked out here by hand for
// pp 2 and checked to stay under the slot-level bound (docs/syssim-sim.md) of every layout.
TEST(SweepSearch, ComputeBoundIsAHandSumAndNeverAboveTheStepBound) {
  const ModelConfig model = tiny(8), short_model = tiny(2);
  const HardwareConfig hardware = a100();
  PointEvaluator evaluate(model, hardware, false);
  ShardOptions layout;
  layout.parallelism.tp = 2, layout.parallelism.sp = true, layout.parallelism.pp = 2;
  layout.training.micro_batch = 1, layout.training.global_batch = 8;
  const nlohmann::json compute = layer_compute(evaluate, short_model, trace_of(short_model), layout, false);
  // Per part and micro-batch: [compute in all passes, in the forward, in the weight gradients,
  // recomputed; span of the forward slot, of the backward slot].
  auto part = [&](const char* name) {
    struct {
      double all, forward, weight, recomputed, forward_span, backward_span, input_gradient;
    } p{compute[name][0], compute[name][1], compute[name][2], compute[name][3], compute[name][4], compute[name][5], 0};
    p.input_gradient = p.all - p.forward - p.weight - p.recomputed;
    return p;
  };
  const auto layer = part("layer"), embedding = part("embedding"), head = part("head");
  EXPECT_GT(layer.forward, 0);
  EXPECT_GT(layer.weight, 0);
  EXPECT_EQ(layer.recomputed, 0);
  EXPECT_GT(layer.input_gradient, 0);
  // Sequence parallelism's all-gathers and reduce-scatters sit between a layer's GEMMs: the
  // spans hold them.
  EXPECT_GT(layer.forward_span, layer.forward);
  EXPECT_GT(layer.backward_span, layer.all - layer.forward);
  // pp 2, 8 micro-batches, 4 layers a rank: rank 0 runs the embedding, rank 1 the output
  // layer; rank 1 starts after the first forward through rank 0, runs its 8 forward and
  // backward slots, and after its last backward's input gradient (all of that slot but the
  // weight gradients and what the span adds to them) rank 0 still runs its backward's input
  // gradient.
  const double rank0 = 8 * (4 * (layer.forward_span + layer.backward_span) + embedding.forward_span + embedding.backward_span);
  const double rank1_last_slot_after_input_gradient = 4 * (layer.backward_span - layer.input_gradient) + head.backward_span - head.input_gradient;
  const double rank1 = (4 * layer.forward_span + embedding.forward_span) +
                       8 * (4 * (layer.forward_span + layer.backward_span) + head.forward_span + head.backward_span) +
                       std::max(0.0, 4 * layer.input_gradient + embedding.input_gradient - rank1_last_slot_after_input_gradient);
  EXPECT_DOUBLE_EQ(compute_lower_bound_ms(compute, model, layout), std::max(rank0, rank1));
  // On one GPU nothing is communicated: the spans are the compute.
  ShardOptions one_gpu = layout;
  one_gpu.parallelism.tp = 1, one_gpu.parallelism.sp = false;
  const nlohmann::json alone = layer_compute(evaluate, short_model, trace_of(short_model), one_gpu, false);
  for (const char* name : {"layer", "embedding", "head"}) {
    EXPECT_DOUBLE_EQ(alone[name][4], alone[name][1]) << name;
    EXPECT_NEAR(alone[name][5], alone[name][0].get<double>() - alone[name][1].get<double>(), 1e-12) << name;
  }
  // Full recompute runs each layer's forward again in its backward slot.
  ShardOptions full = layout;
  full.training.recompute = "full";
  const nlohmann::json recomputing = layer_compute(evaluate, short_model, trace_of(short_model), full, false);
  EXPECT_NEAR(recomputing["layer"][3].get<double>(), layer.forward, 1e-9);
  EXPECT_EQ(compute_lower_bound_ms(nlohmann::json(), model, layout), 0);

  const CostEstimator estimator(hardware);
  for (int64_t pp : {1, 2, 4})
    for (const char* schedule : {"", "gpipe", "zb-h1", "interleaved"})
      for (int64_t cp : {1, 2})
        for (const char* recompute : {"none", "selective", "full"}) {
          const bool interleaved = std::string(schedule) == "interleaved";
          if (pp == 1 && *schedule) continue;
          ShardOptions o = layout;
          o.parallelism.pp = pp, o.parallelism.cp = cp, o.training.recompute = recompute;
          if (interleaved) o.parallelism.vpp = 2;
          else o.pipeline_schedule = parse_enum<ScheduleKind>(schedule);  // "": the default
          SCOPED_TRACE("pp " + std::to_string(pp) + " " + schedule + " cp " + std::to_string(cp) + " " + recompute);
          Graph graph = estimate_memory(model, trace_of(model), estimator, o);
          const double bound = compute_lower_bound_ms(layer_compute(evaluate, short_model, trace_of(short_model), o, false), model, o);
          EXPECT_GT(bound, 0);
          EXPECT_LE(bound, step_time_lower_bound_ms(*graph.shard, *graph.cost) * (1 + 1e-12));
        }
}

// The search's activation bound: at its first backward slot a pipeline rank holds, for every
// layer of every forward slot it ran before, what a layer keeps for its backward; the bound
// is the ranks' average (their model states are bounded on average too, docs/syssim-sweep.md),
// worked out here by hand and checked to stay under the peak of every layout.
TEST(SweepSearch, ActivationBoundIsAHandSumAndNeverAboveThePeak) {
  ShardOptions layout;
  layout.parallelism.pp = 4, layout.training.micro_batch = 1, layout.training.global_batch = 8;
  // 1F1B: pp - rank - 1 warm-up forwards and one more before the first backward.
  EXPECT_EQ(forwards_before_first_backward(layout), (std::vector<int64_t>{4, 3, 2, 1}));
  ShardOptions zero_bubble = layout;
  zero_bubble.pipeline_schedule = ScheduleKind::zb_h1;
  EXPECT_EQ(forwards_before_first_backward(zero_bubble), (std::vector<int64_t>{4, 3, 2, 1}));
  ShardOptions gpipe = layout;
  gpipe.pipeline_schedule = ScheduleKind::gpipe, gpipe.parallelism.pp = 2, gpipe.training.global_batch = 3;
  EXPECT_EQ(forwards_before_first_backward(gpipe), (std::vector<int64_t>{3, 3}));
  // Interleaved, pp 2, vpp 2, 4 micro-batches: (pp - rank - 1) * 2 + (vpp - 1) * pp warm-up
  // forwards, and one more.
  ShardOptions interleaved = layout;
  interleaved.parallelism.pp = 2, interleaved.parallelism.vpp = 2, interleaved.training.global_batch = 4;
  EXPECT_EQ(forwards_before_first_backward(interleaved), (std::vector<int64_t>{5, 3}));

  // A layer keeping 1 GB: 8 layers on pp 4 are 2 a rank, (4 + 3 + 2 + 1) / 4 forward slots of
  // them on average; on pp 2 with vpp 2, 2 a virtual stage, (5 + 3) / 2 forward slots.
  const nlohmann::json gigabyte = {{"layer_kept_bytes", 1e9}};
  EXPECT_DOUBLE_EQ(activation_lower_bound_gb(gigabyte, 8, layout, {4, 3, 2, 1}), 2.5 * 2);
  EXPECT_DOUBLE_EQ(activation_lower_bound_gb(gigabyte, 8, interleaved, {5, 3}), 4.0 * 2);
  EXPECT_EQ(activation_lower_bound_gb(nlohmann::json(), 8, layout, {4, 3, 2, 1}), 0);
  ShardOptions offloading = layout;
  offloading.training.cpu_offloading_num_layers = 1;
  EXPECT_EQ(activation_lower_bound_gb(gigabyte, 8, offloading, {4, 3, 2, 1}), 0);

  const ModelConfig model = tiny(8), short_model = tiny(2);
  const HardwareConfig hardware = a100();
  PointEvaluator evaluate(model, hardware, false);
  const CostEstimator estimator(hardware);
  const double params = traced_parameters(trace_of(model), trace_of(model).axes);
  for (int64_t pp : {1, 2, 4})
    for (const char* schedule : {"", "gpipe", "zb-h1", "interleaved"})
      for (int64_t tp : {1, 2})
        for (const char* recompute : {"none", "selective", "full"}) {
          if (pp == 1 && *schedule) continue;
          ShardOptions o;
          o.parallelism.pp = pp, o.parallelism.tp = tp, o.parallelism.sp = tp > 1, o.parallelism.dp = 2;
          o.training.micro_batch = 2, o.training.global_batch = 32, o.training.recompute = recompute;
          o.training.distributed_optimizer = true;
          if (std::string(schedule) == "interleaved") o.parallelism.vpp = 2;
          else o.pipeline_schedule = parse_enum<ScheduleKind>(schedule);  // "": the default
          SCOPED_TRACE("pp " + std::to_string(pp) + " " + schedule + " tp " + std::to_string(tp) + " " + recompute);
          const nlohmann::json compute = layer_compute(evaluate, short_model, trace_of(short_model), o, false);
          EXPECT_GT(compute["layer_kept_bytes"].get<double>(), 0);
          const double activations = activation_lower_bound_gb(compute, 8, o, forwards_before_first_backward(o));
          EXPECT_GT(activations, 0);
          const Graph graph = estimate_memory(model, trace_of(model), estimator, o);
          EXPECT_LE(model_state_lower_bound_gb(params, o) + activations, graph.mem->peak_memory_gb * (1 + 1e-12));
        }
}

// A model of dense and MoE layers split unevenly: the short model has one layer of each kind,
// the bound takes each layer of a stage at its own kind's compute (7 = 4 + 3 on pp 2: two
// dense and two MoE layers, then three MoE layers), worked out here by hand, and it stays
// under the slot-level bound.
TEST(SweepSearch, ComputeBoundOfMixedLayersAndAnUnevenSplit) {
  ModelConfig model = tiny(7);
  model.num_moe_experts = 4, model.moe_router_topk = 2, model.moe_ffn_hidden_size = 64;
  model.moe_layer_pattern = {0, 0, 1, 1, 1, 1, 1};
  const ModelConfig short_model = short_model_of(model);
  EXPECT_EQ(short_model.moe_layer_pattern, (std::vector<int>{0, 1}));
  const HardwareConfig hardware = a100();
  PointEvaluator evaluate(model, hardware, false);
  ShardOptions layout;
  layout.parallelism.pp = 2, layout.parallelism.dp = 2, layout.parallelism.ep = 2;
  layout.training.micro_batch = 1, layout.training.global_batch = 8;
  layout.pp_layout = uneven_pipeline_layout(7, 2);
  ASSERT_EQ(layout.pp_layout, (std::vector<int64_t>{4, 3}));
  Graph graph = estimate_memory(model, trace_of(model), CostEstimator(hardware), layout);
  const nlohmann::json compute = layer_compute(evaluate, short_model, trace_of(short_model), layout, false);
  const double bound = compute_lower_bound_ms(compute, model, layout);
  EXPECT_GT(bound, 0);
  // Per part: its forward span, backward span and input-gradient compute (all passes less the
  // forward, the weight gradients and the recomputed forward).
  struct Part {
    double forward_span, backward_span, input_gradient;
  };
  auto part = [](const nlohmann::json& ms) {
    return Part{ms[4], ms[5], ms[0].get<double>() - ms[1].get<double>() - ms[2].get<double>() - ms[3].get<double>()};
  };
  ASSERT_EQ(compute["layers"].size(), 2u);
  EXPECT_FALSE(compute["layers"][0]["moe"].get<bool>());
  EXPECT_TRUE(compute["layers"][1]["moe"].get<bool>());
  const Part dense = part(compute["layers"][0]["ms"]), moe = part(compute["layers"][1]["ms"]);
  const Part embedding = part(compute["embedding"]), head = part(compute["head"]);
  EXPECT_GT(moe.forward_span, dense.forward_span);
  auto stage = [](std::vector<std::pair<double, Part>> parts) {
    Part sum{0, 0, 0};
    for (const auto& [count, p] : parts)
      sum.forward_span += count * p.forward_span, sum.backward_span += count * p.backward_span,
          sum.input_gradient += count * p.input_gradient;
    return sum;
  };
  const Part first = stage({{2, dense}, {2, moe}, {1, embedding}}), last = stage({{3, moe}, {1, head}});
  // 1F1B over 4 micro-batches: rank 0 runs its slots back to back; rank 1 starts after the first
  // forward through rank 0 and, after its last backward's input gradient, rank 0 still runs its
  // own.
  const double rank0 = 4 * (first.forward_span + first.backward_span);
  const double rank1 = first.forward_span + 4 * (last.forward_span + last.backward_span) +
                       std::max(0.0, first.input_gradient - (last.backward_span - last.input_gradient));
  EXPECT_NEAR(bound, std::max(rank0, rank1), std::max(rank0, rank1) * 1e-12);
  EXPECT_LE(bound, step_time_lower_bound_ms(*graph.shard, *graph.cost) * (1 + 1e-12));
}

// The memory estimates (a group of layouts each) and the simulations (rounds of layouts) run on
// several threads: the same front and counts.
TEST(SweepSearch, ThreadsDoNotChangeTheResult) {
  ShardOptions base;
  base.gpus = 8;
  base.training.global_batch = 16;
  HardwareConfig hardware = a100();
  hardware.gpu_memory_GB = search_layouts(tiny(4), hardware, base, false).front.front().peak_memory_gb;
  SweepSettings one{false, {}, 1}, three{false, {}, 3};
  SearchResult serial = search_layouts(tiny(4), hardware, base, true, one);
  SearchResult parallel = search_layouts(tiny(4), hardware, base, true, three);
  EXPECT_EQ(render_sweep(parallel.front, "mfu", std::nullopt, "json"), render_sweep(serial.front, "mfu", std::nullopt, "json"));
  EXPECT_GT(serial.pruned_by_memory, 0);
  EXPECT_EQ(parallel.pruned_by_memory, serial.pruned_by_memory);
  EXPECT_EQ(parallel.pruned_by_bound, serial.pruned_by_bound);
  EXPECT_EQ(parallel.invalid, serial.invalid);
  EXPECT_EQ(parallel.simulated, serial.simulated);
}

// By hand: 1e9 parameters over tp 2 x pp 2 = 2.5e8 per GPU, with 2 bytes of bf16 weight,
// 4 of fp32 gradient and 12 of Adam state each, the state sharded 4 ways by the distributed
// optimizer over dp 4; fp8 parameters hold 1 byte.
TEST(SweepSearch, ModelStateBoundByHand) {
  ShardOptions layout;
  layout.parallelism.tp = 2;
  layout.parallelism.pp = 2;
  layout.parallelism.dp = 4;
  EXPECT_DOUBLE_EQ(model_state_lower_bound_gb(1e9, layout), 2.5e8 * (2 + 4 + 12) / 1e9);
  layout.training.distributed_optimizer = true;
  EXPECT_DOUBLE_EQ(model_state_lower_bound_gb(1e9, layout), 2.5e8 * (2 + 4 + 12.0 / 4) / 1e9);
  layout.training.dtype = "fp8";
  layout.training.fp8_param_gather = true;
  EXPECT_DOUBLE_EQ(model_state_lower_bound_gb(1e9, layout), 2.5e8 * (1 + 4 + 12.0 / 4) / 1e9);
}

// The bound the search prunes with never exceeds the memory the estimate finds.
TEST(SweepSearch, ModelStateBoundIsBelowTheEstimate) {
  const ModelConfig model = tiny(4);
  const TraceSection& trace = trace_of(model);
  const double params = traced_parameters(trace, trace.axes);
  const CostEstimator estimator(a100());
  for (int64_t tp : {1, 2})
    for (int64_t pp : {1, 2, 4})
      for (bool distributed_optimizer : {false, true}) {
        ShardOptions layout;
        layout.parallelism.tp = tp;
        layout.parallelism.pp = pp;
        layout.parallelism.dp = 2;
        layout.training.global_batch = 8;
        layout.training.distributed_optimizer = distributed_optimizer;
        double peak_gb = estimate_memory(model, trace, estimator, layout).mem->peak_memory_gb;
        EXPECT_LE(model_state_lower_bound_gb(params, layout), peak_gb) << tp << " " << pp;
        EXPECT_GT(model_state_lower_bound_gb(params, layout), 0.1 * peak_gb) << tp << " " << pp;
      }
  // fp8 parameters (1 byte of weight each) on a GPU with fp8 tensor cores.
  const CostEstimator h100(load_hardware_yaml(std::string(SYSSIM_SOURCE_DIR) + "/configs/hardware/h100-sxm-80gb.yaml"));
  ShardOptions layout;
  layout.parallelism.tp = 2;
  layout.parallelism.dp = 2;
  layout.training.global_batch = 8;
  layout.training.distributed_optimizer = true;
  layout.training.dtype = "fp8";
  layout.training.fp8_param_gather = true;
  EXPECT_LE(model_state_lower_bound_gb(params, layout),
            estimate_memory(model, trace, h100, layout).mem->peak_memory_gb);
}

// The bound from the per-micro-batch collectives of the per-layer sharding strategies stays
// under the simulated step, across groups in and across nodes (a100 nodes of 8 GPUs), with
// pipeline stages, and grows with the strategy's traffic; the other strategies have none.
TEST(SweepSearch, ShardedCommunicationBoundIsBelowTheSimulatedStep) {
  const ModelConfig model = tiny(4);
  const TraceSection& trace = trace_of(model);
  const double params = traced_parameters(trace, trace.axes);
  const HardwareConfig hardware = a100();
  const CostEstimator estimator(hardware);
  for (int64_t dp : {4, 16})
    for (int64_t tp : {1, 2})
      for (int64_t pp : {1, 2}) {
        double previous = 0;
        for (const char* strategy : {"optim", "optim_grads", "optim_grads_params"}) {
          ShardOptions layout;
          layout.parallelism.tp = tp, layout.parallelism.sp = tp > 1, layout.parallelism.pp = pp;
          layout.parallelism.dp = dp;
          layout.training.global_batch = 4 * dp;
          layout.training.data_parallel_sharding = *parse_data_parallel_sharding(strategy);
          SCOPED_TRACE(std::string(strategy) + " dp " + std::to_string(dp) + " tp " + std::to_string(tp) + " pp " +
                       std::to_string(pp));
          const double bound = sharded_communication_lower_bound_ms(model, hardware, params, 0, layout);
          const Graph graph = simulate(model, trace, estimator, layout);
          EXPECT_LE(bound, graph.sim->step_time_ms);
          if (std::string(strategy) == "optim") EXPECT_EQ(bound, 0);
          else EXPECT_GT(bound, previous);
          previous = bound;
        }
      }
}

TEST(SweepSearch, PeakMemoryNeverFallsAsTheMicroBatchGrows) {
  // What the search's memory rule assumes, checked where it is most at risk: with pipeline
  // and interleaved stages, as many micro-batches in flight as there are and fewer as they grow.
  ShardOptions base;
  base.parallelism.pp = 2;
  base.training.global_batch = 16;
  for (const char* vpp : {"null", "2"}) {
    std::vector<SweepAxis> axes = {{"parallelism.vpp", {vpp}},
                                   {"training.recompute", {"none", "selective", "full"}},
                                   {"training.micro_batch", {"1", "2", "4", "8", "16"}}};
    std::vector<SweepRow> rows = run_sweep(tiny(4), a100(), base, axes, {false, {}});
    // Interleaving needs the micro-batches (16 / micro-batch) in whole rounds of pp = 2: not 16.
    EXPECT_EQ(rank_rows(rows, "mfu").size(), std::string(vpp) == "null" ? 15u : 12u);
    for (size_t i = 0; i < rows.size(); ++i) {
      if (i % 5 == 0 || rows[i].status == "invalid") continue;  // the first micro-batch of a recompute setting
      EXPECT_GE(rows[i].peak_memory_gb, rows[i - 1].peak_memory_gb) << rows[i].inputs.dump();
    }
  }
}

TEST(SweepSearch, PrunedFrontIsTheExhaustiveFront) { expect_same_front(tiny(4), 8, 16); }

// Dense and MoE layers: the compute bound takes each at its own kind, and ep joins the axes.
TEST(SweepSearch, PrunedFrontIsTheExhaustiveFrontWithDenseAndMoeLayers) {
  ModelConfig model = tiny(4);
  model.num_moe_experts = 4, model.moe_router_topk = 2, model.moe_ffn_hidden_size = 64;
  model.moe_layer_pattern = {0, 1, 1, 1};
  expect_same_front(model, 8, 16);
}

TEST(SweepSearch, EnumeratesEveryLayoutTheShardStageAccepts) {
  // Tiny (2 layers, 4 heads in 2 groups, sequence 128) on 4 GPUs, global batch 4: tp in {1, 2,
  // 4} (4 a multiple of the 2 groups, without cp), pp in {1, 2}, cp with 2*cp dividing 128;
  // dp = 4/(tp*pp*cp); micro-batches dividing 4/dp; no vpp (a rank's 1 layer cannot be split);
  // 3 recompute settings, times 2 optimizers when dp x cp > 1 (the distributed optimizer shards
  // over the cp ranks too):
  //   tp1 pp1: cp1 dp4 mb{1} 6, cp2 dp2 mb{1,2} 12, cp4 dp1 mb{1,2,4} 18
  //   tp1 pp2: cp1 dp2 mb{1,2} 12, cp2 dp1 mb{1,2,4} 18
  //   tp2 pp1: cp1 dp2 mb{1,2} 12, cp2 dp1 mb{1,2,4} 18
  //   tp2 pp2: cp1 dp1 mb{1,2,4} 9
  //   tp4 pp1: cp1 dp1 mb{1,2,4} 9                                  -> 114 layouts
  ShardOptions base;
  base.gpus = 4;
  base.training.global_batch = 4;
  SearchResult result = search_layouts(tiny(), a100(), base, false);
  EXPECT_EQ(result.enumerated, 114);
  EXPECT_EQ(result.invalid, 0);
  EXPECT_EQ(result.pruned_by_memory, 0);  // a tiny model on 80 GB
  EXPECT_EQ(result.simulated, 114);
  base.gpus.reset();
  EXPECT_THROW(search_layouts(tiny(), a100(), base), UsageError);
}

TEST(SweepSearch, HybridShardingAddsTheReplicaCountsOfTheShardingStrategies) {
  // A base job in hybrid sharding (ZeRO-3, 2 replicas) adds, for ZeRO-2 and ZeRO-3, every replica
  // count R > 1 dividing dp that leaves shard groups (dp x cp / R) of two or more ranks. On 4
  // GPUs (as above): tp1 pp1 cp1 dp4 with R 2 (R 4 leaves groups of one), micro-batch 1; tp1
  // pp1 cp2 dp2 with R 2 (groups of 2: the cp pair), micro-batches 1 and 2; no other layout has
  // dp x cp of 4. (1 + 2) x 3 recompute settings x 2 strategies = 18 layouts more than without.
  ShardOptions base;
  base.gpus = 4;
  base.training.global_batch = 4;
  base.training.data_parallel_sharding = DataParallelSharding::optim_grads_params;
  const SearchResult whole = search_layouts(tiny(), a100(), base, false);
  base.parallelism.dp_replicate = 2;
  const SearchResult hybrid = search_layouts(tiny(), a100(), base, false);
  EXPECT_EQ(hybrid.enumerated - whole.enumerated, 18);
  EXPECT_EQ(hybrid.invalid, 0);
}

}  // namespace
}  // namespace syssim
