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

namespace syssim {

class Symbol {
 public:
  Symbol();
  Symbol(std::string_view text);  // NOLINT: implicit, so that op.kind = "gemm" reads naturally
  Symbol(const std::string& text) : Symbol(std::string_view(text)) {}
  Symbol(const char* text) : Symbol(std::string_view(text)) {}

  const std::string& str() const { return *text_; }
  operator const std::string&() const { return *text_; }  // NOLINT
  const char* c_str() const { return text_->c_str(); }
  bool empty() const { return text_->empty(); }
  size_t size() const { return text_->size(); }
  bool starts_with(std::string_view prefix) const { return std::string_view(*text_).substr(0, prefix.size()) == prefix; }

  friend bool operator==(Symbol a, Symbol b) { return a.text_ == b.text_; }
  friend bool operator!=(Symbol a, Symbol b) { return a.text_ != b.text_; }
  friend bool operator==(Symbol a, std::string_view b) { return *a.text_ == b; }
  friend bool operator!=(Symbol a, std::string_view b) { return *a.text_ != b; }
  // Against a literal (op.stream == "compute", a common test): its length is known at
  // compile time, so this is a length test and a fixed-size compare, inlined.
  template <size_t N>
  friend bool operator==(Symbol a, const char (&literal)[N]) {
    return a.text_->size() == N - 1 && std::memcmp(a.text_->data(), literal, N - 1) == 0;
  }
  template <size_t N>
  friend bool operator!=(Symbol a, const char (&literal)[N]) { return !(a == literal); }
  friend bool operator==(Symbol a, const std::string& b) { return *a.text_ == b; }
  friend bool operator!=(Symbol a, const std::string& b) { return *a.text_ != b; }
  friend bool operator==(std::string_view a, Symbol b) { return b == a; }
  friend bool operator!=(std::string_view a, Symbol b) { return b != a; }
  template <size_t N>
  friend bool operator==(const char (&literal)[N], Symbol b) { return b == literal; }
  template <size_t N>
  friend bool operator!=(const char (&literal)[N], Symbol b) { return b != literal; }
  friend bool operator==(const std::string& a, Symbol b) { return b == a; }
  friend bool operator!=(const std::string& a, Symbol b) { return b != a; }
  // By text, so that maps and sorts keyed by symbols do not depend on the order of interning.
  friend bool operator<(Symbol a, Symbol b) { return a.text_ != b.text_ && *a.text_ < *b.text_; }
  // One value per text, for lookup tables whose order never shows (cheaper to compare).
  uintptr_t identity() const { return reinterpret_cast<uintptr_t>(text_); }

  friend std::string operator+(const std::string& a, Symbol b) { return a + *b.text_; }
  friend std::string operator+(Symbol a, const std::string& b) { return *a.text_ + b; }
  friend std::string operator+(const char* a, Symbol b) { return a + *b.text_; }
  friend std::string operator+(Symbol a, const char* b) { return *a.text_ + b; }
  friend std::ostream& operator<<(std::ostream& out, Symbol s) { return out << *s.text_; }

 private:
  const std::string* text_;
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
