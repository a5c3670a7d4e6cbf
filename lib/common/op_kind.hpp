// What an op computes, and so how the cost stage prices it (docs/graph-format.md): parsed once
// where a section is read, an enum everywhere after.
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>

namespace syssim {

enum class OpKind : uint8_t { gemm, attention, math, memory, collective, optimizer };

inline const char* to_string(OpKind kind) {
  switch (kind) {
    case OpKind::gemm: return "gemm";
    case OpKind::attention: return "attention";
    case OpKind::math: return "math";
    case OpKind::memory: return "memory";
    case OpKind::collective: return "collective";
    case OpKind::optimizer: return "optimizer";
  }
  return "?";
}

// Its kind, or nullopt for another name.
inline std::optional<OpKind> parse_op_kind(std::string_view name) {
  for (OpKind kind : {OpKind::gemm, OpKind::attention, OpKind::math, OpKind::memory, OpKind::collective,
                      OpKind::optimizer})
    if (name == to_string(kind)) return kind;
  return std::nullopt;
}

// The kinds a traced op has: the others are inserted by the shard stage.
inline bool is_traced_kind(OpKind kind) { return kind <= OpKind::memory; }

}  // namespace syssim
