// Tests of the Hugging Face model source (lib/config/huggingface): where config.json is found,
// how its keys map to the model fields, and what is refused. The independent reference for the
// shipped config.json files is the paper-cited preset of configs/models/ describing the same model.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
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
  EXPECT_EQ(files, static_cast<int>(kShipped.size()));
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
  std::string yaml = (dir / "model.yaml").string();
  EXPECT_EQ(error_of([&] { load_hf(dir, "meta-llama/Foo", "{seq_length: 8}"); }),
            yaml + ": huggingface: meta-llama/Foo: no config.json found (looked in: " + (dir / "meta-llama/Foo").string() +
                ", " + (dir / "hf/hub/models--meta-llama--Foo/snapshots/*/config.json").string() + ", " + kRoot +
                "/configs/hf/meta-llama/Foo/config.json)");
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
// Refusals

TEST_F(HfEnvironment, MixtureOfExpertsIsRefused) {
  fs::path dir = fresh_dir("moe");
  std::string yaml = (dir / "model.yaml").string();
  for (std::string arch : {"MixtralForCausalLM", "Qwen3MoeForCausalLM", "DeepseekV3ForCausalLM", "GptOssForCausalLM"}) {
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
                "Gemma3ForConditionalGeneration, GPT2LMHeadModel)");
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
  write(config, "{not json");
  EXPECT_NE(error_of([&] { load_hf(dir, "b", "{seq_length: 4096}"); }).find(config + ": invalid JSON"), std::string::npos);
  write(config, R"({"model_type": "llama"})");
  EXPECT_NE(error_of([&] { load_hf(dir, "b", "{seq_length: 4096}"); }).find("key 'architectures' must list"),
            std::string::npos);
}
