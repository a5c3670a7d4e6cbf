// Tests of the Hugging Face model source (lib/config/huggingface): where config.json is found,
// how its keys map to the model fields, and what is refused. The independent reference for the
// shipped config.json files is the paper-cited preset of configs/models/ describing the same model,
// and for the mixture-of-experts files the numbers their papers and model cards publish.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "config/config.hpp"
#include "config/huggingface.hpp"

namespace fs = std::filesystem;
using syssim::DataError;
using syssim::ModelConfig;

namespace {

const std::string kRoot = SYSSIM_SOURCE_DIR;

// A fresh empty folder of the test's temporary folder.
fs::path fresh_dir(const std::string& name) {
  fs::path dir = fs::path(testing::TempDir()) / "syssim_test_huggingface" / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const DataError& e) {
    return e.what();
  }
  return "(no DataError)";
}

// A model YAML `huggingface: id` with `overrides` (YAML flow mapping text) in `dir`.
ModelConfig load_hf(const fs::path& dir, const std::string& id, const std::string& overrides) {
  fs::path yaml = dir / "model.yaml";
  write(yaml, "huggingface: " + id + "\noverrides: " + overrides + "\n");
  return syssim::load_model_yaml(yaml.string());
}

// Clears the environment variables that choose the Hugging Face cache for one test.
class HfEnvironment : public testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"}) unsetenv(name);
    setenv("HOME", fresh_dir("home").c_str(), 1);
  }
};

// The shipped config.json and the preset of configs/models describing the same model.
struct ShippedPair {
  std::string id;
  std::string preset;
  int64_t max_position_embeddings;  // config.json's own value (Llama 3.1 supports 131072 positions)
};
const std::vector<ShippedPair> kShipped = {
    {"meta-llama/Meta-Llama-3-8B", "llama3-8b", 8192},       {"meta-llama/Llama-3.1-8B", "llama3-8b", 131072},
    {"meta-llama/Meta-Llama-3-70B", "llama3-70b", 8192},     {"meta-llama/Llama-3.1-70B", "llama3-70b", 131072},
    {"meta-llama/Llama-3.1-405B", "llama3.1-405b", 131072},  {"meta-llama/Llama-2-7b-hf", "llama2-7b", 4096},
    {"meta-llama/Llama-2-70b-hf", "llama2-70b", 4096},       {"Qwen/Qwen3-8B", "qwen3-8b", 40960},
};
// The shipped config.json files of mixture-of-experts models, checked below against the numbers
// their papers and model cards publish.
const std::vector<std::string> kShippedMixtureOfExperts = {
    "mistralai/Mixtral-8x7B-v0.1",  "mistralai/Mixtral-8x22B-v0.1", "Qwen/Qwen3-30B-A3B",
    "Qwen/Qwen3-235B-A22B",         "deepseek-ai/DeepSeek-V3",      "moonshotai/Kimi-K2-Instruct",
    "moonshotai/Moonlight-16B-A3B", "openai/gpt-oss-120b"};

// The layers of `m` for which `is_layer` holds (MoE layers, sliding-window layers).
std::vector<int64_t> layers_where(const ModelConfig& m, bool (ModelConfig::*is_layer)(int64_t) const) {
  std::vector<int64_t> layers;
  for (int64_t layer = 0; layer < m.num_layers; ++layer)
    if ((m.*is_layer)(layer)) layers.push_back(layer);
  return layers;
}

// The layers first, first + 1, ..., last.
std::vector<int64_t> range(int64_t first, int64_t last) {
  std::vector<int64_t> layers;
  for (int64_t layer = first; layer <= last; ++layer) layers.push_back(layer);
  return layers;
}

// A shipped config.json with one key changed, written to `path`.
void write_changed(const fs::path& path, const std::string& id, const std::string& key, const nlohmann::json& value) {
  nlohmann::json config = nlohmann::json::parse(std::ifstream(kRoot + "/configs/hf/" + id + "/config.json"));
  config[key] = value;
  write(path, config.dump());
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The shipped configs against the paper-cited presets

TEST_F(HfEnvironment, EveryShippedConfigMapsToItsPreset) {
  fs::path dir = fresh_dir("shipped");
  for (const auto& pair : kShipped) {
    ModelConfig preset = syssim::load_model_yaml(kRoot + "/configs/models/" + pair.preset + ".yaml");
    ModelConfig hf = load_hf(dir, pair.id, "{seq_length: " + std::to_string(preset.seq_length) + "}");
    EXPECT_EQ(hf.max_position_embeddings, pair.max_position_embeddings) << pair.id;
    hf.name = preset.name;
    hf.max_position_embeddings = preset.max_position_embeddings;
    EXPECT_EQ(syssim::to_json(hf), syssim::to_json(preset)) << pair.id;
  }
}

TEST_F(HfEnvironment, EveryShippedFolderIsInTheTable) {
  int files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(kRoot + "/configs/hf"))
    if (entry.path().filename() == "config.json") ++files;
  EXPECT_EQ(files, static_cast<int>(kShipped.size() + kShippedMixtureOfExperts.size()));
}

// ---------------------------------------------------------------------------------------------
// Where config.json is found

TEST_F(HfEnvironment, APathToAFileOrAFolderComesFirst) {
  fs::path dir = fresh_dir("path");
  // A folder named like the id, beside the YAML, holding a 2-layer Llama 3.1 8B.
  write(dir / "meta-llama/Llama-3.1-8B/config.json",
        R"({"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 2, "hidden_size": 4096,
            "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 8,
            "vocab_size": 128256, "max_position_embeddings": 131072})");
  EXPECT_EQ(load_hf(dir, "meta-llama/Llama-3.1-8B", "{seq_length: 8192}").num_layers, 2);
  write(dir / "tiny.json", R"({"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 3})");
  EXPECT_EQ(load_hf(dir, "tiny.json", "{seq_length: 1024}").num_layers, 3);
  EXPECT_EQ(load_hf(dir, (dir / "tiny.json").string(), "{seq_length: 1024}").num_layers, 3);
}

TEST_F(HfEnvironment, TheCacheUsesTheSnapshotRefsMainNamesElseTheLastOne) {
  fs::path dir = fresh_dir("cache");
  fs::path repo = dir / "hf/hub/models--acme--tiny";
  auto snapshot = [&](const std::string& revision, int layers) {
    write(repo / "snapshots" / revision / "config.json",
          R"({"architectures": ["LlamaForCausalLM"], "num_hidden_layers": )" + std::to_string(layers) + "}");
  };
  snapshot("aaa111", 5);
  snapshot("fff999", 7);
  setenv("HF_HOME", (dir / "hf").c_str(), 1);
  EXPECT_EQ(load_hf(dir, "acme/tiny", "{seq_length: 1024}").num_layers, 7);  // fff999 sorts last
  write(repo / "refs/main", "aaa111\n");
  EXPECT_EQ(load_hf(dir, "acme/tiny", "{seq_length: 1024}").num_layers, 5);
}

TEST_F(HfEnvironment, CacheVariablesAreReadAsHuggingfaceHubDoes) {
  fs::path dir = fresh_dir("variables");
  auto cache_with = [&](const std::string& cache, int layers) {
    write(dir / cache / "models--acme--tiny/snapshots/r/config.json",
          R"({"architectures": ["LlamaForCausalLM"], "num_hidden_layers": )" + std::to_string(layers) + "}");
  };
  cache_with("home/.cache/huggingface/hub", 1);
  cache_with("xdg/huggingface/hub", 2);
  cache_with("hf_home/hub", 3);
  cache_with("legacy", 4);
  cache_with("hub_cache", 5);
  setenv("HOME", (dir / "home").c_str(), 1);
  EXPECT_EQ(load_hf(dir, "acme/tiny", "{seq_length: 64}").num_layers, 1);
  setenv("XDG_CACHE_HOME", (dir / "xdg").c_str(), 1);
  EXPECT_EQ(load_hf(dir, "acme/tiny", "{seq_length: 64}").num_layers, 2);
  setenv("HF_HOME", (dir / "hf_home").c_str(), 1);
  EXPECT_EQ(load_hf(dir, "acme/tiny", "{seq_length: 64}").num_layers, 3);
  setenv("HUGGINGFACE_HUB_CACHE", (dir / "legacy").c_str(), 1);
  EXPECT_EQ(load_hf(dir, "acme/tiny", "{seq_length: 64}").num_layers, 4);
  setenv("HF_HUB_CACHE", (dir / "hub_cache").c_str(), 1);
  EXPECT_EQ(load_hf(dir, "acme/tiny", "{seq_length: 64}").num_layers, 5);
}

TEST_F(HfEnvironment, TheCacheComesBeforeTheShippedConfigs) {
  fs::path dir = fresh_dir("before");
  write(dir / "hf/hub/models--meta-llama--Llama-3.1-8B/snapshots/r/config.json",
        R"({"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 4})");
  EXPECT_EQ(load_hf(dir, "meta-llama/Llama-3.1-8B", "{seq_length: 8192}").num_layers, 32);  // shipped
  setenv("HF_HOME", (dir / "hf").c_str(), 1);
  EXPECT_EQ(load_hf(dir, "meta-llama/Llama-3.1-8B", "{seq_length: 8192}").num_layers, 4);
}

TEST_F(HfEnvironment, NoConfigNamesEveryPlaceLookedIn) {
  fs::path dir = fresh_dir("missing");
  setenv("HF_HOME", (dir / "hf").c_str(), 1);
  setenv("SYSSIM_DATA_DIR", (dir / "data").c_str(), 1);  // the shipped configs: the data folder's hf/
  std::string yaml = (dir / "model.yaml").string();
  EXPECT_EQ(error_of([&] { load_hf(dir, "meta-llama/Foo", "{seq_length: 8}"); }),
            yaml + ": huggingface: meta-llama/Foo: no config.json found (looked in: " + (dir / "meta-llama/Foo").string() +
                ", " + (dir / "hf/hub/models--meta-llama--Foo/snapshots/*/config.json").string() + ", " +
                (dir / "data/hf/meta-llama/Foo/config.json").string() + ")");
  unsetenv("SYSSIM_DATA_DIR");
}

// ---------------------------------------------------------------------------------------------
// Mapping of the architectures

// GPT-2 small as published (huggingface.co/openai-community/gpt2 config.json): 12 layers of
// width 768, 12 heads, 1024 learned positions, vocabulary 50257, LayerNorm 1e-5, dropouts 0.1,
// gelu_new, n_inner null (4 x 768 = 3072), tied embeddings by default.
TEST_F(HfEnvironment, Gpt2IsMegatronsGpt) {
  fs::path dir = fresh_dir("gpt2");
  write(dir / "gpt2/config.json",
        R"({"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
            "embd_pdrop": 0.1, "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": 1024, "n_embd": 768,
            "n_head": 12, "n_layer": 12, "n_positions": 1024, "resid_pdrop": 0.1, "vocab_size": 50257})");
  ModelConfig m = load_hf(dir, "gpt2", "{seq_length: 1024}");
  EXPECT_EQ(m.num_layers, 12);
  EXPECT_EQ(m.hidden_size, 768);
  EXPECT_EQ(m.num_attention_heads, 12);
  EXPECT_EQ(m.num_query_groups, 12);
  EXPECT_EQ(m.kv_channels, 64);
  EXPECT_EQ(m.ffn_hidden_size, 3072);
  EXPECT_EQ(m.max_position_embeddings, 1024);
  EXPECT_EQ(m.vocab_size, 50257);
  EXPECT_FALSE(m.swiglu);
  EXPECT_EQ(m.activation, "gelu");
  EXPECT_FALSE(m.rope);
  EXPECT_TRUE(m.tie_word_embeddings);
  EXPECT_EQ(m.normalization, "LayerNorm");
  EXPECT_DOUBLE_EQ(m.rms_norm_eps, 1e-5);
  EXPECT_TRUE(m.add_bias_linear);
  EXPECT_DOUBLE_EQ(m.hidden_dropout, 0.1);
  EXPECT_DOUBLE_EQ(m.attention_dropout, 0.1);
}

// Qwen2.5-7B (huggingface.co/Qwen/Qwen2.5-7B config.json): QKV biases, untied.
TEST_F(HfEnvironment, Qwen2HasQkvBiases) {
  fs::path dir = fresh_dir("qwen2");
  write(dir / "q/config.json",
        R"({"architectures": ["Qwen2ForCausalLM"], "hidden_size": 3584, "intermediate_size": 18944,
            "max_position_embeddings": 131072, "num_attention_heads": 28, "num_hidden_layers": 28,
            "num_key_value_heads": 4, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 131072,
            "tie_word_embeddings": false, "use_sliding_window": false, "vocab_size": 152064})");
  ModelConfig m = load_hf(dir, "q", "{seq_length: 4096}");
  EXPECT_TRUE(m.add_qkv_bias);
  EXPECT_FALSE(m.add_bias_linear);
  EXPECT_FALSE(m.qk_layernorm);
  EXPECT_EQ(m.kv_channels, 128);  // 3584 / 28
  EXPECT_EQ(m.num_query_groups, 4);
  EXPECT_DOUBLE_EQ(m.rope_theta, 1e6);
}

// Gemma 3 4B as its config.json nests it (Gemma3ForConditionalGeneration; text_config lists only
// what differs from Gemma3TextConfig's defaults: 8 heads, 4 KV heads, head_dim 256, vocabulary 262208).
TEST_F(HfEnvironment, Gemma3NestedTextConfigTakesTheClassDefaults) {
  fs::path dir = fresh_dir("gemma3");
  write(dir / "g/config.json",
        R"({"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
            "text_config": {"hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text",
                            "num_hidden_layers": 34, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
                            "sliding_window": 1024},
            "vision_config": {"hidden_size": 1152}})");
  ModelConfig m = load_hf(dir, "g", "{seq_length: 1024}");
  EXPECT_EQ(m.num_layers, 34);
  EXPECT_EQ(m.hidden_size, 2560);
  EXPECT_EQ(m.num_attention_heads, 8);
  EXPECT_EQ(m.num_query_groups, 4);
  EXPECT_EQ(m.kv_channels, 256);
  EXPECT_EQ(m.ffn_hidden_size, 10240);
  EXPECT_EQ(m.vocab_size, 262208);
  EXPECT_TRUE(m.swiglu);  // GeGLU, priced as SwiGLU
  EXPECT_TRUE(m.qk_layernorm);
  EXPECT_TRUE(m.tie_word_embeddings);
  EXPECT_DOUBLE_EQ(m.rope_theta, 1e6);
  // The sliding-window layers attend to 1024 tokens; a longer sequence is refused.
  std::string message = error_of([&] { load_hf(dir, "g", "{seq_length: 2048}"); });
  EXPECT_NE(message.find("architecture Gemma3ForConditionalGeneration has sliding-window attention (window 1024) "
                         "and seq_length 2048 is longer"), std::string::npos) << message;
  // Unless the overrides say which layers slide and how far (Gemma 3: five of every six).
  const ModelConfig windowed =
      load_hf(dir, "g", "{seq_length: 2048, window_size: 1023, window_attn_skip_freq: 6}");
  EXPECT_EQ(windowed.window_size, 1023);
  // A text_config that is not an object was read as one without keys: every default (issue 23).
  write(dir / "bad/config.json",
        R"({"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3", "text_config": "gemma3_text"})");
  EXPECT_EQ(error_of([&] { load_hf(dir, "bad", "{seq_length: 1024}"); }),
            (dir / "model.yaml").string() + ": huggingface: bad: " + (dir / "bad/config.json").string() +
                ": key 'text_config' must be an object, got \"gemma3_text\"");
}

// Gemma 2 9B (huggingface.co/google/gemma-2-9b config.json): head_dim 256 x 16 heads = 4096 != 3584.
TEST_F(HfEnvironment, Gemma2KeepsItsExplicitHeadDim) {
  fs::path dir = fresh_dir("gemma2");
  write(dir / "g/config.json",
        R"({"architectures": ["Gemma2ForCausalLM"], "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0,
            "head_dim": 256, "hidden_act": "gelu_pytorch_tanh", "hidden_activation": "gelu_pytorch_tanh",
            "hidden_size": 3584, "intermediate_size": 14336, "max_position_embeddings": 8192,
            "num_attention_heads": 16, "num_hidden_layers": 42, "num_key_value_heads": 8, "rms_norm_eps": 1e-06,
            "rope_theta": 10000.0, "sliding_window": 4096, "vocab_size": 256000})");
  ModelConfig m = load_hf(dir, "g", "{seq_length: 4096}");
  EXPECT_EQ(m.kv_channels, 256);
  EXPECT_EQ(m.num_query_groups, 8);
  EXPECT_FALSE(m.qk_layernorm);
  EXPECT_TRUE(m.tie_word_embeddings);
  EXPECT_NE(error_of([&] { load_hf(dir, "g", "{seq_length: 8192}"); }).find("(window 4096)"), std::string::npos);
}

TEST_F(HfEnvironment, MistralWithoutAWindowTakesAnySequence) {
  fs::path dir = fresh_dir("mistral");
  // Mistral-7B-v0.3 (huggingface.co/mistralai/Mistral-7B-v0.3): sliding_window null.
  write(dir / "m/config.json",
        R"({"architectures": ["MistralForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336,
            "max_position_embeddings": 32768, "num_attention_heads": 32, "num_hidden_layers": 32,
            "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "sliding_window": null,
            "vocab_size": 32768})");
  ModelConfig m = load_hf(dir, "m", "{seq_length: 32768}");
  EXPECT_EQ(m.vocab_size, 32768);
  EXPECT_DOUBLE_EQ(m.rms_norm_eps, 1e-5);
}

TEST_F(HfEnvironment, OverridesReplaceMappedFieldsAndAreCheckedLikeModelKeys) {
  fs::path dir = fresh_dir("overrides");
  ModelConfig m = load_hf(dir, "meta-llama/Llama-3.1-8B", "{seq_length: 4096, num_layers: 4, attention_backend: unfused}");
  EXPECT_EQ(m.num_layers, 4);
  EXPECT_EQ(m.seq_length, 4096);
  EXPECT_EQ(m.attention_backend, "unfused");
  EXPECT_EQ(m.name, "model");  // the YAML's file stem, as for the Megatron fields
  ModelConfig gelu = load_hf(dir, "meta-llama/Llama-3.1-8B", "{seq_length: 4096, activation: gelu}");
  EXPECT_FALSE(gelu.swiglu);
  std::string yaml = (dir / "model.yaml").string();
  EXPECT_EQ(error_of([&] { load_hf(dir, "meta-llama/Llama-3.1-8B", "{seq_length: 4096, num_layer: 4}"); }),
            yaml + ": overrides: unknown key 'num_layer' (did you mean 'num_layers'?)");
  EXPECT_NE(error_of([&] { load_hf(dir, "meta-llama/Llama-3.1-8B", "{seq_length: 4096, num_query_groups: 5}"); })
                .find("num_query_groups=5 does not divide num_attention_heads=32"),
            std::string::npos);
}

TEST_F(HfEnvironment, SeqLengthIsRequired) {
  fs::path dir = fresh_dir("seq");
  std::string yaml = (dir / "model.yaml").string();
  EXPECT_EQ(error_of([&] { load_hf(dir, "meta-llama/Llama-3.1-8B", "{num_layers: 2}"); }),
            yaml + ": huggingface: meta-llama/Llama-3.1-8B: overrides.seq_length is required (config.json holds no "
                   "training sequence length)");
}

TEST_F(HfEnvironment, MegatronFieldsBesideHuggingfaceAreRefused) {
  fs::path dir = fresh_dir("both");
  write(dir / "both.yaml", "huggingface: meta-llama/Llama-3.1-8B\nnum_layers: 2\n");
  EXPECT_EQ(error_of([&] { syssim::load_model_yaml((dir / "both.yaml").string()); }),
            (dir / "both.yaml").string() + ": key 'num_layers' cannot be given with 'huggingface' (set it under 'overrides')");
}

// ---------------------------------------------------------------------------------------------
// Mixture-of-experts architectures, from the shipped config.json files

// Mixtral 8x7B ("Mixtral of Experts", arXiv:2401.04088, Table 1): 32 layers of width 4096, 32
// heads of 128, 8 KV heads, 8 experts of width 14336 in every layer, each token to 2 of them,
// vocabulary 32000; the model card's config: RoPE base 1e6, RMSNorm 1e-5, no sliding window.
TEST_F(HfEnvironment, Mixtral8x7bHasEightExpertsTopTwoInEveryLayer) {
  ModelConfig m = load_hf(fresh_dir("mixtral-8x7b"), "mistralai/Mixtral-8x7B-v0.1", "{seq_length: 32768}");
  EXPECT_EQ(m.num_layers, 32);
  EXPECT_EQ(m.hidden_size, 4096);
  EXPECT_EQ(m.num_attention_heads, 32);
  EXPECT_EQ(m.num_query_groups, 8);
  EXPECT_EQ(m.kv_channels, 128);
  EXPECT_EQ(m.vocab_size, 32000);
  EXPECT_EQ(m.max_position_embeddings, 32768);
  EXPECT_EQ(m.num_moe_experts, 8);
  EXPECT_EQ(m.moe_router_topk, 2);
  EXPECT_EQ(m.moe_ffn_hidden_size, 14336);
  EXPECT_EQ(m.moe_shared_expert_intermediate_size, 0);
  EXPECT_EQ(layers_where(m, &ModelConfig::is_moe_layer), range(0, 31));
  EXPECT_EQ(m.moe_router_score_function, "softmax");
  EXPECT_EQ(m.moe_router_load_balancing_type, "aux_loss");
  EXPECT_TRUE(m.swiglu);
  EXPECT_FALSE(m.tie_word_embeddings);
  EXPECT_DOUBLE_EQ(m.rope_theta, 1e6);
  EXPECT_DOUBLE_EQ(m.rms_norm_eps, 1e-5);
  EXPECT_EQ(m.window_size, 0);
  EXPECT_FALSE(m.multi_latent_attention);
}

// Mixtral 8x22B (Mistral AI, "Cheaper, Better, Faster, Stronger", 2024; model card
// mistralai/Mixtral-8x22B-v0.1): 56 layers of width 6144, 48 heads, 8 KV heads, 8 experts of
// width 16384, top-2, vocabulary 32000 (v0.1), 64K positions.
TEST_F(HfEnvironment, Mixtral8x22bHasEightExpertsOfWidth16384) {
  ModelConfig m = load_hf(fresh_dir("mixtral-8x22b"), "mistralai/Mixtral-8x22B-v0.1", "{seq_length: 4096}");
  EXPECT_EQ(m.num_layers, 56);
  EXPECT_EQ(m.hidden_size, 6144);
  EXPECT_EQ(m.num_attention_heads, 48);
  EXPECT_EQ(m.num_query_groups, 8);
  EXPECT_EQ(m.kv_channels, 128);
  EXPECT_EQ(m.vocab_size, 32000);
  EXPECT_EQ(m.max_position_embeddings, 65536);
  EXPECT_EQ(m.num_moe_experts, 8);
  EXPECT_EQ(m.moe_router_topk, 2);
  EXPECT_EQ(m.moe_ffn_hidden_size, 16384);
  EXPECT_EQ(layers_where(m, &ModelConfig::is_moe_layer).size(), 56u);
}

// Qwen3-30B-A3B (Qwen3 Technical Report, arXiv:2505.09388, Table 2; model card): 48 layers of
// width 2048, 32 query heads and 4 KV heads of 128, 128 experts of width 768 in every layer, 8
// per token, QK-norm, vocabulary 151936, untied embeddings.
TEST_F(HfEnvironment, Qwen3_30bA3bHas128ExpertsTopEight) {
  ModelConfig m = load_hf(fresh_dir("qwen3-30b"), "Qwen/Qwen3-30B-A3B", "{seq_length: 4096}");
  EXPECT_EQ(m.num_layers, 48);
  EXPECT_EQ(m.hidden_size, 2048);
  EXPECT_EQ(m.num_attention_heads, 32);
  EXPECT_EQ(m.num_query_groups, 4);
  EXPECT_EQ(m.kv_channels, 128);
  EXPECT_EQ(m.vocab_size, 151936);
  EXPECT_EQ(m.num_moe_experts, 128);
  EXPECT_EQ(m.moe_router_topk, 8);
  EXPECT_EQ(m.moe_ffn_hidden_size, 768);
  EXPECT_EQ(m.moe_shared_expert_intermediate_size, 0);
  EXPECT_EQ(layers_where(m, &ModelConfig::is_moe_layer), range(0, 47));
  EXPECT_TRUE(m.qk_layernorm);
  EXPECT_FALSE(m.add_qkv_bias);
  EXPECT_FALSE(m.tie_word_embeddings);
  EXPECT_DOUBLE_EQ(m.rope_theta, 1e6);
  EXPECT_EQ(m.moe_router_load_balancing_type, "aux_loss");
}

// Qwen3-235B-A22B (Qwen3 Technical Report, Table 2; model card): 94 layers of width 4096, 64
// query heads and 4 KV heads of 128, 128 experts of width 1536, 8 per token.
TEST_F(HfEnvironment, Qwen3_235bA22bHas94Layers) {
  ModelConfig m = load_hf(fresh_dir("qwen3-235b"), "Qwen/Qwen3-235B-A22B", "{seq_length: 4096}");
  EXPECT_EQ(m.num_layers, 94);
  EXPECT_EQ(m.hidden_size, 4096);
  EXPECT_EQ(m.num_attention_heads, 64);
  EXPECT_EQ(m.num_query_groups, 4);
  EXPECT_EQ(m.kv_channels, 128);
  EXPECT_EQ(m.num_moe_experts, 128);
  EXPECT_EQ(m.moe_router_topk, 8);
  EXPECT_EQ(m.moe_ffn_hidden_size, 1536);
  EXPECT_EQ(layers_where(m, &ModelConfig::is_moe_layer).size(), 94u);
  EXPECT_TRUE(m.qk_layernorm);
}

// Qwen3MoeDecoderLayer: every decoder_sparse_step-th layer (counting from 1) is MoE, unless
// mlp_only_layers lists it; the others are dense MLPs of intermediate_size.
TEST_F(HfEnvironment, Qwen3MoeLayersFollowSparseStepAndMlpOnlyLayers) {
  fs::path dir = fresh_dir("qwen3-moe-pattern");
  write(dir / "q/config.json",
        R"({"architectures": ["Qwen3MoeForCausalLM"], "num_hidden_layers": 6, "decoder_sparse_step": 2,
            "mlp_only_layers": [3], "intermediate_size": 6144, "moe_intermediate_size": 768})");
  ModelConfig m = load_hf(dir, "q", "{seq_length: 4096}");
  EXPECT_EQ(layers_where(m, &ModelConfig::is_moe_layer), (std::vector<int64_t>{1, 5}));
  EXPECT_EQ(m.ffn_hidden_size, 6144);
  EXPECT_EQ(m.moe_ffn_hidden_size, 768);
  // Qwen3MoeConfig's defaults fill the rest: 128 experts, top-8, 32 heads, 4 KV heads.
  EXPECT_EQ(m.num_moe_experts, 128);
  EXPECT_EQ(m.moe_router_topk, 8);
  EXPECT_EQ(m.num_query_groups, 4);
}

// DeepSeek-V3 (DeepSeek-V3 Technical Report, arXiv:2412.19437, section 4.2): 61 layers of width
// 7168, 128 heads; MLA with query compression 1536, KV compression 512, head dimension 128 plus a
// decoupled RoPE part of 64, value heads of 128; every FFN but the first three is MoE: 1 shared
// and 256 routed experts of width 2048, 8 routed per token, at most 4 of 8 groups (nodes);
// sigmoid affinities with the auxiliary-loss-free bias. The config: dense width 18432, vocabulary
// 129280. Loaded as a model YAML `huggingface: deepseek-ai/DeepSeek-V3`.
TEST_F(HfEnvironment, DeepSeekV3HasLatentAttentionAndThreeDenseLayers) {
  ModelConfig m = load_hf(fresh_dir("deepseek-v3"), "deepseek-ai/DeepSeek-V3", "{seq_length: 4096}");
  EXPECT_EQ(m.seq_length, 4096);
  EXPECT_EQ(m.num_layers, 61);
  EXPECT_EQ(m.hidden_size, 7168);
  EXPECT_EQ(m.num_attention_heads, 128);
  EXPECT_TRUE(m.multi_latent_attention);
  EXPECT_EQ(m.q_lora_rank, 1536);
  EXPECT_EQ(m.kv_lora_rank, 512);
  EXPECT_EQ(m.qk_head_dim, 128);
  EXPECT_EQ(m.qk_pos_emb_head_dim, 64);
  EXPECT_EQ(m.v_head_dim, 128);
  EXPECT_EQ(m.kv_channels, 128 + 64);
  EXPECT_TRUE(m.qk_layernorm);  // q_a_layernorm and kv_a_layernorm, the latents' RMSNorms
  EXPECT_EQ(m.num_query_groups, 128);
  EXPECT_EQ(m.ffn_hidden_size, 18432);
  EXPECT_EQ(m.vocab_size, 129280);
  EXPECT_EQ(m.num_moe_experts, 256);
  EXPECT_EQ(m.moe_router_topk, 8);
  EXPECT_EQ(m.moe_ffn_hidden_size, 2048);
  EXPECT_EQ(m.moe_shared_expert_intermediate_size, 2048);
  EXPECT_EQ(layers_where(m, &ModelConfig::is_moe_layer), range(3, 60));
  EXPECT_EQ(m.moe_router_score_function, "sigmoid");
  EXPECT_EQ(m.moe_router_num_groups, 8);
  EXPECT_EQ(m.moe_router_group_topk, 4);
  EXPECT_TRUE(m.moe_router_enable_expert_bias);
  EXPECT_EQ(m.moe_router_load_balancing_type, "seq_aux_loss");
  // The architecture's MoEGate computes its logits in fp32 (modeling_deepseek.py).
  EXPECT_EQ(m.moe_router_dtype, "fp32");
  EXPECT_FALSE(m.tie_word_embeddings);
  EXPECT_DOUBLE_EQ(m.rms_norm_eps, 1e-6);
  // config.json's num_nextn_predict_layers is not read: multi-token prediction is a training choice.
  EXPECT_EQ(m.mtp_num_layers, 0);
  EXPECT_EQ(load_hf(fresh_dir("deepseek-v3-mtp"), "deepseek-ai/DeepSeek-V3", "{seq_length: 4096, mtp_num_layers: 1}")
                .mtp_num_layers,
            1);
}

// Kimi K2 (model card moonshotai/Kimi-K2-Instruct; "Kimi K2: Open Agentic Intelligence",
// arXiv:2507.20534, on its differences from DeepSeek-V3): 61 layers of width 7168, 64 heads, the
// same MLA dimensions, 384 experts of width 2048, 8 per token, 1 shared, 1 dense layer, no expert
// grouping; vocabulary 163840.
TEST_F(HfEnvironment, KimiK2Has384ExpertsAndOneDenseLayer) {
  ModelConfig m = load_hf(fresh_dir("kimi-k2"), "moonshotai/Kimi-K2-Instruct", "{seq_length: 4096}");
  EXPECT_EQ(m.num_layers, 61);
  EXPECT_EQ(m.hidden_size, 7168);
  EXPECT_EQ(m.num_attention_heads, 64);
  EXPECT_EQ(m.q_lora_rank, 1536);
  EXPECT_EQ(m.kv_lora_rank, 512);
  EXPECT_EQ(m.qk_head_dim, 128);
  EXPECT_EQ(m.qk_pos_emb_head_dim, 64);
  EXPECT_EQ(m.v_head_dim, 128);
  EXPECT_EQ(m.ffn_hidden_size, 18432);
  EXPECT_EQ(m.vocab_size, 163840);
  EXPECT_EQ(m.num_moe_experts, 384);
  EXPECT_EQ(m.moe_router_topk, 8);
  EXPECT_EQ(m.moe_ffn_hidden_size, 2048);
  EXPECT_EQ(m.moe_shared_expert_intermediate_size, 2048);
  EXPECT_EQ(layers_where(m, &ModelConfig::is_moe_layer), range(1, 60));
  EXPECT_EQ(m.moe_router_num_groups, 0);
  EXPECT_EQ(m.moe_router_group_topk, 0);
  EXPECT_DOUBLE_EQ(m.rope_theta, 50000);
}

// Moonlight-16B-A3B (model card moonshotai/Moonlight-16B-A3B; "Muon is Scalable for LLM
// Training", arXiv:2502.16982): 27 layers of width 2048, 16 heads, MLA without query compression
// (q_lora_rank null), KV compression 512, 64 experts of width 1408, 6 per token, 2 shared, the
// first layer dense of width 11264, vocabulary 163840.
TEST_F(HfEnvironment, MoonlightHasNoQueryCompressionAndTwoSharedExperts) {
  ModelConfig m = load_hf(fresh_dir("moonlight"), "moonshotai/Moonlight-16B-A3B", "{seq_length: 8192}");
  EXPECT_EQ(m.num_layers, 27);
  EXPECT_EQ(m.hidden_size, 2048);
  EXPECT_EQ(m.num_attention_heads, 16);
  EXPECT_EQ(m.q_lora_rank, 0);
  EXPECT_EQ(m.kv_lora_rank, 512);
  EXPECT_EQ(m.qk_head_dim, 128);
  EXPECT_EQ(m.qk_pos_emb_head_dim, 64);
  EXPECT_EQ(m.v_head_dim, 128);
  EXPECT_EQ(m.ffn_hidden_size, 11264);
  EXPECT_EQ(m.vocab_size, 163840);
  EXPECT_EQ(m.num_moe_experts, 64);
  EXPECT_EQ(m.moe_router_topk, 6);
  EXPECT_EQ(m.moe_ffn_hidden_size, 1408);
  EXPECT_EQ(m.moe_shared_expert_intermediate_size, 2 * 1408);
  EXPECT_EQ(layers_where(m, &ModelConfig::is_moe_layer), range(1, 26));
  EXPECT_EQ(m.moe_router_num_groups, 0);
  EXPECT_DOUBLE_EQ(m.rms_norm_eps, 1e-5);
}

// gpt-oss-120b (gpt-oss-120b & gpt-oss-20b model card, arXiv:2508.10925): 36 layers of width
// 2880, 64 query heads of 64, 8 KV heads, 128 experts of width 2880, 4 per token, attention
// alternating between a banded window of 128 tokens (first) and full attention, a learned sink
// per head, biases, vocabulary 201088; RoPE base 150000.
TEST_F(HfEnvironment, GptOss120bAlternatesSlidingAndFullAttention) {
  fs::path dir = fresh_dir("gpt-oss");
  ModelConfig m = load_hf(dir, "openai/gpt-oss-120b", "{seq_length: 4096}");
  EXPECT_EQ(m.num_layers, 36);
  EXPECT_EQ(m.hidden_size, 2880);
  EXPECT_EQ(m.num_attention_heads, 64);
  EXPECT_EQ(m.num_query_groups, 8);
  EXPECT_EQ(m.kv_channels, 64);
  EXPECT_EQ(m.vocab_size, 201088);
  EXPECT_EQ(m.num_moe_experts, 128);
  EXPECT_EQ(m.moe_router_topk, 4);
  EXPECT_EQ(m.moe_ffn_hidden_size, 2880);
  EXPECT_EQ(layers_where(m, &ModelConfig::is_moe_layer).size(), 36u);
  EXPECT_EQ(m.window_size, 127);  // 128 keys with the query's own: Megatron's (127, 0)
  std::vector<int64_t> even_layers;
  for (int64_t layer = 0; layer < 36; layer += 2) even_layers.push_back(layer);
  EXPECT_EQ(layers_where(m, &ModelConfig::is_sliding_window_layer), even_layers);
  EXPECT_EQ(m.softmax_type, "learnable");
  EXPECT_TRUE(m.add_bias_linear);
  EXPECT_TRUE(m.add_qkv_bias);
  EXPECT_TRUE(m.swiglu);  // its quick-GELU GLU, priced as SwiGLU
  EXPECT_DOUBLE_EQ(m.activation_func_clamp_value, 7.0);  // swiglu_limit: the GLU's inputs clamped
  EXPECT_FALSE(m.apply_rope_fusion);  // YaRN's scaled cos and sin: Megatron-Core's unfused RoPE
  EXPECT_FALSE(m.tie_word_embeddings);
  EXPECT_DOUBLE_EQ(m.rope_theta, 150000);
  // The window is the model's at any sequence; one that holds the whole sequence (128 keys, the
  // query's own among them) is full causal attention, and the model is traced without it.
  const ModelConfig short_sequence = load_hf(dir, "openai/gpt-oss-120b", "{seq_length: 128}");
  EXPECT_EQ(short_sequence.window_size, 127);
  EXPECT_EQ(traced_at(short_sequence, 128).window_size, 0);
  EXPECT_EQ(traced_at(short_sequence, 129).window_size, 127);
}

// Mixtral's first config.json had sliding_window 4096 on every layer: mapped at any sequence.
// Qwen3-MoE's window (use_sliding_window) is refused over a longer sequence, as for the
// dense architectures.
TEST_F(HfEnvironment, MixtralWindowsAreMappedAndQwen3MoeWindowsRefused) {
  fs::path dir = fresh_dir("moe-windows");
  write(dir / "m/config.json",
        R"({"architectures": ["MixtralForCausalLM"], "num_hidden_layers": 4, "sliding_window": 4096})");
  EXPECT_EQ(load_hf(dir, "m", "{seq_length: 4096}").window_size, 4095);
  ModelConfig m = load_hf(dir, "m", "{seq_length: 8192}");
  EXPECT_EQ(m.window_size, 4095);  // 4096 keys with the query's own
  EXPECT_EQ(layers_where(m, &ModelConfig::is_sliding_window_layer), range(0, 3));
  write(dir / "q/config.json",
        R"({"architectures": ["Qwen3MoeForCausalLM"], "use_sliding_window": true, "sliding_window": 4096})");
  EXPECT_NE(error_of([&] { load_hf(dir, "q", "{seq_length: 8192}"); })
                .find("architecture Qwen3MoeForCausalLM has sliding-window attention (window 4096) and seq_length "
                      "8192 is longer"),
            std::string::npos);
}

TEST_F(HfEnvironment, BadMixtureOfExpertsValuesNameTheFileAndKey) {
  fs::path dir = fresh_dir("bad-moe");
  std::string yaml = (dir / "model.yaml").string();
  std::string config = (dir / "b/config.json").string();
  write_changed(config, "deepseek-ai/DeepSeek-V3", "n_routed_experts", "many");
  EXPECT_EQ(error_of([&] { load_hf(dir, "b", "{seq_length: 4096}"); }),
            yaml + ": huggingface: b: " + config + ": key 'n_routed_experts' must be an integer, got \"many\"");
  write_changed(config, "deepseek-ai/DeepSeek-V3", "scoring_func", "softplus");
  EXPECT_EQ(error_of([&] { load_hf(dir, "b", "{seq_length: 4096}"); }),
            yaml + ": huggingface: b: " + config + ": key 'scoring_func' is 'softplus': expected sigmoid or softmax");
  // A layer count no model has, refused before per-layer lists are sized by it (found by
  // fuzz_huggingface_config: 1,201,088 layers of GPT-OSS ran past its 10 s limit).
  write_changed(config, "openai/gpt-oss-120b", "num_hidden_layers", 1201088);
  EXPECT_EQ(error_of([&] { load_hf(dir, "b", "{seq_length: 4096}"); }),
            yaml + ": huggingface: b: " + config + ": key 'num_hidden_layers' is 1201088; syssim takes at most 10000 layers");
  write_changed(config, "Qwen/Qwen3-30B-A3B", "decoder_sparse_step", 0);
  EXPECT_EQ(error_of([&] { load_hf(dir, "b", "{seq_length: 4096}"); }),
            yaml + ": huggingface: b: " + config + ": key 'decoder_sparse_step' must be at least 1, got 0");
  nlohmann::json layer_types(36, "full_attention");
  write_changed(config, "openai/gpt-oss-120b", "layer_types", layer_types);
  EXPECT_EQ(load_hf(dir, "b", "{seq_length: 4096}").window_size, 0);  // no sliding layer
  layer_types[0] = "sliding_attention";
  layer_types[3] = "local_attention";
  write_changed(config, "openai/gpt-oss-120b", "layer_types", layer_types);
  EXPECT_EQ(error_of([&] { load_hf(dir, "b", "{seq_length: 4096}"); }),
            yaml + ": huggingface: b: " + config +
                ": key 'layer_types' entry 3 is \"local_attention\": expected sliding_attention or full_attention");
  layer_types.erase(layer_types.begin() + 3);
  write_changed(config, "openai/gpt-oss-120b", "layer_types", layer_types);
  EXPECT_EQ(error_of([&] { load_hf(dir, "b", "{seq_length: 4096}"); }),
            yaml + ": huggingface: b: " + config +
                ": key 'layer_types' must list one layer type per layer (num_hidden_layers=36), got 35 entries");
}

// ---------------------------------------------------------------------------------------------
// Refusals

TEST_F(HfEnvironment, MixtureOfExpertsNotMappedIsRefused) {
  fs::path dir = fresh_dir("moe");
  std::string yaml = (dir / "model.yaml").string();
  for (std::string arch : {"Qwen2MoeForCausalLM", "DeepseekV2ForCausalLM", "OlmoeForCausalLM", "Llama4ForCausalLM"}) {
    write(dir / arch / "config.json", R"({"architectures": [")" + arch + R"("]})");
    EXPECT_EQ(error_of([&] { load_hf(dir, arch, "{seq_length: 4096}"); }),
              yaml + ": huggingface: " + arch + ": " + (dir / arch / "config.json").string() + ": architecture " + arch +
                  " is a mixture of experts, which syssim does not model yet");
  }
  // An expert count marks an MoE under a dense architecture name too.
  write(dir / "x/config.json", R"({"architectures": ["LlamaForCausalLM"], "num_local_experts": 8})");
  EXPECT_NE(error_of([&] { load_hf(dir, "x", "{seq_length: 4096}"); }).find("is a mixture of experts"), std::string::npos);
}

TEST_F(HfEnvironment, UnknownArchitectureNamesTheSupportedOnes) {
  fs::path dir = fresh_dir("unknown");
  write(dir / "f/config.json", R"({"architectures": ["FalconForCausalLM"]})");
  std::string yaml = (dir / "model.yaml").string();
  EXPECT_EQ(error_of([&] { load_hf(dir, "f", "{seq_length: 4096}"); }),
            yaml + ": huggingface: f: " + (dir / "f/config.json").string() +
                ": architecture FalconForCausalLM is not supported (supported: LlamaForCausalLM, MistralForCausalLM, "
                "Qwen2ForCausalLM, Qwen3ForCausalLM, Gemma2ForCausalLM, Gemma3ForCausalLM, "
                "Gemma3ForConditionalGeneration, GPT2LMHeadModel, MixtralForCausalLM, Qwen3MoeForCausalLM, "
                "DeepseekV3ForCausalLM, GptOssForCausalLM)");
}

TEST_F(HfEnvironment, BadValuesNameTheFileAndKey) {
  fs::path dir = fresh_dir("bad");
  std::string yaml = (dir / "model.yaml").string();
  std::string config = (dir / "b/config.json").string();
  write(config, R"({"architectures": ["LlamaForCausalLM"], "hidden_size": "big"})");
  EXPECT_EQ(error_of([&] { load_hf(dir, "b", "{seq_length: 4096}"); }),
            yaml + ": huggingface: b: " + config + ": key 'hidden_size' must be an integer, got \"big\"");
  write(config, R"({"architectures": ["LlamaForCausalLM"], "hidden_act": "relu"})");
  EXPECT_NE(error_of([&] { load_hf(dir, "b", "{seq_length: 4096}"); }).find("key 'hidden_act' is 'relu'"), std::string::npos);
  write(config, R"({"architectures": ["LlamaForCausalLM"], "mlp_bias": true})");
  EXPECT_NE(error_of([&] { load_hf(dir, "b", "{seq_length: 4096}"); }).find("key 'mlp_bias' is true without attention_bias"),
            std::string::npos);
  const std::string where = yaml + ": huggingface: b: " + config;
  write(config, "{not json");
  // Byte 3 ('o') is where "n" stops being the start of null.
  EXPECT_EQ(error_of([&] { load_hf(dir, "b", "{seq_length: 4096}"); }), where + ": not valid JSON at byte 3");
  write(config, R"({"architectures": ["LlamaForCausalLM"], "rope_theta": 1e400})");
  EXPECT_EQ(error_of([&] { load_hf(dir, "b", "{seq_length: 4096}"); }),
            where + ": not valid JSON: number overflow parsing '1e400'");
  write(config, "{\"architectures\": [\"Llama\xff\"]}");  // not UTF-8: JSON's parser refuses it, at byte 26
  EXPECT_EQ(error_of([&] { load_hf(dir, "b", "{seq_length: 4096}"); }), where + ": not valid JSON at byte 26");
  write(config, R"({"model_type": "llama"})");
  EXPECT_NE(error_of([&] { load_hf(dir, "b", "{seq_length: 4096}"); }).find("key 'architectures' must list"),
            std::string::npos);
}
