#include "config/huggingface.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <optional>
#include <sstream>

#include "common/error.hpp"
#include "common/io.hpp"
#include "common/yaml_util.hpp"

#ifndef SYSSIM_HF_DIR
#error "SYSSIM_HF_DIR must name the folder of the shipped Hugging Face configs (configs/hf)"
#endif

namespace syssim {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

enum class Family { llama, qwen2, qwen3, gemma2, gemma3, gpt2 };

struct Architecture {
  std::string name;
  Family family;
  bool nested_text_config;  // the text model's keys are under "text_config"
  // The defaults of the transformers config class for the keys read here: config.json leaves
  // out a key whose value is the default (always so in nested configs such as Gemma 3's
  // text_config), and transformers then uses the default.
  json defaults;
};

// Defaults from huggingface/transformers src/transformers/models/<model>/configuration_<model>.py
// (LlamaConfig, MistralConfig, Qwen2Config, Qwen3Config, Gemma2Config, Gemma3TextConfig, GPT2Config).
const json kLlamaDefaults = {{"vocab_size", 32000}, {"hidden_size", 4096}, {"intermediate_size", 11008},
                             {"num_hidden_layers", 32}, {"num_attention_heads", 32}, {"hidden_act", "silu"},
                             {"max_position_embeddings", 2048}, {"rms_norm_eps", 1e-6}, {"rope_theta", 10000.0},
                             {"tie_word_embeddings", false}};
const json kMistralDefaults = {{"vocab_size", 32000}, {"hidden_size", 4096}, {"intermediate_size", 14336},
                               {"num_hidden_layers", 32}, {"num_attention_heads", 32}, {"num_key_value_heads", 8},
                               {"hidden_act", "silu"}, {"max_position_embeddings", 4096 * 32}, {"rms_norm_eps", 1e-6},
                               {"rope_theta", 10000.0}, {"tie_word_embeddings", false}, {"sliding_window", 4096}};
const json kQwen2Defaults = {{"vocab_size", 151936}, {"hidden_size", 4096}, {"intermediate_size", 22016},
                             {"num_hidden_layers", 32}, {"num_attention_heads", 32}, {"num_key_value_heads", 32},
                             {"hidden_act", "silu"}, {"max_position_embeddings", 32768}, {"rms_norm_eps", 1e-6},
                             {"rope_theta", 10000.0}, {"tie_word_embeddings", false}, {"use_sliding_window", false},
                             {"sliding_window", 4096}};
json qwen3_defaults() {
  json defaults = kQwen2Defaults;
  defaults["head_dim"] = 128;
  return defaults;
}
const json kGemma2Defaults = {{"vocab_size", 256000}, {"hidden_size", 2304}, {"intermediate_size", 9216},
                              {"num_hidden_layers", 26}, {"num_attention_heads", 8}, {"num_key_value_heads", 4},
                              {"head_dim", 256}, {"hidden_activation", "gelu_pytorch_tanh"},
                              {"max_position_embeddings", 8192}, {"rms_norm_eps", 1e-6}, {"rope_theta", 10000.0},
                              {"tie_word_embeddings", true}, {"sliding_window", 4096}};
const json kGemma3Defaults = {{"vocab_size", 262208}, {"hidden_size", 2304}, {"intermediate_size", 9216},
                              {"num_hidden_layers", 26}, {"num_attention_heads", 8}, {"num_key_value_heads", 4},
                              {"head_dim", 256}, {"hidden_activation", "gelu_pytorch_tanh"},
                              {"max_position_embeddings", 131072}, {"rms_norm_eps", 1e-6}, {"rope_theta", 1000000.0},
                              {"tie_word_embeddings", true}, {"sliding_window", 4096}};
const json kGpt2Defaults = {{"vocab_size", 50257}, {"n_positions", 1024}, {"n_embd", 768}, {"n_layer", 12},
                            {"n_head", 12}, {"n_inner", nullptr}, {"activation_function", "gelu_new"},
                            {"resid_pdrop", 0.1}, {"attn_pdrop", 0.1}, {"layer_norm_epsilon", 1e-5},
                            {"tie_word_embeddings", true}};

const std::vector<Architecture>& supported_architectures() {
  static const std::vector<Architecture> list = {
      {"LlamaForCausalLM", Family::llama, false, kLlamaDefaults},
      {"MistralForCausalLM", Family::llama, false, kMistralDefaults},
      {"Qwen2ForCausalLM", Family::qwen2, false, kQwen2Defaults},
      {"Qwen3ForCausalLM", Family::qwen3, false, qwen3_defaults()},
      {"Gemma2ForCausalLM", Family::gemma2, false, kGemma2Defaults},
      {"Gemma3ForCausalLM", Family::gemma3, false, kGemma3Defaults},
      {"Gemma3ForConditionalGeneration", Family::gemma3, true, kGemma3Defaults},
      {"GPT2LMHeadModel", Family::gpt2, false, kGpt2Defaults},
  };
  return list;
}

// Mixture-of-experts architectures; syssim has no expert layers yet.
const std::vector<std::string> kMixtureOfExperts = {
    "MixtralForCausalLM",    "Qwen2MoeForCausalLM",  "Qwen3MoeForCausalLM",  "DeepseekV2ForCausalLM",
    "DeepseekV3ForCausalLM", "GptOssForCausalLM",    "OlmoeForCausalLM",     "Llama4ForCausalLM",
    "Llama4ForConditionalGeneration"};
// The keys that give the expert count in those configs (Mixtral, Qwen MoE, DeepSeek), for MoE
// architectures not listed above.
const std::vector<std::string> kExpertCountKeys = {"num_local_experts", "num_experts", "n_routed_experts"};

// Typed reads of one config.json (or its text_config) with the architecture's defaults;
// errors name the file and the key.
class ConfigReader {
 public:
  ConfigReader(const json& config, const json& defaults, std::string where)
      : config_(config), defaults_(defaults), where_(std::move(where)) {}

  bool is_null(const std::string& key) const { return value(key).is_null(); }
  bool has(const std::string& key) const { return config_.contains(key); }
  int64_t integer(const std::string& key) const { return typed(key, &json::is_number_integer, "an integer").get<int64_t>(); }
  double number(const std::string& key) const { return typed(key, &json::is_number, "a number").get<double>(); }
  bool boolean(const std::string& key, bool fallback) const {
    return is_null(key) ? fallback : typed(key, &json::is_boolean, "true or false").get<bool>();
  }
  std::string text(const std::string& key) const { return typed(key, &json::is_string, "a string").get<std::string>(); }
  const json& raw(const std::string& key) const { return value(key); }
  [[noreturn]] void fail(const std::string& key, const std::string& message) const {
    throw DataError(where_ + ": key '" + key + "' " + message);
  }

 private:
  const json& value(const std::string& key) const {
    static const json null;
    if (config_.contains(key)) return config_[key];
    return defaults_.contains(key) ? defaults_[key] : null;
  }
  const json& typed(const std::string& key, bool (json::*check)() const noexcept, const char* expected) const {
    const json& v = value(key);
    if (v.is_null() && !config_.contains(key)) throw DataError(where_ + ": missing key '" + key + "'");
    if (!(v.*check)()) fail(key, std::string("must be ") + expected + ", got " + v.dump());
    return v;
  }

  const json& config_;
  const json& defaults_;
  std::string where_;
};

// A number given as a YAML scalar with all the digits of the double.
std::string yaml_number(double value) {
  std::ostringstream out;
  out.precision(17);
  out << value;
  return out.str();
}

// RoPE base: rope_theta, or (transformers 5) rope_parameters.rope_theta, per layer type for
// Gemma 3 (the full-attention layers' base).
double rope_theta(const ConfigReader& r) {
  if (r.has("rope_theta") || !r.has("rope_parameters")) return r.number("rope_theta");
  const json& parameters = r.raw("rope_parameters");
  const json& global = parameters.contains("full_attention") ? parameters["full_attention"] : parameters;
  if (!global.contains("rope_theta") || !global["rope_theta"].is_number())
    r.fail("rope_parameters", "has no numeric rope_theta: " + parameters.dump());
  return global["rope_theta"].get<double>();
}

// The attention window of the sliding-window layers, if any layer has one.
std::optional<int64_t> sliding_window(const ConfigReader& r) {
  if (r.is_null("sliding_window")) return std::nullopt;
  if (r.has("layer_types")) {
    const json& types = r.raw("layer_types");
    if (std::find(types.begin(), types.end(), json("sliding_attention")) == types.end()) return std::nullopt;
  } else if (!r.boolean("use_sliding_window", true)) {
    return std::nullopt;
  }
  return r.integer("sliding_window");
}

// GPT-2: LayerNorm with bias, learned positions, biases on every linear, a plain GELU MLP, tied
// embeddings: the Megatron GPT of configs/models/gpt3-*.yaml.
void map_gpt2(const ConfigReader& r, YAML::Node& m) {
  int64_t hidden = r.integer("n_embd");
  std::string activation = r.text("activation_function");
  const std::vector<std::string> gelus = {"gelu", "gelu_new", "gelu_pytorch_tanh", "gelu_fast"};
  if (std::find(gelus.begin(), gelus.end(), activation) == gelus.end())
    r.fail("activation_function", "is '" + activation + "': syssim's plain MLP has gelu or squared_relu");
  m["num_layers"] = r.integer("n_layer");
  m["hidden_size"] = hidden;
  m["num_attention_heads"] = r.integer("n_head");
  m["ffn_hidden_size"] = r.is_null("n_inner") ? 4 * hidden : r.integer("n_inner");
  m["max_position_embeddings"] = r.integer("n_positions");
  m["vocab_size"] = r.integer("vocab_size");
  m["activation"] = "gelu";
  m["rope"] = false;
  m["tie_word_embeddings"] = r.boolean("tie_word_embeddings", true);
  m["rms_norm_eps"] = yaml_number(r.number("layer_norm_epsilon"));
  m["normalization"] = "LayerNorm";
  m["add_bias_linear"] = true;
  m["hidden_dropout"] = yaml_number(r.number("resid_pdrop"));
  m["attention_dropout"] = yaml_number(r.number("attn_pdrop"));
}

// Llama, Mistral, Qwen2/3, Gemma 2/3: pre-norm RMSNorm decoders with RoPE and a gated MLP.
void map_gated(const Architecture& arch, const ConfigReader& r, YAML::Node& m) {
  bool gemma = arch.family == Family::gemma2 || arch.family == Family::gemma3;
  // Gemma's classes read hidden_activation (their config.json files also carry hidden_act).
  std::string act_key = gemma && (r.has("hidden_activation") || !r.has("hidden_act")) ? "hidden_activation" : "hidden_act";
  std::string activation = r.text(act_key);
  // SiLU gates SwiGLU; a GELU gate (Gemma's GeGLU) has the same three GEMMs and an elementwise
  // activation of the same size, so it is priced as SwiGLU (docs/configs.md).
  const std::vector<std::string> gates = {"silu", "swish", "gelu", "gelu_new", "gelu_pytorch_tanh"};
  if (std::find(gates.begin(), gates.end(), activation) == gates.end())
    r.fail(act_key, "is '" + activation + "': syssim's gated MLP is SwiGLU (silu), or GeGLU priced as SwiGLU");
  int64_t hidden = r.integer("hidden_size");
  int64_t heads = r.integer("num_attention_heads");
  m["num_layers"] = r.integer("num_hidden_layers");
  m["hidden_size"] = hidden;
  m["num_attention_heads"] = heads;
  m["num_query_groups"] = r.is_null("num_key_value_heads") ? heads : r.integer("num_key_value_heads");
  if (!r.is_null("head_dim")) m["kv_channels"] = r.integer("head_dim");
  m["ffn_hidden_size"] = r.integer("intermediate_size");
  m["max_position_embeddings"] = r.integer("max_position_embeddings");
  m["vocab_size"] = r.integer("vocab_size");
  m["swiglu"] = true;
  m["rope"] = true;
  m["rope_theta"] = yaml_number(rope_theta(r));
  m["tie_word_embeddings"] = r.boolean("tie_word_embeddings", false);
  m["rms_norm_eps"] = yaml_number(r.number("rms_norm_eps"));
  m["normalization"] = "RMSNorm";
  // Qwen2 has biases on q, k and v (not on o); the others on q, k, v and o with
  // attention_bias (the o bias, h values per layer, is not modelled) and on the MLP with mlp_bias.
  bool attention_bias = arch.family == Family::qwen2 || r.boolean("attention_bias", false);
  bool mlp_bias = r.boolean("mlp_bias", false);
  if (mlp_bias && !attention_bias)
    r.fail("mlp_bias", "is true without attention_bias: Megatron biases the MLP only together with the attention "
                       "(add_bias_linear)");
  m["add_bias_linear"] = attention_bias && mlp_bias;
  m["add_qkv_bias"] = attention_bias && !mlp_bias;
  m["qk_layernorm"] = arch.family == Family::qwen3 || arch.family == Family::gemma3;
  if (!r.is_null("attention_dropout")) m["attention_dropout"] = yaml_number(r.number("attention_dropout"));
}

std::string hub_cache_dir() {
  // huggingface_hub src/huggingface_hub/constants.py: HF_HUB_CACHE, else HUGGINGFACE_HUB_CACHE,
  // else $HF_HOME/hub with HF_HOME defaulting to $XDG_CACHE_HOME/huggingface, ~/.cache/huggingface.
  auto env = [](const char* name) -> std::string {
    const char* value = std::getenv(name);
    return value ? value : "";
  };
  if (!env("HF_HUB_CACHE").empty()) return env("HF_HUB_CACHE");
  if (!env("HUGGINGFACE_HUB_CACHE").empty()) return env("HUGGINGFACE_HUB_CACHE");
  if (!env("HF_HOME").empty()) return env("HF_HOME") + "/hub";
  if (!env("XDG_CACHE_HOME").empty()) return env("XDG_CACHE_HOME") + "/huggingface/hub";
  if (!env("HOME").empty()) return env("HOME") + "/.cache/huggingface/hub";
  return "";
}

// The config.json of the snapshot refs/main names, else of the lexicographically last snapshot.
std::optional<std::string> cached_config(const fs::path& repo) {
  std::error_code error;
  std::string main_revision;
  if (fs::is_regular_file(repo / "refs" / "main", error)) {
    main_revision = read_input((repo / "refs" / "main").string());
    main_revision.erase(main_revision.find_last_not_of(" \n\r\t") + 1);
  }
  if (!main_revision.empty() && fs::is_regular_file(repo / "snapshots" / main_revision / "config.json", error))
    return (repo / "snapshots" / main_revision / "config.json").string();
  std::vector<std::string> revisions;
  if (fs::is_directory(repo / "snapshots", error))
    for (const auto& entry : fs::directory_iterator(repo / "snapshots", error))
      if (fs::is_regular_file(entry.path() / "config.json", error)) revisions.push_back(entry.path().filename().string());
  if (revisions.empty()) return std::nullopt;
  return (repo / "snapshots" / *std::max_element(revisions.begin(), revisions.end()) / "config.json").string();
}

}  // namespace

std::string find_huggingface_config(const std::string& id, const std::string& base_dir, const std::string& where) {
  std::error_code error;
  std::vector<std::string> looked;
  fs::path given = fs::path(id).is_absolute() || base_dir.empty() ? fs::path(id) : fs::path(base_dir) / id;
  if (fs::is_regular_file(given, error)) return given.string();
  if (fs::is_regular_file(given / "config.json", error)) return (given / "config.json").string();
  looked.push_back(given.string());

  std::string cache = hub_cache_dir();
  if (!cache.empty()) {
    std::string repo = id;
    for (size_t slash = repo.find('/'); slash != std::string::npos; slash = repo.find('/', slash + 2))
      repo.replace(slash, 1, "--");
    fs::path repo_dir = fs::path(cache) / ("models--" + repo);
    if (auto found = cached_config(repo_dir)) return *found;
    looked.push_back((repo_dir / "snapshots" / "*" / "config.json").string());
  }

  fs::path shipped = fs::path(SYSSIM_HF_DIR) / id / "config.json";
  if (fs::is_regular_file(shipped, error)) return shipped.string();
  looked.push_back(shipped.string());

  std::string list;
  for (const auto& place : looked) list += (list.empty() ? "" : ", ") + place;
  throw DataError(where + ": no config.json found (looked in: " + list + ")");
}

YAML::Node map_huggingface_config(const json& config, int64_t seq_length, const std::string& where) {
  if (!config.is_object()) throw DataError(where + ": expected a JSON object");
  if (!config.contains("architectures") || !config["architectures"].is_array() || config["architectures"].empty() ||
      !config["architectures"][0].is_string())
    throw DataError(where + ": key 'architectures' must list the model class, e.g. [\"LlamaForCausalLM\"]");
  std::string name = config["architectures"][0].get<std::string>();
  const auto& supported = supported_architectures();
  auto arch = std::find_if(supported.begin(), supported.end(), [&](const Architecture& a) { return a.name == name; });
  const json& text = arch != supported.end() && arch->nested_text_config && config.contains("text_config")
                         ? config["text_config"] : config;
  bool experts = std::any_of(kExpertCountKeys.begin(), kExpertCountKeys.end(), [&](const std::string& key) {
    return text.contains(key) && text[key].is_number() && text[key].get<double>() > 0;
  });
  if (experts || std::find(kMixtureOfExperts.begin(), kMixtureOfExperts.end(), name) != kMixtureOfExperts.end())
    throw DataError(where + ": architecture " + name + " is a mixture of experts, which syssim does not model yet");
  if (arch == supported.end()) {
    std::string list;
    for (const auto& a : supported) list += (list.empty() ? "" : ", ") + a.name;
    throw DataError(where + ": architecture " + name + " is not supported (supported: " + list + ")");
  }

  ConfigReader reader(text, arch->defaults, arch->nested_text_config ? where + ": text_config" : where);
  YAML::Node m(YAML::NodeType::Map);
  if (arch->family == Family::gpt2) {
    map_gpt2(reader, m);
    return m;
  }
  map_gated(*arch, reader, m);
  // Sliding-window layers attend to the last `window` tokens only; syssim prices every layer's
  // attention over the whole causal sequence, which overstates them when the sequence is longer.
  if (auto window = sliding_window(reader); window && seq_length > *window)
    throw DataError(where + ": architecture " + name + " has sliding-window attention (window " +
                    std::to_string(*window) + ") and seq_length " + std::to_string(seq_length) +
                    " is longer; syssim does not model sliding-window attention yet");
  return m;
}

YAML::Node huggingface_model_node(const YAML::Node& model, const std::vector<std::string>& model_keys,
                                  const std::string& where) {
  for (const auto& entry : model) {
    std::string key = entry.first.as<std::string>();
    if (key != "name" && key != "huggingface" && key != "overrides")
      throw DataError(where + ": key '" + key + "' cannot be given with 'huggingface' (set it under 'overrides')");
  }
  std::string id = yaml_require<std::string>(model, "huggingface", where);
  std::string context = where + ": huggingface: " + id;
  YAML::Node overrides = model["overrides"] ? model["overrides"] : YAML::Node(YAML::NodeType::Map);
  std::vector<std::string> overridable;
  std::copy_if(model_keys.begin(), model_keys.end(), std::back_inserter(overridable),
               [](const std::string& key) { return key != "huggingface" && key != "overrides"; });
  check_keys(overrides, overridable, where + ": overrides");
  // config.json describes the architecture, not the training run: the sequence length is required
  // as for a model YAML with the Megatron fields (a job's seq_length still overrides it).
  if (!overrides["seq_length"])
    throw DataError(context + ": overrides.seq_length is required (config.json holds no training sequence length)");
  int64_t seq_length = yaml_require<int64_t>(overrides, "seq_length", where + ": overrides");

  std::string path = find_huggingface_config(id, fs::path(where).parent_path().string(), context);
  json config;
  try {
    config = json::parse(read_input(path));
  } catch (const json::exception& e) {
    throw DataError(context + ": " + path + ": invalid JSON: " + e.what());
  }
  YAML::Node fields = map_huggingface_config(config, seq_length, context + ": " + path);
  if (model["name"]) fields["name"] = model["name"];
  if (overrides["swiglu"] || overrides["activation"]) {  // the overrides say which MLP, alone
    fields.remove("swiglu");
    fields.remove("activation");
  }
  for (const auto& entry : overrides) fields[entry.first.as<std::string>()] = entry.second;
  return fields;
}

}  // namespace syssim
