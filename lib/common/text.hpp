// Text shared by messages and reports.
#pragma once
#include <string>
#include <vector>

namespace syssim {

// "a, b, c": the items with `separator` between them.
inline std::string join(const std::vector<std::string>& items, const std::string& separator = ", ") {
  std::string text;
  for (const std::string& item : items) text += (text.empty() ? "" : separator) + item;
  return text;
}

}  // namespace syssim
