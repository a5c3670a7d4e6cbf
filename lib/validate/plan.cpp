// The plan of a measured row (docs/validation.md): the model, hardware preset, layout and
// measured step time its cells describe, or why syssim cannot express it. Needs no simulation.
#include "validate/plan.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <regex>
#include <sstream>

#include "common/error.hpp"
#include "common/text.hpp"
#include "common/units.hpp"
#include "config/presets.hpp"
#include "shard/shard.hpp"
#include "validate/spellings.hpp"

namespace syssim {

namespace {

constexpr int64_t kGpt2BpeVocab = 50257;  // GPT-2 BPE, which NeMo's GPT3 configs use
// NeMo's performance scripts train Nemotron-3 and -4 with NullTokenizer(vocab_size=256000)
// (NVIDIA/NeMo scripts/performance/llm/pretrain_nemotron{3_8b,3_22b,4_15b,4_340b}.py).
constexpr int64_t kNemotronVocab = 256000;
constexpr double kTera = 1e12;
constexpr int64_t kMaxCell = int64_t{1} << 30;  // the largest integer cell: 2^30 (a billion tokens)

// A row that cannot be simulated; the message is the reason shown for it.
struct Unsupported {
  std::string reason;
};

// The text parsed whole by `parse` (std::stoll, std::stod), or nothing when it is not, or when
// it is not written in decimal digits (std::stod also reads "0x10", "inf" and leading spaces).
template <typename T, typename Parse>
std::optional<T> parsed_whole(const std::string& text, Parse parse) {
  if (text.find_first_not_of("0123456789.eE+-") != std::string::npos) return std::nullopt;
  size_t used = 0;
  T value = 0;
  try {
    value = parse(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || text.empty()) return std::nullopt;
  return value;
}

// The cell parsed whole by `parse`, or nothing when it is empty.
template <typename T, typename Parse>
std::optional<T> parsed_cell(const MeasuredRow& row, const std::string& column, const char* expected, Parse parse) {
  std::string text = cell(row, column);
  if (text.empty()) return std::nullopt;
  std::optional<T> value = parsed_whole<T>(text, parse);
  if (!value) throw DataError("column '" + column + "': expected " + expected + ", got '" + text + "'");
  return value;
}

// A parallel size, 1 to kMaxGpus, or nothing when the cell is empty: its products stay in range.
std::optional<int64_t> size_cell(const MeasuredRow& row, const std::string& column) {
  std::optional<int64_t> size = int_cell(row, column);
  if (size && (*size < 1 || *size > kMaxGpus))
    throw DataError("column '" + column + "': expected 1 to " + std::to_string(kMaxGpus) + ", got '" +
                    cell(row, column) + "'");
  return size;
}

// The cell as `read` reads it; a row with the cell empty cannot be simulated.
int64_t required(std::optional<int64_t> (*read)(const MeasuredRow&, const std::string&), const MeasuredRow& row,
                 const std::string& column) {
  std::optional<int64_t> value = read(row, column);
  if (!value) throw Unsupported{"column '" + column + "' is empty"};
  return *value;
}
int64_t required_int(const MeasuredRow& row, const std::string& column) { return required(int_cell, row, column); }
int64_t required_size(const MeasuredRow& row, const std::string& column) { return required(size_cell, row, column); }

// torchtitan's Llama 3 training configs train at 8,192 tokens (torchtitan/models/llama3/
// train_configs/llama3_8b.toml, seq_len = 8192, at 820504e, the commit of its June 2025
// benchmarks, whose tables do not restate it).
constexpr int64_t kTorchtitanLlama3Sequence = 8192;

bool torchtitan(const MeasuredRow& row) { return cell(row, "source_id") == "TORCHTITAN"; }

// The row's sequence length, else the one its source's training config sets.
int64_t sequence_length(const MeasuredRow& row) {
  if (std::optional<int64_t> seq = int_cell(row, "seq_length")) return *seq;
  if (torchtitan(row) && starts_with(cell(row, "model"), "Llama3")) return kTorchtitanLlama3Sequence;
  throw Unsupported{"column 'seq_length' is empty"};
}

// The `gpu` cells of the measured table's README, which name their presets exactly; any other
// spelling (spellings.hpp) is listed among the row's assumptions.
const std::vector<std::string> kTableGpus = {"H100-80GB", "A100-80GB", "GB200", "B200", "GB300",
                                             "H100-96GB-HBM2e-500W"};

// The row's `hardware` cell, else what --hardware-map says for its gpu, else the built-in
// preset of the gpu: a preset name of hardware_dir or a YAML path.
std::string hardware_preset(const MeasuredRow& row, const std::string& hardware_dir,
                            const std::map<std::string, std::string>& hardware_map,
                            std::vector<std::string>& assumptions) {
  std::string gpu = cell(row, "gpu");
  std::string chosen = cell(row, "hardware");
  if (chosen.empty())
    for (const auto& [mapped, preset] : hardware_map)
      if (same_gpu_spelling(mapped, gpu)) {
        chosen = preset;
        assumptions.push_back("hardware=" + preset + " (--hardware-map)");
        break;
      }
  if (chosen.empty()) {
    std::optional<std::string> preset = preset_of_gpu(gpu);
    if (!preset) throw Unsupported{"no hardware preset for gpu '" + gpu + "'"};
    chosen = *preset;
    if (std::find(kTableGpus.begin(), kTableGpus.end(), gpu) == kTableGpus.end())
      assumptions.push_back("hardware=" + chosen);
  }
  return preset_path(chosen, hardware_dir);
}

// Sources older than Megatron-LM's sequence parallelism and distributed optimizer (2022) that
// reduce gradients after the backward pass: Narayanan et al. 2021 and BLOOM's Megatron-DeepSpeed
// (its pipeline engine reduces gradients after the last micro-batch). Empty cells take these off.
bool predates_megatron_2022(const MeasuredRow& row) {
  std::string source = cell(row, "source_id");
  return source == "NARAYANAN21" || source == "BLOOM_176B";
}

// The DGX Cloud Benchmarking release of a row ("dgxc-benchmarking v25.04" in its notes) as
// YYMM (2504); 0 for another source or none named.
int dgxc_release(const MeasuredRow& row) {
  std::smatch match;
  static const std::regex kRelease("dgxc-benchmarking v([0-9]{2})\\.([0-9]{2})");
  const std::string notes = cell(row, "notes");
  if (cell(row, "source_id") != "DGXC" || !std::regex_search(notes, match, kRelease)) return 0;
  return std::stoi(match[1]) * 100 + std::stoi(match[2]);
}

// Sources published before FlashAttention (Dao et al., May 2022) ran Megatron's unfused
// attention: batched GEMMs around a fused scale-mask-softmax kernel (Korthikanti et al.'s
// selective recomputation recomputes exactly that softmax and dropout).
bool predates_flash_attention(const MeasuredRow& row) {
  std::string source = cell(row, "source_id");
  return source == "NARAYANAN21" || source == "KORTHIKANTI22" || source == "BLOOM_176B";
}

// The preset named like the model: lower case, spaces as dashes ("DeepSeek-V3" -> deepseek-v3),
// if there is one.
std::optional<std::string> preset_of_model(const std::string& model) {
  std::string name;
  for (char c : model) name += c == ' ' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (std::filesystem::is_regular_file(preset_dir(PresetKind::kModel) + "/" + name + ".yaml")) return name;
  return std::nullopt;
}

// A model given by name: a model YAML path, a model preset, or a Hugging Face id (a local
// folder or cache entry, or a config.json shipped in the data folder) at the row's sequence.
ModelConfig named_model(const std::string& name, int64_t seq_length) {
  const bool path = name.find(".yaml") != std::string::npos || name.find(".yml") != std::string::npos;
  if (path) return load_model_yaml(name);
  if (std::optional<std::string> preset = preset_of_model(name)) return load_model_yaml(*preset);
  std::error_code error;
  const bool config_json = name.size() > 5 && name.compare(name.size() - 5, 5, ".json") == 0;
  if (name.find('/') == std::string::npos && !config_json && !std::filesystem::exists(name, error))
    throw Unsupported{"model_config '" + name + "' is neither a model YAML, a preset, a config.json nor a Hugging Face id (org/name)"};
  return load_model(name, seq_length);
}

// A model from a preset or the model_config column, checked against the row's own columns.
ModelConfig configured_model(const MeasuredRow& row, const std::string& config, std::vector<std::string>& assumptions) {
  ModelConfig model = named_model(config, sequence_length(row));
  // The row's ffn_hidden is the routed experts' width for a mixture of experts (the table's
  // README); multi-latent attention has no KV heads to compare.
  std::vector<std::pair<const char*, int64_t>> columns = {
      {"layers", model.num_layers}, {"hidden", model.hidden_size}, {"heads", model.num_attention_heads},
      {"vocab", model.vocab_size}, {"ffn_hidden", model.is_moe() ? model.moe_ffn_hidden_size : model.ffn_hidden_size}};
  if (!model.multi_latent_attention)
    columns.emplace_back("kv_heads", model.num_query_groups > 0 ? model.num_query_groups : model.num_attention_heads);
  for (const auto& [column, value] : columns)
    if (std::optional<int64_t> given = int_cell(row, column); given && *given != value)
      throw Unsupported{std::string("column '") + column + "' is " + std::to_string(*given) + " but model " + config +
                        " has " + std::to_string(value)};
  assumptions.push_back("model " + config);
  return model;
}

// Architecture from the model's name: Llama* is Llama (RMSNorm, SwiGLU, RoPE, untied, no
// biases); Nemotron-3 and -4 are NeMo's Nemotron (LayerNorm, squared-ReLU, RoPE, untied, no
// biases); GPT* and BLOOM are Megatron's GPT (LayerNorm, GELU, biases, learned positions, tied
// embeddings). BLOOM's ALiBi is taken as learned positions (same GEMMs). MPT is llm-foundry's
// (LayerNorm, GELU, no biases, ALiBi taken as learned positions, tied embeddings, no dropout).
// Other models by the preset named like them (the mixtures of experts), or by the row's
// model_config.
ModelConfig architecture(const MeasuredRow& row, std::vector<std::string>& assumptions) {
  std::string name = cell(row, "model");
  if (std::string config = cell(row, "model_config"); !config.empty()) return configured_model(row, config, assumptions);
  ModelConfig model;
  model.name = name;
  const std::string lower = lowercase(name);  // the families' names in any case, as the other cells
  bool llama = starts_with(lower, "llama");
  bool nemotron = false;
  for (const char* prefix : {"nemotron3", "nemotron-3", "nemotron4", "nemotron-4"}) nemotron |= starts_with(lower, prefix);
  const bool mpt = starts_with(lower, "mpt");
  bool gpt = starts_with(lower, "gpt") || starts_with(lower, "bloom") || mpt;
  // Other models by their preset: the mixtures of experts (DeepSeek-V3, Qwen3-30B-A3B, GPT-OSS-120B, ...).
  if (!llama && !nemotron && (!gpt || starts_with(lower, "gpt-oss")))
    if (std::optional<std::string> preset = preset_of_model(name)) return configured_model(row, *preset, assumptions);
  if (!llama && !nemotron && !gpt)
    throw Unsupported{"no architecture known for model '" + name +
                      "' (give a model_config column: a preset, a model YAML or a Hugging Face id)"};
  model.num_layers = required_int(row, "layers");
  model.hidden_size = required_int(row, "hidden");
  model.num_attention_heads = required_int(row, "heads");
  model.num_query_groups = int_cell(row, "kv_heads").value_or(model.num_attention_heads);
  if (cell(row, "kv_heads").empty()) assumptions.push_back("kv_heads=heads (multi-head attention)");
  model.kv_channels = model.num_attention_heads > 0 ? model.hidden_size / model.num_attention_heads : 0;
  model.seq_length = sequence_length(row);
  model.max_position_embeddings = model.seq_length;
  if (llama) {
    model.ffn_hidden_size = required_int(row, "ffn_hidden");
    model.vocab_size = required_int(row, "vocab");
    model.rms_norm_eps = 1e-5;
    return model;
  }
  model.swiglu = false;
  model.normalization = "LayerNorm";
  model.rms_norm_eps = 1e-5;
  if (nemotron) {
    // NeMo's NemotronConfig (nemo/collections/llm/gpt/model/nemotron.py): squared_relu, RoPE
    // (on half of each head, rotary_percent 0.5; syssim rotates all of it), LayerNorm with a
    // zero-centred gamma (same kernel cost), no biases, untied embeddings, no dropout.
    model.activation = "squared_relu";
    model.ffn_hidden_size = required_int(row, "ffn_hidden");
    std::optional<int64_t> vocab = int_cell(row, "vocab");
    model.vocab_size = vocab.value_or(kNemotronVocab);
    if (!vocab) assumptions.push_back("vocab=256000 (NeMo's Nemotron NullTokenizer)");
    return model;
  }
  model.rope = false;
  model.tie_word_embeddings = true;
  if (mpt) {
    // llm-foundry's scripts/train/yamls/pretrain/mpt-*.yaml: no_bias, ALiBi, dropout 0.
    assumptions.push_back("MPT: no biases, ALiBi as learned positions, no dropout");
  } else {
    model.add_bias_linear = true;
    model.hidden_dropout = 0.1;  // Megatron-LM's GPT default, as configs/models/gpt3-*.yaml
    model.attention_dropout = 0.1;
  }
  model.ffn_hidden_size = int_cell(row, "ffn_hidden").value_or(4 * model.hidden_size);
  if (cell(row, "ffn_hidden").empty()) assumptions.push_back("ffn_hidden=4*hidden");
  std::optional<int64_t> vocab = int_cell(row, "vocab");
  model.vocab_size = vocab.value_or(kGpt2BpeVocab);
  if (!vocab) assumptions.push_back("vocab=50257 (GPT-2 BPE, padded)");
  return model;
}

// A cell in lower case, for labels written in either case.
std::string lowercase_cell(const MeasuredRow& row, const std::string& column) { return lowercase(cell(row, column)); }

// The replicas of hybrid sharding: the data-parallel ranks (dp x cp) over the "sharding group
// N" the cell names, which must hold whole replicas of cp ranks; 1 without a group.
int64_t sharding_replicas(const MeasuredRow& row, const ParallelismConfig& p) {
  const std::string text = lowercase_cell(row, "distributed_optimizer");
  const size_t at = text.find("sharding group ");
  if (text.find("fsdp") == std::string::npos || at == std::string::npos) return 1;
  const std::string group_text = text.substr(at + 15, text.find(')', at) - at - 15);
  const int64_t data_parallel = p.dp * p.cp;
  const int64_t group = parsed_whole<int64_t>(group_text, [](const std::string& text, size_t* used) {
                          return std::stoll(text, used);
                        }).value_or(0);
  if (group < 1 || data_parallel % group != 0 || group % p.cp != 0)
    throw Unsupported{"sharding group '" + group_text + "' does not split the " + std::to_string(data_parallel) +
                      " data-parallel ranks (dp x cp) into whole groups of cp ranks"};
  return data_parallel / group;
}

// PyTorch FSDP's strategies by name (FULL_SHARD also its default, and FSDP2's fully_shard),
// Megatron-FSDP's, and DeepSpeed's ZeRO stages; any other text is the distributed optimizer's
// switch (flag_cell).
DataParallelSharding sharding_of(const MeasuredRow& row) {
  const std::string text = lowercase_cell(row, "distributed_optimizer");
  static const std::regex kZeroStage("\\bzero[-_ ]?(stage[-_ ]?)?([123])\\b");
  std::smatch zero;
  const bool has_zero = std::regex_search(text, zero, kZeroStage);
  if (text.find("shard_grad_op") != std::string::npos || (has_zero && zero[2] == "2"))
    return DataParallelSharding::optim_grads;
  if (text.find("megatron-fsdp") != std::string::npos || text.find("full_shard") != std::string::npos ||
      text.find("fully sharded") != std::string::npos || text == "fsdp" || text == "fsdp2" || (has_zero && zero[2] == "3"))
    return DataParallelSharding::optim_grads_params;
  // Another FSDP strategy (HYBRID_SHARD without its group size) is skipped below, as text naming FSDP.
  if (text.find("fsdp") == std::string::npos && text.find("hybrid") == std::string::npos)
    return DataParallelSharding::no_shard;
  throw Unsupported{"sharding '" + cell(row, "distributed_optimizer") +
                    "' not recognised (FSDP / FULL_SHARD, SHARD_GRAD_OP, FSDP2, megatron-fsdp (sharding group N), "
                    "ZeRO-1, ZeRO-2, ZeRO-3, or the distributed optimizer's 1 / 0)"};
}

// dp: the data-parallel size.
TrainingConfig training(const MeasuredRow& row, int64_t dp, std::vector<std::string>& assumptions) {
  TrainingConfig t;
  // Papers and READMEs that leave it out: Megatron-LM's own GPT-3 example trains with micro-batch
  // 1 (examples/gpt3/train_gpt3_175b_distributed.sh, --micro-batch-size 1).
  std::optional<int64_t> micro_batch = int_cell(row, "micro_batch");
  t.micro_batch = micro_batch.value_or(1);
  if (!micro_batch) assumptions.push_back("micro_batch=1");
  t.global_batch = required_int(row, "global_batch");
  t.seq_length = sequence_length(row);
  if (cell(row, "seq_length").empty()) assumptions.push_back("seq_length=" + std::to_string(*t.seq_length));
  const std::string dtype = cell(row, "dtype");
  if (dtype.empty()) throw Unsupported{"column 'dtype' is empty"};
  const std::optional<Precision> precision = precision_of(dtype);
  if (!precision)
    throw Unsupported{"dtype '" + dtype +
                      "' not recognised (bf16, fp16, fp8, fp8-cs / current scaling, fp8-ds / delayed scaling, "
                      "fp8-mx / mxfp8, nvfp4, fp8 tensorwise, fp8 rowwise)"};
  t.dtype = precision->dtype;
  if (precision->mixed_16bit || dtype != t.dtype) assumptions.push_back("dtype=" + t.dtype);
  std::string recompute = lowercase_cell(row, "recompute");
  std::string method = recompute.substr(0, recompute.find(' '));
  if (method.empty()) {
    method = "none";
    assumptions.push_back("recompute=none");
  }
  if (method != "none" && method != "full" && method != "selective")
    throw Unsupported{"recompute '" + cell(row, "recompute") +
                      "' not recognised (none, full, selective, selective (MODULE, ...), selective (op-level SAC))"};
  t.recompute = method;
  // torchtitan's per-op selective checkpointing, as its tables name it; Megatron's modules
  // listed in parentheses, "selective (layernorm, moe_act)".
  static const std::regex kModules("^selective \\(([a-z_]+(, ?[a-z_]+)*)\\)$");
  std::smatch modules;
  if (method == "selective" &&
      (recompute.find("op-level sac") != std::string::npos || recompute.find("per-op sac") != std::string::npos)) {
    t.recompute_modules = {"op"};
    assumptions.push_back("recompute_modules=op");
  } else if (std::regex_match(recompute, modules, kModules)) {
    std::stringstream list(modules[1].str());
    for (std::string module; std::getline(list >> std::ws, module, ',');) t.recompute_modules.push_back(module);
  }
  const bool legacy = predates_megatron_2022(row);
  std::optional<bool> distributed = flag_cell(row, "distributed_optimizer");
  t.distributed_optimizer = distributed.value_or(!legacy);
  if (!distributed) assumptions.push_back(legacy ? "distributed_optimizer=0" : "distributed_optimizer=1");
  t.data_parallel_sharding = sharding_of(row);
  if (t.shards_gradients()) {
    // Whose schedule: torchtitan's FSDP2, else Megatron-FSDP's (Composer's FSDP1 runs the same).
    if (lowercase_cell(row, "distributed_optimizer").find("fsdp2") != std::string::npos)
      t.fsdp_implementation = FsdpImplementation::fsdp2;
    assumptions.push_back(std::string("data_parallel_sharding_strategy=") + to_string(t.data_parallel_sharding));
    assumptions.push_back(std::string("fsdp_implementation=") + to_string(t.fsdp_implementation));
  }
  // The recipe of an fp8 row: Megatron-Bridge's labels fp8-cs (per-tensor current scaling) and
  // fp8-mx (MXFP8); its 25.09 table labels no precision, its rows are fp8 with current scaling
  // (the table's footnote: the values in parentheses are the blockwise/MX variant). Other fp8
  // rows name no recipe: NVIDIA's NeMo recipes run Transformer Engine's delayed scaling
  // (nemo/collections/llm/recipes/precision/mixed_precision.py, bf16_with_fp8_mixed: fp8_recipe
  // "delayed"; the NeMo performance scripts' --fp8_recipe defaults to "ds"). Both NeMo's and
  // Megatron-Bridge's per-tensor recipes keep fp8 parameters (fp8_param_gather True; Megatron-
  // Bridge's bf16_with_fp8_current_scaling_mixed), which syssim simulates with the distributed
  // optimizer; its MXFP8 recipe's fp8 parameters are not simulated (bf16 parameters instead).
  const bool megatron_bridge = cell(row, "source_id") == "MB_PERF";
  // torchtitan's float8 runs gather 16-bit weights unless told otherwise (its config's
  // float8.enable_fsdp_float8_all_gather defaults to false; llama3_8b.toml at 820504e keeps it).
  if (t.dtype == "fp8" || t.dtype == "fp4") {
    t.fp8_recipe = precision->recipe.value_or(megatron_bridge ? "current" : "delayed");
    t.fp8_param_gather =
        (*t.fp8_recipe == "current" || *t.fp8_recipe == "delayed") && t.distributed_optimizer && !torchtitan(row);
    if (!precision->recipe || (dtype != "fp8-cs" && dtype != "fp8-mx"))
      assumptions.push_back("fp8_recipe=" + *t.fp8_recipe);
    assumptions.push_back(t.fp8_param_gather ? "fp8_param_gather=1" : "fp8_param_gather=0");
  }
  // Activation offloading, where the row states it (Megatron-Bridge's recipes name it
  // cpu_offloading_num_layers; the published tables do not).
  t.cpu_offloading_num_layers = int_cell(row, "cpu_offloading_num_layers").value_or(0);
  // Megatron-Bridge's performance recipes keep and reduce the main gradients in bf16, for
  // every model of its tables (grad_reduce_in_fp32 false: scripts/performance/configs at
  // v0.1.0rc4, *_llm_pretrain.yaml, and at v0.2.0, *_llm_pretrain.py); NVIDIA's others below.
  // Composer's FSDP mixed-precision policy PURE reduces the gradients in the 16-bit dtype
  // (Composer's get_mixed_precision: reduce_dtype the precision's), DEFAULT in fp32.
  const bool composer_pure = t.shards_gradients() && dtype.find("PURE") != std::string::npos;
  t.grad_reduce_in_bf16 =
      switch_cell(row, "grad_reduce_in_bf16").value_or((megatron_bridge || composer_pure) && t.dtype != "fp16");
  if (t.grad_reduce_in_bf16) assumptions.push_back("grad_reduce_in_bf16=1");
  // Megatron recipes overlap the gradient reduction, and the parameter all-gather with the
  // distributed optimizer; there is nothing to overlap without data parallelism.
  // Listed where a default turned one on, as every default taken is.
  auto overlap = [&](const char* column, bool by_default) {
    const std::optional<bool> given = switch_cell(row, column);
    if (!given && by_default) assumptions.push_back(std::string(column) + "=1");
    return given.value_or(by_default);
  };
  t.overlap_grad_reduce = overlap("overlap_grad_reduce", dp > 1 && !legacy);
  t.overlap_param_gather = overlap("overlap_param_gather", t.overlap_grad_reduce && t.distributed_optimizer);
  t.overlap_moe_expert_parallel_comm = switch_cell(row, "overlap_moe_expert_parallel_comm").value_or(false);
  return t;
}

ShardOptions layout(const MeasuredRow& row, std::vector<std::string>& assumptions) {
  ShardOptions options;
  ParallelismConfig& p = options.parallelism;
  int64_t gpus = required_size(row, "num_gpus");
  p.tp = required_size(row, "tp");
  p.pp = required_size(row, "pp");
  p.cp = size_cell(row, "cp").value_or(1);
  if (cell(row, "cp").empty()) assumptions.push_back("cp=1");
  p.vpp = size_cell(row, "vpp");
  p.ep = size_cell(row, "ep").value_or(1);
  if (std::optional<int64_t> dp = size_cell(row, "dp")) {
    p.dp = *dp;
  } else {
    if (gpus % (p.tp * p.pp * p.cp) != 0)
      throw Unsupported{"column 'dp' is empty and tp*cp*pp=" + std::to_string(p.tp * p.pp * p.cp) +
                        " does not divide num_gpus=" + std::to_string(gpus)};
    p.dp = gpus / (p.tp * p.pp * p.cp);
    assumptions.push_back("dp=" + std::to_string(p.dp) + " (num_gpus/(tp*cp*pp))");
  }
  std::optional<bool> sp = switch_cell(row, "sp");
  p.sp = sp.value_or(p.tp > 1 && !predates_megatron_2022(row));  // NVIDIA recipes enable SP whenever tp > 1
  if (!sp && p.tp > 1) assumptions.push_back(p.sp ? "sp=1" : "sp=0");
  options.gpus = gpus;
  options.training = training(row, p.dp, assumptions);
  p.dp_replicate = sharding_replicas(row, p);
  if (p.dp_replicate > 1) assumptions.push_back("dp_replicate=" + std::to_string(p.dp_replicate));
  // The overlap of the TP collectives with their GEMMs where the row says the run turned it on
  // (a tp_comm_overlap column, else "--tp-comm-overlap" in its notes, as Megatron-LM's README
  // rows, or torchtitan's "async TP", which splits each all-gather and reduce-scatter into
  // pieces that run beside the GEMM's pieces as Transformer Engine's overlap does); Megatron-LM
  // allows it only with sequence parallelism, as torchtitan's async TP needs.
  const std::optional<bool> tp_comm_overlap = switch_cell(row, "tp_comm_overlap");
  const std::string notes = cell(row, "notes");
  const bool noted = notes.find("--tp-comm-overlap") != std::string::npos || notes.find("async TP") != std::string::npos;
  options.training.tp_comm_overlap = tp_comm_overlap.value_or(noted) && p.sp && p.tp > 1;
  if (options.training.tp_comm_overlap && !tp_comm_overlap) assumptions.push_back("tp_comm_overlap=1 (notes)");
  return options;
}

// Layers that pp*vpp does not divide: Megatron recipes count the embedding and the loss as a
// layer each when that divides (NeMo's llama31_405b recipe sets account_for_embedding/loss_in_
// pipeline_split; BLOOM's 'type:transformer|embedding' partition splits 70 layers and its two
// tied embeddings as 72 blocks on 12 stages, bigscience train/tr11-176B-ml/README.md), else
// Megatron-Bridge's uneven layouts (uneven_pipeline_layout, lib/shard/shard.hpp). A row's
// decoder_first/last_pipeline_num_layers columns (Megatron-LM's uneven first and last pipeline
// ranks) take the place of all that.
void balance_pipeline(const MeasuredRow& row, const ModelConfig& model, ShardOptions& options,
                      std::vector<std::string>& assumptions) {
  options.decoder_first_pipeline_num_layers = int_cell(row, "decoder_first_pipeline_num_layers");
  options.decoder_last_pipeline_num_layers = int_cell(row, "decoder_last_pipeline_num_layers");
  if (options.decoder_first_pipeline_num_layers || options.decoder_last_pipeline_num_layers) return;
  const ParallelismConfig& p = options.parallelism;
  const int64_t stages = p.pp * p.vpp.value_or(1), layers = model.num_layers;
  if (p.pp == 1 || layers % stages == 0) return;
  if ((layers + 2) % stages == 0) {
    options.account_for_embedding_in_pipeline_split = options.account_for_loss_in_pipeline_split = true;
    assumptions.push_back("embedding and loss counted as pipeline layers");
    return;
  }
  options.pp_layout = uneven_pipeline_layout(layers, stages);
  if (options.pp_layout.empty()) return;  // more stages than layers: the shard stage says why
  std::string text;
  for (int64_t count : options.pp_layout) text += (text.empty() ? "" : ",") + std::to_string(count);
  assumptions.push_back("pp_layout=" + text);
}

// torchtitan's Llama (torchtitan/models/llama3/model.py at the rows' commits): wq, wk, wv and
// w1, w3 are separate linears. Its runs without torch.compile run it eagerly: PyTorch's RMSNorm,
// RoPE and SwiGLU as chains of separate kernels (torchtitan/models/norms.py RMSNorm, model.py
// apply_rotary_emb and FeedForward); torch.compile fuses them.
void torchtitan_model(const MeasuredRow& row, ModelConfig& model, std::vector<std::string>& assumptions) {
  if (!torchtitan(row)) return;
  if (!model.multi_latent_attention) model.projection_fusion = false;  // MLA's projections stay fused
  model.cross_entropy = "torch_fp32";  // torchtitan/components/loss.py: cross_entropy(pred.float(), labels)
  assumptions.push_back("projection_fusion=0, cross_entropy=torch_fp32");
  if (cell(row, "notes").find("torch.compile") != std::string::npos) return;
  // Each only where the model has the kernel (config.cpp refuses the others).
  model.rms_norm_fusion = model.normalization != "RMSNorm";
  model.apply_rope_fusion = !model.rope;
  model.bias_swiglu_fusion = !model.swiglu;
  assumptions.push_back("eager PyTorch: rms_norm_fusion, apply_rope_fusion, bias_swiglu_fusion off");
}

// The attention kernel the row's run ran, where it is not the model's flash attention; an
// attention_backend cell decides instead.
// - Sources published before FlashAttention (May 2022) ran Megatron's unfused attention.
// - llm-foundry's benchmarks set MPT's attn_impl from submit_benchmarks.py's --attn_impl, default
//   triton: flash-attn's Triton kernel, the one of its attention implementations that takes
//   ALiBi's bias.
// - Before Transformer Engine 2.5 (June 2025) cuDNN's fused attention takes no head dimension
//   over 128 on Blackwell (transformer_engine/common/fused_attn/fused_attn.cpp at v2.4, "special
//   conditions for blackwell"; v2.5 adds d_qk 192 with d_v 128 for training), and its
//   FlashAttention backend refuses MLA's unequal query and value head dimensions
//   (pytorch/attention/dot_product_attention/utils.py at v2.3, "does not support MLA"), so that
//   multi-latent attention runs TE's UnfusedDotProductAttention: the batched GEMMs around the
//   fused softmax kernel that syssim's `unfused` backend traces. DGX Cloud Benchmarking v25.05
//   ran the NeMo 25.04.01 container (deepseek_v3/pretraining/launch.sh at dfc8039, FW_VERSION),
//   before Transformer Engine 2.5.
void attention_that_ran(const MeasuredRow& row, const std::string& hardware_path, ModelConfig& model,
                        std::vector<std::string>& assumptions) {
  if (std::string backend = cell(row, "attention_backend"); !backend.empty()) {
    model.attention_backend = backend;
    return;
  }
  auto run = [&](const char* backend, const std::string& why) {
    model.attention_backend = backend;
    assumptions.push_back(std::string("attention_backend=") + backend + " (" + why + ")");
  };
  const std::string preset = std::filesystem::path(hardware_path).stem().string();
  const bool blackwell = starts_with(preset, "b200") || starts_with(preset, "gb200") || starts_with(preset, "b300") ||
                         starts_with(preset, "gb300");
  const int release = dgxc_release(row);
  if (predates_flash_attention(row))
    run("unfused", "the source predates FlashAttention");
  else if (starts_with(lowercase_cell(row, "model"), "mpt"))
    run("triton", "llm-foundry's attn_impl: triton");
  else if (model.multi_latent_attention && blackwell && release > 0 && release <= 2505)
    run("unfused", "Transformer Engine before 2.5 has no fused MLA attention on Blackwell");
}

// NVIDIA's runs that reduce their gradients in bf16, from the configs that launched them.
// DGX Cloud Benchmarking v24.11's NeMo configs set optim.grad_sync_dtype bf16 for every model
// (commit 35a9aec: llama3.1/*.yaml, nemo_megatron/gpt3_175b_hydra.yaml, nemotron/*-synth.yaml,
// grok1/grok1_314b.yaml), as v25.04's Grok-1 config does (741c886, grok1/cfg); from v25.04 the
// dense models run NeMo 2's performance scripts, whose recipes in performance mode set
// grad_reduce_in_fp32 False (pretrain_performance_optimizations, nemo/collections/llm/recipes at
// v2.2.1 and v2.3.0), as the scripts do for every fp8 run (scripts/llm/performance/pretrain_*.py
// at v2.2.1, scripts/performance/utils.py at v2.3.0); v25.05's MoE runs in bf16 take NeMo 2's
// recipes that keep bf16_mixed's fp32 reduction (recipes/deepseek_v3.py at v2.3.0). NeMo 24.07's
// Nemotron-4 340B ran the launcher's nemotron_340b.yaml, grad_sync_dtype bf16 (NeMo-Framework-
// Launcher 7c842fcd). A grad_reduce_in_bf16 cell decides instead.
void nvidia_gradient_reduction(const MeasuredRow& row, const ModelConfig& model, ShardOptions& options,
                               std::vector<std::string>& assumptions) {
  TrainingConfig& t = options.training;
  if (switch_cell(row, "grad_reduce_in_bf16") || t.grad_reduce_in_bf16) return;
  const int release = dgxc_release(row);
  const bool low_precision = t.dtype == "fp8" || t.dtype == "fp4";
  const bool dgxc = release > 0 && !(release >= 2505 && model.is_moe() && !low_precision);
  const bool nemo_launcher = cell(row, "source_id") == "NEMO_2407" && cell(row, "model") == "Nemotron4-340B";
  if (!dgxc && !nemo_launcher) return;
  t.grad_reduce_in_bf16 = true;
  assumptions.push_back("grad_reduce_in_bf16=1");
}

// NeMo 1's runs (NeMo-Framework-Launcher 24.07's training configs: the NEMO_2407 rows; DGX Cloud
// Benchmarking v24.11's NeMo configs but Grok-1's, whose optim.name is mcore_distributed_optim)
// train with Apex's DistributedFusedAdam (optim.name distributed_fused_adam), which NeMo sets up
// by the weights and the optimizer's dtype (nemo/collections/nlp/models/language_modeling/
// megatron_base_model.py at v2.0.0, setup_optimization): fp8 parameters (model.fp8_params) keep
// fp32 master weights; an optim.dtype equal to the bf16 weights' keeps none (store_params false);
// fp32 keeps them as remainders (store_param_remainders). Only Nemotron-4 340B's configs set
// optim.dtype bf16 (launcher 24.07 training/nemotron/nemotron_340b.yaml; dgxc 35a9aec
// nemotron/nemotron4-340b-synth.yaml); DGXC's GPT-3 175B sets fp8_params
// (nemo_megatron/gpt3_175b_hydra.yaml), and the fp8 rows are simulated with fp8 parameters
// (`layout`; their configs leave fp8_params unset, but without fp8 parameters three of the
// NEMO_2407 runs would not have fit in 80 GB).
void nemo1_optimizer(const MeasuredRow& row, ShardOptions& options, std::vector<std::string>& assumptions) {
  const std::string model = cell(row, "model");
  const bool launcher = cell(row, "source_id") == "NEMO_2407";
  const bool dgxc = dgxc_release(row) == 2411 && !starts_with(model, "Grok");
  if (!(launcher || dgxc) || (dgxc && starts_with(model, "GPT3"))) return;
  TrainingConfig& t = options.training;
  if (t.fp8_param_gather) return;
  if (starts_with(model, "Nemotron4-340B")) {
    t.optimizer_state_dtype = OptimizerStateDtype::bf16;
    assumptions.push_back("optimizer_state_dtype=bf16 (NeMo 1's optim.dtype)");
  } else {
    t.store_param_remainders = true;
    assumptions.push_back("store_param_remainders=1 (NeMo 1's DistributedFusedAdam)");
  }
}

// A mixture of experts as the row's notes describe its run: the expert-TP size of a config table
// ("ETP4"; default 1, as NVIDIA's MoE recipes set expert_tensor_parallel_size), token dropping of
// Megatron-Bridge's "tokendrop" variant (apply_moe_token_drop: capacity factor 1.0, inputs padded
// to capacity), multi-token prediction where the model label says "w/ MTP"; the token
// dispatcher of a moe_token_dispatcher_type column (default alltoall, as Megatron's recipes).
void expert_settings(const MeasuredRow& row, ModelConfig& model, ShardOptions& options,
                     std::vector<std::string>& assumptions) {
  if (!model.is_moe()) return;
  const std::string notes = cell(row, "notes");
  std::optional<int64_t> etp = size_cell(row, "etp");
  std::smatch match;
  static const std::regex kExpertTp("\\bETP([0-9]{1,4})\\b");
  if (!etp && std::regex_search(notes, match, kExpertTp)) etp = std::stoll(match[1]);
  options.parallelism.etp = etp.value_or(1);
  if (cell(row, "ep").empty()) assumptions.push_back("ep=1");
  assumptions.push_back("etp=" + std::to_string(*options.parallelism.etp));
  // "token-dropless" is the opposite: the default, dropless routing.
  static const std::regex kTokenDrop("token-?drop(?!less)");
  if (std::regex_search(notes, kTokenDrop)) {
    options.training.moe_expert_capacity_factor = 1.0;
    options.training.moe_pad_expert_input_to_capacity = true;
    assumptions.push_back("moe_expert_capacity_factor=1, padded to capacity");
  }
  if (notes.find("w/ MTP") != std::string::npos) {
    model.mtp_num_layers = 1;
    assumptions.push_back("mtp_num_layers=1");
  }
  if (const std::string dispatcher = cell(row, "moe_token_dispatcher_type"); !dispatcher.empty()) {
    options.training.moe_token_dispatcher_type = dispatcher;
    assumptions.push_back("moe_token_dispatcher_type=" + dispatcher);
  }
}

// FLOPs per step by the formulas the sources report their throughput with, for global batch B,
// sequence s, l layers, hidden h, vocabulary V.
enum class FlopsFormula {
  // Narayanan et al. 2021 eq. 3, with the recomputed forward pass: 96 B s l h^2 (1 + s/6h +
  // V/16lh); Megatron-DeepSpeed's throughput_calculator (megatron/utils.py) for BLOOM is the same.
  kNarayananWithRecompute,
  // Korthikanti et al. 2022 Section 6 model FLOPs (their MFU): 72 B s l h^2 (1 + s/6h + V/12lh).
  kKorthikantiModel,
  // Megatron-LM's num_floating_point_operations (megatron_model_flops).
  kMegatronModel,
};

struct ThroughputConvention {
  FlopsFormula formula;
  std::string formula_name;
  double mfu_peak_tflops;  // the peak the source's MFU divides by
};

// Sources whose throughput figures convert back to a step time (docs/validation.md).
const std::map<std::string, ThroughputConvention> kThroughputConventions = {
    {"NARAYANAN21", {FlopsFormula::kNarayananWithRecompute, "Narayanan et al. 2021 eq. 3", 312}},
    {"BLOOM_176B", {FlopsFormula::kNarayananWithRecompute, "Narayanan et al. 2021 eq. 3", 312}},
    {"KORTHIKANTI22", {FlopsFormula::kKorthikantiModel, "Korthikanti et al. 2022 model FLOPs", 312}},
    // The README's MFU is its TFLOP/s over H100's 989 (465.9 / 989 = 0.471).
    {"MLM_README_H100", {FlopsFormula::kMegatronModel, "Megatron-LM num_floating_point_operations", 989}},
};

double step_flops(FlopsFormula formula, const ModelConfig& m, const ShardOptions& o) {
  const double B = o.training.global_batch, s = static_cast<double>(*o.training.seq_length);
  const double l = m.num_layers, h = m.hidden_size, V = m.vocab_size;
  switch (formula) {
    case FlopsFormula::kNarayananWithRecompute:
      return 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
    case FlopsFormula::kKorthikantiModel:
      return 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
    case FlopsFormula::kMegatronModel:
      return megatron_model_flops(m, o.training.global_batch, *o.training.seq_length, o.parallelism.tp);
  }
  return 0;
}

// A measurement: a positive, finite number, or nothing when the cell is empty.
std::optional<double> measurement_cell(const MeasuredRow& row, const std::string& column) {
  std::optional<double> value = number_cell(row, column);
  if (value && !(*value > 0 && std::isfinite(*value)))
    throw DataError("column '" + column + "': expected a positive number, got '" + cell(row, column) + "'");
  return value;
}

// The measured step time: the row's own, else the global batch's tokens over the GPUs' token
// throughput, else recovered from its TFLOP/s per GPU or its MFU with the source's FLOP
// formula. Sets plan.measured_step_s and plan.measured_from.
void measured_step_time(const MeasuredRow& row, RowPlan& plan) {
  // A run that ran out of memory gave no step time: simulated for its OOM verdict alone, and a
  // measurement beside it is a contradiction, not a sample of the error statistics.
  if (plan.measured_oom) {
    for (const char* column : {"measured_step_s", "measured_tokens_per_s_per_gpu", "measured_tflops_per_gpu", "measured_mfu"})
      if (measurement_cell(row, column))
        throw Unsupported{std::string("measured_oom is 1, but column '") + column +
                          "' holds a measurement: a run that ran out of memory has no step time"};
    plan.measured_from = RowResult::kOutOfMemoryOnly;
    return;
  }
  if (std::optional<double> step = measurement_cell(row, "measured_step_s")) {
    plan.measured_step_s = *step;
    plan.measured_from = "measured_step_s";
    return;
  }
  if (std::optional<double> tokens = measurement_cell(row, "measured_tokens_per_s_per_gpu")) {
    const TrainingConfig& t = plan.options.training;
    plan.measured_step_s = static_cast<double>(t.global_batch) * static_cast<double>(*t.seq_length) /
                           (*tokens * static_cast<double>(*plan.options.gpus));
    plan.measured_from = "measured_tokens_per_s_per_gpu";
    plan.assumptions.push_back("measured_step_s from measured_tokens_per_s_per_gpu (global_batch x seq_length / "
                               "(tokens/s per GPU x num_gpus))");
    return;
  }
  std::optional<double> tflops = measurement_cell(row, "measured_tflops_per_gpu");
  std::optional<double> mfu = measurement_cell(row, "measured_mfu");
  if (!tflops && !mfu) throw Unsupported{"no measured step time"};
  auto convention = kThroughputConventions.find(cell(row, "source_id"));
  if (convention == kThroughputConventions.end())
    throw Unsupported{"no measured step time, and the FLOP formula of source '" + cell(row, "source_id") +
                      "' is not known"};
  const ThroughputConvention& c = convention->second;
  plan.measured_from = tflops ? "measured_tflops_per_gpu" : "measured_mfu";
  double per_gpu_tflops = tflops ? *tflops : *mfu * c.mfu_peak_tflops;
  plan.measured_step_s = step_flops(c.formula, plan.model, plan.options) /
                         (per_gpu_tflops * kTera * static_cast<double>(*plan.options.gpus));
  plan.assumptions.push_back("measured_step_s from " + plan.measured_from + " (" + c.formula_name + ")");
}

// The measured peak memory in GB: the cell, converted from GiB where the row's notes say the
// source printed it in GiB (torchtitan logs PyTorch's reserved memory in GiB).
std::optional<double> measured_peak_memory(const MeasuredRow& row, std::vector<std::string>& assumptions) {
  std::optional<double> memory = measurement_cell(row, "measured_peak_mem_gb");
  if (!memory || cell(row, "notes").find("unit GiB") == std::string::npos) return memory;
  assumptions.push_back("measured_peak_mem_gb in GiB (notes) x 1.073741824");
  return *memory * kBytesPerGiB / kBytesPerGB;
}

}  // namespace

std::string cell(const MeasuredRow& row, const std::string& column) {
  auto found = row.find(column);
  return found == row.end() ? "" : found->second;
}

std::optional<int64_t> int_cell(const MeasuredRow& row, const std::string& column) {
  std::optional<int64_t> value = parsed_cell<int64_t>(
      row, column, "an integer", [](const std::string& text, size_t* used) { return std::stoll(text, used); });
  // No count of a training run comes near; products of two such cells stay within 64 bits.
  if (value && (*value > kMaxCell || *value < -kMaxCell))
    throw DataError("column '" + column + "': expected an integer below 2^30, got '" + cell(row, column) + "'");
  return value;
}

std::optional<double> number_cell(const MeasuredRow& row, const std::string& column) {
  return parsed_cell<double>(row, column, "a number",
                             [](const std::string& text, size_t* used) { return std::stod(text, used); });
}

std::optional<bool> flag_cell(const MeasuredRow& row, const std::string& column) {
  const std::string text = lowercase_cell(row, column);
  if (text.empty()) return std::nullopt;
  // NO_SHARD (PyTorch FSDP's) and DDP name plain data parallelism too.
  for (const char* off : {"0", "no", "false", "off", "none", "no_shard", "ddp"})
    if (text == off) return false;
  return true;
}

std::optional<bool> switch_cell(const MeasuredRow& row, const std::string& column) {
  const std::string text = lowercase_cell(row, column);
  if (text.empty()) return std::nullopt;
  for (const char* on : {"1", "true", "yes", "on"})
    if (text == on) return true;
  for (const char* off : {"0", "false", "no", "off"})
    if (text == off) return false;
  throw DataError("column '" + column + "' is '" + cell(row, column) + "': expected 1 or 0");
}

std::string preset_path(const std::string& chosen, const std::string& hardware_dir) {
  bool is_path = chosen.find('/') != std::string::npos ||
                 (chosen.size() > 5 && chosen.substr(chosen.size() - 5) == ".yaml");
  return is_path ? chosen : hardware_dir + "/" + chosen + ".yaml";
}

RowPlan plan_row(const MeasuredRow& row, const std::string& hardware_dir,
                 const std::map<std::string, std::string>& hardware_map) {
  RowPlan plan;
  try {
    plan.hardware_path = hardware_preset(row, hardware_dir, hardware_map, plan.assumptions);
    plan.options = layout(row, plan.assumptions);
    plan.model = architecture(row, plan.assumptions);
    attention_that_ran(row, plan.hardware_path, plan.model, plan.assumptions);
    expert_settings(row, plan.model, plan.options, plan.assumptions);
    nvidia_gradient_reduction(row, plan.model, plan.options, plan.assumptions);
    nemo1_optimizer(row, plan.options, plan.assumptions);
    torchtitan_model(row, plan.model, plan.assumptions);
    balance_pipeline(row, plan.model, plan.options, plan.assumptions);
    plan.measured_oom = switch_cell(row, "measured_oom").value_or(false);
    measured_step_time(row, plan);
    plan.measured_peak_mem_gb = measured_peak_memory(row, plan.assumptions);
  } catch (const Unsupported& unsupported) {
    plan.skip_reason = unsupported.reason;
  } catch (const std::runtime_error& error) {  // DataError, UsageError: a cell syssim refuses
    plan.skip_reason = error.what();
  }
  return plan;
}

}  // namespace syssim
