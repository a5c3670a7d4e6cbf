// Reading JSON with errors that name the JSON path, e.g.
// "graph: /shard/ops/12/flops: expected a number, got \"x\"".
#pragma once
#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "common/error.hpp"
#include "common/op_kinds.hpp"
#include "common/text.hpp"

namespace syssim {

using json = nlohmann::json;

// The one line a JSON parser's failure on `text` gives: "SOURCE: truncated JSON: input ends
// after N bytes", "SOURCE: not valid JSON at byte N" or "SOURCE: not valid JSON: number
// overflow parsing '1e400'", never the library's own text.
[[noreturn]] void throw_json_error(const json::exception& error, const std::string& text, const std::string& source);

// DataError "SOURCE: JSON nested deeper than N levels at byte B": the parser and the document's
// destruction recurse, and no syssim document nests beyond a few levels.
void check_json_depth(const std::string& text, const std::string& source);

// The parser's callback refusing an object that names a key twice, which the parser would
// take silently with the last value: DataError "SOURCE: PATH: key 'K' appears twice".
class DuplicateKeyCheck {
 public:
  explicit DuplicateKeyCheck(const std::string& source) : source_(source) {}
  template <typename Event, typename Json>
  bool operator()(int /*depth*/, Event event, Json& parsed) {
    if (event == Event::object_start || event == Event::array_start) {
      levels_.push_back({event == Event::array_start, 0, {}});
    } else if (event == Event::key) {
      Level& object = levels_.back();
      const std::string& key = parsed.template get_ref<const std::string&>();
      if (std::find(object.keys.begin(), object.keys.end(), key) != object.keys.end())
        throw DataError(source_ + ": " + path() + ": key '" + key + "' appears twice");
      object.keys.push_back(key);
    } else {  // a value ends, or an object or array: the next element of an array
      if (event == Event::object_end || event == Event::array_end) levels_.pop_back();
      if (!levels_.empty() && levels_.back().array) ++levels_.back().index;
    }
    return true;
  }

 private:
  struct Level {
    bool array = false;
    size_t index = 0;               // an array's element being read
    std::vector<std::string> keys;  // an object's keys so far, the last being read (few: a linear search)
  };
  // The JSON pointer of the object being read ("/" at the top).
  std::string path() const {
    std::string text;
    for (size_t i = 0; i + 1 < levels_.size(); ++i)
      text += "/" + (levels_[i].array ? std::to_string(levels_[i].index) : levels_[i].keys.back());
    return text.empty() ? "/" : text;
  }
  const std::string& source_;
  std::vector<Level> levels_;
};

// Parses JSON text (json or ordered_json), failures as throw_json_error and DuplicateKeyCheck
// say.
template <typename Json = json>
Json parse_json(const std::string& text, const std::string& source) {
  check_json_depth(text, source);
  try {
    return Json::parse(text, DuplicateKeyCheck(source));
  } catch (const json::exception& error) {
    throw_json_error(error, text, source);
  }
}

// The value at j[key]; throws DataError naming the document (a graph, or a file of another
// kind), path/key when it is missing.
const json& require(const json& j, const std::string& key, const std::string& path,
                    const std::string& document = "graph");

// The array at j[key]; throws DataError naming path/key when it is missing or not an array.
const json& require_array(const json& j, const std::string& key, const std::string& path,
                          const std::string& document = "graph");

// Whether `v` is a whole number in T's range, written with or without a fraction of zeros
// (nlohmann's get truncates a fraction, wraps an unsigned number past the signed range, and
// converts a float out of range undefinedly).
template <typename T>
bool whole_number_fits(const json& v) {
  using Limits = std::numeric_limits<T>;
  if (v.is_number_unsigned()) return v.get<uint64_t>() <= static_cast<uint64_t>(Limits::max());  // 0 and up
  if (v.is_number_integer()) return Limits::is_signed && v.get<int64_t>() >= static_cast<int64_t>(Limits::min());
  if (v.is_number_float()) {  // JSON has one kind of number: 32.0 (Python's 64 / 2) is the whole number 32
    const double d = v.get<double>();
    return d == std::floor(d) && d >= static_cast<double>(Limits::min()) && d < std::ldexp(1.0, Limits::digits);
  }
  return false;
}

template <typename T>
struct IsIntegerVector : std::false_type {};
template <typename T>
struct IsIntegerVector<std::vector<T>> : std::bool_constant<std::is_integral_v<T> && !std::is_same_v<T, bool>> {};

// The value at j[key] as T; throws DataError naming the path and the value on a type mismatch,
// and for an integer T, or a vector of integers, on a value that is not a whole number in the
// integer's range.
template <typename T>
T require_as(const json& j, const std::string& key, const std::string& path, const std::string& document = "graph") {
  const json& v = require(j, key, path, document);
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    if (!whole_number_fits<T>(v))
      throw DataError(document + ": " + path + "/" + key + ": expected a whole number that fits " +
                      std::to_string(sizeof(T) * 8) + " bits, got " + v.dump());
  } else if constexpr (IsIntegerVector<T>::value) {
    using Element = typename T::value_type;
    if (v.is_array())
      for (size_t i = 0; i < v.size(); ++i)
        if (!whole_number_fits<Element>(v[i]))
          throw DataError(document + ": " + path + "/" + key + "/" + std::to_string(i) +
                          ": expected a whole number that fits " + std::to_string(sizeof(Element) * 8) +
                          " bits, got " + v[i].dump());
  }
  try {
    return v.get<T>();
  } catch (const json::exception&) {
    throw DataError(document + ": " + path + "/" + key + ": unexpected value " + v.dump());
  }
}

// Throws DataError "WHERE: expected a number of at least LEAST, got GIVEN" unless `value` (read
// from `given`) is finite and at least `least`: a size, a count of bytes or FLOPs, a time.
inline void check_at_least(double value, double least, const std::string& where, const json& given) {
  if (!std::isfinite(value) || value < least)
    throw DataError(where + ": expected a number of at least " + text_of(least) + ", got " + given.dump());
}

// The id at j[key] of the element at `path`, the list's `position`-th: a graph's tensors, buffers
// and ops are numbered by their place. Throws DataError "graph: PATH/id: expected P, got ID".
inline int64_t require_position_id(const json& j, size_t position, const std::string& path) {
  const int64_t id = require_as<int64_t>(j, "id", path);
  if (id != static_cast<int64_t>(position))
    throw DataError("graph: " + path + "/id: expected " + std::to_string(position) + ", got " + std::to_string(id));
  return id;
}

// The number at j[key], as check_at_least asks.
inline double require_at_least(const json& j, const std::string& key, const std::string& path, double least,
                               const std::string& document = "graph") {
  const double value = require_as<double>(j, key, path, document);
  check_at_least(value, least, document + ": " + path + "/" + key, j.at(key));
  return value;
}

// The list of numbers at j[key], each as check_at_least asks.
inline std::vector<double> require_all_at_least(const json& j, const std::string& key, const std::string& path,
                                                double least, const std::string& document = "graph") {
  const std::vector<double> values = require_as<std::vector<double>>(j, key, path, document);
  for (size_t i = 0; i < values.size(); ++i)
    check_at_least(values[i], least, document + ": " + path + "/" + key + "/" + std::to_string(i), j.at(key)[i]);
  return values;
}

// The value at j[key] as one of `accepted` (default: every value of Enum), named as the graph
// format writes it; throws DataError naming path/key, the choices and the value otherwise.
template <typename Enum>
Enum require_enum(const json& j, const std::string& key, const std::string& path, std::vector<Enum> accepted = {}) {
  if (accepted.empty())
    for (size_t i = 0; i < EnumNames<Enum>::kNames.size(); ++i) accepted.push_back(static_cast<Enum>(i));
  const std::string name = require_as<std::string>(j, key, path);
  const std::optional<Enum> value = parse_enum<Enum>(name);
  if (value && std::find(accepted.begin(), accepted.end(), *value) != accepted.end()) return *value;
  throw DataError("graph: " + path + "/" + key + ": expected " + either_of(names_of(accepted)) + ", got \"" + name + "\"");
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
