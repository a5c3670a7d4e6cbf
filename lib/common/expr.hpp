// Axis expressions: tensor dimensions, FLOPs and bytes written as polynomials
// over named model axes (b, s, h, g, r, d, f, v, p), e.g. "2*s*b*g*r*d*h".
// A trace stores them symbolically; syssim-shard evaluates them with the axis
// values of one rank, so splitting an axis recomputes shapes exactly.
#pragma once
#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace syssim {

// Orders axis names as std::string does (byte by byte) in an inlined loop instead of a call
// to memcmp: the names are a few letters, and a shard stage looks up every dimension of every
// op.
struct AxisNameLess {
  using is_transparent = void;
  bool operator()(std::string_view a, std::string_view b) const {
    const size_t common = std::min(a.size(), b.size());
    for (size_t i = 0; i < common; ++i)
      if (a[i] != b[i]) return static_cast<unsigned char>(a[i]) < static_cast<unsigned char>(b[i]);
    return a.size() < b.size();
  }
};

using AxisValues = std::map<std::string, double, AxisNameLess>;

// A product coefficient * prod(axis^exponent).
struct Monomial {
  double coefficient = 1;
  // Sorted by axis name, no zero exponents. A flat vector, not a map: a graph holds hundreds
  // of thousands of these, and axis names fit in a string without an allocation.
  std::vector<std::pair<std::string, int>> exponents;

  void multiply_axis(const std::string& axis, int exponent);
};

// A sum of monomials; the empty polynomial is zero.
class Poly {
 public:
  Poly() = default;
  static Poly constant(double c);
  static Poly axis(const std::string& name);
  // Parses "2*s*b*h + s^2*b"; throws DataError naming `where` on bad text.
  static Poly parse(const std::string& text, const std::string& where);

  Poly operator+(const Poly& other) const;
  Poly operator*(const Poly& other) const;
  Poly operator*(double c) const;

  // Throws DataError naming `where` if an axis has no value.
  double evaluate(const AxisValues& values, const std::string& where) const;
  bool contains_axis(std::string_view name) const;
  std::string to_string() const;  // canonical text: sorted, deterministic
  const std::vector<Monomial>& terms() const {
    if (terms_) return *terms_;
    static const std::vector<Monomial> kZero;
    return kZero;
  }

 private:
  explicit Poly(std::vector<Monomial> made);  // merged and sorted
  // The terms never change once made, so copies share them: every stage copies the dims of
  // the ops it reads, and a copy is then a count, not an allocation per term. Null: zero.
  std::shared_ptr<const std::vector<Monomial>> terms_;
};

// A tensor shape: one Poly per dimension.
using Dims = std::vector<Poly>;
Poly numel(const Dims& dims);
// numel(dims).evaluate(values, where) without building the product: the dims' values
// multiplied (the same number wherever the products are exact, as element counts are).
double numel_at(const Dims& dims, const AxisValues& values, const std::string& where);
// The axes of one lowercase letter that `dims` use, as a set: bit c - 'a' for axis c (one pass
// where asking for each axis apart scanned the dims again).
uint32_t letter_axes(const Dims& dims);
constexpr uint32_t letter_axis(char c) { return uint32_t{1} << (c - 'a'); }
std::vector<std::string> dims_to_strings(const Dims& dims);
Dims dims_from_strings(const std::vector<std::string>& text, const std::string& where);

}  // namespace syssim
