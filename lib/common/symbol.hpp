// An interned string: the names, kinds, passes and streams that every op of a graph carries.
// A shard stage rebuilds its op list in every pass, and copying ten std::strings per op was a
// large part of its time; a Symbol is a pointer into one table of the distinct texts, so it
// copies and compares by pointer. The table only grows (a few thousand texts per model) and
// is shared by all threads.
#pragma once
#include <cstdint>
#include <cstring>
#include <functional>
#include <ostream>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/module_path.hpp"
#include "common/op_kinds.hpp"

namespace syssim {

class Symbol {
 public:
  Symbol();
  Symbol(std::string_view text);  // NOLINT: implicit, so that op.kind = "gemm" reads naturally
  Symbol(const std::string& text) : Symbol(std::string_view(text)) {}
  Symbol(const char* text) : Symbol(std::string_view(text)) {}

  const std::string& str() const { return entry_->text; }
  operator const std::string&() const { return entry_->text; }  // NOLINT
  const char* c_str() const { return entry_->text.c_str(); }
  bool empty() const { return entry_->text.empty(); }
  size_t size() const { return entry_->text.size(); }
  bool starts_with(std::string_view prefix) const { return std::string_view(entry_->text).substr(0, prefix.size()) == prefix; }
  // The op the text names where a stage treats it apart (common/op_kinds.hpp), else
  // NamedOp::other: found once, when the text is first interned.
  NamedOp named_op() const { return entry_->named_op; }
  // What the text says read as a module path (common/module_path.hpp), likewise found once.
  const ModulePath& module_path() const { return entry_->module_path; }

  friend bool operator==(Symbol a, Symbol b) { return a.entry_ == b.entry_; }
  friend bool operator!=(Symbol a, Symbol b) { return a.entry_ != b.entry_; }
  friend bool operator==(Symbol a, std::string_view b) { return a.entry_->text == b; }
  friend bool operator!=(Symbol a, std::string_view b) { return a.entry_->text != b; }
  // Against a literal (op.dtype == "fp8", a common test): its length is known at
  // compile time, so this is a length test and a fixed-size compare, inlined.
  template <size_t N>
  friend bool operator==(Symbol a, const char (&literal)[N]) {
    return a.entry_->text.size() == N - 1 && std::memcmp(a.entry_->text.data(), literal, N - 1) == 0;
  }
  template <size_t N>
  friend bool operator!=(Symbol a, const char (&literal)[N]) { return !(a == literal); }
  friend bool operator==(Symbol a, const std::string& b) { return a.entry_->text == b; }
  friend bool operator!=(Symbol a, const std::string& b) { return a.entry_->text != b; }
  friend bool operator==(std::string_view a, Symbol b) { return b == a; }
  friend bool operator!=(std::string_view a, Symbol b) { return b != a; }
  template <size_t N>
  friend bool operator==(const char (&literal)[N], Symbol b) { return b == literal; }
  template <size_t N>
  friend bool operator!=(const char (&literal)[N], Symbol b) { return b != literal; }
  friend bool operator==(const std::string& a, Symbol b) { return b == a; }
  friend bool operator!=(const std::string& a, Symbol b) { return b != a; }
  // By text, so that maps and sorts keyed by symbols do not depend on the order of interning.
  friend bool operator<(Symbol a, Symbol b) { return a.entry_ != b.entry_ && a.entry_->text < b.entry_->text; }
  // One value per text, for lookup tables whose order never shows (cheaper to compare).
  uintptr_t identity() const { return reinterpret_cast<uintptr_t>(entry_); }

  friend std::string operator+(const std::string& a, Symbol b) { return a + b.entry_->text; }
  friend std::string operator+(Symbol a, const std::string& b) { return a.entry_->text + b; }
  friend std::string operator+(const char* a, Symbol b) { return a + b.entry_->text; }
  friend std::string operator+(Symbol a, const char* b) { return a.entry_->text + b; }
  friend std::ostream& operator<<(std::ostream& out, Symbol s) { return out << s.entry_->text; }

  // The text with each dot-separated part of only digits read as '*' (a module path of any
  // layer: "decoder.layers.*.mlp"), found once, when the text is first interned.
  const std::string& any_layer() const { return entry_->any_layer.empty() ? entry_->text : entry_->any_layer; }

  // One interned text.
  struct Entry {
    std::string text;
    NamedOp named_op;
    ModulePath module_path;
    std::string any_layer;  // empty where it is the text
  };

 private:
  const Entry* entry_;
};

// As JSON strings, in json and ordered_json alike.
template <typename Json>
void to_json(Json& j, Symbol s) { j = s.str(); }
template <typename Json>
void from_json(const Json& j, Symbol& s) { s = Symbol(j.template get<std::string>()); }

}  // namespace syssim

template <>
struct std::hash<syssim::Symbol> {
  size_t operator()(syssim::Symbol s) const { return std::hash<std::string>()(s.str()); }
};
