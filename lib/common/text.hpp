// Text shared by messages and reports.
#pragma once
#include <algorithm>
#include <cctype>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"

namespace syssim {

// Whether `text` ends in `suffix` (a file's extension).
inline bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

// `text` without the spaces and tabs at either end.
inline std::string trimmed(std::string_view text) {
  const size_t begin = text.find_first_not_of(" \t"), end = text.find_last_not_of(" \t");
  return begin == std::string_view::npos ? std::string() : std::string(text.substr(begin, end - begin + 1));
}

// A number as a person writes it: 0, 1, 0.5, 1.5.
inline std::string text_of(double value) {
  std::ostringstream text;
  text << value;
  return text.str();
}

// `text` in lower case (ASCII).
inline std::string lowercase(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

// "a, b, c": the items with `separator` between them.
inline std::string join(const std::vector<std::string>& items, const std::string& separator = ", ") {
  std::string text;
  for (const std::string& item : items) text += (text.empty() ? "" : separator) + item;
  return text;
}

// "a, b or c": the choices a message offers.
inline std::string either_of(const std::vector<std::string>& items) {
  std::string text;
  for (size_t i = 0; i < items.size(); ++i) text += (i == 0 ? "" : i + 1 == items.size() ? " or " : ", ") + items[i];
  return text;
}

// `lines` (the header first) as columns `gap` spaces apart, each as wide as its widest cell,
// right-aligned where `right_aligned` says (by column; left where it has no entry); no line
// ends in spaces.
inline std::string aligned_columns(const std::vector<std::vector<std::string>>& lines,
                                   const std::vector<bool>& right_aligned = {}, size_t gap = 2) {
  std::vector<size_t> width;
  for (const auto& line : lines) {
    if (width.size() < line.size()) width.resize(line.size(), 0);
    for (size_t c = 0; c < line.size(); ++c) width[c] = std::max(width[c], line[c].size());
  }
  std::string text;
  for (const auto& line : lines) {
    std::string row;
    for (size_t c = 0; c < line.size(); ++c) {
      const std::string padding(width[c] - line[c].size(), ' ');
      const bool right = c < right_aligned.size() && right_aligned[c];
      row += (c == 0 ? "" : std::string(gap, ' ')) + (right ? padding + line[c] : line[c] + padding);
    }
    text += row.substr(0, row.find_last_not_of(' ') + 1) + "\n";
  }
  return text;
}

inline bool starts_with(std::string_view text, std::string_view prefix) { return text.substr(0, prefix.size()) == prefix; }

// Each line of `text` after `indent`.
inline std::string indented(const std::string& text, const std::string& indent) {
  std::string out;
  for (size_t begin = 0; begin < text.size();) {
    const size_t end = text.find('\n', begin);
    const size_t stop = end == std::string::npos ? text.size() : end + 1;
    out += indent + text.substr(begin, stop - begin);
    begin = stop;
  }
  return out;
}

// The KEY=VALUE assignments of a repeatable flag as a map; UsageError naming the flag and the
// expected `form` for one without a key or a value, and for a key given twice (`same` says
// when two keys are one: equal texts unless told).
inline std::map<std::string, std::string> parse_assignments(
    const std::vector<std::string>& assignments, const std::string& flag, const std::string& form,
    const std::function<bool(const std::string&, const std::string&)>& same = std::equal_to<std::string>()) {
  std::map<std::string, std::string> map;
  for (const std::string& assignment : assignments) {
    size_t equals = assignment.find('=');
    if (equals == std::string::npos || equals == 0 || equals + 1 == assignment.size())
      throw UsageError(flag + "=" + assignment + ": expected " + form);
    const std::string key = assignment.substr(0, equals);
    for (const auto& [given, value] : map)
      if (same(given, key))
        throw UsageError(flag + "=" + assignment + ": " + given + " is given twice; give it once");
    map[key] = assignment.substr(equals + 1);
  }
  return map;
}

}  // namespace syssim
