#include "common/json_util.hpp"

namespace syssim {

const json& require(const json& j, const std::string& key, const std::string& path) {
  if (!j.is_object()) throw DataError("graph: " + path + ": expected an object, got " + j.dump().substr(0, 60));
  auto it = j.find(key);
  if (it == j.end()) throw DataError("graph: " + path + ": missing key '" + key + "'");
  return *it;
}

const json& require_array(const json& j, const std::string& key, const std::string& path) {
  const json& value = require(j, key, path);
  if (!value.is_array()) throw DataError("graph: " + path + "/" + key + ": expected an array, got " + value.dump().substr(0, 60));
  return value;
}

}  // namespace syssim
