// `syssim validate`: CSV parsing, how a measured row becomes a simulated job, why rows are
// skipped, and the error statistics (hand-made numbers).
#include <gtest/gtest.h>

#include "common/error.hpp"
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
  EXPECT_EQ(plan.assumptions, (std::vector<std::string>{"ffn_hidden=4*hidden", "vocab=50257 (GPT-2 BPE, padded)"}));
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
}

TEST(ValidateRow, SkipReasonsSayWhatIsMissing) {
  auto reason = [](const std::string& column, const std::string& value) {
    MeasuredRow row = llama_row();
    row[column] = value;
    return plan_row(row, kPresets).skip_reason;
  };
  EXPECT_EQ(reason("dtype", "fp8"), "fp8 not simulated yet");
  EXPECT_EQ(reason("ep", "8"), "mixture-of-experts not simulated yet");
  EXPECT_EQ(reason("gpu", "GB200"), "no hardware preset for gpu 'GB200'");
  EXPECT_EQ(reason("model", "Nemotron4-15B"), "squared-ReLU MLP (Nemotron-4) not simulated yet");
  EXPECT_EQ(reason("model", "Grok-1"), "no architecture known for model 'Grok-1'");
  EXPECT_EQ(reason("measured_step_s", ""), "no measured step time");
  EXPECT_EQ(reason("micro_batch", ""), "column 'micro_batch' is empty");
  EXPECT_EQ(reason("tp", "four"), "column 'tp': expected an integer, got 'four'");
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
      {row("B", -10), row("A", 5), row("B", 20), row("B", -30), row("A", 99, "fp8 not simulated yet")});
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

TEST(ValidateRun, SimulatesExpressedRowsAndExplainsTheRest) {
  std::string csv =
      "source_id,model,layers,hidden,ffn_hidden,heads,kv_heads,vocab,seq_length,gpu,num_gpus,tp,pp,micro_batch,"
      "global_batch,dtype,measured_step_s,colour,notes\n"
      "T,Llama-tiny,2,256,512,4,4,1024,128,H100-80GB,2,2,1,1,8,bf16,0.5,red,\"a, b\"\n"
      "T,Llama-tiny,2,256,512,4,4,1024,128,H100-80GB,3,3,1,1,8,bf16,0.5,red,heads 4 not divisible by tp 3\n"
      "T,Llama-tiny,2,256,512,4,4,1024,128,H100-80GB,2,2,1,1,8,fp8,0.5,red,\n";
  ValidationResult result = validate_measured(csv, "t.csv", {std::string(SYSSIM_SOURCE_DIR) + "/configs/hardware"});
  EXPECT_EQ(result.warnings, (std::vector<std::string>{"t.csv: ignoring unknown columns: colour"}));
  ASSERT_EQ(result.rows.size(), 3u);
  const RowResult& simulated = result.rows[0];
  ASSERT_TRUE(simulated.expressed()) << simulated.skip_reason;
  EXPECT_EQ(simulated.layout, "tp2+sp pp1 dp1 mbs1 gbs8");
  EXPECT_GT(simulated.predicted_step_s, 0);
  EXPECT_DOUBLE_EQ(simulated.step_error_pct, (simulated.predicted_step_s - 0.5) / 0.5 * 100);
  EXPECT_FALSE(simulated.predicted_oom);
  EXPECT_FALSE(result.rows[1].expressed());  // the library's own one-line refusal
  EXPECT_NE(result.rows[1].skip_reason.find("tp=3"), std::string::npos) << result.rows[1].skip_reason;
  EXPECT_EQ(result.rows[2].skip_reason, "fp8 not simulated yet");
  EXPECT_EQ(result.rows[2].line, 4);
}

}  // namespace
}  // namespace syssim
