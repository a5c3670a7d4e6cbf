// Reading JSON with errors that name the JSON path, e.g.
// "graph: /shard/ops/12/flops: expected a number, got \"x\"".
#pragma once
#include <nlohmann/json.hpp>
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

template <typename T>
T optional_as(const json& j, const std::string& key, const std::string& path, T fallback) {
  if (!j.is_object() || !j.contains(key) || j.at(key).is_null()) return fallback;
  return require_as<T>(j, key, path);
}

}  // namespace syssim
