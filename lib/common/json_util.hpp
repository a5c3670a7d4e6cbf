// Reading JSON with errors that name the JSON path, e.g.
// "graph: /shard/ops/12/flops: expected a number, got \"x\"".
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "common/error.hpp"

namespace syssim {

using json = nlohmann::json;

// The value at j[key]; throws DataError naming path/key when it is missing.
const json& require(const json& j, const std::string& key, const std::string& path);

// The value at j[key] as T; throws DataError naming the path and the value on a type mismatch.
template <typename T>
T require_as(const json& j, const std::string& key, const std::string& path) {
  const json& v = require(j, key, path);
  try {
    return v.get<T>();
  } catch (const json::exception&) {
    throw DataError("graph: " + path + "/" + key + ": unexpected value " + v.dump());
  }
}

// A value that may be null: null <-> std::nullopt.
template <typename T>
json nullable_to_json(const std::optional<T>& value) {
  return value ? json(*value) : json();
}

template <typename T>
std::optional<T> read_nullable(const json& j, const std::string& key, const std::string& path) {
  if (require(j, key, path).is_null()) return std::nullopt;
  return require_as<T>(j, key, path);
}

}  // namespace syssim
