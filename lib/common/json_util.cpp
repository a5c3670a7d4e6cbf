#include "common/json_util.hpp"

namespace syssim {

void check_json_depth(const std::string& text, const std::string& source) {
  constexpr int kMostLevels = 10000;
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;  // the escaped character
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMostLevels)
        throw DataError(source + ": JSON nested deeper than " + std::to_string(kMostLevels) + " levels at byte " +
                        std::to_string(i));
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
}

void throw_json_error(const json::exception& error, const std::string& text, const std::string& source) {
  if (const auto* parse = dynamic_cast<const json::parse_error*>(&error)) {
    if (parse->byte > text.size())
      throw DataError(source + ": truncated JSON: input ends after " + std::to_string(text.size()) + " bytes");
    throw DataError(source + ": not valid JSON at byte " + std::to_string(parse->byte));
  }
  const std::string what = error.what();  // "[json.exception.out_of_range.406] number overflow parsing '1e400'"
  const size_t cut = what.find("] ");
  std::string reason = cut == std::string::npos ? what : what.substr(cut + 2);
  constexpr size_t kLongest = 80;  // a number of 400 digits is named by its start
  if (reason.size() > kLongest) reason = reason.substr(0, kLongest) + "...'";
  throw DataError(source + ": not valid JSON: " + reason);
}
namespace {

// "DOCUMENT: PATH" where an error is, the path left out at the document's top.
std::string place(const std::string& document, const std::string& path) {
  return path.empty() ? document : document + ": " + path;
}

}  // namespace

const json& require(const json& j, const std::string& key, const std::string& path, const std::string& document) {
  if (!j.is_object()) throw DataError(place(document, path) + ": expected an object, got " + j.dump().substr(0, 60));
  auto it = j.find(key);
  if (it == j.end()) throw DataError(place(document, path) + ": missing key '" + key + "'");
  return *it;
}

const json& require_array(const json& j, const std::string& key, const std::string& path, const std::string& document) {
  const json& value = require(j, key, path, document);
  if (!value.is_array())
    throw DataError(document + ": " + path + "/" + key + ": expected an array, got " + value.dump().substr(0, 60));
  return value;
}

}  // namespace syssim
