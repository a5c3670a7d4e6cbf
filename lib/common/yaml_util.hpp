// Strict YAML reading for configs: unknown keys are errors that name the file,
// the key and the nearest valid key; wrong types name the key and the value.
#pragma once
#include <yaml-cpp/yaml.h>

#include <map>
#include <string>
#include <vector>

namespace syssim {

// Loads a YAML file; throws DataError "FILE: ..." when missing or malformed.
YAML::Node load_yaml_file(const std::string& path);
YAML::Node load_yaml_text(const std::string& text, const std::string& name);

// Throws DataError if `node` has a key not in `allowed`, suggesting the nearest one.
// `known_as`: the names other tools give some allowed keys (Megatron-Core's `layernorm_epsilon`
// for `rms_norm_eps`), which an unknown key is pointed to instead of the nearest spelling.
void check_keys(const YAML::Node& node, const std::vector<std::string>& allowed, const std::string& where,
                const std::map<std::string, std::string>& known_as = {});
// check_keys without a list: a mapping whose keys are names, each given once.
void check_names_once(const YAML::Node& node, const std::string& where);

// The key's value as T, or `fallback` when absent; DataError naming where.key and the value otherwise.
template <typename T>
T yaml_get(const YAML::Node& node, const std::string& key, const std::string& where, const T& fallback);
template <typename T>
T yaml_require(const YAML::Node& node, const std::string& key, const std::string& where);

std::string nearest_key(const std::string& key, const std::vector<std::string>& allowed);

// A value as an error names it: a scalar quoted ('x'), a list or mapping on one line.
std::string scalar_text(const YAML::Node& node);

}  // namespace syssim
