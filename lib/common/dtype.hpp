// The element types of the graph's tensors (docs/graph-format.md, "trace").
#pragma once
#include <optional>
#include <string>

namespace syssim {

// The bytes of one element of `dtype`; nullopt: not an element type the graph knows.
inline std::optional<double> element_bytes(const std::string& dtype) {
  if (dtype == "bf16" || dtype == "fp16") return 2;
  if (dtype == "fp32") return 4;
  if (dtype == "i64") return 8;
  if (dtype == "bool" || dtype == "fp8") return 1;
  if (dtype == "fp4") return 0.5;
  return std::nullopt;
}

}  // namespace syssim
