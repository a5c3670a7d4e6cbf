// The report rendered from hand-filled sections: 8 GPUs (tp 2 x dp 4), a 500 ms step and
// 8e14 model FLOPs per step give 8e14 / (0.5 s * 8) = 200 TFLOP/s per GPU, 20% of a
// 1000 TFLOP/s peak.
#include <gtest/gtest.h>

#include "common/error.hpp"
#include "report/report.hpp"

namespace syssim {
namespace {

Graph simulated_graph() {
  Graph g;
  g.shard = ShardSection{};
  g.shard->parallelism.tp = 2;
  g.shard->parallelism.dp = 4;
  g.shard->model_flops_per_step = 8e14;
  g.shard->params_total = 8e9;   // 16 GB of bf16 weights
  g.shard->params_active = 2e9;  // as a mixture of experts reports it
  g.shard->training.global_batch = 128;  // 128 x 4,096 tokens per 0.5 s step on 8 GPUs:
  g.shard->seq_length = 4096;            // 131,072 tokens/s per GPU
  g.cost = CostSection{};
  g.cost->hardware.name = "test-gpu";
  g.cost->hardware.peak_tflops_mm = 1000;
  g.cost->hardware.gpus_per_node = 8;

  SimSection sim;
  sim.step_time_ms = 500;
  sim.forward_ms = 150;
  sim.backward_ms = 300;
  sim.optimizer_ms = 20;
  sim.collective_total_ms = 40;
  sim.collective_exposed_ms = 30;
  sim.by_op_type_ms = {{"gemm", 400}, {"collective", 40}, {"math", 70}};
  sim.per_pp_rank_step_time_ms = {500};
  sim.collective_by_group_ms = {{"dp", {10, 10}}, {"tp", {30, 20}}};
  sim.top_ops = {{"12_syssim::linear", 4.28666}, {"7_attn", 3.5}, {"3_x", 1.25}, {"4_y", 1.0}};
  sim.top_modules = {{"decoder.layers.*.mlp.linear_fc1 linear", 12.5}};
  sim.dominant_op_type = "gemm";
  sim.longest_collective = {"20_all_reduce", 40};
  sim.hardware_flops_per_rank = 1e14;
  g.sim = sim;

  MemSection mem;
  mem.param_bytes = 16e9;
  mem.grad_bytes = 32e9;
  mem.optimizer_state_bytes = 24e9;
  mem.activation_bytes = 5.5e9;
  mem.temporary_bytes = 1.25e9;
  mem.peak_memory_gb = 78.75;
  mem.device_memory_gb = 78.75;  // nothing outside the allocator
  mem.reserved_memory_gb = 80.25;
  mem.pp_stage_memory_gb = {78.75};
  mem.peak_module = "decoder.layers.0.mlp";
  mem.gpu_memory_gb = 70;
  mem.oom = OomInfo{70, 78.75, 8.75};
  g.mem = mem;
  return g;
}

// The Memory block, shared by the full and the memory-only report.
const std::string kGoldenMemory = R"(  Memory(
    param_gb           = 16.000
    grad_gb            = 32.000
    optimizer_state_gb = 24.000
    activation_gb      = 5.500
    temporary_gb       = 1.250
    peak_memory_gb     = 78.750
    cuda_context_gb    = 0.000
    nccl_buffers_gb    = 0.000
    fragmentation_gb   = 0.000
    device_memory_gb   = 78.750
    reserved_memory_gb = 80.250
    oom                = capacity 70.000 GB, required 78.750 GB, excess 8.750 GB
  )
)";

// The job in words: 8e9 parameters, 2e9 of them active; tp 2 x dp 4 = 8 GPUs; the defaults
// of the rest; no bundle and no efficiencies in the cost section.
const std::string kGoldenJob = R"(Job(
  model         = 8.000 B parameters (2.000 B active)
  hardware      = test-gpu, 8 GPUs, 8 per node
  layout        = tp2 pp1 dp4 mbs1 gbs128
  precision     = bf16
  recompute     = none
  data_parallel = sharding no_shard
  estimator     = the roofline at the bare peaks
)
)";

const std::string kGoldenText = kGoldenJob + R"(SimulationReport(
  step_time_ms         = 500.0000
    step_time_band_ms  = 450.0000 to 750.0000 (where 80% of 19 published moe_16bit runs measured against their prediction, docs/validation.md)
    forward_ms         = 150.0000
    backward_ms        = 300.0000
    optimizer_ms       = 20.0000
  collective_total_ms  = 40.0000
  collective_exposed   = 30.0000
    tp_comm_ms         = 30.0000 (exposed 20.0000)
    dp_comm_ms         = 10.0000 (exposed 10.0000)
  by_op_type_ms        = collective 40.0000, gemm 400.0000, math 70.0000
  model_flops_per_step = 8.0000e+14 (Megatron-LM's count: attention scores and context over the whole s x s matrix)
  achieved_tflops      = 200.00
  tokens_per_s_per_gpu = 131072.0
  mfu                  = 20.00%
  hfu                  = 20.00%
  peak_memory_gb       = 78.750
  params_total_b       = 8.000
  params_active_b      = 2.000
)" + kGoldenMemory + R"(  Bottlenecks(
    dominant_op_type    = gemm
    top_ops_by_time     = [('12_syssim::linear', 4.2867), ('7_attn', 3.5000), ('3_x', 1.2500)]
    top_modules_by_time = [('decoder.layers.*.mlp.linear_fc1 linear', 12.5000)]
    longest_collective  = ('20_all_reduce', 40.0000)
    binding_pp_stage    = 0
    peak_module         = decoder.layers.0.mlp
    oom                 = capacity 70.000 GB, required 78.750 GB, excess 8.750 GB
  )
)
)";

// Step-time bands given by hand: the test graph is a mixture of experts (2 of 8 B parameters
// active) in bf16, so its band is moe_16bit's: 500 ms x 0.9 = 450 ms to 500 ms x 1.5 = 750 ms.
ReportOptions with_hand_bands() {
  ReportOptions options;
  options.step_time_bands = StepTimeBands{0.8, "hand", {ClassBand{BandClass::dense_16bit, 100, 0.5, 0.6, 0.8},
                                                         ClassBand{BandClass::moe_16bit, 19, 0.9, 1.5, 0.7}}};
  return options;
}

TEST(Report, TextMatchesTheGolden) {
  EXPECT_EQ(render_report(simulated_graph(), "text", with_hand_bands()), kGoldenText);
}

TEST(Report, TheStepTimeBandIsThePredictionTimesItsClassRatios) {
  const nlohmann::json j = nlohmann::json::parse(render_report(simulated_graph(), "json", with_hand_bands()));
  EXPECT_DOUBLE_EQ(j["step_time_band_ms"][0].get<double>(), 450);
  EXPECT_DOUBLE_EQ(j["step_time_band_ms"][1].get<double>(), 750);
  EXPECT_EQ(j["step_time_band"]["class"], "moe_16bit");
  EXPECT_EQ(j["step_time_band"]["runs"], 19);
  Graph dense = simulated_graph();
  dense.shard->params_active = dense.shard->params_total;  // no experts: the dense_16bit band
  const nlohmann::json d = nlohmann::json::parse(render_report(dense, "json", with_hand_bands()));
  EXPECT_DOUBLE_EQ(d["step_time_band_ms"][0].get<double>(), 250);
  EXPECT_DOUBLE_EQ(d["step_time_band_ms"][1].get<double>(), 300);
  // A class the bands do not have is bad data, named.
  Graph fp8 = simulated_graph();
  fp8.shard->training.dtype = "fp8";
  fp8.cost->hardware.peak_tflops_mm_fp8 = 2000;
  try {
    render_report(fp8, "json", with_hand_bands());
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    EXPECT_STREQ(e.what(), "hand: no step-time band for class moe_8bit_or_less");
  }
}

// Eleven ratios 1.0, 1.1, ..., 2.0: the 10% and 90% quantiles, interpolated between sorted
// values (common/csv.hpp's percentile), sit at positions 1 and 9: 1.1 and 1.9. Held out, 1.0's
// band from the other ten is 1.1 + 0.9 x 0.1 = 1.19 to 1.9 + 0.1 x 0.1 = 1.91 (outside); 1.1's
// is 1.0 + 0.9 x 0.2 = 1.18 to 1.91 (outside); 1.9 and 2.0 likewise by symmetry; 1.2 to 1.8
// lie inside theirs: 7 of 11 held-out hits.
TEST(StepTimeBands, QuantilesAndHeldOutCoverageByHand) {
  std::vector<StepTimeRatio> runs;
  for (int i = 0; i <= 10; ++i) runs.push_back({BandClass::dense_16bit, 1.0 + 0.1 * i});
  runs.push_back({BandClass::moe_8bit_or_less, 1.2});
  runs.push_back({BandClass::moe_8bit_or_less, 1.6});
  const StepTimeBands bands = fit_step_time_bands(runs, 0.8, "table.csv");
  ASSERT_EQ(bands.classes.size(), 2u);
  const ClassBand& dense = bands.of(BandClass::dense_16bit);
  EXPECT_EQ(dense.runs, 11);
  EXPECT_NEAR(dense.low, 1.1, 1e-12);
  EXPECT_NEAR(dense.high, 1.9, 1e-12);
  EXPECT_NEAR(dense.held_out_coverage.value(), 7.0 / 11.0, 1e-12);
  const std::vector<std::optional<ClassBand>> held_out = held_out_bands(runs, 0.8);
  EXPECT_NEAR(held_out[0]->low, 1.19, 1e-12);
  EXPECT_NEAR(held_out[0]->high, 1.91, 1e-12);
  EXPECT_NEAR(held_out[1]->low, 1.18, 1e-12);
  // Two runs: a band of 1.2 + 0.1 x 0.4 = 1.24 to 1.2 + 0.9 x 0.4 = 1.56, none held out.
  const ClassBand& moe = bands.of(BandClass::moe_8bit_or_less);
  EXPECT_NEAR(moe.low, 1.24, 1e-12);
  EXPECT_NEAR(moe.high, 1.56, 1e-12);
  EXPECT_FALSE(moe.held_out_coverage.has_value());
  EXPECT_FALSE(held_out[11].has_value());
}

TEST(StepTimeBands, TheFileRoundTripsAndBadFilesNameTheKey) {
  const StepTimeBands bands = with_hand_bands().step_time_bands.value();
  const std::string text = write_step_time_bands(bands);
  EXPECT_EQ(write_step_time_bands(parse_step_time_bands(text, "bands.json")), text);
  auto error_of = [](const std::string& file_text) {
    try {
      parse_step_time_bands(file_text, "bands.json");
    } catch (const DataError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error_of("{\"source\": \"x\", \"classes\": []}"), "bands.json: missing key 'coverage'");
  EXPECT_EQ(error_of("{\"coverage\": 1.5, \"source\": \"x\", \"classes\": []}"),
            "bands.json: /coverage: expected a share between 0 and 1, got 1.5");
  EXPECT_EQ(error_of("{\"coverage\": 0.8, \"source\": \"x\", \"classes\": [{\"class\": \"big\"}]}"),
            "bands.json: /classes/0/class: expected dense_16bit, dense_8bit_or_less, moe_16bit or moe_8bit_or_less, "
            "got \"big\"");
  EXPECT_EQ(error_of("{\"coverage\": 0.8, \"source\": \"x\", \"classes\": [{\"class\": \"moe_16bit\", \"runs\": 3, "
                     "\"ratio_low\": 2, \"ratio_high\": 1, \"held_out_coverage\": 0.5}]}"),
            "bands.json: /classes/0: expected 0 < ratio_low <= ratio_high, got 2 and 1");
}

TEST(StepTimeBands, ClassesByExpertsAndPrecision) {
  EXPECT_EQ(band_class_of(false, "bf16"), BandClass::dense_16bit);
  EXPECT_EQ(band_class_of(false, "fp16"), BandClass::dense_16bit);
  EXPECT_EQ(band_class_of(false, "fp4"), BandClass::dense_8bit_or_less);
  EXPECT_EQ(band_class_of(true, "bf16"), BandClass::moe_16bit);
  EXPECT_EQ(band_class_of(true, "fp8"), BandClass::moe_8bit_or_less);
}

TEST(Report, TextWithoutOomOrCollectives) {
  Graph g = simulated_graph();
  g.mem->oom.reset();
  g.sim->longest_collective = {};
  std::string text = render_report(g, "text");
  EXPECT_NE(text.find("    longest_collective  = none\n"), std::string::npos) << text;
  EXPECT_NE(text.find("    oom                 = none\n  )\n)\n"), std::string::npos) << text;
}

TEST(Report, OneGpuIsSingular) {
  Graph g = simulated_graph();
  g.shard->parallelism.tp = g.shard->parallelism.dp = 1;
  EXPECT_NE(render_report(g, "text").find("  hardware      = test-gpu, 1 GPU, 8 per node\n"), std::string::npos);
}

TEST(Report, TheBusiestLinkFollowsTheLongestCollective) {
  // Two links named nvlink (levels 0 and 2): the line shows the more utilized one.
  Graph g = simulated_graph();
  g.sim->links = {{"nvlink", 0, 370, 1234.5, 2.9e11, 0.621, 3}, {"nvlink", 2, 25, 10, 1e9, 0.08, 1}};
  g.sim->busiest_link = "nvlink";
  g.sim->collective_slowdown = 1.5;
  std::string text = render_report(g, "text");
  EXPECT_NE(text.find("    longest_collective  = ('20_all_reduce', 40.0000)\n"
                      "    busiest_link        = nvlink (level 0, 370.0 GB/s per GPU): 62.10% utilized, busy 1234.5000 ms\n"
                      "    binding_pp_stage    = 0\n"),
            std::string::npos)
      << text;
  nlohmann::json j = nlohmann::json::parse(render_report(g, "json"));
  EXPECT_EQ(j["bottlenecks"]["busiest_link"]["level"], 0);
  EXPECT_DOUBLE_EQ(j["bottlenecks"]["busiest_link"]["utilization"].get<double>(), 0.621);
  EXPECT_DOUBLE_EQ(j["collective_slowdown"].get<double>(), 1.5);
  // Without one (no links): no line, null in JSON.
  EXPECT_EQ(render_report(simulated_graph(), "text").find("busiest_link"), std::string::npos);
  EXPECT_TRUE(nlohmann::json::parse(render_report(simulated_graph(), "json"))["bottlenecks"]["busiest_link"].is_null());
}

// Ops the shard section has are named by module and role in the text: a layer's GEMM, a
// collective with its group, a recomputed op; a name that is no op of the section is kept.
TEST(Report, TextNamesOpsByModuleAndRole) {
  Graph g = simulated_graph();
  g.shard->ops.resize(3);
  auto op = [&](int64_t id, const char* name, const char* kind, const char* module) -> ShardOp& {
    ShardOp& o = g.shard->ops[id];
    o.id = id, o.name = name, o.kind = parse_enum<OpKind>(kind).value(), o.module = module;
    return o;
  };
  op(0, "syssim::linear_wgrad", "gemm", "decoder.layers.17.mlp.linear_fc2");
  op(1, "collective::all_gather", "collective", "decoder.layers.3.self_attention.linear_qkv").group = CommGroup::tp;
  op(2, "syssim::flash_attn", "attention", "decoder.layers.3.self_attention.core_attention").recompute = true;
  g.sim->top_ops = {{"0_syssim::linear_wgrad", 5}, {"2_syssim::flash_attn", 4}, {"1_other", 3}};
  g.sim->longest_collective = {"1_collective::all_gather", 2};
  const std::string text = render_report(g, "text");
  EXPECT_NE(text.find("top_ops_by_time     = [('decoder.layers.17.mlp.linear_fc2 linear_wgrad', 5.0000), "
                      "('decoder.layers.3.self_attention.core_attention flash_attn (recompute)', 4.0000), "
                      "('1_other', 3.0000)]"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("longest_collective  = ('decoder.layers.3.self_attention.linear_qkv all_gather tp', 2.0000)"),
            std::string::npos)
      << text;
  EXPECT_EQ(op_label(g.shard->ops[0], true), "decoder.layers.*.mlp.linear_fc2 linear_wgrad");
}

// The causal convention counts half of attention's score and context FLOPs: 8e14 - 2e14 / 2 =
// 7e14 per 0.5 s step on 8 GPUs is 175 TFLOP/s per GPU, 17.5% of the 1000 TFLOP/s peak.
TEST(Report, CausalConventionCountsHalfTheAttentionScores) {
  Graph g = simulated_graph();
  g.shard->model_attention_flops_per_step = 2e14;
  const Throughput causal = throughput(g, MfuConvention::kCausal);
  EXPECT_DOUBLE_EQ(causal.model_flops_per_step, 7e14);
  EXPECT_DOUBLE_EQ(causal.achieved_tflops, 175);
  EXPECT_DOUBLE_EQ(causal.mfu, 0.175);
  EXPECT_DOUBLE_EQ(throughput(g).mfu, 0.2);  // Megatron-LM's count, the default
  ReportOptions options;
  options.mfu_convention = MfuConvention::kCausal;
  const nlohmann::json j = nlohmann::json::parse(render_report(g, "json", options));
  EXPECT_EQ(j["mfu_convention"], "causal");
  EXPECT_DOUBLE_EQ(j["mfu"].get<double>(), 0.175);
  EXPECT_DOUBLE_EQ(j["model_flops_per_step"].get<double>(), 8e14);  // the shard section's count, as the API names it
  EXPECT_NE(render_report(g, "text", options).find("  model_flops_per_step = 7.0000e+14 (causal: "), std::string::npos);
  // A shard section older than format 1.7 does not know the attention part.
  g.shard->model_attention_flops_per_step.reset();
  try {
    throughput(g, MfuConvention::kCausal);
    FAIL();
  } catch (const DataError& e) {
    EXPECT_STREQ(e.what(), "/shard/model_attention_flops_per_step: missing (a shard section older than format 1.7); "
                           "rerun syssim-shard to count FLOPs by the causal convention");
  }
}

// Two layers at s = 4,096, one with a window of 1,023 keys before each query (K = 1,024 keys):
// A = 2e14 is 1e14 per layer. The full layer computes half of its 1e14; the windowed one, per
// query, min(i, 1,024) keys: 1,024 - 1,024^2 / 8,192 = 896 keys of 4,096, 0.21875 of 1e14.
// Causal count: 8e14 - 2e14 + 0.5e14 + 0.21875e14 = 6.71875e14.
TEST(Report, CausalConventionCountsASlidingWindowsKeys) {
  Graph g = simulated_graph();
  g.shard->model_attention_flops_per_step = 2e14;
  g.model = ModelConfig{};
  g.model->num_layers = 2;
  g.model->window_size = 1023;
  g.model->sliding_window_pattern = {1, 0};
  EXPECT_DOUBLE_EQ(throughput(g, MfuConvention::kCausal).model_flops_per_step, 6.71875e14);
  EXPECT_DOUBLE_EQ(throughput(g).model_flops_per_step, 8e14);  // Megatron-LM counts every layer in full
  g.model->window_size = 4095;  // a window that holds the sequence is full causal attention
  EXPECT_DOUBLE_EQ(throughput(g, MfuConvention::kCausal).model_flops_per_step, 7e14);
}

// 1e12 tokens at 128 x 4,096 tokens per 0.5 s step: 1,907,348.6 steps, 953,674.3 s = 11.0379
// days, x 8 GPUs = 2,119.3 GPU-hours.
TEST(Report, TrainTokensGiveDaysAndGpuHours) {
  ReportOptions options;
  options.train_tokens = 1e12;
  const std::string text = render_report(simulated_graph(), "text", options);
  EXPECT_NE(text.find("  train_tokens         = 1.0000e+12\n"
                      "    train_days         = 11.0379\n"
                      "    train_gpu_hours    = 2119.3\n"),
            std::string::npos)
      << text;
  const nlohmann::json j = nlohmann::json::parse(render_report(simulated_graph(), "json", options));
  EXPECT_NEAR(j["train_days"].get<double>(), 11.037897180627894, 1e-12);
  EXPECT_NEAR(j["train_gpu_hours"].get<double>(), 2119.2762586805557, 1e-9);
  EXPECT_FALSE(nlohmann::json::parse(render_report(simulated_graph(), "json")).contains("train_days"));
  options.train_tokens = -1;
  EXPECT_THROW(render_report(simulated_graph(), "text", options), UsageError);
}

TEST(Report, JsonHasTheApiFields) {
  Graph g = simulated_graph();
  std::string text = render_report(g, "json");
  EXPECT_EQ(text, render_report(g, "json"));
  nlohmann::json j = nlohmann::json::parse(text);
  EXPECT_DOUBLE_EQ(j["step_time_ms"].get<double>(), 500);
  EXPECT_DOUBLE_EQ(j["collective_exposed_ms"].get<double>(), 30);
  EXPECT_DOUBLE_EQ(j["achieved_tflops"].get<double>(), 200);
  EXPECT_DOUBLE_EQ(j["mfu"].get<double>(), 0.2);
  EXPECT_DOUBLE_EQ(j["hfu"].get<double>(), 0.2);
  EXPECT_DOUBLE_EQ(j["model_flops_per_step"].get<double>(), 8e14);
  EXPECT_DOUBLE_EQ(j["by_op_type_ms"]["math"].get<double>(), 70);
  EXPECT_DOUBLE_EQ(j["param_bytes"].get<double>(), 16e9);
  EXPECT_EQ(j["pp_stage_memory_gb"], nlohmann::json::array({78.75}));
  EXPECT_EQ(j["per_pp_rank_step_time_ms"], nlohmann::json::array({500.0}));
  const nlohmann::json& b = j["bottlenecks"];
  EXPECT_EQ(b["dominant_op_type"], "gemm");
  EXPECT_EQ(b["top_ops_by_time"].size(), 4u);
  EXPECT_EQ(b["top_ops_by_time"][0], nlohmann::json::array({"12_syssim::linear", 4.28666}));
  EXPECT_EQ(b["longest_collective"], nlohmann::json::array({"20_all_reduce", 40.0}));
  EXPECT_EQ(b["top_modules_by_time"],
            nlohmann::json::array({nlohmann::json::array({"decoder.layers.*.mlp.linear_fc1 linear", 12.5})}));
  EXPECT_EQ(b["binding_pp_stage"], 0);
  EXPECT_EQ(b["peak_module"], "decoder.layers.0.mlp");
  EXPECT_DOUBLE_EQ(b["oom"]["excess_gb"].get<double>(), 8.75);
  EXPECT_EQ(j["parallelism"]["tp"], 2);
  EXPECT_EQ(j["hardware"]["name"], "test-gpu");
  EXPECT_TRUE(j["model"].is_null());
}

TEST(Report, MemoryOnly) {
  Graph g = simulated_graph();
  g.sim.reset();
  g.cost.reset();
  EXPECT_EQ(render_memory_report(g, "text"), R"(Job(
  model         = 8.000 B parameters (2.000 B active)
  layout        = tp2 pp1 dp4 mbs1 gbs128
  precision     = bf16
  recompute     = none
  data_parallel = sharding no_shard
)
SimulationReport(
  peak_memory_gb  = 78.750
  params_total_b  = 8.000
  params_active_b = 2.000
)" + kGoldenMemory + R"(  Bottlenecks(
    peak_module = decoder.layers.0.mlp
    oom         = capacity 70.000 GB, required 78.750 GB, excess 8.750 GB
  )
)
)");
  nlohmann::json j = nlohmann::json::parse(render_memory_report(g, "json"));
  EXPECT_FALSE(j.contains("step_time_ms"));
  EXPECT_DOUBLE_EQ(j["peak_memory_gb"].get<double>(), 78.75);
  EXPECT_DOUBLE_EQ(j["reserved_memory_gb"].get<double>(), 80.25);
  EXPECT_EQ(j["bottlenecks"]["peak_module"], "decoder.layers.0.mlp");
  EXPECT_TRUE(j["hardware"].is_null());
}

TEST(Report, RefusesAnUnknownFormatAndMissingSections) {
  Graph g = simulated_graph();
  EXPECT_THROW(render_report(g, "xml"), UsageError);
  EXPECT_THROW(render_memory_report(g, "yaml"), UsageError);
  g.sim.reset();
  try {
    render_report(g, "text");
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("syssim-sim"), std::string::npos) << e.what();
  }
}

TEST(Report, RefusesAStepThatTakesNoTime) {
  Graph g = simulated_graph();
  g.sim->step_time_ms = 0;
  EXPECT_THROW(render_report(g, "text"), DataError);
}

}  // namespace
}  // namespace syssim
