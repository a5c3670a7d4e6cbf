// Tests of the shipped configuration presets (configs/) and of the strict YAML loaders
// (lib/config). Expected numbers come from the publications cited in each preset file and in
// the comments below, or from hand calculations written out here.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
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
const std::vector<std::string> kMoeModels = {"mixtral-8x7b", "mixtral-8x22b",     "qwen3-30b-a3b",
                                             "qwen3-235b-a22b", "deepseek-v3",     "kimi-k2",
                                             "moonlight-16b-a3b", "gpt-oss-120b", "grok-1"};
const std::vector<std::string> kModels = [] {
  std::vector<std::string> models = {"llama3-8b", "llama3-70b", "llama3.1-405b", "qwen3-8b",
                                     "gpt3-175b", "gpt3-5b",    "llama2-7b",     "llama2-70b",
                                     "llama3.1-8b-torchtitan"};
  models.insert(models.end(), kMoeModels.begin(), kMoeModels.end());
  return models;
}();
const std::vector<std::string> kHardware = {"a100-sxm-80gb", "h100-sxm-80gb", "h200-sxm",
                                            "gh200",         "b200",          "mi300x",  "gb200-nvl72",
                                            "h100-100gbe",   "gb300-nvl72",   "a100-sxm-40gb", "h100-sxm-96gb-500w",
                                            "h100-nvl",      "h800-sxm",      "b300",    "jean-zay-a100"};

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

// A model's parameters: all of them, and those one token uses (all but the routed experts it is
// not sent to).
struct ParamCount {
  double total = 0;
  double active = 0;
};

// Parameter counts of a Megatron-Core GPT model in closed form, with the unpadded vocabulary
// (published counts use the tokenizer's vocabulary, not Megatron's padded one).
//   embedding v*h, plus the output layer v*h when untied, plus learned positions p*h;
//   per layer, attention:
//     Q h*(a*d), K and V 2*h*(g*d), output (a*d)*h; biases a*d + 2*g*d on Q, K and V (add_qkv_bias
//     or add_bias_linear) and h on the output (add_bias_linear); QK-norm 2*d (one RMSNorm weight of
//     size d on queries, one on keys); a learned softmax offset (attention sink) per head: a;
//   or multi-head latent attention, with query latent q, KV latent c, query/key head n without
//     RoPE plus t with RoPE, value head w: queries h*q + q (latent norm) + q*a*(n+t), or h*a*(n+t)
//     without a query latent (q = 0); KV down projection h*(c+t) and its norm c; KV up projection
//     c*a*(n+w); output (a*w)*h; no biases (no model with latent attention has them);
//   per layer, MLP:
//     dense: 3*h*f (SwiGLU: gate, up, down) or 2*h*f (GELU: fc1, fc2); biases 2f + h or f + h
//       when add_bias_linear;
//     mixture of experts: router e*h (and e biases when add_bias_linear), e routed SwiGLU experts
//       of width x, 3*h*x each (and 2x + h biases), shared experts as a dense MLP of width u; a
//       token uses k of the e routed experts;
//   two norms per layer: 2h for RMSNorm (weight), 4h for LayerNorm (weight and bias);
//   final norm h (RMSNorm) or 2h (LayerNorm);
//   per multi-token-prediction layer: norms of the embedding and of the hidden state 2h, their
//     projection 2h*h, one layer of the last layer's kind, a final norm h (it reuses the
//     embedding and the output layer).
// For Llama (RMSNorm, SwiGLU, no bias, untied, RoPE) this is
//   2*v*h + L*(h*(a*d) + 2*h*(g*d) + (a*d)*h + 3*h*f + 2*h) + h.
ParamCount closed_form_params(const ModelConfig& m) {
  const double v = m.vocab_size, h = m.hidden_size, a = m.num_attention_heads, g = m.num_query_groups,
               d = m.kv_channels, f = m.ffn_hidden_size;
  const double norm = m.normalization == "LayerNorm" ? 2 * h : h;
  auto attention = [&] {
    if (m.multi_latent_attention) {
      const double q = m.q_lora_rank, c = m.kv_lora_rank, n = m.qk_head_dim, t = m.qk_pos_emb_head_dim,
                   w = m.v_head_dim;
      const double queries = q > 0 ? h * q + q + q * a * (n + t) : h * a * (n + t);
      return queries + h * (c + t) + c + c * a * (n + w) + (a * w) * h;
    }
    double params = h * (a * d) + 2 * h * (g * d) + (a * d) * h;
    if (m.add_qkv_bias || m.add_bias_linear) params += a * d + 2 * g * d;
    if (m.add_bias_linear) params += h;
    if (m.qk_layernorm) params += 2 * d;
    if (m.softmax_type == "learnable") params += a;
    return params;
  };
  auto dense_mlp = [&](double width) {
    return (m.swiglu ? 3 : 2) * h * width + (m.add_bias_linear ? (m.swiglu ? 2 : 1) * width + h : 0);
  };
  ParamCount count;
  auto add = [&](double total, double active) {
    count.total += total;
    count.active += active;
  };
  auto add_layer = [&](int64_t layer) {
    const double attention_and_norms = attention() + 2 * norm;
    if (!m.is_moe_layer(layer)) {
      add(attention_and_norms + dense_mlp(f), attention_and_norms + dense_mlp(f));
      return;
    }
    const double e = m.num_moe_experts, k = m.moe_router_topk, x = m.moe_ffn_hidden_size,
                 u = m.moe_shared_expert_intermediate_size;
    const double router = e * h + (m.add_bias_linear ? e : 0);
    const double always_used = attention_and_norms + router + (u > 0 ? dense_mlp(u) : 0);
    const double routed = e * (3 * h * x + (m.add_bias_linear ? 2 * x + h : 0));
    add(always_used + routed, always_used + routed * k / e);
  };
  const double embedding = v * h + (m.tie_word_embeddings ? 0 : v * h) + (m.rope ? 0 : m.max_position_embeddings * h);
  add(embedding + norm, embedding + norm);
  for (int64_t layer = 0; layer < m.num_layers; ++layer) add_layer(layer);
  for (int64_t depth = 0; depth < m.mtp_num_layers; ++depth) {
    add(2 * h + 2 * h * h + h, 2 * h + 2 * h * h + h);
    add_layer(m.num_layers - 1);
  }
  return count;
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
    // Dense FP4 is four times dense BF16, six on Blackwell Ultra (GB300: 15 against 2.5 PFLOPS;
    // HGX B300: 108 against 18 PFLOPS for 8 GPUs).
    const double fp4_ratio = name == "gb300-nvl72" || name == "b300" ? 6 : 4;
    if (hw.peak_tflops_mm_fp4) expect_near_rel(*hw.peak_tflops_mm_fp4, fp4_ratio * hw.peak_tflops_mm, 0.001, "fp4");
    // No GPU runs its GEMMs at the datasheet peak (kernel ceilings: 60-80% on H100, MI300X and
    // Blackwell): every preset prices them below it, with a bundle or a gemm share under 1.
    const bool calibrated_gemm =
        !hw.calibrated_model.empty() &&
        (hw.calibrated_families.empty() ||
         std::count(hw.calibrated_families.begin(), hw.calibrated_families.end(), "gemm") > 0);
    if (!calibrated_gemm) {
      ASSERT_TRUE(hw.efficiency.count("gemm")) << "GEMMs at 100% of the peak";
      EXPECT_LT(hw.efficiency.at("gemm"), 0.9);
    }
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

// torchtitan's Llama 3.1 8B is the published 8B architecture (Llama 3.1 extends the positions to
// 131,072) with torchtitan's separate linears and fp32 loss.
TEST(Presets, TorchtitansLlama31_8bIsLlama3_8bWithItsLinearsAndLoss) {
  nlohmann::json torchtitan = syssim::to_json(syssim::load_model_yaml(model_path("llama3.1-8b-torchtitan")));
  nlohmann::json llama = syssim::to_json(syssim::load_model_yaml(model_path("llama3-8b")));
  EXPECT_EQ(torchtitan["projection_fusion"], false);
  EXPECT_EQ(torchtitan["cross_entropy"], "torch_fp32");
  EXPECT_EQ(torchtitan["max_position_embeddings"], 131072);
  for (const char* key : {"name", "projection_fusion", "cross_entropy", "max_position_embeddings"})
    torchtitan.erase(key), llama.erase(key);
  EXPECT_EQ(torchtitan, llama);
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
    expect_near_rel(closed_form_params(m).total, c.published, c.tolerance, c.name);
  }
}

// Hand calculations of the closed form, to pin the formula itself (not only the tolerance):
//   Llama-3-8B: 2*128256*4096 = 1,050,673,152; per layer 4096*4096 + 2*4096*1024 + 4096*4096
//   + 3*4096*14336 + 2*4096 = 218,112,000, times 32 = 6,979,584,000; plus 4096 = 8,030,261,248.
//   Llama-3-70B: 2*128256*8192 = 2,101,346,304; per layer 855,654,400, times 80; plus 8192
//   = 70,553,706,496.  Llama 3.1 405B: 4,202,692,608 + 126*3,187,703,808 + 16384
//   = 405,853,388,800.  Qwen3-8B non-embedding: 36*(192,946,176 + 256) + 4096 = 6,946,075,648.
TEST(Presets, ClosedFormMatchesHandCalculation) {
  EXPECT_DOUBLE_EQ(closed_form_params(syssim::load_model_yaml(model_path("llama3-8b"))).total, 8030261248.0);
  EXPECT_DOUBLE_EQ(closed_form_params(syssim::load_model_yaml(model_path("llama3-70b"))).total, 70553706496.0);
  EXPECT_DOUBLE_EQ(closed_form_params(syssim::load_model_yaml(model_path("llama3.1-405b"))).total, 405853388800.0);
  ModelConfig q = syssim::load_model_yaml(model_path("qwen3-8b"));
  double non_embedding = closed_form_params(q).total - 2.0 * q.vocab_size * q.hidden_size;
  EXPECT_DOUBLE_EQ(non_embedding, 6946075648.0);
  expect_near_rel(non_embedding, 6.95e9, 0.005, "qwen3-8b non-embedding");
}

// The MoE presets' shapes, each from the config.json or code cited in its file: layers, hidden,
// attention heads, KV heads, head dim (MLA: query/key head), vocab, routed experts, experts per
// token, expert width, shared-expert width, leading dense layers, training sequence, positions.
TEST(Presets, MoePresetsHaveThePublishedShapes) {
  struct Shape {
    std::string name;
    std::vector<int64_t> dims;  // the fields in the order above
  };
  for (const Shape& c : std::vector<Shape>{
           {"mixtral-8x7b", {32, 4096, 32, 8, 128, 32000, 8, 2, 14336, 0, 0, 4096, 32768}},
           {"mixtral-8x22b", {56, 6144, 48, 8, 128, 32000, 8, 2, 16384, 0, 0, 4096, 65536}},
           {"qwen3-30b-a3b", {48, 2048, 32, 4, 128, 151936, 128, 8, 768, 0, 0, 4096, 40960}},
           {"qwen3-235b-a22b", {94, 4096, 64, 4, 128, 151936, 128, 8, 1536, 0, 0, 4096, 40960}},
           {"deepseek-v3", {61, 7168, 128, 128, 192, 129280, 256, 8, 2048, 2048, 3, 4096, 163840}},
           {"kimi-k2", {61, 7168, 64, 64, 192, 163840, 384, 8, 2048, 2048, 1, 4096, 131072}},
           {"moonlight-16b-a3b", {27, 2048, 16, 16, 192, 163840, 64, 6, 1408, 2 * 1408, 1, 4096, 8192}},
           {"gpt-oss-120b", {36, 2880, 64, 8, 64, 201088, 128, 4, 2880, 0, 0, 4096, 131072}},
           {"grok-1", {64, 6144, 48, 8, 128, 131072, 8, 2, 32768, 0, 0, 8192, 8192}}}) {
    ModelConfig m = syssim::load_model_yaml(model_path(c.name));
    int64_t dense = 0;
    while (dense < m.num_layers && !m.is_moe_layer(dense)) ++dense;
    int64_t moe = 0;
    for (int64_t layer = 0; layer < m.num_layers; ++layer) moe += m.is_moe_layer(layer);
    EXPECT_EQ(moe, m.num_layers - dense) << c.name << ": MoE layers after the dense ones only";
    EXPECT_EQ(std::vector<int64_t>({m.num_layers, m.hidden_size, m.num_attention_heads, m.num_query_groups,
                                    m.kv_channels, m.vocab_size, m.num_moe_experts, m.moe_router_topk,
                                    m.moe_ffn_hidden_size, m.moe_shared_expert_intermediate_size, dense,
                                    m.seq_length, m.max_position_embeddings}),
              c.dims)
        << c.name;
  }
}

// DeepSeek-V3 report Section 4.2 and config.json; Kimi K2 and Moonlight config.json (the same
// architecture); GPT-OSS model card and config.json; Grok-1 run.py and model.py.
TEST(Presets, MoePresetsHaveThePublishedSpecifics) {
  ModelConfig ds = syssim::load_model_yaml(model_path("deepseek-v3"));
  EXPECT_TRUE(ds.multi_latent_attention);
  EXPECT_EQ(std::vector<int64_t>({ds.q_lora_rank, ds.kv_lora_rank, ds.qk_head_dim, ds.qk_pos_emb_head_dim,
                                  ds.v_head_dim, ds.moe_router_num_groups, ds.moe_router_group_topk}),
            std::vector<int64_t>({1536, 512, 128, 64, 128, 8, 4}));
  EXPECT_EQ(ds.moe_router_score_function, "sigmoid");
  EXPECT_TRUE(ds.moe_router_enable_expert_bias);
  EXPECT_EQ(ds.moe_router_load_balancing_type, "seq_aux_loss");
  EXPECT_EQ(ds.mtp_num_layers, 0);  // 671B is the main model; the MTP module is another 14B
  EXPECT_FALSE(ds.tie_word_embeddings);
  EXPECT_DOUBLE_EQ(ds.rope_theta, 10000);

  ModelConfig kimi = syssim::load_model_yaml(model_path("kimi-k2"));
  EXPECT_EQ(kimi.q_lora_rank, 1536);
  EXPECT_DOUBLE_EQ(kimi.rope_theta, 50000);
  ModelConfig moonlight = syssim::load_model_yaml(model_path("moonlight-16b-a3b"));
  EXPECT_EQ(moonlight.q_lora_rank, 0);  // q_lora_rank null: queries straight from the hidden state
  EXPECT_EQ(moonlight.ffn_hidden_size, 11264);
  EXPECT_DOUBLE_EQ(moonlight.rms_norm_eps, 1e-5);

  ModelConfig oss = syssim::load_model_yaml(model_path("gpt-oss-120b"));
  EXPECT_TRUE(oss.add_bias_linear);
  EXPECT_TRUE(oss.add_qkv_bias);
  EXPECT_EQ(oss.softmax_type, "learnable");
  EXPECT_EQ(oss.window_size, 127);  // Megatron's left window: 128 keys with the query's own
  for (int64_t layer = 0; layer < oss.num_layers; ++layer)  // sliding, full, sliding, ...
    EXPECT_EQ(oss.is_sliding_window_layer(layer), layer % 2 == 0) << "layer " << layer;
  EXPECT_EQ(oss.moe_router_load_balancing_type, "none");
  EXPECT_DOUBLE_EQ(oss.rope_theta, 150000);
  EXPECT_DOUBLE_EQ(oss.activation_func_clamp_value, 7.0);  // config.json's swiglu_limit
  EXPECT_FALSE(oss.apply_rope_fusion);  // YaRN's scaled cos and sin, which TE's fused RoPE does not take

  ModelConfig grok = syssim::load_model_yaml(model_path("grok-1"));
  EXPECT_TRUE(grok.tie_word_embeddings);  // InOutEmbed.decode
  EXPECT_EQ(grok.moe_ffn_hidden_size, 8 * 6144 * 2 / 3);  // ffn_size(emb_size, widening_factor 8)

  ModelConfig qwen = syssim::load_model_yaml(model_path("qwen3-30b-a3b"));
  EXPECT_TRUE(qwen.qk_layernorm);
  EXPECT_FALSE(qwen.tie_word_embeddings);
  EXPECT_DOUBLE_EQ(qwen.rope_theta, 1e6);
  ModelConfig mixtral = syssim::load_model_yaml(model_path("mixtral-8x7b"));
  EXPECT_DOUBLE_EQ(mixtral.rope_theta, 1e6);
  EXPECT_DOUBLE_EQ(mixtral.rms_norm_eps, 1e-5);
}

// Closed-form counts against the published figures. A figure is checked to 0.5%, or to its own
// rounding where that is coarser ("37B": [36.5B, 37.5B)). Vendors count differently:
//   - everything: Mistral AI, Qwen, OpenAI's total, the Moonlight model card;
//   - all but the input embedding (a table lookup, no matmul): OpenAI's 5.13B active for
//     gpt-oss-120b (5.71B counted here, less the 0.58B table); DeepSeek's 37B (36.63B; 37.55B with
//     the table, which would round to 38B) and the Kimi K2 model card's 32B (31.69B; 32.86B with
//     the table) fit only this reading;
//   - all but the embedding and the output layer ("non-embedding"): Qwen's 29.9B and 234B, and
//     Moonlight's 15.29B and 2.24B (the Muon paper).
// Published: Mixtral 8x7B 46.7B / 12.9B and Mixtral 8x22B 141B / 39B (Mistral AI's announcements);
// Qwen3-30B-A3B 30.5B (29.9B non-embedding) and Qwen3-235B-A22B 235B (234B) / 22B (model cards);
// DeepSeek-V3 671B / 37B (report; without the 14B MTP module); Kimi K2 1T / 32B (model card; the
// 1.04T / 32.6B attributed to its technical report match no reading: 1.026T, 31.69B or 32.86B
// here); Moonlight 15.29B / 2.24B (paper) and 16B / 3B (model card); gpt-oss-120b 116.83B / 5.13B
// (OpenAI model card table).
TEST(Presets, MoeParameterCountsMatchThePublishedFigures) {
  enum class Counts { everything, no_input_embedding, no_embeddings };
  struct Figure {
    std::string name;
    bool active;       // the active count, else the total
    double published;
    double rounding;   // the unit the figure is rounded to
    Counts counts;
  };
  for (const Figure& c : std::vector<Figure>{
           {"mixtral-8x7b", false, 46.7e9, 0.1e9, Counts::everything},
           {"mixtral-8x7b", true, 12.9e9, 0.1e9, Counts::everything},
           {"mixtral-8x22b", false, 141e9, 1e9, Counts::everything},
           {"mixtral-8x22b", true, 39e9, 1e9, Counts::everything},
           {"qwen3-30b-a3b", false, 30.5e9, 0.1e9, Counts::everything},
           {"qwen3-30b-a3b", false, 29.9e9, 0.1e9, Counts::no_embeddings},
           {"qwen3-235b-a22b", false, 235e9, 1e9, Counts::everything},
           {"qwen3-235b-a22b", false, 234e9, 1e9, Counts::no_embeddings},
           {"qwen3-235b-a22b", true, 22e9, 1e9, Counts::everything},
           {"deepseek-v3", false, 671e9, 1e9, Counts::everything},
           {"deepseek-v3", true, 37e9, 1e9, Counts::no_input_embedding},
           {"kimi-k2", false, 1e12, 1e12, Counts::everything},  // "1T": a loose check, see kimi-k2.yaml
           {"kimi-k2", true, 32e9, 1e9, Counts::no_input_embedding},
           {"moonlight-16b-a3b", false, 15.29e9, 0.01e9, Counts::no_embeddings},
           {"moonlight-16b-a3b", true, 2.24e9, 0.01e9, Counts::no_embeddings},
           {"moonlight-16b-a3b", false, 16e9, 1e9, Counts::everything},
           {"moonlight-16b-a3b", true, 3e9, 1e9, Counts::everything},
           {"gpt-oss-120b", false, 116.83e9, 0.01e9, Counts::everything},
           {"gpt-oss-120b", true, 5.13e9, 0.01e9, Counts::no_input_embedding}}) {
    ModelConfig m = syssim::load_model_yaml(model_path(c.name));
    const ParamCount count = closed_form_params(m);
    const double table = static_cast<double>(m.vocab_size) * m.hidden_size;
    double counted = c.active ? count.active : count.total;
    if (c.counts == Counts::no_input_embedding) counted -= table;
    if (c.counts == Counts::no_embeddings) counted -= (m.tie_word_embeddings ? 1 : 2) * table;
    const double allowed = std::max(0.005 * c.published, c.rounding / 2);
    EXPECT_LT(std::fabs(counted - c.published), allowed)
        << c.name << (c.active ? " active: " : " total: ") << counted << " vs published " << c.published;
  }

  // Qwen's "3.3B activated" is the count, 3.353B, cut to one decimal: 1.6% off, and rounding would
  // give 3.4B ("22B" of Qwen3-235B-A22B, 22.19B, reads either way).
  const double qwen_active = closed_form_params(syssim::load_model_yaml(model_path("qwen3-30b-a3b"))).active;
  EXPECT_EQ(std::floor(qwen_active / 1e8), 33) << qwen_active;
  // xAI's "314B" for Grok-1 is 0.54% below the 315.68B its released code adds up to; xAI does not
  // say what it counts (without the embedding: 314.88B).
  expect_near_rel(closed_form_params(syssim::load_model_yaml(model_path("grok-1"))).total, 314e9, 0.006, "grok-1");
}

// Hand calculations of the MoE closed form.
//   Mixtral 8x7B: embedding and output layer 2*32000*4096 = 262,144,000; per layer attention
//   4096*4096 + 2*4096*1024 + 4096*4096 = 41,943,040, router 8*4096 = 32,768, an expert
//   3*4096*14336 = 176,160,768 (eight: 1,409,286,144), norms 2*4096 = 8,192: 1,451,270,144,
//   times 32 = 46,440,644,608; plus the final norm 4,096: 46,702,792,704. Active: two experts
//   352,321,536, a layer 394,305,536, times 32 = 12,617,777,152, plus 262,148,096 = 12,879,925,248.
//   DeepSeek-V3: embedding and output layer 2*129280*7168 = 1,853,358,080; latent attention per
//   layer: query down 7168*1536 = 11,010,048, its norm 1,536, query up 1536*128*(128+64)
//   = 37,748,736, KV down 7168*(512+64) = 4,128,768, its norm 512, KV up 512*128*(128+128)
//   = 16,777,216, output 128*128*7168 = 117,440,512: 187,107,328; norms 2*7168 = 14,336.
//   Dense layers: MLP 3*7168*18432 = 396,361,728, a layer 583,483,392, times 3 = 1,750,450,176.
//   MoE layers: router 256*7168 = 1,835,008, an expert 3*7168*2048 = 44,040,192 (the shared one
//   too; 256 routed: 11,274,289,152), a layer 11,507,286,016, times 58 = 667,422,588,928.
//   Total 1,853,358,080 + 1,750,450,176 + 667,422,588,928 + 7,168 = 671,026,404,352. Active: an
//   MoE layer with 8 routed experts (352,321,536) 585,318,400, times 58 = 33,948,467,200; plus
//   1,853,358,080 + 1,750,450,176 + 7,168 = 37,552,282,624. One MTP layer adds 2*7168
//   + 7168*14336 + 11,507,286,016 + 7168 = 11,610,067,968 (13.46B with the copies of the
//   embedding and output layer that the Hugging Face checkpoint stores with it: DeepSeek's "14B").
TEST(Presets, MoeClosedFormMatchesHandCalculation) {
  const ParamCount mixtral = closed_form_params(syssim::load_model_yaml(model_path("mixtral-8x7b")));
  EXPECT_DOUBLE_EQ(mixtral.total, 46702792704.0);
  EXPECT_DOUBLE_EQ(mixtral.active, 12879925248.0);
  ModelConfig ds = syssim::load_model_yaml(model_path("deepseek-v3"));
  const ParamCount deepseek = closed_form_params(ds);
  EXPECT_DOUBLE_EQ(deepseek.total, 671026404352.0);
  EXPECT_DOUBLE_EQ(deepseek.active, 37552282624.0);
  ds.mtp_num_layers = 1;
  EXPECT_DOUBLE_EQ(closed_form_params(ds).total - deepseek.total, 11610067968.0);
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

// A mapping key that is no name (a YAML complex key) is bad data, not yaml-cpp's exception:
// found by fuzz_hardware_yaml (docs/fuzzing.md), which crashed on it.
TEST(Loader, KeysThatAreNotNamesAreRefused) {
  EXPECT_EQ(error_of([] { syssim::parse_hardware_yaml("? [a, b]\n: 1\n", "h.yaml"); }),
            "h.yaml: a key that is not a name, at line 1");
  EXPECT_EQ(error_of([] { syssim::parse_model_yaml(std::string(kValidModel) + "? {x: 1}\n: 2\n", "m.yaml"); }),
            "m.yaml: a key that is not a name, at line 7");
}

// A hardware YAML may extend a preset or another file: the base's keys, each of its own
// replacing the base's whole; its own name, else its file's stem; the base's bundle.
TEST(Loader, HardwareExtendsAPresetOrAFile) {
  const syssim::HardwareConfig h100 = syssim::load_hardware_yaml("h100-sxm-80gb");
  const std::string derived = write_temp("derived-h100.yaml", "extends: h100-sxm-80gb\ngpu_memory_GB: 100\n");
  syssim::HardwareConfig hw = syssim::load_hardware_yaml(derived);
  EXPECT_EQ(hw.name, "derived-h100");
  EXPECT_EQ(hw.gpu_memory_GB, 100);
  EXPECT_EQ(hw.peak_tflops_mm, h100.peak_tflops_mm);
  EXPECT_EQ(hw.topology.size(), h100.topology.size());
  EXPECT_EQ(hw.efficiency, h100.efficiency);
  EXPECT_EQ(hw.calibrated_model_dir, h100.calibrated_model_dir);  // the preset's bundle, not one beside this file
  // A path from the file's own folder, two levels deep.
  hw = syssim::load_hardware_yaml(write_temp("twice.yaml", "extends: derived-h100.yaml\nname: twice\nkernel_launch_us: 9\n"));
  EXPECT_EQ(hw.name, "twice");
  EXPECT_EQ(hw.gpu_memory_GB, 100);
  EXPECT_EQ(hw.kernel_launch_us, 9);
  // A cycle, and a value that names nothing.
  const std::string a = write_temp("cycle-a.yaml", "extends: cycle-b.yaml\n");
  write_temp("cycle-b.yaml", "extends: cycle-a.yaml\n");
  EXPECT_NE(error_of([&] { syssim::load_hardware_yaml(a); }).find("more than 8 presets extend one another (a cycle?)"),
            std::string::npos);
  const std::string listed = write_temp("listed.yaml", "extends: [h100-sxm-80gb]\n");
  EXPECT_EQ(error_of([&] { syssim::load_hardware_yaml(listed); }),
            listed + ": key 'extends' must name a hardware preset or YAML file");
}

TEST(Loader, EstimatorChoosesTheBundleOrTheRoofline) {
  EXPECT_FALSE(syssim::load_hardware_yaml("h100-sxm-80gb").calibrated_model_dir.empty());  // auto: its bundle
  const syssim::HardwareConfig roofline =
      syssim::load_hardware_yaml(write_temp("roofline.yaml", "extends: h100-sxm-80gb\nestimator: roofline\n"));
  EXPECT_TRUE(roofline.calibrated_model.empty());
  EXPECT_TRUE(roofline.calibrated_model_dir.empty());
  EXPECT_TRUE(roofline.calibrated_families.empty());
  const std::string unknown = write_temp("estimator-typo.yaml", "extends: h100-sxm-80gb\nestimator: calib\n");
  EXPECT_EQ(error_of([&] { syssim::load_hardware_yaml(unknown); }),
            unknown + ": key 'estimator' must be one of auto|roofline|calibrated, got 'calib'");
  const std::string unbundled = write_temp("no-bundle.yaml", std::string(kValidHardware) + "estimator: calibrated\n");
  EXPECT_EQ(error_of([&] { syssim::load_hardware_yaml(unbundled); }),
            unbundled + ": key 'estimator' is 'calibrated', but no calibrated_model names a bundle");
}

TEST(Loader, ErrorsNameAHardwareByItsFileWhereTheFileIsNamedOtherwise) {
  // A preset, a file named as it names itself, and a graph's hardware: the name alone; a copy
  // that keeps the preset's name: the name and the file.
  EXPECT_EQ(syssim::load_hardware_yaml("h100-sxm-80gb").label(), "h100-sxm-80gb");
  EXPECT_EQ(syssim::load_hardware_yaml(write_temp("mine.yaml", "extends: h100-sxm-80gb\nname: mine\n")).label(), "mine");
  const std::string copy = write_temp("copy.yaml", "extends: h100-sxm-80gb\nname: h100-sxm-80gb\n");
  EXPECT_EQ(syssim::load_hardware_yaml(copy).label(), "h100-sxm-80gb (" + copy + ")");
  const syssim::HardwareConfig from_graph =
      syssim::hardware_from_json(syssim::to_json(syssim::load_hardware_yaml(copy)), "graph");
  EXPECT_EQ(from_graph.label(), "h100-sxm-80gb");
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

// Megatron-Core asserts that the heads split hidden_size evenly unless kv_channels is given.
TEST(Loader, HeadsThatDoNotDivideHiddenNeedKvChannels) {
  std::string text = kValidModel;
  text.replace(text.find("num_attention_heads: 4"), 22, "num_attention_heads: 6");
  EXPECT_EQ(error_of([&] { syssim::parse_model_yaml(text, "m.yaml"); }),
            "m.yaml: hidden_size=64 is not a multiple of num_attention_heads=6; give kv_channels (the head dimension)");
  EXPECT_EQ(syssim::parse_model_yaml(text + "kv_channels: 16\n", "m.yaml").kv_channels, 16);
}

// A layer count no model has is refused when read: 10^9 layers used to be traced for minutes
// (issue 23), and a per-layer list sized by it.
TEST(Loader, LayerCountsAreBoundedWhenRead) {
  std::string text = kValidModel;
  text.replace(text.find("num_layers: 2"), 13, "num_layers: 1000000000");
  EXPECT_EQ(error_of([&] { syssim::parse_model_yaml(text, "m.yaml"); }),
            "m.yaml: key 'num_layers' is 1000000000; syssim takes at most 10000 layers");
  EXPECT_EQ(error_of([&] { syssim::parse_model_yaml(std::string(kValidModel) + "mtp_num_layers: 20000\n", "m.yaml"); }),
            "m.yaml: key 'mtp_num_layers' is 20000; syssim takes at most 10000 layers");
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

TEST(Loader, HostTimesAreReadAndBadOnesNamed) {
  HardwareConfig hw = syssim::parse_hardware_yaml(
      std::string(kValidHardware) + "host:\n  op_us: 13.5\n  module_us: 36.6\n  launch_us: 4\n", "h.yaml");
  EXPECT_DOUBLE_EQ(hw.host.op_us, 13.5);
  EXPECT_DOUBLE_EQ(hw.host.module_us, 36.6);
  EXPECT_DOUBLE_EQ(hw.host.launch_us, 4);
  EXPECT_TRUE(hw.host.simulated());
  EXPECT_FALSE(syssim::parse_hardware_yaml(kValidHardware, "h.yaml").host.simulated());
  EXPECT_EQ(error_of([] { syssim::parse_hardware_yaml(std::string(kValidHardware) + "host:\n  op_us: -1\n", "h.yaml"); }),
            "h.yaml: key 'host.op_us' must be 0 or more and finite, got -1");
  const std::string message =
      error_of([] { syssim::parse_hardware_yaml(std::string(kValidHardware) + "host:\n  launch: 4\n", "h.yaml"); });
  EXPECT_NE(message.find("launch"), std::string::npos) << message;
  EXPECT_NE(message.find("launch_us"), std::string::npos) << message;
}

TEST(Loader, MultiGpuNodeNeedsATopology) {
  std::string text = kValidHardware;
  text.erase(text.find("topology:"));
  std::string message = error_of([&] { syssim::parse_hardware_yaml(text, "no-topology.yaml"); });
  EXPECT_NE(message.find("needs topology.levels[0]"), std::string::npos) << message;
}

TEST(Loader, ScaleOutLevelsAreCheckedWithTheirIndex) {
  const std::string leaf = "    - kind: leaf\n      size: 64\n      bandwidth_GBps: 50\n";
  // What each file adds to a valid hardware YAML, and the error naming it. The last two: a key
  // no reader of its level takes is refused, not ignored.
  const std::vector<std::array<std::string, 3>> cases = {
      {"both.yaml", leaf + "inter_node_bandwidth_GBps: 50\n",
       "both.yaml: give the scale-out network either as topology.levels[1..] or as inter_node_bandwidth_GBps, not both"},
      {"latency.yaml", leaf + "inter_node_latency_us: 50\n",
       "latency.yaml: give the scale-out latency as topology.levels[1..].latency_us; inter_node_latency_us=50 is for "
       "the inter_node_bandwidth_GBps shorthand"},
      {"uneven.yaml", "    - kind: leaf\n      size: 12\n      bandwidth_GBps: 50\n",
       "uneven.yaml: topology.levels[1].size=12: expected a multiple of the level below's size 8, or none "
       "(the whole cluster)"},
      {"under.yaml", leaf + "      oversubscription: 0.5\n",
       "under.yaml: topology level 'leaf': oversubscription: expected at least 1, got 0.5"},
      {"n.yaml", "      oversubscription: 2\n",
       "n.yaml: topology.levels[0]: oversubscription applies to the levels above 0 (the switches between nodes), "
       "got 2 on the node's own link"},
      {"l.yaml", leaf + "      nvls_bus_bandwidth_GBps: 400\n",
       "l.yaml: topology.levels[1]: nvls_bus_bandwidth_GBps is the NVLink domain's (levels[0]) NVLink SHARP "
       "all-reduce; level 1 does not take it"}};
  for (const auto& [file, added, message] : cases)
    EXPECT_EQ(error_of([&] { syssim::parse_hardware_yaml(std::string(kValidHardware) + added, file); }), message);
}

// Every number of a hardware YAML is range-checked where it is read, naming the file and key:
// NaN, infinite, zero or negative peaks, sizes and bandwidths; negative or infinite latencies
// and launch floors (0 is none).
TEST(Loader, HardwareNumbersOutOfRangeAreNamed) {
  auto error_with = [](const std::string& line) {
    return error_of([&] { syssim::parse_hardware_yaml(std::string(kValidHardware) + line, "h.yaml"); });
  };
  auto replaced = [](const std::string& from, const std::string& to) {
    std::string text = kValidHardware;
    text.replace(text.find(from), from.size(), to);
    return error_of([&] { syssim::parse_hardware_yaml(text, "h.yaml"); });
  };
  EXPECT_EQ(replaced("peak_tflops_mm: 100", "peak_tflops_mm: .nan"), "h.yaml: key 'peak_tflops_mm' must be positive, got nan");
  EXPECT_EQ(replaced("peak_tflops_mm: 100", "peak_tflops_mm: .inf"), "h.yaml: key 'peak_tflops_mm' must be finite, got inf");
  EXPECT_EQ(replaced("peak_memory_bandwidth_GBps: 1000", "peak_memory_bandwidth_GBps: -1"),
            "h.yaml: key 'peak_memory_bandwidth_GBps' must be positive, got -1");
  EXPECT_EQ(error_with("gpu_memory_GB: 0\n"), "h.yaml: key 'gpu_memory_GB' must be positive, got 0");
  EXPECT_EQ(error_with("gpu_memory_GB: .nan\n"), "h.yaml: key 'gpu_memory_GB' must be positive, got nan");
  EXPECT_EQ(error_with("peak_tflops_mm_fp8: .inf\n"), "h.yaml: key 'peak_tflops_mm_fp8' must be finite, got inf");
  EXPECT_EQ(error_with("kernel_launch_us: -4\n"), "h.yaml: key 'kernel_launch_us' must be 0 or more and finite, got -4");
  EXPECT_EQ(error_with("kernel_launch_us: .inf\n"),
            "h.yaml: key 'kernel_launch_us' must be 0 or more and finite, got inf");
  EXPECT_EQ(error_with("compute_slowdown_under_communication: -0.1\n"),
            "h.yaml: key 'compute_slowdown_under_communication' must be 0 or more and finite, got -0.1");
  EXPECT_EQ(error_with("compute_slowdown_under_communication: 12\n"),
            "h.yaml: key 'compute_slowdown_under_communication' must be at most 10, got 12");
  EXPECT_EQ(error_with("inter_node_latency_us: .nan\n"),
            "h.yaml: key 'inter_node_latency_us' must be 0 or more and finite, got nan");
  EXPECT_EQ(replaced("      bandwidth_GBps: 100", "      bandwidth_GBps: .inf"),
            "h.yaml: topology.levels[0]: key 'bandwidth_GBps' must be finite, got inf");
  EXPECT_EQ(replaced("      bandwidth_GBps: 100", "      bandwidth_GBps: 100\n      latency_us: -1"),
            "h.yaml: topology.levels[0]: key 'latency_us' must be 0 or more and finite, got -1");
  EXPECT_EQ(replaced("      bandwidth_GBps: 100", "      bandwidth_GBps: 100\n      efficiency: .nan"),
            "h.yaml: topology level 'nvlink': efficiency: expected a share in (0, 1], got nan");
  EXPECT_EQ(replaced("      bandwidth_GBps: 100", "      bandwidth_GBps: 100\n      alltoall_efficiency: 1.2"),
            "h.yaml: topology level 'nvlink': alltoall_efficiency: expected a share in (0, 1], got 1.2");
  EXPECT_EQ(error_of([] { syssim::parse_hardware_yaml(std::string(kValidHardware) +
                                                          "    - kind: leaf\n      bandwidth_GBps: 50\n"
                                                          "      oversubscription: .inf\n",
                                                      "h.yaml"); }),
            "h.yaml: topology level 'leaf': oversubscription: expected at least 1, got inf");
  // NVLink SHARP's bus bandwidth exists on level 0 only: it is checked there too.
  EXPECT_EQ(replaced("      bandwidth_GBps: 100", "      bandwidth_GBps: 100\n      nvls_bus_bandwidth_GBps: -5"),
            "h.yaml: topology.levels[0]: key 'nvls_bus_bandwidth_GBps' must be positive, got -5");
  EXPECT_EQ(replaced("      bandwidth_GBps: 100", "      bandwidth_GBps: 100\n      nvls_bus_bandwidth_GBps: .inf"),
            "h.yaml: topology.levels[0]: key 'nvls_bus_bandwidth_GBps' must be finite, got inf");
  EXPECT_EQ(error_with("attention_kernels:\n  fa3: {forward: 1, backward: 1}\n"),
            "h.yaml: attention_kernels: unknown key 'fa3' (did you mean 'flash2'?)");
  EXPECT_EQ(error_with("attention_kernels:\n  triton: {forward: 2}\n"),
            "h.yaml: attention_kernels.triton: missing required key 'backward'");
  EXPECT_EQ(error_with("attention_kernels:\n  triton: {forward: 0, backward: 2}\n"),
            "h.yaml: key 'attention_kernels.triton.forward' must be positive, got 0");
  // Size 0 (the whole cluster) below another level would leave that level nothing to group.
  EXPECT_EQ(error_with("    - kind: leaf\n      size: 0\n      bandwidth_GBps: 50\n"
                       "    - kind: spine\n      bandwidth_GBps: 50\n"),
            "h.yaml: topology.levels[1].size=0: only the last level may span the whole cluster");
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

TEST(Loader, MaskedSoftmaxFusionNeedsTheUnfusedAttentionAndSurvivesTheGraph) {
  const std::string flash = std::string(kValidModel) + "masked_softmax_fusion: false\n";
  EXPECT_EQ(error_of([&] { syssim::parse_model_yaml(flash, "m.yaml"); }),
            "m.yaml: key 'masked_softmax_fusion' needs attention_backend: unfused");
  syssim::ModelConfig m = syssim::parse_model_yaml(
      std::string(kValidModel) + "attention_backend: unfused\nmasked_softmax_fusion: false\n", "m.yaml");
  EXPECT_FALSE(m.masked_softmax_fusion);
  EXPECT_FALSE(syssim::model_from_json(syssim::to_json(m), "m").masked_softmax_fusion);
  EXPECT_FALSE(syssim::to_json(syssim::parse_model_yaml(kValidModel, "m.yaml")).contains("masked_softmax_fusion"));
}

TEST(Loader, UnfusedKernelsNeedTheirKernelAndSurviveTheGraph) {
  auto model_error = [](const std::string& extra) {
    return error_of([&] { syssim::parse_model_yaml(std::string(kValidModel) + extra, "m.yaml"); });
  };
  EXPECT_EQ(model_error("swiglu: false\nbias_swiglu_fusion: false\n"), "m.yaml: bias_swiglu_fusion: false needs swiglu");
  EXPECT_EQ(model_error("rope: false\napply_rope_fusion: false\n"),
            "m.yaml: apply_rope_fusion: false needs rope, without multi_latent_attention");
  EXPECT_EQ(model_error("normalization: LayerNorm\nrms_norm_fusion: false\n"),
            "m.yaml: rms_norm_fusion: false needs normalization RMSNorm");
  const syssim::ModelConfig m = syssim::parse_model_yaml(
      std::string(kValidModel) + "swiglu: true\nbias_swiglu_fusion: false\napply_rope_fusion: false\nrms_norm_fusion: false\n",
      "m.yaml");
  const syssim::ModelConfig reread = syssim::model_from_json(syssim::to_json(m), "m");
  EXPECT_FALSE(reread.bias_swiglu_fusion);
  EXPECT_FALSE(reread.apply_rope_fusion);
  EXPECT_FALSE(reread.rms_norm_fusion);
  // Fused, the keys stay out of the graph: it reads as before 1.10.
  const nlohmann::json fused = syssim::to_json(syssim::parse_model_yaml(kValidModel, "m.yaml"));
  for (const char* key : {"bias_swiglu_fusion", "apply_rope_fusion", "rms_norm_fusion"}) EXPECT_FALSE(fused.contains(key));
}

TEST(Loader, RouterDtypeIsFp32OrAbsentAndSurvivesTheGraph) {
  syssim::ModelConfig v3 = syssim::load_model_yaml(model_path("deepseek-v3"));
  EXPECT_EQ(v3.moe_router_dtype, "fp32");  // DeepSeek-V3's FP32 gating (the preset's sources)
  EXPECT_EQ(syssim::model_from_json(syssim::to_json(v3), "m").moe_router_dtype, "fp32");
  v3.moe_router_dtype = "bf16";
  EXPECT_EQ(error_of([&] { syssim::model_from_json(syssim::to_json(v3), "m"); }),
            "graph: m: key 'moe_router_dtype' must be one of fp32, got 'bf16'");
  v3.moe_router_dtype = "fp32";
  v3.add_bias_linear = true;
  EXPECT_EQ(error_of([&] { syssim::model_from_json(syssim::to_json(v3), "m"); }),
            "graph: m: moe_router_dtype: fp32 with a router bias (add_bias_linear) is not simulated");
  v3.add_bias_linear = false;
  v3.moe_router_dtype = "";
  EXPECT_FALSE(syssim::to_json(v3).contains("moe_router_dtype"));  // reads as before 1.20
}

TEST(Loader, ActivationClampNeedsTheExpertsFusedGluAndSurvivesTheGraph) {
  auto model_error = [](const std::string& text) {
    return error_of([&] { syssim::parse_model_yaml(text, "m.yaml"); });
  };
  const std::string needs = "m.yaml: key 'activation_func_clamp_value' needs swiglu with bias_swiglu_fusion and a "
                            "mixture of experts on every layer";
  EXPECT_EQ(model_error(std::string(kValidModel) + "swiglu: true\nactivation_func_clamp_value: 7.0\n"), needs);
  syssim::ModelConfig oss = syssim::load_model_yaml(model_path("gpt-oss-120b"));
  oss.activation_func_clamp_value = -1;
  EXPECT_EQ(error_of([&] { syssim::model_from_json(syssim::to_json(oss), "m"); }),
            "graph: m: key 'activation_func_clamp_value' must be positive, got -1");
  oss.activation_func_clamp_value = 7.0;
  EXPECT_DOUBLE_EQ(syssim::model_from_json(syssim::to_json(oss), "m").activation_func_clamp_value, 7.0);
  oss.activation_func_clamp_value = 0;
  EXPECT_FALSE(syssim::to_json(oss).contains("activation_func_clamp_value"));  // reads as before 1.19
}

TEST(Loader, TorchtitansLinearsAndLossSurviveTheGraph) {
  auto model_error = [](const std::string& extra) {
    return error_of([&] { syssim::parse_model_yaml(std::string(kValidModel) + extra, "m.yaml"); });
  };
  EXPECT_EQ(model_error("cross_entropy: fused\n"),
            "m.yaml: key 'cross_entropy' must be one of vocab_parallel|torch_fp32, got 'fused'");
  const syssim::ModelConfig m = syssim::parse_model_yaml(
      std::string(kValidModel) + "projection_fusion: false\ncross_entropy: torch_fp32\n", "m.yaml");
  const syssim::ModelConfig reread = syssim::model_from_json(syssim::to_json(m), "m");
  EXPECT_FALSE(reread.projection_fusion);
  EXPECT_EQ(reread.cross_entropy, "torch_fp32");
  // Megatron's defaults stay out of the graph: it reads as before 1.14.
  const nlohmann::json megatron = syssim::to_json(syssim::parse_model_yaml(kValidModel, "m.yaml"));
  for (const char* key : {"projection_fusion", "cross_entropy"}) EXPECT_FALSE(megatron.contains(key));
}

TEST(Loader, InvalidValuesAreRejected) {
  std::string text = std::string(kValidModel) + "normalization: BatchNorm\n";
  EXPECT_NE(error_of([&] { syssim::parse_model_yaml(text, "m.yaml"); }).find("RMSNorm|LayerNorm"),
            std::string::npos);
  text = std::string(kValidModel) + "num_query_groups: 3\n";
  EXPECT_NE(error_of([&] { syssim::parse_model_yaml(text, "m.yaml"); }).find("does not divide"),
            std::string::npos);
  text = std::string(kValidModel) + "attention_backend: sdpa\n";
  EXPECT_NE(error_of([&] { syssim::parse_model_yaml(text, "m.yaml"); }).find("flash|flash2|triton|unfused"), std::string::npos);
  text = std::string(kValidModel) + "hidden_dropout: 1.0\n";
  EXPECT_EQ(error_of([&] { syssim::parse_model_yaml(text, "m.yaml"); }),
            "m.yaml: key 'hidden_dropout' must be in [0, 1), got 1");
  text = std::string(kValidModel) + "attention_dropout: -0.1\n";
  EXPECT_NE(error_of([&] { syssim::parse_model_yaml(text, "m.yaml"); }).find("'attention_dropout' must be in [0, 1)"),
            std::string::npos);
  // A NaN or infinite epsilon or RoPE base would reach the graph as null (issue 23).
  text = std::string(kValidModel) + "rms_norm_eps: .nan\n";
  EXPECT_EQ(error_of([&] { syssim::parse_model_yaml(text, "m.yaml"); }),
            "m.yaml: key 'rms_norm_eps' must be positive, got nan");
  text = std::string(kValidModel) + "rope_theta: .inf\n";
  EXPECT_EQ(error_of([&] { syssim::parse_model_yaml(text, "m.yaml"); }),
            "m.yaml: key 'rope_theta' must be finite, got inf");
  text = std::string(kValidModel) + "rms_norm_eps: 0\n";
  EXPECT_EQ(error_of([&] { syssim::parse_model_yaml(text, "m.yaml"); }),
            "m.yaml: key 'rms_norm_eps' must be positive, got 0");
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
  // The MoE presets also state every expert, latent-attention and MTP setting, defaults included.
  for (const auto& name : kMoeModels) {
    std::string text = read_file(model_path(name));
    for (const char* key :
         {"num_moe_experts:", "moe_router_topk:", "moe_ffn_hidden_size:", "moe_shared_expert_intermediate_size:",
          "moe_layer_freq:", "moe_router_score_function:", "moe_router_num_groups:", "moe_router_group_topk:",
          "moe_router_enable_expert_bias:", "moe_router_load_balancing_type:", "multi_latent_attention:",
          "mtp_num_layers:", "softmax_type:", "make_vocab_size_divisible_by:", "max_position_embeddings:"})
      EXPECT_NE(text.find(key), std::string::npos) << name << " lacks " << key;
  }
}
