// Tests of the shipped configuration presets (configs/) and of the strict YAML loaders
// (lib/config). Expected numbers come from the publications cited in each preset file and in
// the comments below, or from hand calculations written out here.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "config/config.hpp"
#include "network/network.hpp"

namespace fs = std::filesystem;
using syssim::DataError;
using syssim::HardwareConfig;
using syssim::ModelConfig;

namespace {

const std::string kRoot = SYSSIM_SOURCE_DIR;
const std::vector<std::string> kModels = {"llama3-8b", "llama3-70b", "llama3.1-405b", "qwen3-8b",
                                          "gpt3-175b", "gpt3-5b",    "llama2-7b",     "llama2-70b"};
const std::vector<std::string> kHardware = {"a100-sxm-80gb", "h100-sxm-80gb", "h200-sxm",
                                            "gh200",         "b200",          "mi300x",  "gb200-nvl72",
                                            "h100-100gbe"};

std::string model_path(const std::string& name) { return kRoot + "/configs/models/" + name + ".yaml"; }
std::string hardware_path(const std::string& name) { return kRoot + "/configs/hardware/" + name + ".yaml"; }

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Writes `text` to a fresh file in the test's temporary folder and returns its path.
std::string write_temp(const std::string& file_name, const std::string& text) {
  fs::path dir = fs::path(testing::TempDir()) / "syssim_test_config";
  fs::create_directories(dir);
  fs::path path = dir / file_name;
  std::ofstream(path) << text;
  return path.string();
}

// The message of the DataError that `f` throws; fails the test when it throws nothing.
template <typename F>
std::string error_of(F f) {
  try {
    f();
  } catch (const DataError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a DataError";
  return "";
}

// Parameter count of a Megatron GPT-style decoder in closed form, with the unpadded vocabulary
// (published counts use the tokenizer's vocabulary, not Megatron's padded one).
//   embedding v*h, plus the output layer v*h when untied, plus learned positions p*h;
//   per layer: Q h*(a*d), K and V 2*h*(g*d), attention output (a*d)*h,
//              MLP 3*h*f (SwiGLU: gate, up, down) or 2*h*f (GELU: fc1, fc2),
//              linear biases (a*d + 2*g*d) + h + (2f or f) + h when add_bias_linear,
//              two norms: 2h for RMSNorm (weight), 4h for LayerNorm (weight and bias),
//              QK-norm 2*d (one RMSNorm weight of size d on queries, one on keys);
//   final norm h (RMSNorm) or 2h (LayerNorm).
// For Llama (RMSNorm, SwiGLU, no bias, untied, RoPE) this is
//   2*v*h + L*(h*(a*d) + 2*h*(g*d) + (a*d)*h + 3*h*f + 2*h) + h.
double closed_form_params(const ModelConfig& m) {
  const double v = m.vocab_size, h = m.hidden_size, L = m.num_layers, a = m.num_attention_heads,
               g = m.num_query_groups, d = m.kv_channels, f = m.ffn_hidden_size;
  const bool layer_norm = m.normalization == "LayerNorm";
  double embedding = v * h + (m.tie_word_embeddings ? 0 : v * h) + (m.rope ? 0 : m.max_position_embeddings * h);
  double attention = h * (a * d) + 2 * h * (g * d) + (a * d) * h;
  double mlp = (m.swiglu ? 3 : 2) * h * f;
  double bias = 0;
  if (m.add_bias_linear) bias = (a * d + 2 * g * d) + h + (m.swiglu ? 2 * f : f) + h;
  else if (m.add_qkv_bias) bias = a * d + 2 * g * d;
  double norms = (layer_norm ? 4 : 2) * h + (m.qk_layernorm ? 2 * d : 0);
  double final_norm = (layer_norm ? 2 : 1) * h;
  return embedding + L * (attention + mlp + bias + norms) + final_norm;
}

void expect_near_rel(double actual, double expected, double rel, const std::string& what) {
  EXPECT_LE(std::fabs(actual - expected), rel * expected)
      << what << ": " << actual << " vs " << expected << " (allowed " << rel * 100 << "%)";
}

const char* kValidModel = R"(num_layers: 2
hidden_size: 64
num_attention_heads: 4
ffn_hidden_size: 256
seq_length: 128
vocab_size: 1000
)";

const char* kValidHardware = R"(peak_tflops_mm: 100
peak_tflops_math: 10
peak_memory_bandwidth_GBps: 1000
gpus_per_node: 8
topology:
  levels:
    - kind: nvlink
      size: 8
      bandwidth_GBps: 100
)";

}  // namespace

// ---------------------------------------------------------------------------------------------
// Presets

TEST(Presets, EveryModelPresetLoadsAndIsNamedAfterItsFile) {
  for (const auto& name : kModels) {
    SCOPED_TRACE(name);
    ModelConfig m;
    ASSERT_NO_THROW(m = syssim::load_model_yaml(model_path(name)));
    EXPECT_EQ(m.name, name);
    EXPECT_EQ(m.attention_backend, "flash");
  }
}

TEST(Presets, EveryHardwarePresetLoadsAndIsNamedAfterItsFile) {
  for (const auto& name : kHardware) {
    SCOPED_TRACE(name);
    HardwareConfig hw;
    ASSERT_NO_THROW(hw = syssim::load_hardware_yaml(hardware_path(name)));
    EXPECT_EQ(hw.name, name);
    ASSERT_FALSE(hw.topology.empty());
    EXPECT_EQ(hw.topology[0].size, hw.gpus_per_node);
    EXPECT_GT(hw.topology[0].latency_us, 0);
    EXPECT_TRUE(hw.gpu_memory_GB.has_value());
    // Every preset reaches other nodes: as scale-out levels or with api.md's shorthand.
    std::vector<syssim::Link> links = syssim::network_links(hw);
    ASSERT_GE(links.size(), 2u);
    EXPECT_GT(hw.topology.size() > 1 ? hw.topology[1].latency_us : hw.inter_node_latency_us, 0);
    EXPECT_GT(hw.kernel_launch_us, 0);
    // The tensor-core peak is far above the FP32 vector peak on every part.
    EXPECT_GT(hw.peak_tflops_mm, 5 * hw.peak_tflops_math);
    // Dense FP8 is twice dense BF16 on every part that has it (vendor figures are rounded).
    if (hw.peak_tflops_mm_fp8) expect_near_rel(*hw.peak_tflops_mm_fp8, 2 * hw.peak_tflops_mm, 0.001, "fp8");
    if (hw.peak_tflops_mm_fp4) expect_near_rel(*hw.peak_tflops_mm_fp4, 4 * hw.peak_tflops_mm, 0.001, "fp4");
  }
}

TEST(Presets, EveryFileInConfigsIsAKnownPreset) {
  // A new preset must be added to the lists above (and to docs/configs.md) to be tested.
  std::set<std::string> models(kModels.begin(), kModels.end()), hardware(kHardware.begin(), kHardware.end());
  for (const auto& entry : fs::directory_iterator(kRoot + "/configs/models")) {
    if (entry.path().extension() == ".yaml") {
      EXPECT_TRUE(models.count(entry.path().stem().string())) << entry.path();
    }
  }
  for (const auto& entry : fs::directory_iterator(kRoot + "/configs/hardware")) {
    if (entry.path().extension() == ".yaml") {
      EXPECT_TRUE(hardware.count(entry.path().stem().string())) << entry.path();
    }
  }
}

TEST(Presets, EveryPresetRoundTripsThroughJson) {
  for (const auto& name : kModels) {
    ModelConfig m = syssim::load_model_yaml(model_path(name));
    EXPECT_EQ(syssim::to_json(syssim::model_from_json(syssim::to_json(m), name)), syssim::to_json(m)) << name;
  }
  for (const auto& name : kHardware) {
    HardwareConfig hw = syssim::load_hardware_yaml(hardware_path(name));
    EXPECT_EQ(syssim::to_json(syssim::hardware_from_json(syssim::to_json(hw), name)), syssim::to_json(hw)) << name;
  }
}

// Llama 3 paper (arXiv:2407.21783) Table 3 and the Hugging Face config.json of Meta-Llama-3-8B.
TEST(Presets, Llama3_8bHasThePublishedArchitecture) {
  ModelConfig m = syssim::load_model_yaml(model_path("llama3-8b"));
  EXPECT_EQ(m.num_layers, 32);
  EXPECT_EQ(m.hidden_size, 4096);
  EXPECT_EQ(m.ffn_hidden_size, 14336);
  EXPECT_EQ(m.num_attention_heads, 32);
  EXPECT_EQ(m.num_query_groups, 8);
  EXPECT_EQ(m.kv_channels, 128);
  EXPECT_EQ(m.vocab_size, 128256);
  EXPECT_EQ(m.seq_length, 8192);
  EXPECT_EQ(m.max_position_embeddings, 8192);
  EXPECT_DOUBLE_EQ(m.rope_theta, 500000.0);
  EXPECT_DOUBLE_EQ(m.rms_norm_eps, 1e-5);
  EXPECT_TRUE(m.swiglu);
  EXPECT_TRUE(m.rope);
  EXPECT_FALSE(m.tie_word_embeddings);
  EXPECT_EQ(m.normalization, "RMSNorm");
  EXPECT_FALSE(m.add_bias_linear);
  EXPECT_FALSE(m.add_qkv_bias);
  EXPECT_FALSE(m.qk_layernorm);
  EXPECT_EQ(m.make_vocab_size_divisible_by, 128);
}

// Llama 3 paper Table 3 rows for 70B and 405B.
TEST(Presets, Llama3LargeModelsHaveThePublishedShapes) {
  ModelConfig m70 = syssim::load_model_yaml(model_path("llama3-70b"));
  EXPECT_EQ(std::vector<int64_t>({m70.num_layers, m70.hidden_size, m70.ffn_hidden_size, m70.num_attention_heads,
                                  m70.num_query_groups}),
            std::vector<int64_t>({80, 8192, 28672, 64, 8}));
  ModelConfig m405 = syssim::load_model_yaml(model_path("llama3.1-405b"));
  EXPECT_EQ(std::vector<int64_t>({m405.num_layers, m405.hidden_size, m405.ffn_hidden_size,
                                  m405.num_attention_heads, m405.num_query_groups}),
            std::vector<int64_t>({126, 16384, 53248, 128, 8}));
}

// Qwen/Qwen3-8B config.json; GPT-3 paper (arXiv:2005.14165) Table 2.1.
TEST(Presets, Qwen3AndGpt3HaveThePublishedArchitecture) {
  ModelConfig q = syssim::load_model_yaml(model_path("qwen3-8b"));
  EXPECT_EQ(q.num_layers, 36);
  EXPECT_EQ(q.ffn_hidden_size, 12288);
  EXPECT_EQ(q.num_query_groups, 8);
  EXPECT_EQ(q.kv_channels, 128);
  EXPECT_EQ(q.vocab_size, 151936);
  EXPECT_TRUE(q.qk_layernorm);
  EXPECT_FALSE(q.tie_word_embeddings);
  EXPECT_DOUBLE_EQ(q.rope_theta, 1e6);
  EXPECT_EQ(q.max_position_embeddings, 40960);

  ModelConfig g = syssim::load_model_yaml(model_path("gpt3-175b"));
  EXPECT_EQ(g.num_layers, 96);
  EXPECT_EQ(g.hidden_size, 12288);
  EXPECT_EQ(g.num_attention_heads, 96);
  EXPECT_EQ(g.num_query_groups, 96);
  EXPECT_EQ(g.ffn_hidden_size, 49152);
  EXPECT_EQ(g.seq_length, 2048);
  EXPECT_EQ(g.vocab_size, 50257);
  EXPECT_EQ(g.normalization, "LayerNorm");
  EXPECT_FALSE(g.swiglu);
  EXPECT_FALSE(g.rope);
  EXPECT_TRUE(g.add_bias_linear);
  EXPECT_TRUE(g.tie_word_embeddings);
  EXPECT_DOUBLE_EQ(g.hidden_dropout, 0.1);  // Megatron-Core's default, kept by NeMo's GPTConfig
  EXPECT_DOUBLE_EQ(g.attention_dropout, 0.1);
}

// Vendor datasheets cited in configs/hardware/h100-sxm-80gb.yaml (dense peaks).
TEST(Presets, H100HasTheDatasheetNumbers) {
  HardwareConfig hw = syssim::load_hardware_yaml(hardware_path("h100-sxm-80gb"));
  EXPECT_DOUBLE_EQ(hw.peak_tflops_mm, 989);
  EXPECT_DOUBLE_EQ(*hw.peak_tflops_mm_fp8, 1979);
  EXPECT_FALSE(hw.peak_tflops_mm_fp4.has_value());
  EXPECT_DOUBLE_EQ(hw.peak_tflops_math, 67);
  EXPECT_DOUBLE_EQ(hw.peak_memory_bandwidth_GBps, 3350);
  EXPECT_DOUBLE_EQ(*hw.gpu_memory_GB, 85.9);  // 80 GiB = 85.899 GB
  EXPECT_EQ(hw.gpus_per_node, 8);
  ASSERT_EQ(hw.topology.size(), 3u);
  EXPECT_EQ(hw.topology[0].kind, "nvlink");
  EXPECT_DOUBLE_EQ(hw.topology[0].bandwidth_GBps, 450);  // 900 GB/s bidirectional / 2
  // DGX SuperPOD: rail leaves of 32 nodes, a non-blocking spine, one 400 Gb/s NIC per GPU.
  EXPECT_EQ(hw.topology[1].size, 256);
  EXPECT_DOUBLE_EQ(hw.topology[1].bandwidth_GBps, 50);  // 400 Gb/s / 8 bits
  EXPECT_EQ(hw.topology[2].size, 0);
  EXPECT_DOUBLE_EQ(hw.topology[2].oversubscription, 1);
}

// Closed-form parameter counts against published totals:
//   Llama-3-8B 8.03B, Llama-3-70B 70.6B (Hugging Face model cards); Llama 3.1 405B "405B"
//   (Llama 3 paper); Qwen3-8B 8.2B total and 6.95B non-embedding (model card); GPT-3 175.0B
//   (GPT-3 paper Table 2.1); Llama-2 7B 6.74B and 70B 69B (Hugging Face model pages).
TEST(Presets, ParameterCountsMatchThePublishedTotals) {
  struct Case {
    std::string name;
    double published;
    double tolerance;
  };
  for (const Case& c : std::vector<Case>{{"llama3-8b", 8.03e9, 0.005},
                                         {"llama3-70b", 70.6e9, 0.005},
                                         {"llama3.1-405b", 405e9, 0.005},
                                         {"qwen3-8b", 8.2e9, 0.005},
                                         {"gpt3-175b", 175.0e9, 0.005},
                                         {"llama2-7b", 6.74e9, 0.005},
                                         {"llama2-70b", 69e9, 0.005},
                                         {"gpt3-5b", 5e9, 0.02}}) {  // "5B" is a nominal size
    ModelConfig m = syssim::load_model_yaml(model_path(c.name));
    expect_near_rel(closed_form_params(m), c.published, c.tolerance, c.name);
  }
}

// Hand calculations of the closed form, to pin the formula itself (not only the tolerance):
//   Llama-3-8B: 2*128256*4096 = 1,050,673,152; per layer 4096*4096 + 2*4096*1024 + 4096*4096
//   + 3*4096*14336 + 2*4096 = 218,112,000, times 32 = 6,979,584,000; plus 4096 = 8,030,261,248.
//   Llama-3-70B: 2*128256*8192 = 2,101,346,304; per layer 855,654,400, times 80; plus 8192
//   = 70,553,706,496.  Llama 3.1 405B: 4,202,692,608 + 126*3,187,703,808 + 16384
//   = 405,853,388,800.  Qwen3-8B non-embedding: 36*(192,946,176 + 256) + 4096 = 6,946,075,648.
TEST(Presets, ClosedFormMatchesHandCalculation) {
  EXPECT_DOUBLE_EQ(closed_form_params(syssim::load_model_yaml(model_path("llama3-8b"))), 8030261248.0);
  EXPECT_DOUBLE_EQ(closed_form_params(syssim::load_model_yaml(model_path("llama3-70b"))), 70553706496.0);
  EXPECT_DOUBLE_EQ(closed_form_params(syssim::load_model_yaml(model_path("llama3.1-405b"))), 405853388800.0);
  ModelConfig q = syssim::load_model_yaml(model_path("qwen3-8b"));
  double non_embedding = closed_form_params(q) - 2.0 * q.vocab_size * q.hidden_size;
  EXPECT_DOUBLE_EQ(non_embedding, 6946075648.0);
  expect_near_rel(non_embedding, 6.95e9, 0.005, "qwen3-8b non-embedding");
}

// ---------------------------------------------------------------------------------------------
// Strict loading

TEST(Loader, MinimalModelGetsDocumentedDefaults) {
  std::string path = write_temp("tiny-model.yaml", kValidModel);
  ModelConfig m = syssim::load_model_yaml(path);
  EXPECT_EQ(m.name, "tiny-model");  // the file stem
  EXPECT_EQ(m.num_query_groups, 4);  // MHA
  EXPECT_EQ(m.kv_channels, 16);      // 64 / 4
  EXPECT_EQ(m.max_position_embeddings, 128);
  EXPECT_EQ(m.make_vocab_size_divisible_by, 128);
  EXPECT_TRUE(m.swiglu);
  EXPECT_TRUE(m.rope);
  EXPECT_DOUBLE_EQ(m.rope_theta, 10000.0);
  EXPECT_FALSE(m.tie_word_embeddings);
  EXPECT_DOUBLE_EQ(m.rms_norm_eps, 1e-6);
  EXPECT_EQ(m.normalization, "RMSNorm");
  EXPECT_EQ(m.attention_backend, "flash");
  EXPECT_DOUBLE_EQ(m.hidden_dropout, 0.0);
  EXPECT_DOUBLE_EQ(m.attention_dropout, 0.0);
}

TEST(Loader, UnknownModelKeyNamesFileKeyAndNearestKey) {
  std::string text = kValidModel;
  text.replace(text.find("hidden_size"), 11, "hiden_size");
  std::string path = write_temp("typo-model.yaml", text);
  std::string message = error_of([&] { syssim::load_model_yaml(path); });
  EXPECT_NE(message.find(path), std::string::npos) << message;
  EXPECT_NE(message.find("'hiden_size'"), std::string::npos) << message;
  EXPECT_NE(message.find("did you mean 'hidden_size'?"), std::string::npos) << message;
}

TEST(Loader, UnknownHardwareKeysNameFileKeyAndNearestKey) {
  std::string path = write_temp("typo-hw.yaml", std::string(kValidHardware) + "kernel_launch: 4\n");
  std::string message = error_of([&] { syssim::load_hardware_yaml(path); });
  EXPECT_NE(message.find(path), std::string::npos) << message;
  EXPECT_NE(message.find("'kernel_launch'"), std::string::npos) << message;
  EXPECT_NE(message.find("did you mean 'kernel_launch_us'?"), std::string::npos) << message;

  std::string level_text = kValidHardware;
  level_text.replace(level_text.rfind("bandwidth_GBps"), 14, "bandwith_GBps");  // the level's key
  std::string level_path = write_temp("typo-level.yaml", level_text);
  message = error_of([&] { syssim::load_hardware_yaml(level_path); });
  EXPECT_NE(message.find(level_path), std::string::npos) << message;
  EXPECT_NE(message.find("topology.levels[0]"), std::string::npos) << message;
  EXPECT_NE(message.find("did you mean 'bandwidth_GBps'?"), std::string::npos) << message;
}

TEST(Loader, MissingRequiredKeyIsNamed) {
  std::string text = kValidModel;
  text.erase(text.find("num_layers: 2\n"), 14);
  std::string path = write_temp("no-layers.yaml", text);
  std::string message = error_of([&] { syssim::load_model_yaml(path); });
  EXPECT_NE(message.find(path), std::string::npos) << message;
  EXPECT_NE(message.find("missing required key 'num_layers'"), std::string::npos) << message;

  std::string hw_text = kValidHardware;
  hw_text.erase(hw_text.find("peak_tflops_math: 10\n"), 21);
  message = error_of([&] { syssim::parse_hardware_yaml(hw_text, "no-math.yaml"); });
  EXPECT_NE(message.find("missing required key 'peak_tflops_math'"), std::string::npos) << message;
}

TEST(Loader, TopologySizeMustEqualGpusPerNode) {
  std::string text = kValidHardware;
  text.replace(text.find("size: 8"), 7, "size: 4");
  std::string message = error_of([&] { syssim::parse_hardware_yaml(text, "mismatch.yaml"); });
  EXPECT_NE(message.find("mismatch.yaml"), std::string::npos) << message;
  EXPECT_NE(message.find("topology.levels[0].size=4 must equal gpus_per_node=8"), std::string::npos) << message;
}

TEST(Loader, MultiGpuNodeNeedsATopology) {
  std::string text = kValidHardware;
  text.erase(text.find("topology:"));
  std::string message = error_of([&] { syssim::parse_hardware_yaml(text, "no-topology.yaml"); });
  EXPECT_NE(message.find("needs topology.levels[0]"), std::string::npos) << message;
}

TEST(Loader, ScaleOutLevelsAreCheckedWithTheirIndex) {
  const std::string leaf = "    - kind: leaf\n      size: 64\n      bandwidth_GBps: 50\n";
  std::string both = std::string(kValidHardware) + leaf + "inter_node_bandwidth_GBps: 50\n";
  EXPECT_EQ(error_of([&] { syssim::parse_hardware_yaml(both, "both.yaml"); }),
            "both.yaml: give the scale-out network either as topology.levels[1..] or as inter_node_bandwidth_GBps, not both");
  std::string uneven = std::string(kValidHardware) + "    - kind: leaf\n      size: 12\n      bandwidth_GBps: 50\n";
  EXPECT_EQ(error_of([&] { syssim::parse_hardware_yaml(uneven, "uneven.yaml"); }),
            "uneven.yaml: topology.levels[1].size=12: expected a multiple of the level below's size 8, or none "
            "(the whole cluster)");
  std::string under = std::string(kValidHardware) + leaf + "      oversubscription: 0.5\n";
  EXPECT_EQ(error_of([&] { syssim::parse_hardware_yaml(under, "under.yaml"); }),
            "under.yaml: topology level 'leaf': oversubscription: expected at least 1, got 0.500000");
}

TEST(Loader, RankOrderNamesEveryDimensionUsedOnce) {
  syssim::ParallelismConfig p;
  p.tp = 2, p.dp = 4, p.pp = 2;
  auto names = [](const std::vector<std::pair<std::string, int64_t>>& order) {
    std::string joined;
    for (const auto& [name, size] : order) joined += name + std::to_string(size) + " ";
    return joined;
  };
  EXPECT_EQ(names(syssim::rank_order(p)), "tp2 cp1 ep1 dp4 pp2 ");
  p.order = "tp-pp-dp";
  EXPECT_EQ(names(syssim::rank_order(p)), "tp2 pp2 dp4 ");
  p.order = "tp-dp";
  EXPECT_EQ(error_of([&] { syssim::rank_order(p); }), "parallelism.order \"tp-dp\": leaves out pp=2");
  p.order = "tp-dp-dp-pp";
  EXPECT_EQ(error_of([&] { syssim::rank_order(p); }), "parallelism.order \"tp-dp-dp-pp\": dp appears twice");
  p.order = "tp-xp-dp-pp";
  EXPECT_EQ(error_of([&] { syssim::rank_order(p); }),
            "parallelism.order \"tp-xp-dp-pp\": unknown dimension \"xp\" (expected tp, cp, ep, dp, pp)");
}

TEST(Loader, InvalidValuesAreRejected) {
  std::string text = std::string(kValidModel) + "normalization: BatchNorm\n";
  EXPECT_NE(error_of([&] { syssim::parse_model_yaml(text, "m.yaml"); }).find("RMSNorm|LayerNorm"),
            std::string::npos);
  text = std::string(kValidModel) + "num_query_groups: 3\n";
  EXPECT_NE(error_of([&] { syssim::parse_model_yaml(text, "m.yaml"); }).find("does not divide"),
            std::string::npos);
  text = std::string(kValidModel) + "attention_backend: sdpa\n";
  EXPECT_NE(error_of([&] { syssim::parse_model_yaml(text, "m.yaml"); }).find("flash|unfused"), std::string::npos);
  text = std::string(kValidModel) + "hidden_dropout: 1.0\n";
  EXPECT_EQ(error_of([&] { syssim::parse_model_yaml(text, "m.yaml"); }),
            "m.yaml: key 'hidden_dropout' must be in [0, 1), got 1.000000");
  text = std::string(kValidModel) + "attention_dropout: -0.1\n";
  EXPECT_NE(error_of([&] { syssim::parse_model_yaml(text, "m.yaml"); }).find("'attention_dropout' must be in [0, 1)"),
            std::string::npos);
  std::string hw = kValidHardware;
  hw.replace(hw.find("peak_tflops_mm: 100"), 19, "peak_tflops_mm: fast");
  EXPECT_NE(error_of([&] { syssim::parse_hardware_yaml(hw, "h.yaml"); }).find("'peak_tflops_mm' has invalid value"),
            std::string::npos);
}

TEST(Loader, MissingFileIsADataErrorNamingThePath) {
  std::string path = kRoot + "/configs/models/no-such-model.yaml";
  EXPECT_NE(error_of([&] { syssim::load_model_yaml(path); }).find(path), std::string::npos);
}

TEST(Presets, ModelPresetsSpellOutTheRequiredKeys) {
  // Loading already rejects unknown and missing keys; this also checks that every preset states
  // its name rather than relying on the file stem.
  for (const auto& name : kModels) {
    std::string text = read_file(model_path(name));
    for (const char* key : {"num_layers:", "hidden_size:", "num_attention_heads:", "ffn_hidden_size:",
                            "seq_length:", "vocab_size:", "name:"})
      EXPECT_NE(text.find(key), std::string::npos) << name << " lacks " << key;
  }
}
