#include "common/flag_text.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <regex>

namespace syssim {

std::string normalize_whole_number(std::string& text) {
  const size_t sign = !text.empty() && (text[0] == '-' || text[0] == '+') ? 1 : 0;
  std::string digits = text.substr(sign);
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos)
    return "expected a whole number, got '" + text + "'";
  digits.erase(0, std::min(digits.find_first_not_of('0'), digits.size() - 1));
  if (digits.size() > 18) return "expected a whole number under 10^18, got '" + text + "'";
  text = (text[0] == '-' ? "-" : "") + digits;
  return "";
}

std::string finite_number_message(const std::string& text) {
  // As CLI11 reads a number: strtod over the whole text.
  char* end = nullptr;
  const double value = text.empty() ? 0 : std::strtod(text.c_str(), &end);
  const bool read = !text.empty() && end == text.c_str() + text.size();
  return read && std::isfinite(value) ? "" : "expected a number, got '" + text + "'";
}

std::string parse_error_text(const std::string& cli11_message) {
  static const std::regex repeated(R"(^(\S+): At Most 1 required but received (\d+)$)");
  std::smatch match;
  if (std::regex_match(cli11_message, match, repeated))
    return match[1].str() + " is given " + match[2].str() + " times; give it once";
  return cli11_message;
}

}  // namespace syssim
