// api.md's Hugging Face model source: a model YAML `huggingface: org/name` (with optional
// `overrides:`) resolved from the model's config.json without network access
// (docs/configs.md, "Hugging Face models").
#pragma once
#include <yaml-cpp/yaml.h>

#include <nlohmann/json.hpp>
#include <map>
#include <string>
#include <vector>

namespace syssim {

// The config.json of `id`: an existing file or folder (relative to base_dir), then the Hugging
// Face cache, then the files shipped in configs/hf. Throws DataError listing where it looked;
// `where` names the model YAML in errors.
std::string find_huggingface_config(const std::string& id, const std::string& base_dir, const std::string& where);

// A syssim graph given where a model goes (syssim-trace GRAPH): is_syssim_graph tells a parsed
// JSON file, refuse_graph_as_model says so, naming `where`.
bool is_syssim_graph(const nlohmann::json& file);
[[noreturn]] void refuse_graph_as_model(const std::string& where);

// The model keys (Megatron names, as in a model YAML) of a parsed config.json; `where` names the
// model YAML, the id and the file in errors. seq_length is not among them (config.json does not
// hold it); it decides whether sliding-window attention differs from full attention: mapped
// (Mixtral, GPT-OSS) or refused (the other architectures) when the sequence is longer than the window.
// `window_given`: the model's overrides give window_size, which then replaces the config's.
YAML::Node map_huggingface_config(const nlohmann::json& config, int64_t seq_length, const std::string& where,
                                  bool window_given = false);

// The model YAML `model` (keys name, huggingface, overrides) turned into the model keys of the
// resolved config.json with the overrides applied. `model_keys` are the keys a model YAML
// accepts; overrides may set any of them but huggingface and overrides (model_keys_known_as:
// the hint for a key given by another name). Relative paths are taken from the folder of
// `where` (the YAML's path).
// names_out, when given, receives the config.json keys behind the model keys that the file
// names otherwise (num_key_value_heads for num_query_groups), the overrides' keys left out.
using ConfigKeyNames = std::map<std::string, std::string>;  // model key -> config.json key
YAML::Node huggingface_model_node(const YAML::Node& model, const std::vector<std::string>& model_keys,
                                  const std::map<std::string, std::string>& model_keys_known_as,
                                  const std::string& where, ConfigKeyNames* names_out = nullptr);

// An error found in the mapped model keys, with the config.json's names of the keys it names
// (" (config.json's keys: num_key_value_heads for num_query_groups)"); unchanged when it names none.
std::string with_config_key_names(const std::string& message, const ConfigKeyNames& names);

}  // namespace syssim
