#include "config/huggingface.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <optional>
#include <sstream>

#include "common/error.hpp"
#include "common/json_util.hpp"
#include "common/install.hpp"
#include "common/io.hpp"
#include "common/text.hpp"
#include "common/yaml_util.hpp"
#include "config/config.hpp"

namespace syssim {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

enum class Family { llama, qwen2, qwen3, gemma2, gemma3, gpt2, mixtral, qwen3_moe, deepseek_v3, gpt_oss };

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
// (LlamaConfig, MistralConfig, Qwen2Config, Qwen3Config, Gemma2Config, Gemma3TextConfig, GPT2Config,
// MixtralConfig, Qwen3MoeConfig, DeepseekV3Config, GptOssConfig).
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
// Mixture-of-experts classes (MixtralConfig, Qwen3MoeConfig, DeepseekV3Config, GptOssConfig), as in
// transformers 4.x, where each key is an argument of the class.
const json kMixtralDefaults = {{"vocab_size", 32000}, {"hidden_size", 4096}, {"intermediate_size", 14336},
                               {"num_hidden_layers", 32}, {"num_attention_heads", 32}, {"num_key_value_heads", 8},
                               {"hidden_act", "silu"}, {"max_position_embeddings", 4096 * 32}, {"rms_norm_eps", 1e-5},
                               {"rope_theta", 1e6}, {"tie_word_embeddings", false}, {"sliding_window", nullptr},
                               {"num_local_experts", 8}, {"num_experts_per_tok", 2}, {"router_aux_loss_coef", 0.001}};
const json kQwen3MoeDefaults = {{"vocab_size", 151936}, {"hidden_size", 2048}, {"intermediate_size", 6144},
                                {"num_hidden_layers", 24}, {"num_attention_heads", 32}, {"num_key_value_heads", 4},
                                {"hidden_act", "silu"}, {"max_position_embeddings", 32768}, {"rms_norm_eps", 1e-6},
                                {"rope_theta", 10000.0}, {"tie_word_embeddings", false}, {"attention_bias", false},
                                {"use_sliding_window", false}, {"sliding_window", 4096}, {"decoder_sparse_step", 1},
                                {"moe_intermediate_size", 768}, {"num_experts_per_tok", 8}, {"num_experts", 128},
                                {"router_aux_loss_coef", 0.001}, {"mlp_only_layers", json::array()}};
// moe_layer_freq, scoring_func, topk_method, aux_loss_alpha and seq_aux are not keys of transformers'
// class (its model always routes by sigmoid with the score bias, every layer after the dense ones);
// their defaults are those of the model repositories' own configuration_deepseek.py
// (huggingface.co/deepseek-ai/DeepSeek-V3), which the published config.json files spell out.
const json kDeepseekV3Defaults = {
    {"vocab_size", 129280}, {"hidden_size", 7168}, {"intermediate_size", 18432}, {"moe_intermediate_size", 2048},
    {"num_hidden_layers", 61}, {"num_attention_heads", 128}, {"n_shared_experts", 1}, {"n_routed_experts", 256},
    {"kv_lora_rank", 512}, {"q_lora_rank", 1536}, {"qk_rope_head_dim", 64}, {"v_head_dim", 128},
    {"qk_nope_head_dim", 128}, {"n_group", 8}, {"topk_group", 4}, {"num_experts_per_tok", 8},
    {"first_k_dense_replace", 3}, {"hidden_act", "silu"}, {"max_position_embeddings", 4096}, {"rms_norm_eps", 1e-6},
    {"tie_word_embeddings", false}, {"rope_theta", 10000.0}, {"attention_bias", false}, {"moe_layer_freq", 1},
    {"scoring_func", "sigmoid"}, {"topk_method", "noaux_tc"}, {"aux_loss_alpha", 0.001}, {"seq_aux", true}};
const json kGptOssDefaults = {{"num_hidden_layers", 36}, {"num_local_experts", 128}, {"vocab_size", 201088},
                              {"hidden_size", 2880}, {"intermediate_size", 2880}, {"head_dim", 64},
                              {"num_attention_heads", 64}, {"num_key_value_heads", 8}, {"sliding_window", 128},
                              {"rope_theta", 150000.0}, {"tie_word_embeddings", false}, {"hidden_act", "silu"},
                              {"max_position_embeddings", 131072}, {"rms_norm_eps", 1e-5}, {"num_experts_per_tok", 4},
                              {"router_aux_loss_coef", 0.9}, {"attention_bias", true}, {"swiglu_limit", 7.0},
                              {"rope_scaling", {{"rope_type", "yarn"}, {"factor", 32.0}}}};

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
      {"MixtralForCausalLM", Family::mixtral, false, kMixtralDefaults},
      {"Qwen3MoeForCausalLM", Family::qwen3_moe, false, kQwen3MoeDefaults},
      {"DeepseekV3ForCausalLM", Family::deepseek_v3, false, kDeepseekV3Defaults},  // also Kimi K2, Moonlight
      {"GptOssForCausalLM", Family::gpt_oss, false, kGptOssDefaults},
  };
  return list;
}

bool is_mixture_of_experts(Family family) {
  return family == Family::mixtral || family == Family::qwen3_moe || family == Family::deepseek_v3 ||
         family == Family::gpt_oss;
}

// Mixture-of-experts architectures not mapped here.
const std::vector<std::string> kMixtureOfExperts = {"Qwen2MoeForCausalLM", "DeepseekV2ForCausalLM", "OlmoeForCausalLM",
                                                    "Llama4ForCausalLM", "Llama4ForConditionalGeneration"};
// The keys that give the expert count in MoE configs (Mixtral, Qwen MoE, DeepSeek), to refuse an
// MoE under a dense architecture's name.
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
  // A count of at least `least`.
  int64_t count(const std::string& key, int64_t least = 1) const {
    int64_t value = integer(key);
    if (value < least) fail(key, "must be at least " + std::to_string(least) + ", got " + std::to_string(value));
    return value;
  }
  // A layer count, from 1 to kMaxLayers.
  int64_t layers(const std::string& key) const {
    int64_t value = count(key);
    if (value > kMaxLayers)
      fail(key, "is " + std::to_string(value) + "; syssim takes at most " + std::to_string(kMaxLayers) + " layers");
    return value;
  }
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

// Whether RoPE is YaRN-scaled (rope_type yarn, factor > 1; transformers 5's rope_parameters
// too): Megatron-Core then scales cos and sin by 0.1 ln(factor) + 1, which Transformer Engine's
// fused RoPE does not take, and runs the unfused chain (rope_utils.py, apply_rotary_pos_emb).
bool yarn_scaled(const ConfigReader& r) {
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    const json& scaling = r.raw(key);
    if (!scaling.is_object()) continue;
    const json& type = scaling.contains("rope_type") ? scaling["rope_type"] : scaling.value("type", json());
    if (type == "yarn" && scaling.contains("factor") && scaling["factor"].is_number())
      return scaling["factor"].get<double>() > 1;
  }
  return false;
}

// The attention window of the sliding-window layers, if any layer has one.
std::optional<int64_t> sliding_window(const ConfigReader& r) {
  if (r.is_null("sliding_window")) return std::nullopt;
  if (!r.is_null("layer_types")) {
    const json& types = r.raw("layer_types");
    if (std::find(types.begin(), types.end(), json("sliding_attention")) == types.end()) return std::nullopt;
  } else if (!r.boolean("use_sliding_window", true)) {
    return std::nullopt;
  }
  return r.count("sliding_window");
}

// GPT-2: LayerNorm with bias, learned positions, biases on every linear, a plain GELU MLP, tied
// embeddings: the Megatron GPT of configs/models/gpt3-*.yaml.
void map_gpt2(const ConfigReader& r, YAML::Node& m) {
  int64_t hidden = r.count("n_embd");
  std::string activation = r.text("activation_function");
  const std::vector<std::string> gelus = {"gelu", "gelu_new", "gelu_pytorch_tanh", "gelu_fast"};
  if (std::find(gelus.begin(), gelus.end(), activation) == gelus.end())
    r.fail("activation_function", "is '" + activation + "': syssim's plain MLP has gelu or squared_relu");
  m["num_layers"] = r.layers("n_layer");
  m["hidden_size"] = hidden;
  m["num_attention_heads"] = r.count("n_head");
  m["ffn_hidden_size"] = r.is_null("n_inner") ? 4 * hidden : r.count("n_inner");
  m["max_position_embeddings"] = r.count("n_positions");
  m["vocab_size"] = r.count("vocab_size");
  m["activation"] = "gelu";
  m["rope"] = false;
  m["tie_word_embeddings"] = r.boolean("tie_word_embeddings", true);
  m["rms_norm_eps"] = yaml_number(r.number("layer_norm_epsilon"));
  m["normalization"] = "LayerNorm";
  m["add_bias_linear"] = true;
  m["hidden_dropout"] = yaml_number(r.number("resid_pdrop"));
  m["attention_dropout"] = yaml_number(r.number("attn_pdrop"));
}

// Every architecture but GPT-2: a pre-norm RMSNorm decoder with RoPE and a gated MLP;
// intermediate_size is the width of the dense MLP layers.
void map_decoder(const Architecture& arch, const ConfigReader& r, YAML::Node& m) {
  bool gemma = arch.family == Family::gemma2 || arch.family == Family::gemma3;
  // Gemma's classes read hidden_activation (their config.json files also carry hidden_act).
  std::string act_key = gemma && (r.has("hidden_activation") || !r.has("hidden_act")) ? "hidden_activation" : "hidden_act";
  std::string activation = r.text(act_key);
  // SiLU gates SwiGLU; a GELU gate (Gemma's GeGLU) has the same three GEMMs and an elementwise
  // activation of the same size, so it is priced as SwiGLU (docs/configs.md).
  const std::vector<std::string> gates = {"silu", "swish", "gelu", "gelu_new", "gelu_pytorch_tanh"};
  if (std::find(gates.begin(), gates.end(), activation) == gates.end())
    r.fail(act_key, "is '" + activation + "': syssim's gated MLP is SwiGLU (silu), or GeGLU priced as SwiGLU");
  m["num_layers"] = r.layers("num_hidden_layers");
  m["hidden_size"] = r.count("hidden_size");
  m["num_attention_heads"] = r.count("num_attention_heads");
  m["ffn_hidden_size"] = r.count("intermediate_size");
  m["max_position_embeddings"] = r.count("max_position_embeddings");
  m["vocab_size"] = r.count("vocab_size");
  m["swiglu"] = true;
  m["rope"] = true;
  m["rope_theta"] = yaml_number(rope_theta(r));
  m["tie_word_embeddings"] = r.boolean("tie_word_embeddings", false);
  m["rms_norm_eps"] = yaml_number(r.number("rms_norm_eps"));
  m["normalization"] = "RMSNorm";
  if (!r.is_null("attention_dropout")) m["attention_dropout"] = yaml_number(r.number("attention_dropout"));
}

// Grouped-query attention: KV heads, head width, biases, QK-norm.
void map_grouped_query_attention(const Architecture& arch, const ConfigReader& r, YAML::Node& m) {
  m["num_query_groups"] = r.is_null("num_key_value_heads") ? r.count("num_attention_heads")
                                                           : r.count("num_key_value_heads");
  if (!r.is_null("head_dim")) m["kv_channels"] = r.count("head_dim");
  if (arch.family == Family::gpt_oss) {  // biases on q, k, v, o and on the experts; attention sinks
    bool bias = r.boolean("attention_bias", true);
    m["add_bias_linear"] = bias;
    m["add_qkv_bias"] = bias;
    m["softmax_type"] = "learnable";  // a learned sink logit per head
    if (yarn_scaled(r)) m["apply_rope_fusion"] = false;
  } else {
    // Qwen2 has biases on q, k and v (not on o); the others on q, k, v and o with
    // attention_bias (the o bias, h values per layer, is not modelled) and on the MLP with mlp_bias.
    bool attention_bias = arch.family == Family::qwen2 || r.boolean("attention_bias", false);
    bool mlp_bias = r.boolean("mlp_bias", false);
    if (mlp_bias && !attention_bias)
      r.fail("mlp_bias", "is true without attention_bias: Megatron biases the MLP only together with the attention "
                         "(add_bias_linear)");
    m["add_bias_linear"] = attention_bias && mlp_bias;
    m["add_qkv_bias"] = attention_bias && !mlp_bias;
  }
  m["qk_layernorm"] =
      arch.family == Family::qwen3 || arch.family == Family::gemma3 || arch.family == Family::qwen3_moe;
}

// A per-layer pattern of 0/1 as a model YAML list (moe_layer_freq, window_attn_skip_freq).
YAML::Node layer_list(const std::vector<int>& per_layer) {
  YAML::Node list(YAML::NodeType::Sequence);
  list.SetStyle(YAML::EmitterStyle::Flow);
  for (int entry : per_layer) list.push_back(entry);
  return list;
}

// transformers' attribute_map lets a config.json name some keys twice (transformers 5 saves
// Qwen3-MoE's num_experts as num_local_experts): the name the file uses.
std::string key_or_alias(const ConfigReader& r, const std::string& key, const std::string& alias) {
  return !r.has(key) && r.has(alias) ? alias : key;
}

// The routed experts of an MoE layer: how many, how many each token goes to, their width.
void map_routed_experts(const ConfigReader& r, YAML::Node& m, const std::string& count_key,
                        const std::string& width_key) {
  const int64_t experts = r.count(count_key), topk = r.count("num_experts_per_tok");
  if (topk > experts)
    r.fail("num_experts_per_tok", "is " + std::to_string(topk) + ", more than the " + std::to_string(experts) +
                                      " experts of '" + count_key + "'");
  m["num_moe_experts"] = experts;
  m["moe_router_topk"] = topk;
  m["moe_ffn_hidden_size"] = r.count(width_key);
}

// Mixtral, Qwen3-MoE, GPT-OSS: a softmax router whose load-balancing loss transformers adds
// in training (output_router_logits) with weight router_aux_loss_coef.
void map_softmax_router(const ConfigReader& r, YAML::Node& m) {
  m["moe_router_score_function"] = "softmax";
  m["moe_router_load_balancing_type"] = r.number("router_aux_loss_coef") > 0 ? "aux_loss" : "none";
}

// Qwen3MoeDecoderLayer: layer i is MoE when (i + 1) is a multiple of decoder_sparse_step and i is
// not in mlp_only_layers (null: none).
std::vector<int> qwen3_moe_layers(const ConfigReader& r) {
  int64_t layers = r.integer("num_hidden_layers");
  int64_t step = r.count("decoder_sparse_step");
  json dense = r.is_null("mlp_only_layers") ? json::array() : r.raw("mlp_only_layers");
  auto is_layer_number = [](const json& entry) { return entry.is_number_integer(); };
  if (!dense.is_array() || !std::all_of(dense.begin(), dense.end(), is_layer_number))
    r.fail("mlp_only_layers", "must be a list of layer numbers, got " + dense.dump());
  std::vector<int> moe;
  for (int64_t layer = 0; layer < layers; ++layer)
    moe.push_back((layer + 1) % step == 0 && std::find(dense.begin(), dense.end(), json(layer)) == dense.end());
  return moe;
}

// DeepSeek's decoder layer (the model repositories' modeling_deepseek.py): layer i is MoE when
// i >= first_k_dense_replace and i is a multiple of moe_layer_freq.
std::vector<int> deepseek_moe_layers(const ConfigReader& r) {
  int64_t layers = r.integer("num_hidden_layers");
  int64_t first_moe = r.count("first_k_dense_replace", 0);
  int64_t every = r.count("moe_layer_freq");
  std::vector<int> moe;
  for (int64_t layer = 0; layer < layers; ++layer) moe.push_back(layer >= first_moe && layer % every == 0);
  return moe;
}

// GPT-OSS's layer_types as 1 for a sliding-window layer, 0 for full attention; without the key,
// GptOssConfig alternates, starting with a sliding layer.
std::vector<int> gpt_oss_sliding_layers(const ConfigReader& r) {
  int64_t layers = r.integer("num_hidden_layers");
  std::vector<int> sliding;
  if (r.is_null("layer_types")) {
    for (int64_t layer = 0; layer < layers; ++layer) sliding.push_back(layer % 2 == 0);
    return sliding;
  }
  const json& types = r.raw("layer_types");
  if (!types.is_array() || static_cast<int64_t>(types.size()) != layers)
    r.fail("layer_types", "must list one layer type per layer (num_hidden_layers=" + std::to_string(layers) +
                              "), got " + std::to_string(types.is_array() ? types.size() : 1) + " entries");
  for (size_t layer = 0; layer < types.size(); ++layer) {
    if (types[layer] != "sliding_attention" && types[layer] != "full_attention")
      r.fail("layer_types", "entry " + std::to_string(layer) + " is " + types[layer].dump() +
                                ": expected sliding_attention or full_attention");
    sliding.push_back(types[layer] == "sliding_attention");
  }
  return sliding;
}

// DeepSeek-V3, Kimi K2, Moonlight: multi-head latent attention, shared experts beside the routed
// ones, a sigmoid router with a per-expert score bias, group-limited routing, dense first layers.
// num_nextn_predict_layers (MTP) is a training choice (overrides.mtp_num_layers), not read.
void map_deepseek_v3(const ConfigReader& r, YAML::Node& m) {
  if (r.boolean("attention_bias", false)) r.fail("attention_bias", "is true: syssim's latent attention has no biases");
  m["multi_latent_attention"] = true;
  // The query and KV latents are normalized (q_a_layernorm, kv_a_layernorm), which Megatron-Core's
  // MLA takes with qk_layernorm.
  m["qk_layernorm"] = true;
  m["q_lora_rank"] = r.is_null("q_lora_rank") ? 0 : r.count("q_lora_rank", 0);  // 0 or null: no query compression
  m["kv_lora_rank"] = r.count("kv_lora_rank");
  m["qk_head_dim"] = r.count("qk_nope_head_dim");
  m["qk_pos_emb_head_dim"] = r.integer("qk_rope_head_dim");
  m["v_head_dim"] = r.count("v_head_dim");

  map_routed_experts(r, m, key_or_alias(r, "n_routed_experts", "num_local_experts"), "moe_intermediate_size");
  int64_t shared = r.is_null("n_shared_experts") ? 0 : r.count("n_shared_experts", 0);
  int64_t shared_width = 0;  // the shared experts as one MLP of their summed width
  if (__builtin_mul_overflow(shared, r.count("moe_intermediate_size"), &shared_width))
    r.fail("n_shared_experts", "is " + std::to_string(shared) + ": times moe_intermediate_size it overflows a 64-bit integer");
  m["moe_shared_expert_intermediate_size"] = shared_width;
  m["moe_layer_freq"] = layer_list(deepseek_moe_layers(r));
  std::string scoring = r.text("scoring_func");
  if (scoring != "sigmoid" && scoring != "softmax")
    r.fail("scoring_func", "is '" + scoring + "': expected sigmoid or softmax");
  m["moe_router_score_function"] = scoring;
  // One group (n_group 1 or null) is no group limit.
  int64_t groups = r.is_null("n_group") ? 1 : r.count("n_group");
  m["moe_router_num_groups"] = groups > 1 ? groups : 0;
  m["moe_router_group_topk"] = groups > 1 ? r.count("topk_group") : 0;
  // noaux_tc: DeepSeek-V3's auxiliary-loss-free balancing, a learned bias on each expert's score.
  std::string method = r.text("topk_method");
  if (method != "noaux_tc" && method != "greedy" && method != "group_limited_greedy")
    r.fail("topk_method", "is '" + method + "': expected noaux_tc, greedy or group_limited_greedy");
  m["moe_router_enable_expert_bias"] = method == "noaux_tc";
  // The architecture's MoEGate computes the router logits in fp32 (modeling_deepseek.py:
  // F.linear(hidden_states.type(torch.float32), self.weight.type(torch.float32))).
  m["moe_router_dtype"] = "fp32";
  bool balanced = r.number("aux_loss_alpha") > 0;
  m["moe_router_load_balancing_type"] = !balanced ? "none" : r.boolean("seq_aux", true) ? "seq_aux_loss" : "aux_loss";
}

// The experts of Mixtral, Qwen3-MoE and GPT-OSS (DeepSeek's are in map_deepseek_v3).
void map_experts(const Architecture& arch, const ConfigReader& r, YAML::Node& m) {
  switch (arch.family) {
    case Family::gpt_oss:  // its GLU's inputs clamped, then as Mixtral's
      m["activation_func_clamp_value"] = yaml_number(r.number("swiglu_limit"));
      [[fallthrough]];
    case Family::mixtral:  // every layer MoE; intermediate_size is the experts' width
      map_routed_experts(r, m, key_or_alias(r, "num_local_experts", "num_experts"), "intermediate_size");
      m["moe_layer_freq"] = 1;
      break;
    case Family::qwen3_moe:  // intermediate_size is the width of the dense layers
      map_routed_experts(r, m, key_or_alias(r, "num_experts", "num_local_experts"), "moe_intermediate_size");
      m["moe_layer_freq"] = layer_list(qwen3_moe_layers(r));
      break;
    default:
      return;
  }
  map_softmax_router(r, m);
}

// Sliding-window layers attend to the last `window` tokens only. Mixtral's and GPT-OSS's are
// mapped (Megatron's window_size, and window_attn_skip_freq where only some layers slide), at
// any sequence: a window holding the whole sequence is traced as full attention (traced_at).
// For the other architectures syssim prices every layer's attention over the whole causal
// sequence, which overstates those layers, so a sequence longer than the window is refused
// unless the overrides give the window (`window_given`: their window_size and
// window_attn_skip_freq say which layers slide); at or below it, sliding and full attention
// are the same.
void map_attention_window(const Architecture& arch, const ConfigReader& r, int64_t seq_length, bool window_given,
                          const std::string& where, YAML::Node& m) {
  // GPT-OSS's layer types are checked even where none slides.
  const std::vector<int> gpt_oss_sliding = arch.family == Family::gpt_oss ? gpt_oss_sliding_layers(r) : std::vector<int>();
  std::optional<int64_t> window = sliding_window(r);
  if (!window) return;
  if (arch.family != Family::mixtral && arch.family != Family::gpt_oss) {
    if (seq_length <= *window || window_given) return;
    throw DataError(where + ": architecture " + arch.name + " has sliding-window attention (window " +
                    std::to_string(*window) + ") and seq_length " + std::to_string(seq_length) +
                    " is longer; syssim maps the sliding windows of MixtralForCausalLM and GptOssForCausalLM only: "
                    "give overrides.window_size (and window_attn_skip_freq where only some layers slide)");
  }
  // transformers' window counts the query among its keys; Megatron's left window does not.
  m["window_size"] = *window - 1;
  if (arch.family == Family::gpt_oss) m["window_attn_skip_freq"] = layer_list(gpt_oss_sliding);
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

  fs::path shipped = fs::path(data_dir()) / "hf" / id / "config.json";
  if (fs::is_regular_file(shipped, error)) return shipped.string();
  looked.push_back(shipped.string());

  throw DataError(where + ": no config.json found (looked in: " + join(looked) + ")");
}

bool is_syssim_graph(const json& file) { return file.is_object() && file.value("format", json()) == "syssim-graph"; }

void refuse_graph_as_model(const std::string& where) {
  throw DataError(where + ": a syssim graph, not a model (a model YAML, a preset or a Hugging Face config.json); "
                  "give a graph to the stage after its last section");
}

YAML::Node map_huggingface_config(const json& config, int64_t seq_length, const std::string& where, bool window_given) {
  if (!config.is_object()) throw DataError(where + ": expected a JSON object");
  if (is_syssim_graph(config)) refuse_graph_as_model(where);
  if (!config.contains("architectures") || !config["architectures"].is_array() || config["architectures"].empty() ||
      !config["architectures"][0].is_string())
    throw DataError(where + ": key 'architectures' must list the model class, e.g. [\"LlamaForCausalLM\"]");
  std::string name = config["architectures"][0].get<std::string>();
  const auto& supported = supported_architectures();
  auto arch = std::find_if(supported.begin(), supported.end(), [&](const Architecture& a) { return a.name == name; });
  const bool nested = arch != supported.end() && arch->nested_text_config && config.contains("text_config");
  if (nested && !config["text_config"].is_object())  // read as an object, it would give every default
    throw DataError(where + ": key 'text_config' must be an object, got " + config["text_config"].dump());
  const json& text = nested ? config["text_config"] : config;
  bool mapped_experts = arch != supported.end() && is_mixture_of_experts(arch->family);
  bool experts = std::any_of(kExpertCountKeys.begin(), kExpertCountKeys.end(), [&](const std::string& key) {
    return text.contains(key) && text[key].is_number() && text[key].get<double>() > 0;
  });
  if (!mapped_experts &&
      (experts || std::find(kMixtureOfExperts.begin(), kMixtureOfExperts.end(), name) != kMixtureOfExperts.end()))
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
  map_decoder(*arch, reader, m);
  if (arch->family == Family::deepseek_v3)
    map_deepseek_v3(reader, m);
  else
    map_grouped_query_attention(*arch, reader, m);
  map_experts(*arch, reader, m);
  map_attention_window(*arch, reader, seq_length, window_given, where, m);
  return m;
}

namespace {

// The config.json keys that give a model key: the first the file has, else the first (the key
// to add). Keys named as the model key are not listed in errors.
const std::vector<std::pair<std::string, std::vector<std::string>>> kConfigKeysOf = {
    {"num_layers", {"num_hidden_layers", "n_layer"}},
    {"hidden_size", {"hidden_size", "n_embd"}},
    {"num_attention_heads", {"num_attention_heads", "n_head"}},
    {"num_query_groups", {"num_key_value_heads"}},
    {"kv_channels", {"head_dim"}},
    {"ffn_hidden_size", {"intermediate_size", "n_inner"}},
    {"max_position_embeddings", {"max_position_embeddings", "n_positions"}},
    {"num_moe_experts", {"n_routed_experts", "num_local_experts", "num_experts"}},
    {"moe_router_topk", {"num_experts_per_tok"}},
    {"moe_ffn_hidden_size", {"moe_intermediate_size", "intermediate_size"}},
    {"moe_router_num_groups", {"n_group"}},
    {"moe_router_group_topk", {"topk_group"}},
    {"qk_head_dim", {"qk_nope_head_dim"}},
    {"qk_pos_emb_head_dim", {"qk_rope_head_dim"}},
    {"window_size", {"sliding_window"}},
    {"rms_norm_eps", {"rms_norm_eps", "layer_norm_epsilon"}},
};

ConfigKeyNames config_key_names(const json& config, const YAML::Node& overrides) {
  const json& text = config.contains("text_config") && config["text_config"].is_object() ? config["text_config"] : config;
  ConfigKeyNames names;
  for (const auto& [model_key, config_keys] : kConfigKeysOf) {
    if (overrides[model_key]) continue;
    auto given = std::find_if(config_keys.begin(), config_keys.end(), [&](const std::string& k) { return text.contains(k); });
    const std::string& config_key = given != config_keys.end() ? *given : config_keys.front();
    if (config_key != model_key) names[model_key] = config_key;
  }
  return names;
}

bool names_key(const std::string& message, const std::string& key) {
  auto part_of_name = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (size_t at = message.find(key); at != std::string::npos; at = message.find(key, at + 1))
    if ((at == 0 || !part_of_name(message[at - 1])) &&
        (at + key.size() == message.size() || !part_of_name(message[at + key.size()])))
      return true;
  return false;
}

}  // namespace

std::string with_config_key_names(const std::string& message, const ConfigKeyNames& names) {
  std::string named;
  for (const auto& [model_key, config_key] : names)
    if (names_key(message, model_key)) named += (named.empty() ? "" : ", ") + config_key + " for " + model_key;
  return named.empty() ? message : message + " (config.json's keys: " + named + ")";
}

YAML::Node huggingface_model_node(const YAML::Node& model, const std::vector<std::string>& model_keys,
                                  const std::map<std::string, std::string>& model_keys_known_as,
                                  const std::string& where, ConfigKeyNames* names_out) {
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
  check_keys(overrides, overridable, where + ": overrides", model_keys_known_as);
  // config.json describes the architecture, not the training run: the sequence length is required
  // as for a model YAML with the Megatron fields (a job's seq_length still overrides it).
  if (!overrides["seq_length"])
    throw DataError(context + ": overrides.seq_length is required (config.json holds no training sequence length)");
  int64_t seq_length = yaml_require<int64_t>(overrides, "seq_length", where + ": overrides");

  std::string path = find_huggingface_config(id, fs::path(where).parent_path().string(), context);
  // The file found, named once: alone where it is what the command line gave (`where` itself),
  // else after the YAML's key, unless the id was its path already.
  const std::string config_where = path == where ? path : path == id ? context : context + ": " + path;
  const json config = parse_json(read_input(path), config_where);
  YAML::Node fields = map_huggingface_config(config, seq_length, config_where, overrides["window_size"].IsDefined());
  if (names_out) *names_out = config_key_names(config, overrides);
  if (model["name"]) fields["name"] = model["name"];
  if (overrides["swiglu"] || overrides["activation"]) {  // the overrides say which MLP, alone
    fields.remove("swiglu");
    fields.remove("activation");
  }
  for (const auto& entry : overrides) fields[entry.first.as<std::string>()] = entry.second;
  return fields;
}

}  // namespace syssim
