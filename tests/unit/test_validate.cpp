// `syssim validate`: CSV parsing, how a measured row becomes a simulated job, why rows are
// skipped, and the error statistics (hand-made numbers).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <sstream>

#include "common/error.hpp"
#include "cost/cost.hpp"
#include "driver/driver.hpp"
#include "sim/sim.hpp"
#include "trace_builder.hpp"
#include "validate/spellings.hpp"
#include "validate/validate.hpp"

namespace syssim {
namespace {

const std::string kPresets = "/presets";

// A Llama-3.1-70B row of the DGXC recipes (bf16), with cells the tests change.
MeasuredRow llama_row() {
  return {{"source_id", "DGXC"}, {"model", "Llama3.1-70B"}, {"layers", "80"}, {"hidden", "8192"},
          {"ffn_hidden", "28672"}, {"heads", "64"}, {"kv_heads", "8"}, {"vocab", "128256"},
          {"seq_length", "8192"}, {"gpu", "H100-80GB"}, {"num_gpus", "64"}, {"tp", "4"}, {"pp", "4"},
          {"vpp", "5"}, {"cp", "2"}, {"ep", "1"}, {"dp", ""}, {"sp", ""}, {"micro_batch", "1"},
          {"global_batch", "128"}, {"dtype", "bf16"}, {"recompute", ""}, {"distributed_optimizer", ""},
          {"measured_step_s", "14.72"}};
}

// A GPT row as the papers give it: vocab, kv heads and FFN left empty.
MeasuredRow gpt_row() {
  MeasuredRow row = llama_row();
  row["source_id"] = "PAPER";
  row["model"] = "GPT3-175B";
  row["layers"] = "96";
  row["hidden"] = "12288";
  row["heads"] = "96";
  row["kv_heads"] = row["ffn_hidden"] = row["vocab"] = row["vpp"] = "";
  row["gpu"] = "A100-80GB";
  row["tp"] = "8";
  row["pp"] = "8";
  row["cp"] = "1";
  row["sp"] = "0";
  row["recompute"] = "full (activation recomputation; counted in FLOPs)";
  row["distributed_optimizer"] = "0";
  return row;
}

// A DeepSeek-V3 row: the preset gives the architecture, the row its layout (ep 8).
MeasuredRow deepseek_row() {
  MeasuredRow row = llama_row();
  row["model"] = "DeepSeek-V3";
  row["layers"] = "61";
  row["ep"] = "8";
  for (const char* column : {"hidden", "ffn_hidden", "heads", "kv_heads", "vocab"}) row[column] = "";
  return row;
}

// A Narayanan et al. 2021 Table 1 row: TFLOP/s per GPU, no step time, no micro-batch.
MeasuredRow narayanan_row() {
  MeasuredRow row = gpt_row();
  row["source_id"] = "NARAYANAN21";
  row["model"] = "GPT-1.7B(Narayanan21)";
  row["layers"] = "24";
  row["hidden"] = "2304";
  row["ffn_hidden"] = "9216";
  row["heads"] = "24";
  row["vocab"] = "51200";
  row["seq_length"] = "2048";
  row["num_gpus"] = "32";
  row["tp"] = row["pp"] = "1";
  row["sp"] = row["micro_batch"] = row["measured_step_s"] = row["distributed_optimizer"] = "";
  row["global_batch"] = "512";
  row["dtype"] = "fp16/bf16 mixed (16-bit)";
  row["measured_tflops_per_gpu"] = "137";
  return row;
}

// BLOOM-176B at iteration 85376 (bigscience tr11-176B-ml README): 104.70 s, 149.77 TFLOP/s.
MeasuredRow bloom_row() {
  MeasuredRow row = gpt_row();
  row["source_id"] = "BLOOM_176B";
  row["model"] = "BLOOM-176B";
  row["layers"] = "70";
  row["hidden"] = "14336";
  row["ffn_hidden"] = "57344";
  row["heads"] = "112";
  row["vocab"] = "250880";
  row["seq_length"] = "2048";
  row["num_gpus"] = "384";
  row["tp"] = "4";
  row["pp"] = "12";
  row["sp"] = "";
  row["micro_batch"] = "2";
  row["global_batch"] = "2048";
  row["dtype"] = "bf16";
  row["recompute"] = "full (DeepSpeed activation checkpointing)";
  row["distributed_optimizer"] = "ZeRO-1 (DeepSpeed BF16Optimizer)";
  row["measured_step_s"] = "104.70";
  row["measured_tflops_per_gpu"] = "149.77";
  return row;
}

TEST(ValidateCsv, QuotedFieldsKeepCommasQuotesAndNewlines) {
  CsvTable table = parse_csv("a,b,notes\r\n1,2,\"x, y \"\"z\"\"\"\n3,,\"two\nlines\"\n\n", "t.csv");
  ASSERT_EQ(table.header, (std::vector<std::string>{"a", "b", "notes"}));
  ASSERT_EQ(table.records.size(), 2u);
  EXPECT_EQ(table.records[0], (std::vector<std::string>{"1", "2", "x, y \"z\""}));
  EXPECT_EQ(table.records[1], (std::vector<std::string>{"3", "", "two\nlines"}));
  EXPECT_EQ(table.record_lines, (std::vector<int64_t>{2, 3}));
}

TEST(ValidateCsv, RejectsRaggedRecordsAndOpenQuotesNamingTheLine) {
  try {
    parse_csv("a,b\n1,2\n1,2,3\n", "t.csv");
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_STREQ(e.what(), "t.csv:3: 3 fields, the header has 2");
  }
  try {
    parse_csv("a,b\n1,\"open\n", "t.csv");
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_STREQ(e.what(), "t.csv:2: quoted field is not closed");
  }
}

// A spreadsheet's byte-order mark is not part of the first column's name; a column given twice
// is refused, not silently the second.
TEST(ValidateCsv, ByteOrderMarkIsSkippedAndDuplicatedColumnsRefused) {
  EXPECT_EQ(parse_csv("\xEF\xBB\xBFsource_id,b\n1,2\n", "t.csv").header, (std::vector<std::string>{"source_id", "b"}));
  try {
    parse_csv("a,b,a\n1,2,3\n", "t.csv");
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_STREQ(e.what(), "t.csv:1: column 'a' appears twice (fields 1 and 3)");
  }
}

TEST(ValidateRow, LlamaRowTakesTheNvidiaRecipeDefaults) {
  RowPlan plan = plan_row(llama_row(), kPresets);
  ASSERT_EQ(plan.skip_reason, "");
  EXPECT_EQ(plan.hardware_path, "/presets/h100-sxm-80gb.yaml");
  const ParallelismConfig& p = plan.options.parallelism;
  EXPECT_EQ(p.tp, 4);
  EXPECT_EQ(p.pp, 4);
  EXPECT_EQ(p.vpp, 5);
  EXPECT_EQ(p.cp, 2);
  EXPECT_EQ(p.dp, 2);  // 64 / (4 * 4 * 2)
  EXPECT_TRUE(p.sp);   // empty with tp > 1
  EXPECT_EQ(plan.options.gpus, 64);
  const TrainingConfig& t = plan.options.training;
  EXPECT_EQ(t.dtype, "bf16");
  EXPECT_EQ(t.recompute, "none");
  EXPECT_TRUE(t.distributed_optimizer);
  EXPECT_TRUE(t.overlap_grad_reduce);
  EXPECT_TRUE(t.overlap_param_gather);
  EXPECT_EQ(t.seq_length, 8192);
  const ModelConfig& m = plan.model;
  EXPECT_TRUE(m.swiglu);
  EXPECT_TRUE(m.rope);
  EXPECT_FALSE(m.tie_word_embeddings);
  EXPECT_EQ(m.normalization, "RMSNorm");
  EXPECT_EQ(m.num_query_groups, 8);
  EXPECT_EQ(m.kv_channels, 128);
  EXPECT_EQ(m.vocab_size, 128256);
}

TEST(ValidateRow, GptRowFillsWhatThePaperLeavesOut) {
  RowPlan plan = plan_row(gpt_row(), kPresets);
  ASSERT_EQ(plan.skip_reason, "");
  EXPECT_EQ(plan.hardware_path, "/presets/a100-sxm-80gb.yaml");
  EXPECT_EQ(plan.model.vocab_size, 50257);
  EXPECT_EQ(plan.model.num_query_groups, 96);
  EXPECT_EQ(plan.model.ffn_hidden_size, 4 * 12288);
  EXPECT_FALSE(plan.model.swiglu);
  EXPECT_FALSE(plan.model.rope);
  EXPECT_TRUE(plan.model.tie_word_embeddings);
  EXPECT_TRUE(plan.model.add_bias_linear);
  EXPECT_EQ(plan.model.normalization, "LayerNorm");
  EXPECT_FALSE(plan.options.parallelism.sp);  // the source says 0
  EXPECT_EQ(plan.options.parallelism.dp, 1);  // 64 / (8 * 8)
  EXPECT_EQ(plan.options.training.recompute, "full");
  EXPECT_FALSE(plan.options.training.distributed_optimizer);
  EXPECT_FALSE(plan.options.training.overlap_grad_reduce);  // dp 1: nothing to overlap
  EXPECT_EQ(plan.assumptions,
            (std::vector<std::string>{"dp=1 (num_gpus/(tp*cp*pp))", "kv_heads=heads (multi-head attention)",
                                      "ffn_hidden=4*hidden", "vocab=50257 (GPT-2 BPE, padded)"}));
}

TEST(ValidateRow, OptionalColumnsOverrideTheDefaults) {
  MeasuredRow row = llama_row();
  row["overlap_grad_reduce"] = "0";
  row["attention_backend"] = "unfused";
  row["hardware"] = "h200-sxm";
  RowPlan plan = plan_row(row, kPresets);
  ASSERT_EQ(plan.skip_reason, "");
  EXPECT_FALSE(plan.options.training.overlap_grad_reduce);
  EXPECT_FALSE(plan.options.training.overlap_param_gather);
  EXPECT_EQ(plan.model.attention_backend, "unfused");
  EXPECT_EQ(plan.hardware_path, "/presets/h200-sxm.yaml");
  row["hardware"] = "my/node.yaml";
  EXPECT_EQ(plan_row(row, kPresets).hardware_path, "my/node.yaml");
  row = llama_row();
  row["overlap_param_gather"] = "0";
  plan = plan_row(row, kPresets);
  EXPECT_TRUE(plan.options.training.overlap_grad_reduce);
  EXPECT_FALSE(plan.options.training.overlap_param_gather);
  EXPECT_FALSE(plan.options.training.overlap_moe_expert_parallel_comm);
  // Megatron-Core's combined 1F1B (a mixture of experts with ep > 1 and interleaving).
  row = deepseek_row();
  row["vpp"] = "2";
  row["overlap_moe_expert_parallel_comm"] = "1";
  plan = plan_row(row, kPresets);
  ASSERT_EQ(plan.skip_reason, "");
  EXPECT_TRUE(plan.options.training.overlap_moe_expert_parallel_comm);
  // The token dispatcher (DeepEP's or HybridEP's kernels: flex), alltoall without the column.
  EXPECT_EQ(plan.options.training.moe_token_dispatcher_type, "alltoall");
  row["moe_token_dispatcher_type"] = "flex";
  plan = plan_row(row, kPresets);
  EXPECT_EQ(plan.options.training.moe_token_dispatcher_type, "flex");
  EXPECT_NE(std::find(plan.assumptions.begin(), plan.assumptions.end(), "moe_token_dispatcher_type=flex"), plan.assumptions.end());
  // Megatron-LM's uneven first and last pipeline ranks take the place of the balanced split.
  row = llama_row();
  row["layers"] = "61";
  row["vpp"] = "";
  EXPECT_FALSE(plan_row(row, kPresets).options.pp_layout.empty());  // 61 on 4 ranks: uneven, balanced
  row["decoder_first_pipeline_num_layers"] = "15";
  row["decoder_last_pipeline_num_layers"] = "14";
  plan = plan_row(row, kPresets);
  EXPECT_EQ(plan.options.decoder_first_pipeline_num_layers, 15);
  EXPECT_EQ(plan.options.decoder_last_pipeline_num_layers, 14);
  EXPECT_TRUE(plan.options.pp_layout.empty());
}

TEST(ValidateRow, ATypoInAOneOrZeroColumnSkipsTheRow) {
  MeasuredRow row = llama_row();
  row["measured_oom"] = "0.5";
  EXPECT_EQ(plan_row(row, kPresets).skip_reason, "column 'measured_oom' is '0.5': expected 1 or 0");
  row["measured_oom"] = "False";
  EXPECT_EQ(plan_row(row, kPresets).skip_reason, "");
  row["sp"] = "yes";
  EXPECT_TRUE(plan_row(row, kPresets).options.parallelism.sp);
}

// Spellings users write, each mapped as its words say, never silently to another setting.
TEST(ValidateRow, OptimizerShardingAndRecomputeCellsInAnyCase) {
  MeasuredRow row = llama_row();
  for (const char* off : {"False", "No", "OFF", "0"}) {
    row["distributed_optimizer"] = off;
    EXPECT_FALSE(plan_row(row, kPresets).options.training.distributed_optimizer) << off;
  }
  const std::vector<std::pair<std::string, DataParallelSharding>> shardings = {
      {"FULL_SHARD", DataParallelSharding::optim_grads_params}, {"FSDP", DataParallelSharding::optim_grads_params},
      {"ZeRO-3", DataParallelSharding::optim_grads_params},      {"DeepSpeed ZeRO stage 2", DataParallelSharding::optim_grads},
      {"SHARD_GRAD_OP", DataParallelSharding::optim_grads},      {"ZeRO-1", DataParallelSharding::no_shard}};
  for (const auto& [text, sharding] : shardings) {
    row["distributed_optimizer"] = text;
    RowPlan plan = plan_row(row, kPresets);
    ASSERT_EQ(plan.skip_reason, "") << text;
    EXPECT_EQ(plan.options.training.data_parallel_sharding, sharding) << text;
    EXPECT_TRUE(plan.options.training.distributed_optimizer) << text;
  }
  row["distributed_optimizer"] = "FSDP HYBRID_SHARD";
  EXPECT_EQ(plan_row(row, kPresets).skip_reason,
            "sharding 'FSDP HYBRID_SHARD' not recognised (FSDP / FULL_SHARD, SHARD_GRAD_OP, FSDP2, megatron-fsdp "
            "(sharding group N), ZeRO-1, ZeRO-2, ZeRO-3, or the distributed optimizer's 1 / 0)");
  row = llama_row();
  row["recompute"] = "FULL";
  EXPECT_EQ(plan_row(row, kPresets).options.training.recompute, "full");
  row["recompute"] = "Selective (core_attn)";
  EXPECT_EQ(plan_row(row, kPresets).options.training.recompute_modules, (std::vector<std::string>{"core_attn"}));
  row["recompute"] = "partial";
  EXPECT_EQ(plan_row(row, kPresets).skip_reason,
            "recompute 'partial' not recognised (none, full, selective, selective (MODULE, ...), selective (op-level SAC))");
  // An MoE row without ep runs ep 1, and says so.
  row = deepseek_row();
  row["ep"] = "";
  RowPlan plan = plan_row(row, kPresets);
  EXPECT_EQ(plan.options.parallelism.ep, 1);
  EXPECT_NE(std::find(plan.assumptions.begin(), plan.assumptions.end(), "ep=1"), plan.assumptions.end());
}

TEST(ValidateRow, GpusThatTheModelParallelRanksDoNotDivideAreNamed) {
  MeasuredRow row = llama_row();  // tp 4, pp 4, cp 2: 32 ranks, dp empty
  row["num_gpus"] = "48";
  EXPECT_EQ(plan_row(row, kPresets).skip_reason, "column 'dp' is empty and tp*cp*pp=32 does not divide num_gpus=48");
}

TEST(ValidateRow, OverlapsADefaultTurnsOnAreListed) {
  // llama_row: dp 2 (64 GPUs over tp 4, pp 4, cp 2), its empty distributed_optimizer cell on for
  // DGXC: both overlaps on by default, and said so.
  RowPlan plan = plan_row(llama_row(), kPresets);
  EXPECT_TRUE(plan.options.training.overlap_grad_reduce);
  EXPECT_TRUE(plan.options.training.overlap_param_gather);
  auto listed = [&](const std::string& assumption) {
    return std::find(plan.assumptions.begin(), plan.assumptions.end(), assumption) != plan.assumptions.end();
  };
  EXPECT_TRUE(listed("overlap_grad_reduce=1"));
  EXPECT_TRUE(listed("overlap_param_gather=1"));
  MeasuredRow row = llama_row();
  row["overlap_grad_reduce"] = "1";  // given, not assumed
  row["overlap_param_gather"] = "0";
  plan = plan_row(row, kPresets);
  EXPECT_FALSE(listed("overlap_grad_reduce=1"));
  EXPECT_FALSE(listed("overlap_param_gather=1"));
  EXPECT_FALSE(plan.options.training.overlap_param_gather);
}

TEST(ValidateRow, MegatronBridgeRowsKeepTheirGradientsInBf16) {
  MeasuredRow row = llama_row();
  EXPECT_FALSE(plan_row(row, kPresets).options.training.grad_reduce_in_bf16);  // NVIDIA's other recipes: fp32
  row["source_id"] = "MB_PERF";
  RowPlan plan = plan_row(row, kPresets);
  EXPECT_TRUE(plan.options.training.grad_reduce_in_bf16);
  EXPECT_NE(std::find(plan.assumptions.begin(), plan.assumptions.end(), "grad_reduce_in_bf16=1"), plan.assumptions.end());
  row["grad_reduce_in_bf16"] = "0";
  EXPECT_FALSE(plan_row(row, kPresets).options.training.grad_reduce_in_bf16);
}

// NVIDIA's configs reduce gradients in bf16: DGX Cloud Benchmarking's NeMo configs of v24.11
// (grad_sync_dtype bf16) and NeMo 2's performance recipes from v25.04, but for v25.05's MoE runs
// in bf16; NeMo 24.07's Nemotron-4 340B launcher config.
TEST(ValidateRow, NvidiasRunsReduceGradientsInBf16WhereTheirConfigsSay) {
  MeasuredRow row = llama_row();
  row["notes"] = "dgxc-benchmarking v24.11.1 (llama3.1/README_70b.md @ 35a9aec); NeMo 24.11 container";
  RowPlan plan = plan_row(row, kPresets);
  EXPECT_TRUE(plan.options.training.grad_reduce_in_bf16);
  EXPECT_NE(std::find(plan.assumptions.begin(), plan.assumptions.end(), "grad_reduce_in_bf16=1"), plan.assumptions.end());
  row["notes"] = "dgxc-benchmarking v25.04 (llama3.1/README.md @ 741c886)";
  EXPECT_TRUE(plan_row(row, kPresets).options.training.grad_reduce_in_bf16);
  row["grad_reduce_in_bf16"] = "0";
  EXPECT_FALSE(plan_row(row, kPresets).options.training.grad_reduce_in_bf16);
  row.erase("notes");  // a DGXC row that names no release: fp32, as Megatron's default
  row.erase("grad_reduce_in_bf16");
  EXPECT_FALSE(plan_row(row, kPresets).options.training.grad_reduce_in_bf16);
  row["source_id"] = "NEMO_2407";
  EXPECT_FALSE(plan_row(row, kPresets).options.training.grad_reduce_in_bf16);
  // DeepSeek-V3's NeMo 2 recipe keeps bf16_mixed's fp32 reduction; its fp8 runs would not.
  row = deepseek_row();
  row["notes"] = "dgxc-benchmarking v25.05.01 (deepseek_v3/pretraining/README.md @ dfc8039)";
  ASSERT_EQ(plan_row(row, kPresets).skip_reason, "");
  EXPECT_FALSE(plan_row(row, kPresets).options.training.grad_reduce_in_bf16);
  row["dtype"] = "fp8";
  EXPECT_TRUE(plan_row(row, kPresets).options.training.grad_reduce_in_bf16);
}

// Transformer Engine before 2.5 has no fused attention for MLA's head dimensions on Blackwell:
// DGX Cloud Benchmarking v25.05's DeepSeek-V3 runs on GB200 ran its unfused attention; its H100
// runs, later releases and models without MLA keep the flash attention; a cell decides instead.
TEST(ValidateRow, MlaOnBlackwellBeforeTransformerEngine25RunsUnfusedAttention) {
  MeasuredRow row = deepseek_row();
  row["notes"] = "dgxc-benchmarking v25.05.01 (deepseek_v3/pretraining/README.md @ dfc8039)";
  row["gpu"] = "GB200";
  RowPlan plan = plan_row(row, kPresets);
  ASSERT_EQ(plan.skip_reason, "");
  EXPECT_EQ(plan.model.attention_backend, "unfused");
  row["attention_backend"] = "flash";
  EXPECT_EQ(plan_row(row, kPresets).model.attention_backend, "flash");
  row.erase("attention_backend");
  row["gpu"] = "H100-80GB";
  EXPECT_EQ(plan_row(row, kPresets).model.attention_backend, "flash");
  row["gpu"] = "GB200";
  row["notes"] = "dgxc-benchmarking v25.07 (deepseek_v3/pretraining/README.md)";
  EXPECT_EQ(plan_row(row, kPresets).model.attention_backend, "flash");
  row = llama_row();
  row["notes"] = "dgxc-benchmarking v25.05.01 (llama3.1/README.md @ dfc8039)";
  row["gpu"] = "GB200";
  EXPECT_EQ(plan_row(row, kPresets).model.attention_backend, "flash");
}

// NeMo 1's DistributedFusedAdam as NeMo sets it up: fp32 master weights as remainders, none
// where optim.dtype is bf16 (Nemotron-4 340B), fp32 ones with fp8 parameters (DGXC's GPT-3 175B);
// Megatron's optimizer (Grok-1's config, later releases) keeps fp32 master weights.
TEST(ValidateRow, NemoOnesRunsKeepTheOptimizerStateTheirConfigsSay) {
  auto has = [](const RowPlan& plan, const std::string& assumption) {
    return std::find(plan.assumptions.begin(), plan.assumptions.end(), assumption) != plan.assumptions.end();
  };
  MeasuredRow row = llama_row();
  row["notes"] = "dgxc-benchmarking v24.11.1 (llama3.1/README_70b.md @ 35a9aec); NeMo 24.11 container";
  RowPlan plan = plan_row(row, kPresets);
  EXPECT_TRUE(plan.options.training.store_param_remainders);
  EXPECT_EQ(plan.options.training.optimizer_state_bytes(), 10);  // 2 + 4 + 4
  EXPECT_TRUE(has(plan, "store_param_remainders=1 (NeMo 1's DistributedFusedAdam)"));
  row["dtype"] = "fp8";  // simulated with fp8 parameters: NeMo keeps fp32 master weights
  plan = plan_row(row, kPresets);
  EXPECT_TRUE(plan.options.training.fp8_param_gather);
  EXPECT_EQ(plan.options.training.optimizer_state_bytes(), 12);
  row["dtype"] = "bf16";
  row["source_id"] = "NEMO_2407";
  row.erase("notes");
  EXPECT_TRUE(plan_row(row, kPresets).options.training.store_param_remainders);
  row["model"] = "Nemotron4-340B";
  plan = plan_row(row, kPresets);
  EXPECT_FALSE(plan.options.training.store_param_remainders);
  EXPECT_EQ(plan.options.training.optimizer_state_dtype, OptimizerStateDtype::bf16);
  EXPECT_EQ(plan.options.training.optimizer_state_bytes(), 4);  // bf16 moments, no master copy
  row = gpt_row();  // DGXC's GPT-3 175B config sets fp8_params: fp32 master weights
  row["source_id"] = "DGXC";
  row["notes"] = "dgxc-benchmarking v24.11.1 (nemo_megatron/README.md @ 35a9aec)";
  EXPECT_EQ(plan_row(row, kPresets).options.training.optimizer_state_bytes(), 12);
  row = llama_row();
  row["notes"] = "dgxc-benchmarking v25.04 (llama3.1/README.md @ 741c886)";  // NeMo 2: Megatron's optimizer
  EXPECT_EQ(plan_row(row, kPresets).options.training.optimizer_state_bytes(), 12);
}

// A selective cell names Megatron's modules in parentheses; other words there are a comment.
TEST(ValidateRow, SelectiveRecomputationOfTheModulesACellNames) {
  MeasuredRow row = llama_row();
  row["recompute"] = "selective (layernorm, moe_act)";
  RowPlan plan = plan_row(row, kPresets);
  EXPECT_EQ(plan.options.training.recompute, "selective");
  EXPECT_EQ(plan.options.training.recompute_modules, (std::vector<std::string>{"layernorm", "moe_act"}));
  row["recompute"] = "selective (op-level SAC)";
  EXPECT_EQ(plan_row(row, kPresets).options.training.recompute_modules, std::vector<std::string>{"op"});
  row["recompute"] = "selective (as the recipe)";
  EXPECT_TRUE(plan_row(row, kPresets).options.training.recompute_modules.empty());  // core_attn, the default
}

TEST(ValidateRow, TpCommOverlapWhereTheNotesSayTheRunUsedIt) {
  MeasuredRow row = llama_row();  // tp 4 with sequence parallelism
  EXPECT_FALSE(plan_row(row, kPresets).options.training.tp_comm_overlap);
  row["notes"] = "--overlap-grad-reduce --overlap-param-gather --tp-comm-overlap enabled";
  RowPlan plan = plan_row(row, kPresets);
  EXPECT_TRUE(plan.options.training.tp_comm_overlap);
  EXPECT_NE(std::find(plan.assumptions.begin(), plan.assumptions.end(), "tp_comm_overlap=1 (notes)"),
            plan.assumptions.end());
  row["tp_comm_overlap"] = "0";  // a column overrides the notes
  EXPECT_FALSE(plan_row(row, kPresets).options.training.tp_comm_overlap);
  row["tp_comm_overlap"] = "";
  row["sp"] = "0";  // Megatron-LM overlaps TP communication only under sequence parallelism
  EXPECT_FALSE(plan_row(row, kPresets).options.training.tp_comm_overlap);
}

TEST(ValidateRow, GpuCellsMapToPresetsAndHardwareMapOverridesThem) {
  MeasuredRow row = llama_row();
  row["gpu"] = "GB200";
  EXPECT_EQ(plan_row(row, kPresets).hardware_path, "/presets/gb200-nvl72.yaml");
  EXPECT_EQ(plan_row(row, kPresets, {{"GB200", "b200"}}).hardware_path, "/presets/b200.yaml");
  EXPECT_EQ(plan_row(row, kPresets, {{"GB200", "racks/nvl72.yaml"}}).hardware_path, "racks/nvl72.yaml");
  row["hardware"] = "h200-sxm";  // the row's own cell wins
  EXPECT_EQ(plan_row(row, kPresets, {{"GB200", "b200"}}).hardware_path, "/presets/h200-sxm.yaml");
  row = llama_row();
  row["gpu"] = "TPU-v5p";
  EXPECT_EQ(plan_row(row, kPresets).skip_reason, "no hardware preset for gpu 'TPU-v5p'");
  EXPECT_EQ(plan_row(row, kPresets, {{"TPU-v5p", "my/tpu.yaml"}}).hardware_path, "my/tpu.yaml");
  // A map names a GPU, not one spelling of it: H100 takes the rows of every spelling of that preset.
  row = llama_row();
  row["gpu"] = "NVIDIA H100 SXM5";
  EXPECT_EQ(plan_row(row, kPresets, {{"H100", "h200-sxm"}}).hardware_path, "/presets/h200-sxm.yaml");
  EXPECT_EQ(plan_row(row, kPresets, {{"H100 NVL", "h200-sxm"}}).hardware_path, "/presets/h100-sxm-80gb.yaml");
}

// The spellings users write (docs/validation.md, "Spellings"), each to a preset or a recipe.
TEST(ValidateSpellings, GpuNamesInAnyCaseAndWithOrWithoutTheirMemory) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"H100", "h100-sxm-80gb"},       {"h100 sxm5 80GB", "h100-sxm-80gb"}, {"NVIDIA H100-80GB", "h100-sxm-80gb"},
      {"A100", "a100-sxm-80gb"},       {"A100-40GB", "a100-sxm-40gb"},      {"a100_sxm4_40gb", "a100-sxm-40gb"},
      {"H200", "h200-sxm"},            {"H800", "h800-sxm"},                {"GH200", "gh200"},
      {"B200", "b200"},                {"B300", "b300"},                    {"GB200 NVL72", "gb200-nvl72"},
      {"gb300", "gb300-nvl72"},        {"H100 NVL", "h100-nvl"},            {"AMD MI300X", "mi300x"}};
  for (const auto& [gpu, preset] : cases) EXPECT_EQ(preset_of_gpu(gpu).value_or("none"), preset) << gpu;
  for (const char* unknown : {"TPU-v5p", "H100-40GB", "B100", ""}) EXPECT_FALSE(preset_of_gpu(unknown)) << unknown;
}

TEST(ValidateSpellings, PrecisionsAndTheirRecipes) {
  auto recipe_of = [](const std::string& dtype) {
    std::optional<Precision> p = precision_of(dtype);
    return p ? p->dtype + "/" + p->recipe.value_or("-") : std::string("none");
  };
  EXPECT_EQ(recipe_of("bf16"), "bf16/-");
  EXPECT_EQ(recipe_of("BF16-mixed"), "bf16/-");
  EXPECT_EQ(recipe_of("fp16"), "fp16/-");
  EXPECT_EQ(recipe_of("fp16/bf16 mixed (16-bit)"), "bf16/-");
  EXPECT_EQ(recipe_of("bf16 (amp_bf16, DEFAULT)"), "bf16/-");
  EXPECT_EQ(recipe_of("fp8"), "fp8/-");
  EXPECT_EQ(recipe_of("fp8-cs"), "fp8/current");
  EXPECT_EQ(recipe_of("FP8 current scaling"), "fp8/current");
  EXPECT_EQ(recipe_of("fp8 delayed scaling"), "fp8/delayed");
  EXPECT_EQ(recipe_of("fp8-mx"), "fp8/mxfp8");
  EXPECT_EQ(recipe_of("MXFP8"), "fp8/mxfp8");
  EXPECT_EQ(recipe_of("nvfp4"), "fp4/nvfp4");
  EXPECT_EQ(recipe_of("fp8 tensorwise"), "fp8/current");  // torchao's labels, as torchtitan's tables
  EXPECT_EQ(recipe_of("fp8 rowwise"), "fp8/rowwise");
  EXPECT_EQ(recipe_of("int8"), "none");
}

// A row spelled another way is simulated as the table's spelling would be, and says what it took.
TEST(ValidateRow, SpelledGpusAndPrecisionsAreListedAmongTheAssumptions) {
  MeasuredRow row = llama_row();
  row["gpu"] = "h100 sxm";
  row["dtype"] = "MXFP8";
  RowPlan plan = plan_row(row, kPresets);
  ASSERT_EQ(plan.skip_reason, "");
  EXPECT_EQ(plan.hardware_path, "/presets/h100-sxm-80gb.yaml");
  EXPECT_EQ(plan.options.training.dtype, "fp8");
  EXPECT_EQ(plan.options.training.fp8_recipe, "mxfp8");
  for (const char* assumption : {"hardware=h100-sxm-80gb", "fp8_recipe=mxfp8", "fp8_param_gather=0"})
    EXPECT_NE(std::find(plan.assumptions.begin(), plan.assumptions.end(), assumption), plan.assumptions.end())
        << assumption;
  row["dtype"] = "int8";
  EXPECT_EQ(plan_row(row, kPresets).skip_reason,
            "dtype 'int8' not recognised (bf16, fp16, fp8, fp8-cs / current scaling, fp8-ds / delayed scaling, "
            "fp8-mx / mxfp8, nvfp4, fp8 tensorwise, fp8 rowwise)");
}

TEST(ValidateRow, HardwareMapAssignmentsNeedAGpuAndAPreset) {
  EXPECT_EQ(parse_hardware_map({"GB200=gb200-nvl72", "H100-80GB=h100.yaml"}),
            (std::map<std::string, std::string>{{"GB200", "gb200-nvl72"}, {"H100-80GB", "h100.yaml"}}));
  // One gpu mapped twice, in any of the spellings a cell is read in: which one would be meant?
  EXPECT_THROW(parse_hardware_map({"GB200=b200", "gb200=gb200-nvl72"}), UsageError);
  for (const char* bad : {"GB200", "=b200", "GB200="}) {
    try {
      parse_hardware_map({bad});
      FAIL() << bad;
    } catch (const UsageError& e) {
      EXPECT_EQ(std::string(e.what()), std::string("--hardware-map=") + bad + ": expected GPU=PRESET_OR_YAML");
    }
  }
}

TEST(ValidateRow, MeasuredOomColumnSaysTheRunFailed) {
  std::string csv =
      "source_id,model,layers,hidden,ffn_hidden,heads,kv_heads,vocab,seq_length,gpu,num_gpus,tp,pp,micro_batch,"
      "global_batch,dtype,measured_step_s,measured_oom\n"
      "T,Llama-tiny,2,256,512,4,4,1024,128,H100-80GB,2,2,1,1,8,bf16,,1\n"
      "T,Llama-tiny,2,256,512,4,4,1024,128,H100-80GB,2,2,1,1,8,bf16,0.5,0\n"
      "T,Llama-tiny,2,256,512,4,4,1024,128,H100-80GB,2,2,1,1,8,bf16,0.5,1\n";
  ValidationResult result = validate_measured(csv, "t.csv", {std::string(SYSSIM_SOURCE_DIR) + "/configs/hardware", {}});
  ASSERT_EQ(result.rows.size(), 3u);
  EXPECT_TRUE(result.rows[0].measured_oom);
  EXPECT_FALSE(result.rows[1].measured_oom);
  EXPECT_FALSE(result.rows[0].predicted_oom);  // a tiny model: the first row is an OOM mismatch
  // A run out of memory with a step time is a contradiction: skipped, naming the column.
  EXPECT_EQ(result.rows[2].skip_reason,
            "measured_oom is 1, but column 'measured_step_s' holds a measurement: a run that ran out of memory has no "
            "step time");
}

TEST(ValidateRow, NemotronIsNemosSquaredReluModel) {
  MeasuredRow row = llama_row();
  row["model"] = "Nemotron4-15B";
  row["layers"] = "32";
  row["hidden"] = "6144";
  row["ffn_hidden"] = "24576";
  row["heads"] = "48";
  row["vocab"] = "";
  row["seq_length"] = "4096";
  row["pp"] = "1";
  row["vpp"] = "";
  row["cp"] = "1";
  row["num_gpus"] = "16";
  RowPlan plan = plan_row(row, kPresets);
  ASSERT_EQ(plan.skip_reason, "");
  const ModelConfig& m = plan.model;
  EXPECT_FALSE(m.swiglu);
  EXPECT_EQ(m.activation, "squared_relu");
  EXPECT_TRUE(m.rope);
  EXPECT_EQ(m.normalization, "LayerNorm");
  EXPECT_FALSE(m.add_bias_linear);
  EXPECT_FALSE(m.tie_word_embeddings);
  EXPECT_EQ(m.hidden_dropout, 0);
  EXPECT_EQ(m.num_query_groups, 8);
  EXPECT_EQ(m.vocab_size, 256000);
  EXPECT_NE(std::find(plan.assumptions.begin(), plan.assumptions.end(), "vocab=256000 (NeMo's Nemotron NullTokenizer)"),
            plan.assumptions.end());
  row["model"] = "Nemotron3-8B";  // Nemotron-3 is the same architecture
  EXPECT_EQ(plan_row(row, kPresets).model.activation, "squared_relu");
}

TEST(ValidateRow, LayersThePipelineDoesNotDivideCountTheEmbeddingAndLoss) {
  MeasuredRow row = llama_row();  // Llama-3.1-405B, pp 8 vpp 8 as the DGXC recipe
  row["layers"] = "126";
  row["pp"] = "8";
  row["vpp"] = "8";
  row["num_gpus"] = "128";
  RowPlan plan = plan_row(row, kPresets);
  ASSERT_EQ(plan.skip_reason, "");
  EXPECT_TRUE(plan.options.account_for_embedding_in_pipeline_split);
  EXPECT_TRUE(plan.options.account_for_loss_in_pipeline_split);
  EXPECT_NE(std::find(plan.assumptions.begin(), plan.assumptions.end(), "embedding and loss counted as pipeline layers"),
            plan.assumptions.end());
  row["pp"] = "9";  // the older pp 9 vpp 7 recipe: 63 virtual stages of 2 layers
  row["vpp"] = "7";
  row["num_gpus"] = "144";
  plan = plan_row(row, kPresets);
  EXPECT_FALSE(plan.options.account_for_embedding_in_pipeline_split);
  EXPECT_FALSE(plan.options.account_for_loss_in_pipeline_split);
}

TEST(ValidateRow, BloomIsMegatronDeepSpeedOf2022) {
  RowPlan plan = plan_row(bloom_row(), kPresets);
  ASSERT_EQ(plan.skip_reason, "");
  EXPECT_EQ(plan.measured_from, "measured_step_s");
  EXPECT_DOUBLE_EQ(plan.measured_step_s, 104.70);
  // 70 layers and the two tied embeddings as 72 blocks on 12 stages: 5, 6 x 10, 5.
  EXPECT_TRUE(plan.options.account_for_embedding_in_pipeline_split);
  EXPECT_TRUE(plan.options.account_for_loss_in_pipeline_split);
  EXPECT_FALSE(plan.options.parallelism.sp);  // before sequence parallelism
  EXPECT_TRUE(plan.options.training.distributed_optimizer);  // ZeRO-1, as the row says
  EXPECT_FALSE(plan.options.training.overlap_grad_reduce);   // DeepSpeed's pipeline engine reduces at the end
  EXPECT_EQ(plan.model.vocab_size, 250880);
}

// BLOOM's pipeline (pp 12, full recompute, 128 micro-batches) on a DGX A100 fabric and on the
// Jean Zay nodes its row names: its state repeats from micro-batch 12 to 13, and the step
// extrapolated from there is the one of simulating every micro-batch, to rounding (both sides
// are the simulator's: this checks the jump, not the step; docs/syssim-sim.md, "Extrapolated
// micro-batches").
TEST(ValidateRow, BloomsPipelineIsExtrapolatedToItsFullSimulation) {
  RowPlan plan = plan_row(bloom_row(), kPresets);
  for (const char* hardware : {"a100-sxm-80gb", "jean-zay-a100"}) {
    SCOPED_TRACE(hardware);
    const CostEstimator estimator(
        load_hardware_yaml(std::string(SYSSIM_SOURCE_DIR) + "/configs/hardware/" + hardware + ".yaml"));
    SimOptions every_microbatch;
    every_microbatch.extrapolate_microbatches = false;
    Graph full = simulate(plan.model, trace_of(plan.model), estimator, plan.options, every_microbatch);
    Graph graph = full;
    graph.sim.reset();
    EXPECT_TRUE(simulate_graph(graph).extrapolated);
    EXPECT_NEAR(graph.sim->step_time_ms, full.sim->step_time_ms, 1e-9 * full.sim->step_time_ms);
  }
}

TEST(ValidateStepTime, NarayananRowFromItsTflopsByEquation3) {
  RowPlan plan = plan_row(narayanan_row(), kPresets);
  ASSERT_EQ(plan.skip_reason, "");
  EXPECT_EQ(plan.measured_from, "measured_tflops_per_gpu");
  // 96 B s l h^2 (1 + s/6h + V/16lh), B 512, s 2048, l 24, h 2304, V 51200:
  // 96*512*2048*24*2304^2 = 12,824,703,626,379,264 times 1 + 2048/13824 + 51200/884736 = 1.2060185
  // is 1.54668e16 FLOPs; over 32 GPUs at 137 TFLOP/s: 3.52802 s.
  EXPECT_NEAR(plan.measured_step_s, 3.52802, 1e-5);
  EXPECT_NE(std::find(plan.assumptions.begin(), plan.assumptions.end(),
                      "measured_step_s from measured_tflops_per_gpu (Narayanan et al. 2021 eq. 3)"),
            plan.assumptions.end());
  // Megatron-LM of 2021: no sequence parallelism, no distributed optimizer, no overlap.
  EXPECT_EQ(plan.options.training.micro_batch, 1);
  EXPECT_FALSE(plan.options.training.distributed_optimizer);
  EXPECT_FALSE(plan.options.training.overlap_grad_reduce);
}

TEST(ValidateStepTime, BloomTflopsGiveBackItsLoggedStepTime) {
  // Megatron-DeepSpeed's TFLOP/s use the same formula: without the logged 104.70 s, the
  // 149.77 TFLOP/s on 384 GPUs give 6.0212e18 FLOPs / 5.7512e16 FLOP/s = 104.695 s.
  MeasuredRow row = bloom_row();
  row["measured_step_s"] = "";
  RowPlan plan = plan_row(row, kPresets);
  ASSERT_EQ(plan.skip_reason, "");
  EXPECT_EQ(plan.measured_from, "measured_tflops_per_gpu");
  EXPECT_LT(std::fabs(plan.measured_step_s - 104.70) / 104.70, 1e-3);
}

TEST(ValidateStepTime, MfuRowsUseTheSourcesPeakAndModelFlops) {
  // Korthikanti et al. 2022 model FLOPs 72 B s l h^2 (1 + s/6h + V/12lh) at the A100's 312 TFLOP/s:
  // the 22B row (B 4, s 2048, l 48, h 6144, V 51200, 8 GPUs) at its 41.5% MFU.
  MeasuredRow row = gpt_row();
  row["source_id"] = "KORTHIKANTI22";
  row["layers"] = "48";
  row["hidden"] = "6144";
  row["heads"] = "64";
  row["vocab"] = "51200";
  row["seq_length"] = "2048";
  row["num_gpus"] = "8";
  row["pp"] = "1";
  row["micro_batch"] = row["global_batch"] = "4";
  row["measured_step_s"] = "";
  row["measured_mfu"] = "0.415";
  RowPlan plan = plan_row(row, kPresets);
  ASSERT_EQ(plan.skip_reason, "");
  EXPECT_EQ(plan.measured_from, "measured_mfu");
  // 72*4*2048*48*6144^2 = 1.068725e15 times 1 + 2048/36864 + 51200/3538944 = 1.070023 is
  // 1.143561e15 FLOPs; over 8 x 0.415 x 312 TFLOP/s: 1.10399 s (the paper's Table 5: 1.10 s).
  EXPECT_NEAR(plan.measured_step_s, 1.10399, 1e-5);
  row["source_id"] = "SOMEONE";
  EXPECT_EQ(plan_row(row, kPresets).skip_reason,
            "no measured step time, and the FLOP formula of source 'SOMEONE' is not known");
}

// torchtitan's June 2025 async-TP table: Llama 3.1 8B on 64 H100 (FSDP 8, TP 8, local batch
// 12), tokens/s per GPU only, no sequence length.
MeasuredRow torchtitan_row() {
  MeasuredRow row = llama_row();
  row["source_id"] = "TORCHTITAN";
  row["model"] = "Llama3.1-8B";
  row["layers"] = "32";
  row["hidden"] = "4096";
  row["ffn_hidden"] = "14336";
  row["heads"] = "32";
  row["seq_length"] = row["measured_step_s"] = row["vpp"] = "";
  row["gpu"] = "H100-96GB-HBM2e-500W";
  row["tp"] = "8";
  row["pp"] = row["cp"] = "1";
  row["dp"] = "8";
  row["micro_batch"] = "12";
  row["global_batch"] = "96";
  row["recompute"] = "selective (per-op SAC)";
  row["distributed_optimizer"] = "FSDP2 (fully sharded)";
  row["measured_tokens_per_s_per_gpu"] = "4378";
  row["notes"] = "FSDP8 TP8 torch.compile, vanilla TP";
  return row;
}

TEST(ValidateStepTime, TokensPerSecondGiveTheStepOfTheGlobalBatch) {
  RowPlan plan = plan_row(torchtitan_row(), kPresets);
  ASSERT_EQ(plan.skip_reason, "");
  // The sequence of torchtitan's llama3_8b.toml, which the table does not restate.
  EXPECT_EQ(plan.options.training.seq_length, 8192);
  EXPECT_EQ(plan.model.seq_length, 8192);
  EXPECT_NE(std::find(plan.assumptions.begin(), plan.assumptions.end(), "seq_length=8192"), plan.assumptions.end());
  // 96 x 8192 tokens per step over 64 GPUs at 4378 tokens/s each: 786,432 / 280,192 = 2.80676 s.
  EXPECT_EQ(plan.measured_from, "measured_tokens_per_s_per_gpu");
  EXPECT_NEAR(plan.measured_step_s, 2.80676, 1e-5);
  EXPECT_FALSE(plan.options.training.tp_comm_overlap);
  // Async TP overlaps the TP collectives with their GEMMs.
  MeasuredRow async = torchtitan_row();
  async["notes"] = "FSDP8 TP8 torch.compile, async TP";
  EXPECT_TRUE(plan_row(async, kPresets).options.training.tp_comm_overlap);
  // torchao's float8: tensorwise is current scaling, rowwise its own recipe; torchtitan gathers
  // 16-bit weights (float8.enable_fsdp_float8_all_gather off by default).
  for (const auto& [dtype, recipe] : {std::pair{"fp8 tensorwise", "current"}, {"fp8 rowwise", "rowwise"}}) {
    MeasuredRow fp8 = torchtitan_row();
    fp8["dtype"] = dtype;
    RowPlan p = plan_row(fp8, kPresets);
    ASSERT_EQ(p.skip_reason, "") << dtype;
    EXPECT_EQ(p.options.training.fp8_recipe, recipe);
    EXPECT_FALSE(p.options.training.fp8_param_gather) << dtype;
  }
  // Its memory, in GiB as torchtitan logs it: 82.4 x 2^30 bytes = 88.477 GB.
  MeasuredRow memory = torchtitan_row();
  memory["measured_peak_mem_gb"] = "82.4";
  memory["notes"] += "; memory = max across GPUs, unit GiB as reported";
  EXPECT_NEAR(*plan_row(memory, kPresets).measured_peak_mem_gb, 88.4763, 1e-4);
  memory["notes"] = "";
  EXPECT_DOUBLE_EQ(*plan_row(memory, kPresets).measured_peak_mem_gb, 82.4);
  // Another source states its sequence, or the row is skipped.
  MeasuredRow other = torchtitan_row();
  other["source_id"] = "SOMEONE";
  EXPECT_EQ(plan_row(other, kPresets).skip_reason, "column 'seq_length' is empty");
}

TEST(ValidateRow, ComposersPurePolicyReducesGradientsInBf16) {
  // Composer's FSDP labels its mixed precision DEFAULT (gradients reduced in fp32) or PURE
  // (in the 16-bit dtype: --grad-reduce-in-bf16).
  MeasuredRow row = llama_row();
  row["source_id"] = "MOSAIC_LLMFOUNDRY";
  row["tp"] = row["pp"] = row["cp"] = "1";
  row["vpp"] = "";
  row["distributed_optimizer"] = "FSDP FULL_SHARD (ZeRO-3)";
  row["dtype"] = "bf16 (amp_bf16, DEFAULT)";
  EXPECT_FALSE(plan_row(row, kPresets).options.training.grad_reduce_in_bf16);
  row["dtype"] = "bf16 (amp_bf16, PURE)";
  RowPlan pure = plan_row(row, kPresets);
  ASSERT_EQ(pure.skip_reason, "");
  EXPECT_TRUE(pure.options.training.grad_reduce_in_bf16);
  EXPECT_NE(std::find(pure.assumptions.begin(), pure.assumptions.end(), "grad_reduce_in_bf16=1"), pure.assumptions.end());
}

TEST(ValidateRow, ShardingGroupsSmallerThanTheDataParallelRanksAreHybridSharding) {
  // Megatron-FSDP over 16 data-parallel ranks (dp 8 x cp 2) in groups of 8: 2 replicas.
  MeasuredRow row = llama_row();
  row["source_id"] = "MB_PERF";
  row["tp"] = row["pp"] = "1";
  row["vpp"] = "";
  row["cp"] = "2";
  row["num_gpus"] = row["global_batch"] = "16";
  row["distributed_optimizer"] = "megatron-fsdp (sharding group 16)";
  RowPlan whole = plan_row(row, kPresets);
  ASSERT_EQ(whole.skip_reason, "");
  EXPECT_EQ(whole.options.parallelism.dp, 8);
  EXPECT_EQ(whole.options.parallelism.dp_replicate, 1);
  row["distributed_optimizer"] = "megatron-fsdp (sharding group 8)";
  RowPlan hybrid = plan_row(row, kPresets);
  ASSERT_EQ(hybrid.skip_reason, "");
  EXPECT_EQ(hybrid.options.parallelism.dp_replicate, 2);
  EXPECT_NE(std::find(hybrid.assumptions.begin(), hybrid.assumptions.end(), "dp_replicate=2"), hybrid.assumptions.end());
  // A group that splits the context-parallel ranks, or that does not divide them, is no layout.
  for (const char* group : {"3", "1", "eight"}) {
    row["distributed_optimizer"] = std::string("megatron-fsdp (sharding group ") + group + ")";
    EXPECT_EQ(plan_row(row, kPresets).skip_reason,
              std::string("sharding group '") + group +
                  "' does not split the 16 data-parallel ranks (dp x cp) into whole groups of cp ranks");
  }
}

TEST(ValidateRow, APresetModelMustAgreeWithTheRowsArchitectureCells) {
  // Qwen3-30B-A3B: 48 layers, hidden 2048, 32 heads, 4 KV heads, vocabulary 151,936, routed
  // experts 768 wide (the ffn_hidden cell of a mixture of experts, the table's README); an
  // empty cell is not compared.
  MeasuredRow row = llama_row();
  row["model"] = "Qwen3-30B-A3B";
  row["layers"] = "48", row["hidden"] = "2048", row["heads"] = "32";
  row["kv_heads"] = row["vocab"] = row["ffn_hidden"] = "";
  ASSERT_EQ(plan_row(row, kPresets).skip_reason, "");
  for (const auto& [column, value, has] : {std::tuple{"kv_heads", "8", "4"}, {"vocab", "151000", "151936"}, {"ffn_hidden", "6144", "768"}}) {
    MeasuredRow wrong = row;
    wrong[column] = value;
    EXPECT_EQ(plan_row(wrong, kPresets).skip_reason,
              std::string("column '") + column + "' is " + value + " but model qwen3-30b-a3b has " + has);
  }
  row["kv_heads"] = "4", row["vocab"] = "151936", row["ffn_hidden"] = "768";
  EXPECT_EQ(plan_row(row, kPresets).skip_reason, "");
}

TEST(ValidateRow, SkipReasonsSayWhatIsMissing) {
  auto reason = [](const std::string& column, const std::string& value) {
    MeasuredRow row = llama_row();
    row[column] = value;
    return plan_row(row, kPresets).skip_reason;
  };
  EXPECT_EQ(reason("dtype", "int8"), "dtype 'int8' not recognised (bf16, fp16, fp8, fp8-cs / current scaling, fp8-ds / delayed scaling, "
            "fp8-mx / mxfp8, nvfp4, fp8 tensorwise, fp8 rowwise)");
  EXPECT_EQ(reason("model", "Grok-1"), "column 'layers' is 80 but model grok-1 has 64");
  EXPECT_EQ(reason("model", "Unknown-2"),
            "no architecture known for model 'Unknown-2' (give a model_config column: a preset, a model YAML or a "
            "Hugging Face id)");
  EXPECT_EQ(reason("measured_step_s", ""), "no measured step time");
  EXPECT_EQ(reason("global_batch", ""), "column 'global_batch' is empty");
  EXPECT_EQ(reason("tp", ""), "column 'tp' is empty");
  EXPECT_EQ(reason("tp", "four"), "column 'tp': expected an integer, got 'four'");
  // Parallel sizes are 1 to 2^20 (pp 0 once divided the layers by zero); other integers below
  // 2^30, so that no product of two overflows.
  EXPECT_EQ(reason("pp", "0"), "column 'pp': expected 1 to 1048576, got '0'");
  EXPECT_EQ(reason("num_gpus", "2097152"), "column 'num_gpus': expected 1 to 1048576, got '2097152'");
  EXPECT_EQ(reason("hidden", "4294967296"), "column 'hidden': expected an integer below 2^30, got '4294967296'");
  // A measurement is a positive, finite number written in decimal: nothing else gives an error
  // to report.
  for (const std::string column : {"measured_step_s", "measured_peak_mem_gb"}) {
    for (const char* bad : {"0", "-14.72"})
      EXPECT_EQ(reason(column, bad), "column '" + column + "': expected a positive number, got '" + bad + "'");
    for (const char* bad : {"nan", "inf", "0x10", " 2.0"})
      EXPECT_EQ(reason(column, bad), "column '" + column + "': expected a number, got '" + bad + "'");
  }
  MeasuredRow from_mfu = llama_row();
  from_mfu["measured_step_s"] = "";
  from_mfu["measured_mfu"] = "-0.4";
  EXPECT_EQ(plan_row(from_mfu, kPresets).skip_reason, "column 'measured_mfu': expected a positive number, got '-0.4'");
}

// A hardware folder or preset the user names must exist: a typo would otherwise skip every row.
TEST(ValidateRun, NamedHardwareThatDoesNotExistIsBadUsage) {
  const std::string csv = "source_id,model,layers,hidden,ffn_hidden,heads,kv_heads,vocab,seq_length,gpu,num_gpus,tp,pp,"
                          "micro_batch,global_batch,dtype,measured_step_s\n";
  auto error_of = [&](const ValidateOptions& options) -> std::string {
    try {
      validate_measured(csv, "t.csv", options);
    } catch (const UsageError& e) {
      return e.what();
    }
    return "no error";
  };
  const std::string presets = std::string(SYSSIM_SOURCE_DIR) + "/configs/hardware";
  EXPECT_EQ(error_of({"/no/such/folder", {}}), "--hardware-dir=/no/such/folder: no such folder");
  EXPECT_EQ(error_of({presets, {{"GB200", "b201"}}}), "--hardware-map=GB200=b201: no such file " + presets + "/b201.yaml");
  EXPECT_EQ(error_of({presets, {{"GB200", "racks/nvl72.yaml"}}}),
            "--hardware-map=GB200=racks/nvl72.yaml: no such file racks/nvl72.yaml");
  EXPECT_EQ(error_of({presets, {{"GB200", "b200"}}}), "no error");
  // A gpu no row has is a warning: the map probably misspells it.
  const std::string row = "S,Llama3-8B,32,4096,14336,32,8,128256,8192,GB200,8,1,1,1,8,bf16,1.0\n";
  EXPECT_EQ(validate_measured(csv + row, "t.csv", {presets, {{"GB-200", "b200"}}}).warnings,
            std::vector<std::string>{"--hardware-map=GB-200=b200: no row of t.csv has gpu 'GB-200'"});
  EXPECT_TRUE(validate_measured(csv + row, "t.csv", {presets, {{"GB200", "b200"}}}).warnings.empty());
}

TEST(ValidateStats, PercentilesInterpolateBetweenRanks) {
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 0.5), 2.5);
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 0.9), 3.7);  // position 2.7: 3 + 0.7 * (4 - 3)
  EXPECT_DOUBLE_EQ(percentile({7}, 0.9), 7);
  EXPECT_THROW(percentile({}, 0.5), DataError);
}

TEST(ValidateStats, PerSourceThenAllOfTheAbsoluteErrors) {
  auto row = [](const std::string& source, double error, const std::string& skip = "") {
    RowResult r;
    r.source_id = source;
    r.step_error_pct = error;
    r.skip_reason = skip;
    return r;
  };
  std::vector<ErrorStats> stats = step_error_stats(
      {row("B", -10), row("A", 5), row("B", 20), row("B", -30), row("A", 99, "dtype 'int8' not recognised")});
  ASSERT_EQ(stats.size(), 3u);
  EXPECT_EQ(stats[0].group, "A");
  EXPECT_EQ(stats[0].rows, 1);
  EXPECT_DOUBLE_EQ(stats[0].max, 5);
  EXPECT_EQ(stats[1].group, "B");  // |errors| 10, 20, 30
  EXPECT_DOUBLE_EQ(stats[1].median, 20);
  EXPECT_DOUBLE_EQ(stats[1].p90, 28);  // position 1.8: 20 + 0.8 * 10
  EXPECT_DOUBLE_EQ(stats[1].max, 30);
  EXPECT_EQ(stats[2].group, "all");  // 5, 10, 20, 30
  EXPECT_EQ(stats[2].rows, 4);
  EXPECT_DOUBLE_EQ(stats[2].median, 15);
  EXPECT_DOUBLE_EQ(stats[2].p90, 27);  // position 2.7: 20 + 0.7 * 10
}

TEST(ValidateRun, ColumnNamesInAnyCaseWithSpacesAroundNamesAndCells) {
  std::string csv =
      "Source_ID, model, layers, hidden, ffn_hidden, heads, kv_heads, vocab, seq_length, GPU, num_gpus, tp, pp,"
      " micro_batch, global_batch, dtype, measured_step_s\n"
      "T, Llama-tiny, 2, 256, 512, 4, 4, 1024, 128, H100-80GB, 2, 2, 1, 1, 8, bf16, 0.5 \n";
  ValidationResult result = validate_measured(csv, "t.csv", {std::string(SYSSIM_SOURCE_DIR) + "/configs/hardware", {}});
  ASSERT_EQ(result.rows.size(), 1u);
  EXPECT_TRUE(result.rows[0].expressed()) << result.rows[0].skip_reason;
  EXPECT_EQ(result.rows[0].measured_step_s, 0.5);
  try {
    validate_measured("gpu,GPU\nH100,H100\n", "t.csv", {std::string(SYSSIM_SOURCE_DIR) + "/configs/hardware", {}});
    FAIL();
  } catch (const DataError& e) {
    EXPECT_STREQ(e.what(), "t.csv:1: fields 1 and 2 both name column 'gpu'");
  }
}

// The summary's columns grow with their values: an error of 1e31 % still leaves spaces
// between the median, p90 and max, and between the band's bounds.
TEST(ValidateRun, SummaryColumnsWidenForWideValues) {
  std::string csv =
      "source_id,model,layers,hidden,ffn_hidden,heads,kv_heads,vocab,seq_length,gpu,num_gpus,tp,pp,micro_batch,"
      "global_batch,dtype,measured_step_s\n";
  for (const char* measured : {"0.000001", "0.5", "1e30"})
    csv += std::string("ME,Llama-tiny,2,256,512,4,4,1024,128,H100-80GB,2,2,1,1,8,bf16,") + measured + "\n";
  ValidationResult result = validate_measured(csv, "t.csv", {std::string(SYSSIM_SOURCE_DIR) + "/configs/hardware", {}});
  const std::string table = render_validation(result, "table");
  std::istringstream lines(table);
  bool found = false;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("    ME ", 0) != 0) continue;
    std::istringstream fields(line);
    std::vector<std::string> words{std::istream_iterator<std::string>(fields), std::istream_iterator<std::string>()};
    EXPECT_EQ(words.size(), 5u) << line;  // group, rows, median, p90, max
    found = true;
  }
  EXPECT_TRUE(found) << table;
}

TEST(ValidateRun, SimulatesExpressedRowsAndExplainsTheRest) {
  std::string csv =
      "source_id,model,layers,hidden,ffn_hidden,heads,kv_heads,vocab,seq_length,gpu,num_gpus,tp,pp,micro_batch,"
      "global_batch,dtype,measured_step_s,colour,notes\n"
      "T,Llama-tiny,2,256,512,4,4,1024,128,H100-80GB,2,2,1,1,8,bf16,0.5,red,\"a, b\"\n"
      "T,Llama-tiny,2,256,512,4,4,1024,128,H100-80GB,3,3,1,1,8,bf16,0.5,red,heads 4 not divisible by tp 3\n"
      "T,Llama-tiny,2,256,512,4,4,1024,128,H100-80GB,2,2,1,1,8,int8,0.5,red,\n";
  ValidationResult result = validate_measured(csv, "t.csv", {std::string(SYSSIM_SOURCE_DIR) + "/configs/hardware", {}});
  EXPECT_EQ(result.warnings, (std::vector<std::string>{"t.csv: ignoring unknown columns: colour"}));
  ASSERT_EQ(result.rows.size(), 3u);
  const RowResult& simulated = result.rows[0];
  ASSERT_TRUE(simulated.expressed()) << simulated.skip_reason;
  EXPECT_EQ(simulated.layout, "tp2+sp pp1 dp1 mbs1 gbs8");
  EXPECT_EQ(simulated.measured_from, "measured_step_s");
  EXPECT_GT(simulated.predicted_step_s, 0);
  EXPECT_DOUBLE_EQ(simulated.step_error_pct, (simulated.predicted_step_s - 0.5) / 0.5 * 100);
  EXPECT_FALSE(simulated.predicted_oom);
  EXPECT_FALSE(result.rows[1].expressed());  // the library's own one-line refusal
  EXPECT_NE(result.rows[1].skip_reason.find("tp=3"), std::string::npos) << result.rows[1].skip_reason;
  EXPECT_EQ(result.rows[2].skip_reason, "dtype 'int8' not recognised (bf16, fp16, fp8, fp8-cs / current scaling, fp8-ds / delayed scaling, "
            "fp8-mx / mxfp8, nvfp4, fp8 tensorwise, fp8 rowwise)");
  EXPECT_EQ(result.rows[2].line, 4);
}

// The shard stage's split of the decoder layers over virtual pipeline stages when the embedding
// and the loss count as layers (Megatron-LM's account_for_embedding/loss_in_pipeline_split),
// which validate uses for the layer counts pp*vpp does not divide. Layer counts by hand.
class PipelineSplit : public ::testing::Test {
 protected:
  static std::vector<int64_t> layout(int64_t layers, int64_t pp, std::optional<int64_t> vpp, bool embedding,
                                     bool loss) {
    Graph graph;
    graph.model = testing::dense_model("tiny", layers, 64, 4, 4, 128, 64, 256);
    graph.trace = trace_of(*graph.model);
    ShardOptions options;
    options.parallelism.pp = pp;
    options.parallelism.vpp = vpp;
    options.training.global_batch = pp;  // one micro-batch per stage
    options.account_for_embedding_in_pipeline_split = embedding;
    options.account_for_loss_in_pipeline_split = loss;
    shard_graph(graph, options);
    return graph.shard->pp_layout;
  }
  static std::vector<int64_t> stages(std::vector<std::pair<int64_t, int64_t>> runs) {  // (count, layers)
    std::vector<int64_t> out;
    for (auto [count, layers] : runs) out.insert(out.end(), count, layers);
    return out;
  }
};

TEST_F(PipelineSplit, Llama405bOnSixtyFourVirtualStages) {
  // 126 + 2 = 128 counted layers, 2 per virtual stage; the embedding's and the loss's stages
  // build one decoder layer each: 1 + 62 * 2 + 1 = 126.
  EXPECT_EQ(layout(126, 16, 4, true, true), stages({{1, 1}, {62, 2}, {1, 1}}));
  EXPECT_EQ(layout(126, 8, 8, true, true), stages({{1, 1}, {62, 2}, {1, 1}}));
  // pp 16 alone: 128 / 16 = 8 per rank, 7 on the first and the last.
  EXPECT_EQ(layout(126, 16, std::nullopt, true, true), stages({{1, 7}, {14, 8}, {1, 7}}));
}

TEST_F(PipelineSplit, BloomSeventyLayersOnTwelveStages) {
  EXPECT_EQ(layout(70, 12, std::nullopt, true, true), stages({{1, 5}, {10, 6}, {1, 5}}));
}

TEST_F(PipelineSplit, EmbeddingOrLossAlone) {
  EXPECT_EQ(layout(31, 4, std::nullopt, true, false), (std::vector<int64_t>{7, 8, 8, 8}));
  EXPECT_EQ(layout(31, 4, std::nullopt, false, true), (std::vector<int64_t>{8, 8, 8, 7}));
}

TEST_F(PipelineSplit, CountedLayersMustDivideAndExcludeExplicitLayouts) {
  try {  // the older 405B recipe: 128 counted layers on 9 x 7 = 63 virtual stages
    layout(126, 9, 7, true, true);
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_STREQ(e.what(),
                 "pp*vpp=63 does not divide num_layers=126 plus 2 for the embedding and loss (128)");
  }
  Graph graph;
  graph.model = testing::dense_model("tiny", 8, 64, 4, 4, 128, 64, 256);
  graph.trace = trace_of(*graph.model);
  ShardOptions options;
  options.parallelism.pp = 2;
  options.training.global_batch = 2;
  options.account_for_embedding_in_pipeline_split = true;
  options.pp_layout = {4, 4};
  EXPECT_THROW(shard_graph(graph, options), UsageError);
}

}  // namespace
}  // namespace syssim
