// The text of command-line flags, as the tools read and report it (tools/common/tool.cpp).
#pragma once
#include <string>

namespace syssim {

// A whole-number flag's text as the user means it: decimal ("064" is 64, where CLI11 reads
// octal) and under 10^18 (where CLI11 clamps); rewritten in place without leading zeros.
// Returns the message for text that is none, "" otherwise.
std::string normalize_whole_number(std::string& text);

// A number flag's text: the message for text that is no finite number, "" otherwise.
std::string finite_number_message(const std::string& text);

// CLI11's message of a parse error, but for a value flag given twice, which it words as a count
// mismatch ("--ep: At Most 1 required but received 2"): "--ep is given 2 times; give it once".
std::string parse_error_text(const std::string& cli11_message);

}  // namespace syssim
