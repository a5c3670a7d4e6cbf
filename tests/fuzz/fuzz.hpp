// What every fuzz target shares: the input as text, and the rule that bad input may only end
// in syssim's own errors (DataError, UsageError), one line each. Anything else escaping, a
// crash, a hang or a sanitizer report is a finding.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/error.hpp"

namespace syssim::fuzz {

inline std::string text_of(const uint8_t* data, size_t size) { return std::string(reinterpret_cast<const char*>(data), size); }

// Runs `read` on the input; syssim's errors for bad input are expected outcomes.
template <typename Read>
int accept_errors(Read read) {
  try {
    read();
  } catch (const DataError&) {
  } catch (const UsageError&) {
  }
  return 0;
}

}  // namespace syssim::fuzz
