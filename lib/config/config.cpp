#include "config/config.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <tuple>
#include <map>
#include <sstream>

#include "common/error.hpp"
#include "common/io.hpp"
#include "common/json_util.hpp"
#include "common/text.hpp"
#include "common/units.hpp"
#include "common/yaml_util.hpp"
#include "config/huggingface.hpp"
#include "config/presets.hpp"

namespace syssim {
namespace {

const std::vector<std::string> kModelKeys = {
    "name", "num_layers", "hidden_size", "num_attention_heads", "num_query_groups", "kv_channels",
    "ffn_hidden_size", "seq_length", "max_position_embeddings", "vocab_size",
    "make_vocab_size_divisible_by", "swiglu", "activation", "rope", "rope_theta", "tie_word_embeddings",
    "rms_norm_eps", "normalization", "add_bias_linear", "add_qkv_bias", "qk_layernorm",
    "attention_backend", "masked_softmax_fusion", "bias_swiglu_fusion", "apply_rope_fusion", "rms_norm_fusion",
    "projection_fusion", "cross_entropy", "hidden_dropout", "attention_dropout", "huggingface", "overrides",
    // Mixture of experts, multi-head latent attention, multi-token prediction, sliding windows.
    "num_moe_experts", "moe_router_topk", "moe_ffn_hidden_size", "moe_shared_expert_intermediate_size",
    "moe_layer_freq", "moe_router_score_function", "moe_router_num_groups", "moe_router_group_topk",
    "moe_router_enable_expert_bias", "moe_router_load_balancing_type", "multi_latent_attention", "q_lora_rank",
    "kv_lora_rank", "qk_head_dim", "qk_pos_emb_head_dim", "v_head_dim", "mtp_num_layers", "window_size",
    "window_attn_skip_freq", "softmax_type", "activation_func_clamp_value", "moe_router_dtype"};

// Model keys as Megatron-Core's TransformerConfig and Hugging Face's config.json name them,
// where syssim's name differs: an unknown key is pointed to syssim's.
const std::map<std::string, std::string> kModelKeysKnownAs = {
    {"layernorm_epsilon", "rms_norm_eps"},       {"rotary_base", "rope_theta"},
    {"gated_linear_unit", "swiglu"},             {"num_experts", "num_moe_experts"},
    {"num_hidden_layers", "num_layers"},         {"intermediate_size", "ffn_hidden_size"},
    {"num_key_value_heads", "num_query_groups"}, {"head_dim", "kv_channels"},
    {"num_local_experts", "num_moe_experts"},    {"num_experts_per_tok", "moe_router_topk"},
    {"moe_intermediate_size", "moe_ffn_hidden_size"}, {"sliding_window", "window_size"},
};

const std::vector<std::string> kHardwareKeys = {
    "name", "peak_tflops_mm", "peak_tflops_math", "peak_memory_bandwidth_GBps", "gpus_per_node",
    "peak_tflops_mm_fp8", "peak_tflops_mm_fp4", "sfu_peak", "gpu_memory_GB",
    "inter_node_bandwidth_GBps", "host_link_GBps", "compute_slowdown_under_communication", "inter_node_latency_us", "kernel_launch_us", "host", "topology",
    "cuda_context_GB", "nccl_channels",
    "estimator", "calibrated_model", "calibrated_families", "efficiency", "attention_kernels",
    "fp8_gemm_speedup", "fp4_gemm_speedup", "block_scaled_formats", "collective_algorithm"};

// A kernel eleven times as long beside communication is far past anything measured (twice as
// long beside a copy kernel on half the SMs, tests/data/calibration/h200/interference.csv).
constexpr double kMostComputeSlowdown = 10;

// Transformer Engine's block-scaled recipes, which need tensor cores with block scaling (Blackwell).
const std::vector<std::string> kBlockScaledFormats = {"mxfp8", "nvfp4"};

const std::vector<std::string> kTopologyKeys = {"levels"};
const std::vector<std::string> kAttentionKernelKeys = {"forward", "backward"};
const std::vector<std::string> kHostKeys = {"op_us", "module_us", "launch_us"};
const std::vector<std::string> kNcclChannelKeys = {"coll_in_node", "coll_across_nodes", "p2p_per_peer_in_node",
                                                  "p2p_per_peer_across_nodes", "p2p_across_nodes", "nvls"};
const std::vector<std::string> kLevelKeys = {"kind", "size", "bandwidth_GBps", "latency_us", "efficiency",
                                             "oversubscription", "nvls_bus_bandwidth_GBps", "alltoall_efficiency"};

// The channel counts' fields, in kNcclChannelKeys' order (const or not, as `c`).
template <typename Channels>
auto nccl_channel_fields(Channels& c) {
  return std::array{&c.coll_in_node, &c.coll_across_nodes, &c.p2p_per_peer_in_node, &c.p2p_per_peer_across_nodes,
                    &c.p2p_across_nodes, &c.nvls};
}

template <typename T>
void require_positive(T value, const std::string& key, const std::string& where) {
  std::ostringstream text;
  text << value;
  if (!(value > 0)) throw DataError(where + ": key '" + key + "' must be positive, got " + text.str());
  if (!std::isfinite(static_cast<double>(value)))
    throw DataError(where + ": key '" + key + "' must be finite, got " + text.str());
}

void require_layer_count(int64_t layers, const std::string& key, const std::string& where) {
  if (layers > kMaxLayers)
    throw DataError(where + ": key '" + key + "' is " + std::to_string(layers) + "; syssim takes at most " +
                    std::to_string(kMaxLayers) + " layers");
}

// A count a key gives: 0 or more.
void require_count(int64_t value, const std::string& key, const std::string& where) {
  if (value < 0) throw DataError(where + ": key '" + key + "' must not be negative, got " + std::to_string(value));
}

// A latency or a floor: 0 (none) or more, and finite.
void require_non_negative(double value, const std::string& key, const std::string& where) {
  std::ostringstream text;
  text << value;
  if (!(value >= 0 && std::isfinite(value)))
    throw DataError(where + ": key '" + key + "' must be 0 or more and finite, got " + text.str());
}

// A dropout probability: 0 <= p < 1 (p = 1 would drop everything).
void require_probability(double value, const std::string& key, const std::string& where) {
  if (!(value >= 0 && value < 1)) throw DataError(where + ": key '" + key + "' must be in [0, 1), got " + text_of(value));
}

std::optional<double> optional_double(const YAML::Node& node, const std::string& key, const std::string& where) {
  if (!node[key] || node[key].IsNull()) return std::nullopt;
  return yaml_require<double>(node, key, where);
}

void require_one_of(const std::string& value, const std::vector<std::string>& allowed, const std::string& key,
                    const std::string& where) {
  for (const auto& a : allowed)
    if (a == value) return;
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "" : "|") + a;
  throw DataError(where + ": key '" + key + "' must be one of " + list + ", got '" + value + "'");
}

// A per-layer pattern of 0/1 from Megatron's forms: an int N (`every` decides which layers
// of every N get 1), a list of num_layers 0/1 entries, or Megatron-LM's command-line expression
// "([0]*3+[1]*58)" (sums of [a, b, ...]*n).
template <typename Every>
std::vector<int> layer_pattern(const YAML::Node& node, const std::string& key, int64_t layers, const std::string& where,
                               Every every) {
  const YAML::Node value = node[key];
  auto fail = [&](const std::string& why) -> DataError {
    return DataError(where + ": key '" + key + "' " + why);
  };
  std::vector<int> pattern;
  if (value.IsSequence()) {
    for (size_t i = 0; i < value.size(); ++i) {
      int entry = -1;
      try {
        entry = value[i].as<int>();
      } catch (const YAML::Exception&) {
      }
      if (entry != 0 && entry != 1)
        throw fail("entry " + std::to_string(i) + " must be 0 or 1, got " + scalar_text(value[i]));
      pattern.push_back(entry);
    }
  } else if (value.IsScalar() && value.Scalar().find('[') != std::string::npos) {
    std::string text;
    for (char c : value.Scalar())
      if (!std::isspace(static_cast<unsigned char>(c)) && c != '(' && c != ')') text += c;
    for (size_t at = 0; at < text.size();) {
      size_t close = text.find(']', at);
      if (text[at] != '[' || close == std::string::npos) throw fail("'" + value.Scalar() + "': expected ([a]*n+[b]*m)");
      std::vector<int> part;
      std::stringstream items(text.substr(at + 1, close - at - 1));
      for (std::string item; std::getline(items, item, ',');) {
        if (item != "0" && item != "1") throw fail("'" + value.Scalar() + "': entries must be 0 or 1");
        part.push_back(item[0] - '0');
      }
      at = close + 1;
      int64_t repeat = 1;
      if (at < text.size() && text[at] == '*') {
        size_t end = text.find('+', at);
        if (end == std::string::npos) end = text.size();
        const std::string count = text.substr(at + 1, end - at - 1);
        if (count.empty() || count.size() > 6 || !std::all_of(count.begin(), count.end(), ::isdigit))
          throw fail("'" + value.Scalar() + "': expected a repeat count after '*'");
        repeat = std::stoll(count);
        at = end;
      }
      for (int64_t r = 0; r < repeat && static_cast<int64_t>(pattern.size()) <= layers; ++r)
        pattern.insert(pattern.end(), part.begin(), part.end());
      if (at < text.size() && text[at++] != '+') throw fail("'" + value.Scalar() + "': expected '+'");
    }
  } else {
    const int64_t n = yaml_require<int64_t>(node, key, where);
    if (n < 1) throw fail("must be at least 1, got " + std::to_string(n));
    for (int64_t layer = 0; layer < layers; ++layer) pattern.push_back(every(layer, n) ? 1 : 0);
  }
  if (static_cast<int64_t>(pattern.size()) != layers)
    throw fail("has " + std::to_string(pattern.size()) + " entries; num_layers=" + std::to_string(layers) +
               " needs one per layer");
  return pattern;
}

// The MoE, MLA, MTP and sliding-window keys of a model YAML (Megatron-Core's names).
void parse_moe_and_attention(const YAML::Node& node, const std::string& name, ModelConfig& m) {
  m.num_moe_experts = yaml_get<int64_t>(node, "num_moe_experts", name, 0);
  // 0 (or absent) is a dense model; below it a slip, named before the keys it gates.
  require_count(m.num_moe_experts, "num_moe_experts", name);
  if (m.is_moe()) {
    m.moe_router_topk = yaml_get<int64_t>(node, "moe_router_topk", name, m.moe_router_topk);
    m.moe_ffn_hidden_size = yaml_get<int64_t>(node, "moe_ffn_hidden_size", name, m.ffn_hidden_size);
    m.moe_shared_expert_intermediate_size = yaml_get<int64_t>(node, "moe_shared_expert_intermediate_size", name, 0);
    // Megatron-LM: an int N makes layer i an MoE layer when i % N == 0; default 1, every layer.
    m.moe_layer_pattern = node["moe_layer_freq"]
                              ? layer_pattern(node, "moe_layer_freq", m.num_layers, name,
                                              [](int64_t layer, int64_t n) { return layer % n == 0; })
                              : std::vector<int>(m.num_layers, 1);
    m.moe_router_score_function = yaml_get<std::string>(node, "moe_router_score_function", name, "softmax");
    m.moe_router_num_groups = yaml_get<int64_t>(node, "moe_router_num_groups", name, 0);
    m.moe_router_group_topk = yaml_get<int64_t>(node, "moe_router_group_topk", name, 0);
    m.moe_router_enable_expert_bias = yaml_get<bool>(node, "moe_router_enable_expert_bias", name, false);
    m.moe_router_load_balancing_type =
        yaml_get<std::string>(node, "moe_router_load_balancing_type", name, m.moe_router_load_balancing_type);
    m.moe_router_dtype = yaml_get<std::string>(node, "moe_router_dtype", name, "");
  } else {
    for (const char* key : {"moe_router_topk", "moe_ffn_hidden_size", "moe_shared_expert_intermediate_size",
                            "moe_layer_freq", "moe_router_score_function", "moe_router_num_groups",
                            "moe_router_group_topk", "moe_router_enable_expert_bias", "moe_router_load_balancing_type",
                            "moe_router_dtype"})
      if (node[key]) throw DataError(name + ": key '" + std::string(key) + "' needs num_moe_experts");
  }
  m.multi_latent_attention = yaml_get<bool>(node, "multi_latent_attention", name, false);
  if (m.multi_latent_attention) {
    m.q_lora_rank = yaml_get<int64_t>(node, "q_lora_rank", name, 0);
    m.kv_lora_rank = yaml_require<int64_t>(node, "kv_lora_rank", name);
    m.qk_head_dim = yaml_require<int64_t>(node, "qk_head_dim", name);
    m.qk_pos_emb_head_dim = yaml_require<int64_t>(node, "qk_pos_emb_head_dim", name);
    m.v_head_dim = yaml_require<int64_t>(node, "v_head_dim", name);
    // The latent attention sets both from its own keys; a value given is still checked.
    for (const char* key : {"num_query_groups", "kv_channels"})
      if (node[key]) require_positive(yaml_require<int64_t>(node, key, name), key, name);
    m.kv_channels = m.qk_head_dim + m.qk_pos_emb_head_dim;  // the attention's query/key head width
    m.num_query_groups = m.num_attention_heads;            // MLA has a key and value per head
  } else {
    for (const char* key : {"q_lora_rank", "kv_lora_rank", "qk_head_dim", "qk_pos_emb_head_dim", "v_head_dim"})
      if (node[key]) throw DataError(name + ": key '" + std::string(key) + "' needs multi_latent_attention: true");
  }
  m.mtp_num_layers = yaml_get<int64_t>(node, "mtp_num_layers", name, 0);
  require_layer_count(m.mtp_num_layers, "mtp_num_layers", name);
  if (YAML::Node window = node["window_size"]; window && !window.IsNull()) {
    // Megatron's (left, right) tuple, or the left size alone; causal attention has no right part.
    if (window.IsSequence()) {
      if (window.size() != 2 || window[1].as<std::string>() != "0")
        throw DataError(name + ": key 'window_size' must be [LEFT, 0] (causal sliding window) or LEFT, got " +
                        scalar_text(window));
      m.window_size = window[0].as<int64_t>();
    } else {
      m.window_size = yaml_require<int64_t>(node, "window_size", name);
    }
    if (m.window_size == 0)  // Megatron's (0, 0): each token sees itself alone, no model's window
      throw DataError(name + ": key 'window_size' must be 1 or more (the keys before each query it attends to), got 0");
    // Megatron-Core: an int N is one full-attention layer after N-1 sliding-window ones (layer
    // numbers from 1); a list has 1 for sliding-window layers; none: every layer slides.
    m.sliding_window_pattern = node["window_attn_skip_freq"]
                                   ? layer_pattern(node, "window_attn_skip_freq", m.num_layers, name,
                                                   [](int64_t layer, int64_t n) { return (layer + 1) % n != 0; })
                                   : std::vector<int>(m.num_layers, 1);
  } else if (node["window_attn_skip_freq"]) {
    throw DataError(name + ": key 'window_attn_skip_freq' needs window_size");
  }
  m.softmax_type = yaml_get<std::string>(node, "softmax_type", name, m.softmax_type);
}

// A model read from its fields (a model YAML's, or those mapped from a config.json), checked.
ModelConfig model_from_fields(const YAML::Node& node, const std::string& name) {
  ModelConfig m;
  m.name = yaml_get<std::string>(node, "name", name, stem_of(name));
  m.num_layers = yaml_require<int64_t>(node, "num_layers", name);
  // Before anything is sized by it (the per-layer patterns of experts and sliding windows).
  require_positive(m.num_layers, "num_layers", name);
  require_layer_count(m.num_layers, "num_layers", name);
  m.hidden_size = yaml_require<int64_t>(node, "hidden_size", name);
  m.num_attention_heads = yaml_require<int64_t>(node, "num_attention_heads", name);
  m.num_query_groups = yaml_get<int64_t>(node, "num_query_groups", name, m.num_attention_heads);
  if (m.num_attention_heads <= 0) throw DataError(name + ": key 'num_attention_heads' must be positive");
  // Megatron-Core's TransformerConfig: without kv_channels the heads split hidden_size evenly.
  if (!node["kv_channels"] && m.hidden_size % m.num_attention_heads != 0)
    throw DataError(name + ": hidden_size=" + std::to_string(m.hidden_size) + " is not a multiple of num_attention_heads=" +
                    std::to_string(m.num_attention_heads) + "; give kv_channels (the head dimension)");
  m.kv_channels = yaml_get<int64_t>(node, "kv_channels", name, m.hidden_size / m.num_attention_heads);
  m.ffn_hidden_size = yaml_require<int64_t>(node, "ffn_hidden_size", name);
  m.seq_length = yaml_require<int64_t>(node, "seq_length", name);
  m.max_position_embeddings = yaml_get<int64_t>(node, "max_position_embeddings", name, m.seq_length);
  m.vocab_size = yaml_require<int64_t>(node, "vocab_size", name);
  m.make_vocab_size_divisible_by =
      yaml_get<int64_t>(node, "make_vocab_size_divisible_by", name, m.make_vocab_size_divisible_by);
  m.swiglu = yaml_get<bool>(node, "swiglu", name, m.swiglu);
  if (node["activation"]) {  // swiglu | gelu | squared_relu; `swiglu:` may say the same, not the opposite
    std::string activation = yaml_require<std::string>(node, "activation", name);
    require_one_of(activation, {"swiglu", "gelu", "squared_relu"}, "activation", name);
    bool gated = activation == "swiglu";
    if (node["swiglu"] && m.swiglu != gated)
      throw DataError(name + ": key 'activation' is '" + activation + "' but 'swiglu' is " + (m.swiglu ? "true" : "false"));
    m.swiglu = gated;
    if (!gated) m.activation = activation;
  }
  m.rope = yaml_get<bool>(node, "rope", name, m.rope);
  m.rope_theta = yaml_get<double>(node, "rope_theta", name, m.rope_theta);
  m.tie_word_embeddings = yaml_get<bool>(node, "tie_word_embeddings", name, m.tie_word_embeddings);
  m.rms_norm_eps = yaml_get<double>(node, "rms_norm_eps", name, m.rms_norm_eps);
  m.normalization = yaml_get<std::string>(node, "normalization", name, m.normalization);
  m.add_bias_linear = yaml_get<bool>(node, "add_bias_linear", name, m.add_bias_linear);
  m.add_qkv_bias = yaml_get<bool>(node, "add_qkv_bias", name, m.add_qkv_bias);
  m.qk_layernorm = yaml_get<bool>(node, "qk_layernorm", name, m.qk_layernorm);
  m.attention_backend = yaml_get<std::string>(node, "attention_backend", name, m.attention_backend);
  if (node["masked_softmax_fusion"] && m.attention_backend != "unfused")
    throw DataError(name + ": key 'masked_softmax_fusion' needs attention_backend: unfused");
  m.masked_softmax_fusion = yaml_get<bool>(node, "masked_softmax_fusion", name, m.masked_softmax_fusion);
  m.bias_swiglu_fusion = yaml_get<bool>(node, "bias_swiglu_fusion", name, m.bias_swiglu_fusion);
  m.activation_func_clamp_value =
      yaml_get<double>(node, "activation_func_clamp_value", name, m.activation_func_clamp_value);
  m.apply_rope_fusion = yaml_get<bool>(node, "apply_rope_fusion", name, m.apply_rope_fusion);
  m.rms_norm_fusion = yaml_get<bool>(node, "rms_norm_fusion", name, m.rms_norm_fusion);
  m.projection_fusion = yaml_get<bool>(node, "projection_fusion", name, m.projection_fusion);
  m.cross_entropy = yaml_get<std::string>(node, "cross_entropy", name, m.cross_entropy);
  m.hidden_dropout = yaml_get<double>(node, "hidden_dropout", name, m.hidden_dropout);
  m.attention_dropout = yaml_get<double>(node, "attention_dropout", name, m.attention_dropout);
  parse_moe_and_attention(node, name, m);
  validate(m, name);
  return m;
}

}  // namespace

std::string stem_of(const std::string& path) {
  size_t slash = path.find_last_of('/');
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  size_t dot = base.find_last_of('.');
  return dot == std::string::npos ? base : base.substr(0, dot);
}

ModelConfig parse_model_yaml(const std::string& text, const std::string& name, std::optional<int64_t> job_seq_length) {
  YAML::Node node = load_yaml_text(text, name);
  if (node.IsMap() && node["format"] && node["format"].IsScalar() && node["format"].Scalar() == "syssim-graph")
    refuse_graph_as_model(name);
  check_keys(node, kModelKeys, name, kModelKeysKnownAs);
  // A config.json is read at the sequence the job runs: whether its sliding window covers the
  // whole sequence, and so is full attention, depends on it.
  if (node["huggingface"] && job_seq_length) {
    if (!node["overrides"]) node["overrides"] = YAML::Node(YAML::NodeType::Map);
    if (node["overrides"].IsMap()) node["overrides"]["seq_length"] = *job_seq_length;
  }
  ConfigKeyNames config_keys;
  if (node["huggingface"])  // the fields of the model's config.json, with the overrides applied
    node = huggingface_model_node(node, kModelKeys, kModelKeysKnownAs, name, &config_keys);
  else if (node["overrides"])
    throw DataError(name + ": key 'overrides' is only valid with 'huggingface'");
  try {
    return model_from_fields(node, name);
  } catch (const DataError& e) {  // a config.json's relations, in the names its user knows
    throw DataError(with_config_key_names(e.what(), config_keys));
  }
}

ModelConfig load_model_yaml(const std::string& name_or_path, std::optional<int64_t> job_seq_length) {
  const std::string path = preset_file(PresetKind::kModel, name_or_path);
  return parse_model_yaml(read_input(path), path, job_seq_length);  // reports unreadable files and bad YAML with the path
}

ModelConfig load_model(const std::string& argument, std::optional<int64_t> seq_length) {
  namespace fs = std::filesystem;
  const fs::path given(argument);
  std::error_code error;
  const bool config_file = given.extension() == ".json" && fs::is_regular_file(given, error);
  const bool config_folder = fs::is_regular_file(given / "config.json", error);
  // An id may hold dots (meta-llama/Llama-3.1-8B); a model YAML path that is missing may not.
  const std::string extension = given.extension().string();
  const bool id = !fs::exists(given, error) && extension != ".yaml" && extension != ".yml" && extension != ".json" &&
                  std::count(argument.begin(), argument.end(), '/') == 1 && argument.front() != '/';
  if (!config_file && !config_folder && !id) return load_model_yaml(argument, seq_length);
  if (!seq_length) {  // a flag the command line lacks, unless the file is no config.json at all
    if (config_file && is_syssim_graph(parse_json(read_input(argument), argument))) refuse_graph_as_model(argument);
    throw UsageError(argument + ": a Hugging Face model needs --seq-length (its config.json holds no training sequence length)");
  }
  // The model YAML `huggingface: ...` would say, named after the model's folder; a local file by
  // its absolute path (the YAML's own folder does not exist).
  fs::path local = fs::absolute(given).lexically_normal();
  if (local.filename().empty()) local = local.parent_path();  // a folder given as "Qwen3-8B/" or "."
  const std::string name = (config_file ? local.parent_path() : local).filename().string();
  YAML::Node model;
  model["name"] = name;
  model["huggingface"] = id ? argument : local.string();
  model["overrides"]["seq_length"] = *seq_length;
  // Errors name the config.json read (an id's, found by the lookup, names itself).
  const std::string where = config_file ? local.string() : config_folder ? (local / "config.json").string() : name;
  return parse_model_yaml(YAML::Dump(model), where);
}

bool runs_fused_softmax_kernel(const ModelConfig& model, int64_t seq_length) {
  // The kernel's other conditions, 16-bit scores and (micro-batch x heads per rank) % 4 == 0,
  // are left out: scores are 16-bit, and the trace knows neither the batch nor the TP size.
  return model.attention_backend == "unfused" && model.masked_softmax_fusion && seq_length > 16 &&
         seq_length <= 4096 && seq_length % 4 == 0;
}

bool window_slides_at(const ModelConfig& model, int64_t seq_length) {
  return model.window_size > 0 && seq_length > model.window_size + 1;
}

bool tp_splits_query_groups(const ModelConfig& model, int64_t tp) {
  return model.num_query_groups % tp == 0 || tp % model.num_query_groups == 0;
}

ModelConfig traced_at(const ModelConfig& model, int64_t seq_length) {
  ModelConfig traced = model;
  traced.seq_length = seq_length;
  if (!window_slides_at(model, seq_length)) {
    traced.window_size = 0;
    traced.sliding_window_pattern.clear();
  }
  return traced;
}

void validate(const ModelConfig& m, const std::string& where) {
  require_positive(m.num_layers, "num_layers", where);
  require_layer_count(m.num_layers, "num_layers", where);
  require_layer_count(m.mtp_num_layers, "mtp_num_layers", where);
  require_positive(m.hidden_size, "hidden_size", where);
  require_positive(m.num_query_groups, "num_query_groups", where);
  require_positive(m.kv_channels, "kv_channels", where);
  require_positive(m.ffn_hidden_size, "ffn_hidden_size", where);
  require_positive(m.seq_length, "seq_length", where);
  require_positive(m.max_position_embeddings, "max_position_embeddings", where);
  require_positive(m.vocab_size, "vocab_size", where);
  require_positive(m.make_vocab_size_divisible_by, "make_vocab_size_divisible_by", where);
  if (m.num_attention_heads % m.num_query_groups != 0)
    throw DataError(where + ": num_query_groups=" + std::to_string(m.num_query_groups) +
                    " does not divide num_attention_heads=" + std::to_string(m.num_attention_heads));
  require_one_of(m.activation, {"gelu", "squared_relu"}, "activation", where);
  require_one_of(m.normalization, {"RMSNorm", "LayerNorm"}, "normalization", where);
  require_one_of(m.attention_backend, {"flash", "flash2", "triton", "unfused"}, "attention_backend", where);
  // A NaN or infinite epsilon or RoPE base would be written to the graph as null.
  require_positive(m.rms_norm_eps, "rms_norm_eps", where);
  require_positive(m.rope_theta, "rope_theta", where);
  require_probability(m.hidden_dropout, "hidden_dropout", where);
  require_probability(m.attention_dropout, "attention_dropout", where);
  require_one_of(m.softmax_type, {"vanilla", "learnable"}, "softmax_type", where);
  require_one_of(m.cross_entropy, {"vocab_parallel", "torch_fp32"}, "cross_entropy", where);
  require_count(m.mtp_num_layers, "mtp_num_layers", where);
  require_count(m.window_size, "window_size", where);
  auto check_pattern = [&](const std::vector<int>& pattern, const char* key) {
    if (static_cast<int64_t>(pattern.size()) != m.num_layers ||
        std::any_of(pattern.begin(), pattern.end(), [](int entry) { return entry != 0 && entry != 1; }))
      throw DataError(where + ": key '" + key + "' needs one entry of 0 or 1 per layer (num_layers=" +
                      std::to_string(m.num_layers) + ")");
  };
  if (!m.bias_swiglu_fusion && !m.swiglu) throw DataError(where + ": bias_swiglu_fusion: false needs swiglu");
  if (m.activation_func_clamp_value != 0) {
    require_positive(m.activation_func_clamp_value, "activation_func_clamp_value", where);
    // Megatron-Core clamps in its fused kernels only for the routed experts (TEGroupedMLP).
    if (!m.swiglu || !m.bias_swiglu_fusion || !m.is_moe() ||
        std::find(m.moe_layer_pattern.begin(), m.moe_layer_pattern.end(), 0) != m.moe_layer_pattern.end())
      throw DataError(where + ": key 'activation_func_clamp_value' needs swiglu with bias_swiglu_fusion and a "
                              "mixture of experts on every layer");
  }
  if (!m.apply_rope_fusion && (!m.rope || m.multi_latent_attention))
    throw DataError(where + ": apply_rope_fusion: false needs rope, without multi_latent_attention");
  if (!m.rms_norm_fusion && m.normalization != "RMSNorm")
    throw DataError(where + ": rms_norm_fusion: false needs normalization RMSNorm");
  if (!m.projection_fusion && m.multi_latent_attention)
    throw DataError(where + ": projection_fusion: false needs attention without multi_latent_attention");
  if (m.window_size > 0) check_pattern(m.sliding_window_pattern, "window_attn_skip_freq");
  if (m.window_size > 0 && !m.flash_attention())
    throw DataError(where + ": sliding-window attention is simulated with a flash attention_backend only");
  if (m.window_size > 0 && m.multi_latent_attention)
    throw DataError(where + ": key 'window_size' (sliding-window attention) with multi_latent_attention is not simulated");
  if (m.multi_latent_attention) {
    require_positive(m.kv_lora_rank, "kv_lora_rank", where);
    require_positive(m.qk_head_dim, "qk_head_dim", where);
    require_positive(m.qk_pos_emb_head_dim, "qk_pos_emb_head_dim", where);
    require_positive(m.v_head_dim, "v_head_dim", where);
    require_count(m.q_lora_rank, "q_lora_rank", where);
    if (!m.rope) throw DataError(where + ": multi_latent_attention needs rope (its keys carry a RoPE part)");
  }
  if (!m.is_moe()) return;
  require_positive(m.moe_router_topk, "moe_router_topk", where);
  require_positive(m.moe_ffn_hidden_size, "moe_ffn_hidden_size", where);
  if (m.moe_router_topk > m.num_moe_experts)
    throw DataError(where + ": moe_router_topk=" + std::to_string(m.moe_router_topk) + " exceeds num_moe_experts=" +
                    std::to_string(m.num_moe_experts));
  require_count(m.moe_shared_expert_intermediate_size, "moe_shared_expert_intermediate_size", where);
  check_pattern(m.moe_layer_pattern, "moe_layer_freq");
  require_one_of(m.moe_router_score_function, {"softmax", "sigmoid"}, "moe_router_score_function", where);
  require_one_of(m.moe_router_load_balancing_type, {"aux_loss", "seq_aux_loss", "global_aux_loss", "none"},
                 "moe_router_load_balancing_type", where);
  if (!m.moe_router_dtype.empty()) {
    require_one_of(m.moe_router_dtype, {"fp32"}, "moe_router_dtype", where);
    if (m.add_bias_linear)  // RouterGatingLinearFunction of Megatron-Core 0.14 takes no bias
      throw DataError(where + ": moe_router_dtype: fp32 with a router bias (add_bias_linear) is not simulated");
  }
  // Megatron-Core's group-limited routing: the experts split into groups, top-k within the
  // best group_topk groups.
  for (const auto& [key, value] : {std::pair{"moe_router_num_groups", m.moe_router_num_groups},
                                    {"moe_router_group_topk", m.moe_router_group_topk}})
    require_count(value, key, where);
  if ((m.moe_router_num_groups > 0) != (m.moe_router_group_topk > 0))
    throw DataError(where + ": moe_router_num_groups and moe_router_group_topk go together");
  if (m.moe_router_num_groups > 0 &&
      (m.num_moe_experts % m.moe_router_num_groups != 0 || m.moe_router_group_topk > m.moe_router_num_groups))
    throw DataError(where + ": moe_router_num_groups=" + std::to_string(m.moe_router_num_groups) +
                    " must divide num_moe_experts=" + std::to_string(m.num_moe_experts) +
                    " and be at least moe_router_group_topk=" + std::to_string(m.moe_router_group_topk));
}

const std::vector<std::string> kOpFamilies = {"gemm", "attention", "norm", "elementwise", "reduction", "quantize"};
const std::vector<std::string> kAttentionKernels = {"flash2", "triton"};

const std::vector<CollectiveAlgorithm>& algorithms_of(NcclCollective collective) {
  using A = CollectiveAlgorithm;
  static const std::vector<A> all_reduce = {A::ring, A::tree, A::nvls, A::hierarchical}, ring = {A::ring},
                              pairwise = {A::pairwise}, p2p = {A::p2p};
  switch (collective) {
    case NcclCollective::all_reduce: return all_reduce;
    case NcclCollective::alltoall: return pairwise;
    case NcclCollective::sendrecv: return p2p;
    case NcclCollective::all_gather:
    case NcclCollective::reduce_scatter:
    case NcclCollective::broadcast: break;
  }
  return ring;
}

std::string HardwareConfig::label() const {
  return file.empty() || stem_of(file) == name ? name : name + " (" + file + ")";
}

namespace {

// The hardware of a loaded YAML mapping, read from the node itself: a dumped and parsed
// copy would lose what the reader refuses (a quoted number is text).
HardwareConfig hardware_from_node(const YAML::Node& node, const std::string& name, const std::string& base_dir) {
  check_keys(node, kHardwareKeys, name);
  HardwareConfig hw;
  hw.name = yaml_get<std::string>(node, "name", name, stem_of(name));
  hw.file = name;
  hw.peak_tflops_mm = yaml_require<double>(node, "peak_tflops_mm", name);
  hw.peak_tflops_math = yaml_require<double>(node, "peak_tflops_math", name);
  hw.peak_memory_bandwidth_GBps = yaml_require<double>(node, "peak_memory_bandwidth_GBps", name);
  hw.gpus_per_node = yaml_require<int64_t>(node, "gpus_per_node", name);
  hw.peak_tflops_mm_fp8 = optional_double(node, "peak_tflops_mm_fp8", name);
  hw.peak_tflops_mm_fp4 = optional_double(node, "peak_tflops_mm_fp4", name);
  hw.sfu_peak = optional_double(node, "sfu_peak", name);
  hw.gpu_memory_GB = optional_double(node, "gpu_memory_GB", name);
  hw.inter_node_bandwidth_GBps = optional_double(node, "inter_node_bandwidth_GBps", name);
  hw.host_link_GBps = optional_double(node, "host_link_GBps", name);
  hw.compute_slowdown_under_communication = yaml_get<double>(node, "compute_slowdown_under_communication", name, 0.0);
  hw.inter_node_latency_us = yaml_get<double>(node, "inter_node_latency_us", name, 0.0);
  hw.kernel_launch_us = yaml_get<double>(node, "kernel_launch_us", name, 0.0);
  if (YAML::Node host = node["host"]) {
    check_keys(host, kHostKeys, name + ": host");
    hw.host.op_us = yaml_get<double>(host, "op_us", name + ": host", 0.0);
    hw.host.module_us = yaml_get<double>(host, "module_us", name + ": host", 0.0);
    hw.host.launch_us = yaml_get<double>(host, "launch_us", name + ": host", 0.0);
  }
  hw.cuda_context_GB = yaml_get<double>(node, "cuda_context_GB", name, 0.0);
  if (YAML::Node channels = node["nccl_channels"]) {
    check_keys(channels, kNcclChannelKeys, name + ": nccl_channels");
    const auto fields = nccl_channel_fields(hw.nccl_channels);
    for (size_t i = 0; i < fields.size(); ++i)
      *fields[i] = yaml_get<int64_t>(channels, kNcclChannelKeys[i], name + ": nccl_channels", 0);
  }
  if (YAML::Node formats = node["block_scaled_formats"]) {
    if (!formats.IsSequence()) throw DataError(name + ": key 'block_scaled_formats' must be a list (mxfp8, nvfp4)");
    for (size_t i = 0; i < formats.size(); ++i) {
      std::string where = "block_scaled_formats[" + std::to_string(i) + "]";
      if (!formats[i].IsScalar()) throw DataError(name + ": key '" + where + "' must be mxfp8 or nvfp4");
      hw.block_scaled_formats.push_back(formats[i].as<std::string>());
    }
  }
  if (YAML::Node efficiency = node["efficiency"]) {
    check_keys(efficiency, kOpFamilies, name + ": efficiency");
    for (const std::string& family : kOpFamilies)
      if (efficiency[family]) hw.efficiency[family] = yaml_require<double>(efficiency, family, name + ": efficiency");
  }
  if (YAML::Node kernels = node["attention_kernels"]) {
    check_keys(kernels, kAttentionKernels, name + ": attention_kernels");
    for (const std::string& kernel : kAttentionKernels) {
      if (!kernels[kernel]) continue;
      const std::string where = name + ": attention_kernels." + kernel;
      check_keys(kernels[kernel], kAttentionKernelKeys, where);
      hw.attention_kernels[kernel] = {yaml_require<double>(kernels[kernel], "forward", where),
                                      yaml_require<double>(kernels[kernel], "backward", where)};
    }
  }
  hw.fp8_gemm_speedup = optional_double(node, "fp8_gemm_speedup", name);
  hw.fp4_gemm_speedup = optional_double(node, "fp4_gemm_speedup", name);
  hw.calibrated_model = yaml_get<std::string>(node, "calibrated_model", name, "");
  hw.calibrated_families = yaml_get<std::vector<std::string>>(node, "calibrated_families", name, {});
  for (const std::string& family : hw.calibrated_families)
    require_one_of(family, kOpFamilies, "calibrated_families", name);
  hw.calibrated_model_dir =
      resolve_calibrated_model(hw.calibrated_model, base_dir.empty() ? std::filesystem::path(name).parent_path().string() : base_dir);
  // Which prices the compute ops: the bundle where the hardware names one (auto), the
  // roofline over `efficiency` whatever bundle it names, or the bundle, which it must name.
  const std::string estimator = yaml_get<std::string>(node, "estimator", name, "auto");
  require_one_of(estimator, {"auto", "roofline", "calibrated"}, "estimator", name);
  if (estimator == "roofline") hw.calibrated_model.clear(), hw.calibrated_model_dir.clear(), hw.calibrated_families.clear();
  if (estimator == "calibrated" && hw.calibrated_model.empty())
    throw DataError(name + ": key 'estimator' is 'calibrated', but no calibrated_model names a bundle");
  if (YAML::Node topology = node["topology"]) {
    check_keys(topology, kTopologyKeys, name + ": topology");
    YAML::Node levels = topology["levels"];
    if (!levels || !levels.IsSequence()) throw DataError(name + ": topology.levels must be a list");
    for (size_t i = 0; i < levels.size(); ++i) {
      std::string where = name + ": topology.levels[" + std::to_string(i) + "]";
      check_keys(levels[i], kLevelKeys, where);
      TopologyLevel level;
      level.kind = yaml_require<std::string>(levels[i], "kind", where);
      // Above the node, a level without a size is the whole cluster.
      level.size = i == 0 ? yaml_require<int64_t>(levels[i], "size", where) : yaml_get<int64_t>(levels[i], "size", where, 0);
      level.bandwidth_GBps = yaml_require<double>(levels[i], "bandwidth_GBps", where);
      level.latency_us = yaml_get<double>(levels[i], "latency_us", where, 0.0);
      level.efficiency = yaml_get<double>(levels[i], "efficiency", where, 1.0);
      level.oversubscription = yaml_get<double>(levels[i], "oversubscription", where, 1.0);
      level.nvls_bus_bandwidth_GBps = optional_double(levels[i], "nvls_bus_bandwidth_GBps", where);
      level.alltoall_efficiency = optional_double(levels[i], "alltoall_efficiency", where);
      hw.topology.push_back(level);
    }
  }
  if (YAML::Node forced = node["collective_algorithm"]) {
    if (!forced.IsMap()) throw DataError(name + ": key 'collective_algorithm' must be a map like {all_reduce: ring}");
    check_keys(forced, names_of<NcclCollective>(), name + ": collective_algorithm");
    for (const std::string& collective : names_of<NcclCollective>()) {
      if (!forced[collective]) continue;
      const NcclCollective which = *parse_enum<NcclCollective>(collective);
      std::string algorithm = yaml_require<std::string>(forced, collective, name + ": collective_algorithm");
      std::vector<std::string> allowed = names_of(algorithms_of(which));
      allowed.push_back("auto");
      require_one_of(algorithm, allowed, "collective_algorithm." + collective, name);
      if (algorithm != "auto") hw.collective_algorithm[which] = *parse_enum<CollectiveAlgorithm>(algorithm);
    }
  }
  validate(hw, name);
  return hw;
}

}  // namespace

HardwareConfig parse_hardware_yaml(const std::string& text, const std::string& name, const std::string& base_dir) {
  return hardware_from_node(load_yaml_text(text, name), name, base_dir);
}

double tensor_core_peak_tflops(const HardwareConfig& hw, const std::string& dtype) {
  auto required = [&](const std::optional<double>& peak, const char* key) {
    if (!peak) throw DataError("hardware " + hw.label() + ": " + key + " is required by " + dtype + " GEMM and attention");
    return *peak;
  };
  if (dtype == "bf16" || dtype == "fp16") return hw.peak_tflops_mm;
  if (dtype == "fp8") return required(hw.peak_tflops_mm_fp8, "peak_tflops_mm_fp8");
  if (dtype == "fp4") return required(hw.peak_tflops_mm_fp4, "peak_tflops_mm_fp4");
  if (dtype == "fp32") return hw.peak_tflops_math;
  throw DataError("dtype \"" + dtype + "\": expected bf16, fp16, fp8, fp4 or fp32");
}

double TrainingConfig::master_weight_bytes() const {
  if (optimizer_state_dtype != OptimizerStateDtype::fp32) return 0;
  return store_param_remainders ? 2 : kFp32Bytes;
}

double TrainingConfig::optimizer_state_bytes() const {
  const double moments = 2 * (optimizer_state_dtype == OptimizerStateDtype::fp32 ? kFp32Bytes : 2);
  return master_weight_bytes() + moments;
}

std::string layout_text(const ParallelismConfig& p, const TrainingConfig& t) {
  // Sequence parallelism needs tp > 1: Megatron-LM turns it off at tp 1, and syssim ignores it there.
  std::string text = "tp" + std::to_string(p.tp) + (p.sp && p.tp > 1 ? "+sp" : "") + " pp" + std::to_string(p.pp);
  if (p.vpp) text += " vpp" + std::to_string(*p.vpp);
  if (p.cp > 1) text += " cp" + std::to_string(p.cp);
  if (p.ep > 1) text += " ep" + std::to_string(p.ep);
  if (p.etp && *p.etp != p.tp) text += " etp" + std::to_string(*p.etp);
  text += " dp" + std::to_string(p.dp) + (p.dp_replicate > 1 ? " dp_replicate" + std::to_string(p.dp_replicate) : "") + " mbs" + std::to_string(t.micro_batch) + " gbs" + std::to_string(t.global_batch);
  if (t.recompute != "none") text += " " + t.recompute;
  if (t.shards_gradients()) text += std::string(" ") + to_string(t.data_parallel_sharding);
  return text;
}

std::string resolve_calibrated_model(const std::string& calibrated_model, const std::string& base_dir) {
  if (calibrated_model.empty()) return "";
  std::filesystem::path model(calibrated_model);
  return (model.is_absolute() ? model : std::filesystem::path(base_dir) / model).lexically_normal().string();
}

namespace {

// Longer chains of `extends` are refused (a cycle would be endless).
constexpr int kMaxExtends = 8;

// The hardware YAML at `path` with its `extends` applied: the keys of the preset or file it
// names (a name is a preset; a path is taken from this file's folder), each replaced whole by
// this file's own; its own name or, without one, its file's stem. A relative calibrated_model
// of a base is made absolute from the base's folder, so that it stays the base's bundle.
YAML::Node hardware_node(const std::string& path, int depth) {
  YAML::Node node = load_yaml_file(path);
  if (!node.IsMap() || !node["extends"]) return node;
  // Merged into the base, a key given twice would just keep one value.
  check_names_once(node, path);
  const YAML::Node extends = node["extends"];
  if (!extends.IsScalar() || extends.Scalar().empty())
    throw DataError(path + ": key 'extends' must name a hardware preset or YAML file");
  if (depth >= kMaxExtends)
    throw DataError(path + ": key 'extends' is '" + extends.Scalar() + "': more than " + std::to_string(kMaxExtends) +
                    " presets extend one another (a cycle?)");
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  const std::filesystem::path named(extends.Scalar());
  const std::string base_path = named.has_parent_path() || named.has_extension()
                                    ? (named.is_absolute() ? named : folder / named).lexically_normal().string()
                                    : preset_file(PresetKind::kHardware, extends.Scalar());
  YAML::Node base = hardware_node(base_path, depth + 1);
  if (!base.IsMap()) throw DataError(base_path + ": expected a mapping (the hardware that " + path + " extends)");
  if (base["calibrated_model"] && base["calibrated_model"].IsScalar())
    base["calibrated_model"] = resolve_calibrated_model(base["calibrated_model"].Scalar(),
                                                        std::filesystem::path(base_path).parent_path().string());
  base.remove("name");
  for (const auto& entry : node) {
    if (!entry.first.IsScalar())
      base[entry.first] = entry.second;  // a key that is not a name: check_keys refuses it
    else if (entry.first.Scalar() != "extends")
      base[entry.first.Scalar()] = entry.second;
  }
  return base;
}

}  // namespace

HardwareConfig load_hardware_yaml(const std::string& name_or_path) {
  const std::string path = preset_file(PresetKind::kHardware, name_or_path);
  return hardware_from_node(hardware_node(path, 0), path, "");
}

void validate(const HardwareConfig& hw, const std::string& where) {
  require_positive(hw.peak_tflops_mm, "peak_tflops_mm", where);
  require_positive(hw.peak_tflops_math, "peak_tflops_math", where);
  require_positive(hw.peak_memory_bandwidth_GBps, "peak_memory_bandwidth_GBps", where);
  require_positive(hw.gpus_per_node, "gpus_per_node", where);
  for (const auto& [peak, key] : {std::pair{hw.peak_tflops_mm_fp8, "peak_tflops_mm_fp8"},
                                  std::pair{hw.peak_tflops_mm_fp4, "peak_tflops_mm_fp4"},
                                  std::pair{hw.sfu_peak, "sfu_peak"},
                                  std::pair{hw.gpu_memory_GB, "gpu_memory_GB"},
                                  std::pair{hw.inter_node_bandwidth_GBps, "inter_node_bandwidth_GBps"},
                                  std::pair{hw.host_link_GBps, "host_link_GBps"}})
    if (peak) require_positive(*peak, key, where);
  require_non_negative(hw.inter_node_latency_us, "inter_node_latency_us", where);
  require_non_negative(hw.kernel_launch_us, "kernel_launch_us", where);
  require_non_negative(hw.compute_slowdown_under_communication, "compute_slowdown_under_communication", where);
  if (hw.compute_slowdown_under_communication > kMostComputeSlowdown) {  // a bound keeps slowed times finite
    std::ostringstream text;
    text << where << ": key 'compute_slowdown_under_communication' must be at most " << kMostComputeSlowdown
         << ", got " << hw.compute_slowdown_under_communication;
    throw DataError(text.str());
  }
  require_non_negative(hw.cuda_context_GB, "cuda_context_GB", where);
  const auto channel_fields = nccl_channel_fields(hw.nccl_channels);
  for (size_t i = 0; i < channel_fields.size(); ++i)
    require_non_negative(static_cast<double>(*channel_fields[i]), "nccl_channels." + kNcclChannelKeys[i], where);
  require_non_negative(hw.host.op_us, "host.op_us", where);
  require_non_negative(hw.host.module_us, "host.module_us", where);
  require_non_negative(hw.host.launch_us, "host.launch_us", where);
  if (hw.gpus_per_node > 1 && hw.topology.empty())
    throw DataError(where + ": gpus_per_node=" + std::to_string(hw.gpus_per_node) +
                    " needs topology.levels[0] (the intra-node link)");
  if (!hw.topology.empty() && hw.topology[0].size != hw.gpus_per_node)
    throw DataError(where + ": topology.levels[0].size=" + std::to_string(hw.topology[0].size) +
                    " must equal gpus_per_node=" + std::to_string(hw.gpus_per_node));
  if (hw.topology.size() > 1 && hw.inter_node_bandwidth_GBps)
    throw DataError(where + ": give the scale-out network either as topology.levels[1..] or as inter_node_bandwidth_GBps, not both");
  if (hw.topology.size() > 1 && hw.inter_node_latency_us != 0)  // the levels' latency_us replace it
    throw DataError(where + ": give the scale-out latency as topology.levels[1..].latency_us; inter_node_latency_us=" +
                    text_of(hw.inter_node_latency_us) + " is for the inter_node_bandwidth_GBps shorthand");
  for (size_t i = 0; i < hw.topology.size(); ++i) {
    const TopologyLevel& level = hw.topology[i];
    const std::string at = where + ": topology.levels[" + std::to_string(i) + "]";
    require_positive(level.bandwidth_GBps, "bandwidth_GBps", at);
    require_non_negative(level.latency_us, "latency_us", at);
    for (auto [key, share] : {std::pair{"efficiency", std::optional<double>(level.efficiency)},
                              std::pair{"alltoall_efficiency", level.alltoall_efficiency}})
      if (share && !(*share > 0 && *share <= 1))
        throw DataError(where + ": topology level '" + level.kind + "': " + key + ": expected a share in (0, 1], got " +
                        text_of(*share));
    if (!(level.oversubscription >= 1 && std::isfinite(level.oversubscription)))
      throw DataError(where + ": topology level '" + level.kind + "': oversubscription: expected at least 1, got " +
                      text_of(level.oversubscription));
    if (level.nvls_bus_bandwidth_GBps) require_positive(*level.nvls_bus_bandwidth_GBps, "nvls_bus_bandwidth_GBps", at);
    // Keys that only one side of the node boundary reads: refused where nothing would read them.
    if (i == 0 && level.oversubscription != 1)
      throw DataError(at + ": oversubscription applies to the levels above 0 (the switches between nodes), got " +
                      text_of(level.oversubscription) + " on the node's own link");
    if (i > 0 && level.nvls_bus_bandwidth_GBps)
      throw DataError(at + ": nvls_bus_bandwidth_GBps is the NVLink domain's (levels[0]) NVLink SHARP all-reduce; "
                      "level " + std::to_string(i) + " does not take it");
    if (i == 0) continue;
    const int64_t inner = hw.topology[i - 1].size;
    if (level.size < 0 || (level.size > 0 && (inner == 0 || level.size % inner != 0)))
      throw DataError(where + ": topology.levels[" + std::to_string(i) + "].size=" + std::to_string(level.size) +
                      ": expected a multiple of the level below's size " + std::to_string(inner) +
                      ", or none (the whole cluster)");
    if (level.size == 0 && i + 1 < hw.topology.size())
      throw DataError(where + ": topology.levels[" + std::to_string(i) +
                      "].size=0: only the last level may span the whole cluster");
  }
  for (const auto& format : hw.block_scaled_formats) {
    require_one_of(format, kBlockScaledFormats, "block_scaled_formats", where);
    const auto& peak = format == "mxfp8" ? hw.peak_tflops_mm_fp8 : hw.peak_tflops_mm_fp4;
    if (!peak)
      throw DataError(where + ": block_scaled_formats lists " + format + " but " +
                      (format == "mxfp8" ? "peak_tflops_mm_fp8" : "peak_tflops_mm_fp4") + " is not given");
  }
  for (const auto& [family, share] : hw.efficiency)
    if (!(share > 0 && share <= 1))
      throw DataError(where + ": efficiency." + family + ": expected a share in (0, 1], got " + text_of(share));
  if (hw.fp8_gemm_speedup) require_positive(*hw.fp8_gemm_speedup, "fp8_gemm_speedup", where);
  if (hw.fp4_gemm_speedup) {
    require_positive(*hw.fp4_gemm_speedup, "fp4_gemm_speedup", where);
    if (!hw.peak_tflops_mm_fp4 || !hw.peak_tflops_mm_fp8)
      throw DataError(where + ": key 'fp4_gemm_speedup' needs peak_tflops_mm_fp4 and peak_tflops_mm_fp8");
    // Above the peaks' ratio an FP4 GEMM would beat its own roofline.
    if (*hw.fp4_gemm_speedup > *hw.peak_tflops_mm_fp4 / *hw.peak_tflops_mm_fp8)
      throw DataError(where + ": fp4_gemm_speedup=" + text_of(*hw.fp4_gemm_speedup) +
                      " exceeds peak_tflops_mm_fp4 / peak_tflops_mm_fp8 = " +
                      text_of(*hw.peak_tflops_mm_fp4 / *hw.peak_tflops_mm_fp8));
  }
  for (const auto& [kernel, time] : hw.attention_kernels) {
    require_positive(time.forward, "attention_kernels." + kernel + ".forward", where);
    require_positive(time.backward, "attention_kernels." + kernel + ".backward", where);
  }
}

std::optional<std::string> low_precision_recipe(const TrainingConfig& t) {
  // Megatron-LM's --fp8-recipe defaults to delayed; its --fp4-recipe to nvfp4
  // (megatron/training/arguments.py).
  if (t.dtype == "fp8") return t.fp8_recipe.value_or("delayed");
  if (t.dtype == "fp4") return t.fp8_recipe.value_or("nvfp4");
  return std::nullopt;
}

void check_precision_support(const HardwareConfig& hw, const TrainingConfig& t) {
  for (const auto& [dtype, peak, key] : {std::tuple{"fp8", hw.peak_tflops_mm_fp8, "peak_tflops_mm_fp8"},
                                         std::tuple{"fp4", hw.peak_tflops_mm_fp4, "peak_tflops_mm_fp4"}})
    if (t.dtype == dtype && !peak)
      throw UsageError(std::string("dtype=") + dtype + " needs " + dtype + " tensor cores; hardware " + hw.label() +
                       " has none (" + key + ")");
  std::optional<std::string> recipe = low_precision_recipe(t);
  if (!recipe || (*recipe != "mxfp8" && *recipe != "nvfp4")) return;
  const auto& formats = hw.block_scaled_formats;
  if (std::find(formats.begin(), formats.end(), *recipe) == formats.end())
    throw UsageError("fp8_recipe=" + *recipe + " needs tensor cores with " + *recipe +
                     " block scaling; hardware " + hw.label() + " has none (block_scaled_formats)");
}

nlohmann::json to_json(const ModelConfig& m) {
  nlohmann::json j = {{"name", m.name},
          {"num_layers", m.num_layers},
          {"hidden_size", m.hidden_size},
          {"num_attention_heads", m.num_attention_heads},
          {"num_query_groups", m.num_query_groups},
          {"kv_channels", m.kv_channels},
          {"ffn_hidden_size", m.ffn_hidden_size},
          {"seq_length", m.seq_length},
          {"max_position_embeddings", m.max_position_embeddings},
          {"vocab_size", m.vocab_size},
          {"make_vocab_size_divisible_by", m.make_vocab_size_divisible_by},
          {"swiglu", m.swiglu},
          {"activation", m.swiglu ? "swiglu" : m.activation},  // as the YAML key: swiglu | gelu | squared_relu
          {"rope", m.rope},
          {"rope_theta", m.rope_theta},
          {"tie_word_embeddings", m.tie_word_embeddings},
          {"rms_norm_eps", m.rms_norm_eps},
          {"normalization", m.normalization},
          {"add_bias_linear", m.add_bias_linear},
          {"add_qkv_bias", m.add_qkv_bias},
          {"qk_layernorm", m.qk_layernorm},
          {"attention_backend", m.attention_backend},
          {"hidden_dropout", m.hidden_dropout},
          {"attention_dropout", m.attention_dropout}};
  // Written only when the model uses them, so that a dense model's section reads as before 1.5.
  if (m.is_moe())
    j.update({{"num_moe_experts", m.num_moe_experts},
              {"moe_router_topk", m.moe_router_topk},
              {"moe_ffn_hidden_size", m.moe_ffn_hidden_size},
              {"moe_shared_expert_intermediate_size", m.moe_shared_expert_intermediate_size},
              {"moe_layer_freq", m.moe_layer_pattern},
              {"moe_router_score_function", m.moe_router_score_function},
              {"moe_router_num_groups", m.moe_router_num_groups},
              {"moe_router_group_topk", m.moe_router_group_topk},
              {"moe_router_enable_expert_bias", m.moe_router_enable_expert_bias},
              {"moe_router_load_balancing_type", m.moe_router_load_balancing_type}});
  if (!m.moe_router_dtype.empty()) j["moe_router_dtype"] = m.moe_router_dtype;
  if (m.multi_latent_attention)
    j.update({{"multi_latent_attention", true},
              {"q_lora_rank", m.q_lora_rank},
              {"kv_lora_rank", m.kv_lora_rank},
              {"qk_head_dim", m.qk_head_dim},
              {"qk_pos_emb_head_dim", m.qk_pos_emb_head_dim},
              {"v_head_dim", m.v_head_dim}});
  if (m.mtp_num_layers > 0) j["mtp_num_layers"] = m.mtp_num_layers;
  if (m.window_size > 0) j.update({{"window_size", m.window_size}, {"window_attn_skip_freq", m.sliding_window_pattern}});
  if (m.softmax_type != "vanilla") j["softmax_type"] = m.softmax_type;
  if (m.activation_func_clamp_value != 0) j["activation_func_clamp_value"] = m.activation_func_clamp_value;
  if (!m.masked_softmax_fusion) j["masked_softmax_fusion"] = false;
  if (!m.bias_swiglu_fusion) j["bias_swiglu_fusion"] = false;
  if (!m.apply_rope_fusion) j["apply_rope_fusion"] = false;
  if (!m.rms_norm_fusion) j["rms_norm_fusion"] = false;
  if (!m.projection_fusion) j["projection_fusion"] = false;
  if (m.cross_entropy != "vocab_parallel") j["cross_entropy"] = m.cross_entropy;
  return j;
}

ModelConfig model_from_json(const nlohmann::json& j, const std::string& path) {
  ModelConfig m;
  m.name = require_as<std::string>(j, "name", path);
  m.num_layers = require_as<int64_t>(j, "num_layers", path);
  m.hidden_size = require_as<int64_t>(j, "hidden_size", path);
  m.num_attention_heads = require_as<int64_t>(j, "num_attention_heads", path);
  m.num_query_groups = require_as<int64_t>(j, "num_query_groups", path);
  m.kv_channels = require_as<int64_t>(j, "kv_channels", path);
  m.ffn_hidden_size = require_as<int64_t>(j, "ffn_hidden_size", path);
  m.seq_length = require_as<int64_t>(j, "seq_length", path);
  m.max_position_embeddings = require_as<int64_t>(j, "max_position_embeddings", path);
  m.vocab_size = require_as<int64_t>(j, "vocab_size", path);
  m.make_vocab_size_divisible_by = require_as<int64_t>(j, "make_vocab_size_divisible_by", path);
  m.swiglu = require_as<bool>(j, "swiglu", path);
  if (j.contains("activation") && !m.swiglu)  // new in 1.2
    m.activation = require_as<std::string>(j, "activation", path);
  m.rope = require_as<bool>(j, "rope", path);
  m.rope_theta = require_as<double>(j, "rope_theta", path);
  m.tie_word_embeddings = require_as<bool>(j, "tie_word_embeddings", path);
  m.rms_norm_eps = require_as<double>(j, "rms_norm_eps", path);
  m.normalization = require_as<std::string>(j, "normalization", path);
  m.add_bias_linear = require_as<bool>(j, "add_bias_linear", path);
  m.add_qkv_bias = require_as<bool>(j, "add_qkv_bias", path);
  m.qk_layernorm = require_as<bool>(j, "qk_layernorm", path);
  m.attention_backend = require_as<std::string>(j, "attention_backend", path);
  m.hidden_dropout = require_as<double>(j, "hidden_dropout", path);
  m.attention_dropout = require_as<double>(j, "attention_dropout", path);
  // New in 1.5, present only for the models that use them.
  if (j.contains("num_moe_experts")) {
    m.num_moe_experts = require_as<int64_t>(j, "num_moe_experts", path);
    m.moe_router_topk = require_as<int64_t>(j, "moe_router_topk", path);
    m.moe_ffn_hidden_size = require_as<int64_t>(j, "moe_ffn_hidden_size", path);
    m.moe_shared_expert_intermediate_size = require_as<int64_t>(j, "moe_shared_expert_intermediate_size", path);
    m.moe_layer_pattern = require_as<std::vector<int>>(j, "moe_layer_freq", path);
    m.moe_router_score_function = require_as<std::string>(j, "moe_router_score_function", path);
    m.moe_router_num_groups = require_as<int64_t>(j, "moe_router_num_groups", path);
    m.moe_router_group_topk = require_as<int64_t>(j, "moe_router_group_topk", path);
    m.moe_router_enable_expert_bias = require_as<bool>(j, "moe_router_enable_expert_bias", path);
    m.moe_router_load_balancing_type = require_as<std::string>(j, "moe_router_load_balancing_type", path);
    if (j.contains("moe_router_dtype")) m.moe_router_dtype = require_as<std::string>(j, "moe_router_dtype", path);
  }
  if (j.contains("multi_latent_attention")) {
    m.multi_latent_attention = require_as<bool>(j, "multi_latent_attention", path);
    m.q_lora_rank = require_as<int64_t>(j, "q_lora_rank", path);
    m.kv_lora_rank = require_as<int64_t>(j, "kv_lora_rank", path);
    m.qk_head_dim = require_as<int64_t>(j, "qk_head_dim", path);
    m.qk_pos_emb_head_dim = require_as<int64_t>(j, "qk_pos_emb_head_dim", path);
    m.v_head_dim = require_as<int64_t>(j, "v_head_dim", path);
  }
  if (j.contains("mtp_num_layers")) m.mtp_num_layers = require_as<int64_t>(j, "mtp_num_layers", path);
  if (j.contains("window_size")) {
    m.window_size = require_as<int64_t>(j, "window_size", path);
    m.sliding_window_pattern = require_as<std::vector<int>>(j, "window_attn_skip_freq", path);
  }
  if (j.contains("softmax_type")) m.softmax_type = require_as<std::string>(j, "softmax_type", path);
  if (j.contains("activation_func_clamp_value"))
    m.activation_func_clamp_value = require_as<double>(j, "activation_func_clamp_value", path);
  if (j.contains("cross_entropy")) m.cross_entropy = require_as<std::string>(j, "cross_entropy", path);
  if (j.contains("masked_softmax_fusion")) m.masked_softmax_fusion = require_as<bool>(j, "masked_softmax_fusion", path);
  for (auto [key, fusion] : {std::pair{"bias_swiglu_fusion", &m.bias_swiglu_fusion},
                             std::pair{"apply_rope_fusion", &m.apply_rope_fusion},
                             std::pair{"rms_norm_fusion", &m.rms_norm_fusion},
                             std::pair{"projection_fusion", &m.projection_fusion}})
    if (j.contains(key)) *fusion = require_as<bool>(j, key, path);
  validate(m, "graph: " + path);
  return m;
}

nlohmann::json to_json(const HardwareConfig& hw) {
  nlohmann::json levels = nlohmann::json::array();
  for (const auto& l : hw.topology) {
    levels.push_back({{"kind", l.kind}, {"size", l.size}, {"bandwidth_GBps", l.bandwidth_GBps},
                      {"latency_us", l.latency_us}, {"efficiency", l.efficiency},
                      {"oversubscription", l.oversubscription}});
    if (l.nvls_bus_bandwidth_GBps) levels.back()["nvls_bus_bandwidth_GBps"] = *l.nvls_bus_bandwidth_GBps;
    if (l.alltoall_efficiency) levels.back()["alltoall_efficiency"] = *l.alltoall_efficiency;
  }
  nlohmann::json j = {{"name", hw.name},
          {"peak_tflops_mm", hw.peak_tflops_mm},
          {"peak_tflops_math", hw.peak_tflops_math},
          {"peak_memory_bandwidth_GBps", hw.peak_memory_bandwidth_GBps},
          {"gpus_per_node", hw.gpus_per_node},
          {"peak_tflops_mm_fp8", nullable_to_json(hw.peak_tflops_mm_fp8)},
          {"peak_tflops_mm_fp4", nullable_to_json(hw.peak_tflops_mm_fp4)},
          {"sfu_peak", nullable_to_json(hw.sfu_peak)},
          {"gpu_memory_GB", nullable_to_json(hw.gpu_memory_GB)},
          {"inter_node_bandwidth_GBps", nullable_to_json(hw.inter_node_bandwidth_GBps)},
          {"inter_node_latency_us", hw.inter_node_latency_us},
          {"kernel_launch_us", hw.kernel_launch_us},
          {"block_scaled_formats", hw.block_scaled_formats},
          {"efficiency", hw.efficiency},
          {"calibrated_model", hw.calibrated_model},
          {"calibrated_families", hw.calibrated_families},
          {"topology", {{"levels", levels}}}};
  // Optional keys, written only when set so that graphs without them read as before.
  for (const auto& [collective, algorithm] : hw.collective_algorithm)
    j["collective_algorithm"][to_string(collective)] = to_string(algorithm);
  if (hw.host_link_GBps) j["host_link_GBps"] = *hw.host_link_GBps;  // new in 1.11
  if (hw.compute_slowdown_under_communication > 0)  // new in 1.12
    j["compute_slowdown_under_communication"] = hw.compute_slowdown_under_communication;
  if (hw.host.simulated())
    j["host"] = {{"op_us", hw.host.op_us}, {"module_us", hw.host.module_us}, {"launch_us", hw.host.launch_us}};
  if (hw.cuda_context_GB > 0) j["cuda_context_GB"] = hw.cuda_context_GB;  // new in 1.15
  for (const auto& [kernel, time] : hw.attention_kernels)  // new in 1.18
    j["attention_kernels"][kernel] = {{"forward", time.forward}, {"backward", time.backward}};
  if (hw.fp8_gemm_speedup) j["fp8_gemm_speedup"] = *hw.fp8_gemm_speedup;  // new in 1.18
  if (hw.fp4_gemm_speedup) j["fp4_gemm_speedup"] = *hw.fp4_gemm_speedup;  // new in 1.23
  if (hw.nccl_channels.given()) {  // new in 1.15
    const auto fields = nccl_channel_fields(hw.nccl_channels);
    for (size_t i = 0; i < fields.size(); ++i) j["nccl_channels"][kNcclChannelKeys[i]] = *fields[i];
  }
  return j;
}

HardwareConfig hardware_from_json(const nlohmann::json& j, const std::string& path) {
  auto opt = [&](const std::string& key) { return read_nullable<double>(j, key, path); };
  HardwareConfig hw;
  hw.name = require_as<std::string>(j, "name", path);
  hw.peak_tflops_mm = require_as<double>(j, "peak_tflops_mm", path);
  hw.peak_tflops_math = require_as<double>(j, "peak_tflops_math", path);
  hw.peak_memory_bandwidth_GBps = require_as<double>(j, "peak_memory_bandwidth_GBps", path);
  hw.gpus_per_node = require_as<int64_t>(j, "gpus_per_node", path);
  hw.peak_tflops_mm_fp8 = opt("peak_tflops_mm_fp8");
  hw.peak_tflops_mm_fp4 = opt("peak_tflops_mm_fp4");
  hw.sfu_peak = opt("sfu_peak");
  hw.gpu_memory_GB = opt("gpu_memory_GB");
  hw.inter_node_bandwidth_GBps = opt("inter_node_bandwidth_GBps");
  if (j.contains("host_link_GBps")) hw.host_link_GBps = opt("host_link_GBps");
  if (j.contains("compute_slowdown_under_communication"))
    hw.compute_slowdown_under_communication = require_as<double>(j, "compute_slowdown_under_communication", path);
  hw.inter_node_latency_us = require_as<double>(j, "inter_node_latency_us", path);
  hw.kernel_launch_us = require_as<double>(j, "kernel_launch_us", path);
  if (j.contains("block_scaled_formats"))  // new in graph format 1.2
    hw.block_scaled_formats = require_as<std::vector<std::string>>(j, "block_scaled_formats", path);
  // Both keys are new in graph format 1.2.
  if (j.contains("efficiency")) {
    hw.efficiency = require_as<std::map<std::string, double>>(j, "efficiency", path);
    for (const auto& [family, share] : hw.efficiency)  // as a YAML's families, checked there
      if (std::find(kOpFamilies.begin(), kOpFamilies.end(), family) == kOpFamilies.end())
        throw DataError(path + "/efficiency/" + family + ": unknown family (" + join(kOpFamilies) + ")");
  }
  if (j.contains("calibrated_model")) hw.calibrated_model = require_as<std::string>(j, "calibrated_model", path);
  if (j.contains("fp8_gemm_speedup")) hw.fp8_gemm_speedup = require_as<double>(j, "fp8_gemm_speedup", path);  // new in 1.18
  if (j.contains("fp4_gemm_speedup")) hw.fp4_gemm_speedup = require_as<double>(j, "fp4_gemm_speedup", path);  // new in 1.23
  if (j.contains("attention_kernels")) {  // new in graph format 1.18
    const std::string kernels_path = path + "/attention_kernels";
    for (const auto& [kernel, time] : require(j, "attention_kernels", path).items()) {
      require_one_of(kernel, kAttentionKernels, "attention_kernels", "graph: " + kernels_path);
      hw.attention_kernels[kernel] = {require_as<double>(time, "forward", kernels_path + "/" + kernel),
                                      require_as<double>(time, "backward", kernels_path + "/" + kernel)};
    }
  }
  if (j.contains("calibrated_families"))
    hw.calibrated_families = require_as<std::vector<std::string>>(j, "calibrated_families", path);
  const auto& levels = require(require(j, "topology", path), "levels", path + "/topology");
  for (size_t i = 0; i < levels.size(); ++i) {
    std::string p = path + "/topology/levels/" + std::to_string(i);
    hw.topology.push_back(TopologyLevel{require_as<std::string>(levels[i], "kind", p),
                                        require_as<int64_t>(levels[i], "size", p),
                                        require_as<double>(levels[i], "bandwidth_GBps", p),
                                        require_as<double>(levels[i], "latency_us", p),
                                        // New in graph format 1.2.
                                        levels[i].contains("efficiency") ? require_as<double>(levels[i], "efficiency", p) : 1.0,
                                        // New in graph format 1.3.
                                        levels[i].contains("oversubscription")
                                            ? require_as<double>(levels[i], "oversubscription", p)
                                            : 1.0,
                                        // Optional: only NVSwitch domains with NVLS have it.
                                        levels[i].contains("nvls_bus_bandwidth_GBps")
                                            ? read_nullable<double>(levels[i], "nvls_bus_bandwidth_GBps", p)
                                            : std::optional<double>(),
                                        // New in graph format 1.22; optional.
                                        levels[i].contains("alltoall_efficiency")
                                            ? read_nullable<double>(levels[i], "alltoall_efficiency", p)
                                            : std::optional<double>()});
  }
  if (j.contains("collective_algorithm")) {
    const nlohmann::json& forced = require(j, "collective_algorithm", path);
    const std::string at = path + "/collective_algorithm";
    if (!forced.is_object()) throw DataError("graph: " + at + ": expected an object, got " + forced.dump());
    for (const auto& [collective, algorithm] : forced.items()) {
      const std::optional<NcclCollective> which = parse_enum<NcclCollective>(collective);
      if (!which)
        throw DataError("graph: " + at + ": expected keys among " + either_of(names_of<NcclCollective>()) + ", got \"" +
                        collective + "\"");
      hw.collective_algorithm[*which] = require_enum(forced, collective, at, algorithms_of(*which));
    }
  }
  if (j.contains("host")) {  // new in graph format 1.8
    const nlohmann::json& host = j["host"];
    const std::string at = path + "/host";
    hw.host = {require_as<double>(host, "op_us", at), require_as<double>(host, "module_us", at),
               require_as<double>(host, "launch_us", at)};
  }
  if (j.contains("cuda_context_GB")) hw.cuda_context_GB = require_as<double>(j, "cuda_context_GB", path);
  if (j.contains("nccl_channels")) {  // new in graph format 1.15
    const auto fields = nccl_channel_fields(hw.nccl_channels);
    for (size_t i = 0; i < fields.size(); ++i)
      *fields[i] = require_as<int64_t>(j["nccl_channels"], kNcclChannelKeys[i], path + "/nccl_channels");
  }
  validate(hw, "graph: " + path);
  return hw;
}

namespace {

// The dimensions of `p.order` with the given sizes, in name order (the order the check for a
// left-out dimension names them in): cp, dp, ep, pp, tp.
std::vector<std::pair<std::string, int64_t>> ordered_dimensions(
    const ParallelismConfig& p, const std::array<std::pair<std::string_view, int64_t>, 5>& sizes) {
  std::vector<std::pair<std::string, int64_t>> order;
  // The names between dashes, as getline would split them: none after a trailing dash.
  for (size_t start = 0; start < p.order.size();) {
    const size_t dash = std::min(p.order.find('-', start), p.order.size());
    const std::string name = p.order.substr(start, dash - start);
    start = dash + 1;
    auto size = std::find_if(sizes.begin(), sizes.end(), [&](const auto& s) { return s.first == name; });
    if (size == sizes.end())
      throw DataError("parallelism.order \"" + p.order + "\": unknown dimension \"" + name + "\" (expected tp, cp, ep, dp, pp)");
    for (const auto& [seen, unused] : order)
      if (seen == name) throw DataError("parallelism.order \"" + p.order + "\": " + name + " appears twice");
    order.emplace_back(name, size->second);
  }
  for (const auto& dimension : sizes) {
    const auto& [name, size] = dimension;
    bool listed = std::any_of(order.begin(), order.end(), [&](const auto& dim) { return dim.first == dimension.first; });
    if (!listed && size > 1)
      throw DataError("parallelism.order \"" + p.order + "\": leaves out " + std::string(name) + "=" + std::to_string(size));
  }
  return order;
}

}  // namespace

std::vector<std::pair<std::string, int64_t>> rank_order(const ParallelismConfig& p) {
  // Megatron-LM's decoder RankGenerator: the dense layers have no expert dimension.
  return ordered_dimensions(p, {{{"cp", p.cp}, {"dp", p.dp}, {"ep", 1}, {"pp", p.pp}, {"tp", p.tp}}});
}

void check_order_names(const std::string& order) {
  ParallelismConfig p;  // every size 1: no dimension is needed in the order
  p.order = order;
  rank_order(p);
}

std::vector<std::pair<std::string, int64_t>> expert_rank_order(const ParallelismConfig& p) {
  // Megatron-LM's expert RankGenerator (parallel_state.initialize_model_parallel): the same order
  // over expert-TP as tp, ep, expert-DP as dp, no cp, and pp.
  const int64_t expert_dp = p.tp * p.cp * p.dp / (p.ep * p.expert_tp());
  return ordered_dimensions(p, {{{"cp", 1}, {"dp", expert_dp}, {"ep", p.ep}, {"pp", p.pp}, {"tp", p.expert_tp()}}});
}

std::string ParallelismConfig::world_size_excess() const {
  if (tp * cp <= kMaxGpus / dp && tp * cp * dp <= kMaxGpus / pp) return "";
  return "tp*cp*dp*pp=" + std::to_string(tp) + "*" + std::to_string(cp) + "*" + std::to_string(dp) + "*" +
         std::to_string(pp) + " GPUs, more than the " + std::to_string(kMaxGpus) + " a job can have";
}

nlohmann::json to_json(const ParallelismConfig& p) {
  return {{"tp", p.tp}, {"dp", p.dp}, {"sp", p.sp}, {"cp", p.cp}, {"pp", p.pp},
          {"vpp", nullable_to_json(p.vpp)}, {"order", p.order}, {"ep", p.ep}, {"etp", nullable_to_json(p.etp)},
          {"dp_replicate", p.dp_replicate}, {"world_size", p.world_size()}};
}

ParallelismConfig parallelism_from_json(const nlohmann::json& j, const std::string& path) {
  ParallelismConfig p;
  p.tp = require_as<int64_t>(j, "tp", path);
  p.dp = require_as<int64_t>(j, "dp", path);
  p.sp = require_as<bool>(j, "sp", path);
  p.cp = require_as<int64_t>(j, "cp", path);
  p.pp = require_as<int64_t>(j, "pp", path);
  p.vpp = read_nullable<int64_t>(j, "vpp", path);
  if (j.contains("order")) p.order = require_as<std::string>(j, "order", path);  // new in graph format 1.3
  // New in 1.5; absent: ep 1; etp absent or null: tp.
  if (j.contains("ep")) p.ep = require_as<int64_t>(j, "ep", path);
  if (j.contains("etp")) p.etp = read_nullable<int64_t>(j, "etp", path);
  if (j.contains("dp_replicate")) p.dp_replicate = require_as<int64_t>(j, "dp_replicate", path);  // new in 1.16
  // Sizes a real job can have, checked before any stage allocates by them.
  auto check = [&](const char* key, std::optional<int64_t> size) {
    if (size && (*size < 1 || *size > kMaxGpus))
      throw DataError(path + "/" + key + ": expected a size from 1 to " + std::to_string(kMaxGpus) + ", got " +
                      std::to_string(*size));
  };
  for (const auto& [key, size] : {std::pair{"tp", std::optional(p.tp)}, std::pair{"dp", std::optional(p.dp)},
                                  std::pair{"cp", std::optional(p.cp)}, std::pair{"pp", std::optional(p.pp)},
                                  std::pair{"ep", std::optional(p.ep)}, std::pair{"vpp", p.vpp}, std::pair{"etp", p.etp},
                                  std::pair{"dp_replicate", std::optional(p.dp_replicate)}})
    check(key, size);
  return p;
}

std::optional<DataParallelSharding> parse_data_parallel_sharding(const std::string& name) {
  static const std::map<std::string, DataParallelSharding> kNames = {
      {"no_shard", DataParallelSharding::no_shard},
      {"optim", DataParallelSharding::optim},
      {"optim_grads", DataParallelSharding::optim_grads},
      {"optim_grads_params", DataParallelSharding::optim_grads_params},
      {"zero1", DataParallelSharding::optim},
      {"zero2", DataParallelSharding::optim_grads},
      {"zero3", DataParallelSharding::optim_grads_params},
      {"shard_grad_op", DataParallelSharding::optim_grads},  // PyTorch FSDP's ShardingStrategy
      {"full_shard", DataParallelSharding::optim_grads_params}};
  auto found = kNames.find(name);
  if (found == kNames.end()) return std::nullopt;
  return found->second;
}

const char* to_string(DataParallelSharding sharding) {
  switch (sharding) {
    case DataParallelSharding::no_shard: return "no_shard";
    case DataParallelSharding::optim: return "optim";
    case DataParallelSharding::optim_grads: return "optim_grads";
    case DataParallelSharding::optim_grads_params: return "optim_grads_params";
  }
  return "no_shard";
}

std::optional<FsdpImplementation> parse_fsdp_implementation(const std::string& name) {
  if (name == "megatron") return FsdpImplementation::megatron;
  if (name == "fsdp2") return FsdpImplementation::fsdp2;
  return std::nullopt;
}

const char* to_string(FsdpImplementation implementation) {
  switch (implementation) {
    case FsdpImplementation::megatron: return "megatron";
    case FsdpImplementation::fsdp2: return "fsdp2";
  }
  return "megatron";
}

void normalize_sharding(TrainingConfig& t) {
  if (t.data_parallel_sharding != DataParallelSharding::no_shard) t.distributed_optimizer = true;
  if (t.distributed_optimizer && t.data_parallel_sharding == DataParallelSharding::no_shard)
    t.data_parallel_sharding = DataParallelSharding::optim;
}

const std::map<std::string, nlohmann::json> kTrainingKeysWhenSet = {
    {"data_parallel_sharding_strategy", nullptr}, {"fsdp_implementation", nullptr}, {"cuda_graph_scope", nullptr},
    {"cpu_offloading_num_layers", 0},             {"grad_reduce_in_bf16", false},   {"optimizer_state_dtype", "fp32"},
    {"store_param_remainders", false},            {"allocator_fragmentation", 0},
    {"moe_router_padding_for_quantization", false}};

nlohmann::json to_json(const TrainingConfig& t) {
  nlohmann::json j = {{"micro_batch", t.micro_batch},
          {"global_batch", t.global_batch},
          {"seq_length", nullable_to_json(t.seq_length)},
          {"dtype", t.dtype},
          {"fp8_recipe", nullable_to_json(t.fp8_recipe)},
          {"fp8_param_gather", t.fp8_param_gather},
          {"recompute", t.recompute},
          {"recompute_modules", t.recompute_modules},
          {"recompute_method", nullable_to_json(t.recompute_method)},
          {"recompute_num_layers", nullable_to_json(t.recompute_num_layers)},
          {"distributed_optimizer", t.distributed_optimizer},
          {"overlap_grad_reduce", t.overlap_grad_reduce},
          {"overlap_param_gather", t.overlap_param_gather},
          {"ddp_bucket_size", nullable_to_json(t.ddp_bucket_size)},
          {"tp_comm_overlap", t.tp_comm_overlap},
          {"clip_grad", t.clip_grad}};
  j.update({{"moe_token_dispatcher_type", t.moe_token_dispatcher_type},
            {"moe_expert_capacity_factor", nullable_to_json(t.moe_expert_capacity_factor)},
            {"moe_pad_expert_input_to_capacity", t.moe_pad_expert_input_to_capacity},
            {"moe_imbalance", t.moe_imbalance},
            {"moe_shared_expert_overlap", t.moe_shared_expert_overlap},
            {"overlap_moe_expert_parallel_comm", t.overlap_moe_expert_parallel_comm}});
  // New in 1.8, written only when some scope is captured.
  if (!t.cuda_graph_scope.empty()) j["cuda_graph_scope"] = names_of(t.cuda_graph_scope);
  // New in 1.11, written only when some layer offloads.
  if (t.cpu_offloading_num_layers != 0) j["cpu_offloading_num_layers"] = t.cpu_offloading_num_layers;
  // New in 1.13, written only when set.
  if (t.grad_reduce_in_bf16) j["grad_reduce_in_bf16"] = true;
  // New in 1.15, written only when not the default.
  if (t.optimizer_state_dtype != OptimizerStateDtype::fp32) j["optimizer_state_dtype"] = to_string(t.optimizer_state_dtype);
  if (t.store_param_remainders) j["store_param_remainders"] = true;
  if (t.allocator_fragmentation != 0) j["allocator_fragmentation"] = t.allocator_fragmentation;
  // New in 1.19, written only when set.
  if (t.moe_router_padding_for_quantization) j["moe_router_padding_for_quantization"] = true;
  // New in 1.6, written only for the strategies beyond the distributed optimizer.
  if (t.shards_gradients()) {
    j["data_parallel_sharding_strategy"] = to_string(t.data_parallel_sharding);
    j["fsdp_implementation"] = to_string(t.fsdp_implementation);
  }
  return j;
}

TrainingConfig training_from_json(const nlohmann::json& j, const std::string& path) {
  TrainingConfig t;
  t.micro_batch = require_as<int64_t>(j, "micro_batch", path);
  t.global_batch = require_as<int64_t>(j, "global_batch", path);
  t.seq_length = read_nullable<int64_t>(j, "seq_length", path);
  t.dtype = require_as<std::string>(j, "dtype", path);
  if (j.contains("fp8_recipe")) t.fp8_recipe = read_nullable<std::string>(j, "fp8_recipe", path);  // new in 1.2
  if (j.contains("fp8_param_gather")) t.fp8_param_gather = require_as<bool>(j, "fp8_param_gather", path);
  t.recompute = require_as<std::string>(j, "recompute", path);
  t.recompute_modules = require_as<std::vector<std::string>>(j, "recompute_modules", path);
  t.recompute_method = read_nullable<std::string>(j, "recompute_method", path);
  t.recompute_num_layers = read_nullable<int64_t>(j, "recompute_num_layers", path);
  t.distributed_optimizer = require_as<bool>(j, "distributed_optimizer", path);
  t.overlap_grad_reduce = require_as<bool>(j, "overlap_grad_reduce", path);
  t.overlap_param_gather = require_as<bool>(j, "overlap_param_gather", path);
  t.ddp_bucket_size = read_nullable<int64_t>(j, "ddp_bucket_size", path);
  t.tp_comm_overlap = require_as<bool>(j, "tp_comm_overlap", path);
  t.clip_grad = require_as<double>(j, "clip_grad", path);
  // New in 1.5; absent: the defaults.
  if (j.contains("moe_token_dispatcher_type"))
    t.moe_token_dispatcher_type = require_as<std::string>(j, "moe_token_dispatcher_type", path);
  if (j.contains("moe_expert_capacity_factor"))
    t.moe_expert_capacity_factor = read_nullable<double>(j, "moe_expert_capacity_factor", path);
  if (j.contains("moe_pad_expert_input_to_capacity"))
    t.moe_pad_expert_input_to_capacity = require_as<bool>(j, "moe_pad_expert_input_to_capacity", path);
  if (j.contains("moe_imbalance")) t.moe_imbalance = require_as<double>(j, "moe_imbalance", path);
  if (j.contains("moe_shared_expert_overlap"))
    t.moe_shared_expert_overlap = require_as<bool>(j, "moe_shared_expert_overlap", path);
  if (j.contains("overlap_moe_expert_parallel_comm"))
    t.overlap_moe_expert_parallel_comm = require_as<bool>(j, "overlap_moe_expert_parallel_comm", path);
  if (j.contains("cpu_offloading_num_layers"))
    t.cpu_offloading_num_layers = require_as<int64_t>(j, "cpu_offloading_num_layers", path);
  if (j.contains("grad_reduce_in_bf16")) t.grad_reduce_in_bf16 = require_as<bool>(j, "grad_reduce_in_bf16", path);
  if (j.contains("optimizer_state_dtype"))
    t.optimizer_state_dtype = require_enum<OptimizerStateDtype>(j, "optimizer_state_dtype", path);
  if (j.contains("store_param_remainders"))
    t.store_param_remainders = require_as<bool>(j, "store_param_remainders", path);
  if (j.contains("allocator_fragmentation"))
    t.allocator_fragmentation = require_as<double>(j, "allocator_fragmentation", path);
  if (j.contains("moe_router_padding_for_quantization"))
    t.moe_router_padding_for_quantization = require_as<bool>(j, "moe_router_padding_for_quantization", path);
  if (j.contains("cuda_graph_scope")) {
    const std::string at = path + "/cuda_graph_scope";
    const nlohmann::json& scopes = j["cuda_graph_scope"];
    if (!scopes.is_array()) throw DataError(at + ": expected a list of scopes, got " + scopes.dump());
    for (size_t i = 0; i < scopes.size(); ++i) {
      const std::optional<CudaGraphScope> scope =
          scopes[i].is_string() ? parse_enum<CudaGraphScope>(scopes[i].get<std::string>()) : std::nullopt;
      if (!scope)
        throw DataError(at + "/" + std::to_string(i) + ": expected " + either_of(names_of<CudaGraphScope>()) +
                        ", got " + scopes[i].dump());
      t.cuda_graph_scope.push_back(*scope);
    }
  }
  if (j.contains("data_parallel_sharding_strategy")) {
    const auto name = require_as<std::string>(j, "data_parallel_sharding_strategy", path);
    const auto sharding = parse_data_parallel_sharding(name);
    if (!sharding || name != to_string(*sharding) || *sharding < DataParallelSharding::optim_grads)
      throw DataError(path + "/data_parallel_sharding_strategy: expected optim_grads or optim_grads_params, got '" +
                      name + "'");
    t.data_parallel_sharding = *sharding;
  }
  if (j.contains("fsdp_implementation")) {
    const auto name = require_as<std::string>(j, "fsdp_implementation", path);
    const auto implementation = parse_fsdp_implementation(name);
    if (!implementation || !t.shards_gradients())
      throw DataError(path + "/fsdp_implementation: expected megatron or fsdp2 beside "
                      "data_parallel_sharding_strategy, got '" + name + "'");
    t.fsdp_implementation = *implementation;
  }
  normalize_sharding(t);
  return t;
}

}  // namespace syssim
