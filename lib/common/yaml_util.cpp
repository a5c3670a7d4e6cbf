#include "common/yaml_util.hpp"

#include <algorithm>
#include <sstream>
#include <type_traits>
#include <vector>

#include "common/error.hpp"
#include "common/io.hpp"

namespace syssim {
namespace {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string scalar_text(const YAML::Node& node) {
  if (node.IsScalar()) return "'" + node.Scalar() + "'";
  std::ostringstream out;
  out << YAML::Dump(node);
  std::string text = out.str();
  std::replace(text.begin(), text.end(), '\n', ' ');
  return text;
}

std::string nearest_key(const std::string& key, const std::vector<std::string>& allowed) {
  std::string best;
  size_t best_distance = SIZE_MAX;
  for (const auto& candidate : allowed) {
    size_t d = edit_distance(key, candidate);
    if (d < best_distance) best_distance = d, best = candidate;
  }
  return best;
}

YAML::Node load_yaml_text(const std::string& text, const std::string& name) {
  require_utf8(text, name);
  try {
    YAML::Node node = YAML::Load(text);
    if (!node.IsMap()) throw DataError(name + ": expected a mapping at the top level");
    return node;
  } catch (const YAML::Exception& e) {
    throw DataError(name + ": invalid YAML at line " + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
}

YAML::Node load_yaml_file(const std::string& path) { return load_yaml_text(read_input(path), path); }

namespace {

// check_keys, with `allowed` null for any name.
void check_mapping_keys(const YAML::Node& node, const std::vector<std::string>* allowed, const std::string& where,
                        const std::map<std::string, std::string>& known_as) {
  if (!node.IsMap()) throw DataError(where + ": expected a mapping, got " + scalar_text(node));
  std::vector<std::string> seen;
  for (const auto& entry : node) {
    if (!entry.first.IsScalar())  // `? [a, b]: 1`: a key YAML allows and no config has
      throw DataError(where + ": a key that is not a name, at line " + std::to_string(entry.first.Mark().line + 1));
    std::string key = entry.first.as<std::string>();
    if (std::find(seen.begin(), seen.end(), key) != seen.end())
      throw DataError(where + ": key '" + key + "' appears twice");
    seen.push_back(key);
    if (allowed && std::find(allowed->begin(), allowed->end(), key) == allowed->end()) {
      const auto named = known_as.find(key);
      throw DataError(where + ": unknown key '" + key + "' (" +
                      (named != known_as.end() ? "syssim calls it '" + named->second + "'"
                                               : "did you mean '" + nearest_key(key, *allowed) + "'?") +
                      ")");
    }
  }
}

}  // namespace

void check_keys(const YAML::Node& node, const std::vector<std::string>& allowed, const std::string& where,
                const std::map<std::string, std::string>& known_as) {
  check_mapping_keys(node, &allowed, where, known_as);
}

void check_names_once(const YAML::Node& node, const std::string& where) { check_mapping_keys(node, nullptr, where, {}); }

template <typename T>
T yaml_require(const YAML::Node& node, const std::string& key, const std::string& where) {
  YAML::Node value = node[key];
  if (!value || value.IsNull()) throw DataError(where + ": missing required key '" + key + "'");
  // A quoted scalar is text, which yaml-cpp would read as a number or a truth value ("32",
  // "false") as the JSON reader never does.
  if constexpr (std::is_arithmetic_v<T>)
    if (value.IsScalar() && value.Tag() == "!")
      throw DataError(where + ": key '" + key + "' must be " + (std::is_same_v<T, bool> ? "true or false" : "a number") +
                      ", got the quoted text \"" + value.Scalar() + "\"");
  T result;
  try {
    result = value.as<T>();
  } catch (const YAML::Exception&) {
    throw DataError(where + ": key '" + key + "' has invalid value " + scalar_text(value));
  }
  // A text decoded from YAML's escapes may not be UTF-8 although the file is (a fuzz finding:
  // it reached the JSON writer as an internal error).
  auto require_utf8_value = [&](const std::string& text) {
    if (const std::optional<NotUtf8> bad = find_not_utf8(text))
      throw DataError(where + ": key '" + key + "': not UTF-8 text once YAML has read it (byte " +
                      byte_text(bad->byte) + ")");
  };
  if constexpr (std::is_same_v<T, std::string>) require_utf8_value(result);
  if constexpr (std::is_same_v<T, std::vector<std::string>>)
    for (const std::string& text : result) require_utf8_value(text);
  return result;
}

template <typename T>
T yaml_get(const YAML::Node& node, const std::string& key, const std::string& where, const T& fallback) {
  YAML::Node value = node[key];
  if (!value || value.IsNull()) return fallback;
  return yaml_require<T>(node, key, where);
}

template int64_t yaml_require<int64_t>(const YAML::Node&, const std::string&, const std::string&);
template double yaml_require<double>(const YAML::Node&, const std::string&, const std::string&);
template bool yaml_require<bool>(const YAML::Node&, const std::string&, const std::string&);
template std::string yaml_require<std::string>(const YAML::Node&, const std::string&, const std::string&);
template int64_t yaml_get<int64_t>(const YAML::Node&, const std::string&, const std::string&, const int64_t&);
template double yaml_get<double>(const YAML::Node&, const std::string&, const std::string&, const double&);
template bool yaml_get<bool>(const YAML::Node&, const std::string&, const std::string&, const bool&);
template std::string yaml_get<std::string>(const YAML::Node&, const std::string&, const std::string&,
                                           const std::string&);
template std::vector<std::string> yaml_get<std::vector<std::string>>(const YAML::Node&, const std::string&,
                                                                     const std::string&,
                                                                     const std::vector<std::string>&);

}  // namespace syssim
