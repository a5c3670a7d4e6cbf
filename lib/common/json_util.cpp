#include "common/json_util.hpp"

namespace syssim {

const json& require(const json& j, const std::string& key, const std::string& path) {
  if (!j.is_object()) throw DataError("graph: " + path + ": expected an object, got " + j.dump().substr(0, 60));
  auto it = j.find(key);
  if (it == j.end()) throw DataError("graph: " + path + ": missing key '" + key + "'");
  return *it;
}

}  // namespace syssim
