#include "common/expr.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <sstream>

#include "common/error.hpp"

namespace syssim {
namespace {

std::string monomial_key(const Monomial& m) {
  std::string key;
  for (const auto& [axis, exp] : m.exponents) key += axis + "^" + std::to_string(exp) + "*";
  return key;
}

std::string format_number(double c) {
  if (c == std::floor(c) && std::fabs(c) < 9.0e15) return std::to_string(static_cast<long long>(c));
  std::ostringstream out;
  out.precision(17);
  out << c;
  return out.str();
}

// Merges like terms and drops zero ones, in the canonical order (by monomial_key).
void normalize(std::vector<Monomial>& terms) {
  if (terms.size() <= 1) {  // most dims and counts are one product: nothing to merge or sort
    if (!terms.empty() && terms.front().coefficient == 0) terms.clear();
    return;
  }
  std::map<std::string, Monomial> merged;
  for (const auto& t : terms) {
    auto [it, inserted] = merged.emplace(monomial_key(t), t);
    if (!inserted) it->second.coefficient += t.coefficient;
  }
  terms.clear();
  for (auto& [key, m] : merged)
    if (m.coefficient != 0) terms.push_back(m);
}

}  // namespace

void Monomial::multiply_axis(const std::string& axis, int exponent) {
  auto it = std::lower_bound(exponents.begin(), exponents.end(), axis,
                             [](const std::pair<std::string, int>& e, const std::string& name) { return e.first < name; });
  if (it == exponents.end() || it->first != axis) {
    if (exponent != 0) exponents.insert(it, {axis, exponent});
  } else if ((it->second += exponent) == 0) {
    exponents.erase(it);
  }
}

Poly::Poly(std::vector<Monomial> made) {
  normalize(made);
  if (!made.empty()) terms_ = std::make_shared<const std::vector<Monomial>>(std::move(made));
}

Poly Poly::constant(double c) { return Poly(std::vector<Monomial>{Monomial{c, {}}}); }

Poly Poly::axis(const std::string& name) { return Poly(std::vector<Monomial>{Monomial{1, {{name, 1}}}}); }

Poly Poly::operator+(const Poly& other) const {
  std::vector<Monomial> sum = terms();
  sum.insert(sum.end(), other.terms().begin(), other.terms().end());
  return Poly(std::move(sum));
}

Poly Poly::operator*(const Poly& other) const {
  std::vector<Monomial> product;
  for (const auto& a : terms())
    for (const auto& b : other.terms()) {
      Monomial m{a.coefficient * b.coefficient, a.exponents};
      for (const auto& [axis, exp] : b.exponents) m.multiply_axis(axis, exp);
      product.push_back(m);
    }
  return Poly(std::move(product));
}

Poly Poly::operator*(double c) const { return *this * Poly::constant(c); }

double Poly::evaluate(const AxisValues& values, const std::string& where) const {
  double total = 0;
  for (const auto& t : terms()) {
    double v = t.coefficient;
    for (const auto& [axis, exp] : t.exponents) {
      auto it = values.find(axis);
      if (it == values.end())
        throw DataError(where + ": axis '" + axis + "' has no value");
      // Exponents 1 and 2 as products (exactly pow's correctly rounded values): most of a
      // shard stage's evaluations, and pow is slow.
      const double x = it->second;
      v *= exp == 1 ? x : exp == 2 ? x * x : std::pow(x, exp);
    }
    total += v;
  }
  if (!std::isfinite(total)) throw DataError(where + ": axis expression '" + to_string() + "' overflows");
  return total;
}

bool Poly::contains_axis(std::string_view name) const {
  return std::any_of(terms().begin(), terms().end(),
                     [&](const Monomial& m) {
                       return std::any_of(m.exponents.begin(), m.exponents.end(),
                                          [&](const std::pair<std::string, int>& e) { return e.first == name; });
                     });
}

std::string Poly::to_string() const {
  if (terms().empty()) return "0";
  std::string out;
  for (const auto& t : terms()) {
    if (!out.empty()) out += " + ";
    std::string term;
    if (t.coefficient != 1 || t.exponents.empty()) term = format_number(t.coefficient);
    for (const auto& [axis, exp] : t.exponents) {
      if (!term.empty()) term += "*";
      term += axis;
      if (exp != 1) term += "^" + std::to_string(exp);
    }
    out += term;
  }
  return out;
}

// Traced expressions use squares (attention's s^2); a volume of many dims multiplies more.
constexpr int kMaxExponent = 16;

Poly Poly::parse(const std::string& text, const std::string& where) {
  auto fail = [&](const std::string& why) -> DataError {
    return DataError(where + ": bad axis expression '" + text + "': " + why);
  };
  std::vector<Monomial> sum;
  size_t i = 0;
  auto skip_space = [&] {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  };
  auto read_int = [&]() -> double {
    size_t start = i;
    while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.' ||
                               text[i] == 'e' || text[i] == 'E' ||
                               ((text[i] == '+' || text[i] == '-') && i > start &&
                                (text[i - 1] == 'e' || text[i - 1] == 'E'))))
      ++i;
    try {
      return std::stod(text.substr(start, i - start));
    } catch (const std::exception&) {
      throw fail("expected a number at position " + std::to_string(start));
    }
  };
  skip_space();
  if (text.empty()) throw fail("empty");
  if (text == "0") return Poly();
  // Most dims are one axis name: no monomial to assemble.
  if (std::isalpha(static_cast<unsigned char>(text[0])) &&
      std::all_of(text.begin(), text.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }))
    return axis(text);
  while (true) {
    Monomial m;
    while (true) {
      skip_space();
      if (i >= text.size()) throw fail("unexpected end");
      if (std::isdigit(static_cast<unsigned char>(text[i]))) {
        m.coefficient *= read_int();
      } else if (std::isalpha(static_cast<unsigned char>(text[i]))) {
        size_t start = i;
        while (i < text.size() && (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '_')) ++i;
        std::string axis = text.substr(start, i - start);
        int exp = 1;
        skip_space();
        if (i < text.size() && text[i] == '^') {
          ++i;
          skip_space();
          const size_t at = i;
          const double value = read_int();
          // Whole and small: a larger one overflowed int (to 0 FLOPs) or any axis value.
          if (!(value >= 1 && value <= kMaxExponent) || value != std::floor(value))
            throw fail("exponent at position " + std::to_string(at) + " must be a whole number from 1 to " +
                       std::to_string(kMaxExponent));
          exp = static_cast<int>(value);
        }
        m.multiply_axis(axis, exp);
      } else {
        throw fail(std::string("unexpected '") + text[i] + "'");
      }
      skip_space();
      if (i < text.size() && text[i] == '*') {
        ++i;
        continue;
      }
      break;
    }
    sum.push_back(m);
    if (i >= text.size()) break;
    if (text[i] != '+') throw fail(std::string("unexpected '") + text[i] + "'");
    ++i;
  }
  return Poly(std::move(sum));
}

Poly numel(const Dims& dims) {
  Poly p = Poly::constant(1);
  for (const auto& d : dims) p = p * d;
  return p;
}

double numel_at(const Dims& dims, const AxisValues& values, const std::string& where) {
  double elements = 1;
  for (const auto& d : dims) elements *= d.evaluate(values, where);
  return elements;
}

uint32_t letter_axes(const Dims& dims) {
  uint32_t axes = 0;
  for (const Poly& d : dims)
    for (const Monomial& m : d.terms())
      for (const auto& [axis, exp] : m.exponents)
        if (axis.size() == 1 && axis[0] >= 'a' && axis[0] <= 'z') axes |= letter_axis(axis[0]);
  return axes;
}

std::vector<std::string> dims_to_strings(const Dims& dims) {
  std::vector<std::string> out;
  for (const auto& d : dims) out.push_back(d.to_string());
  return out;
}

Dims dims_from_strings(const std::vector<std::string>& text, const std::string& where) {
  Dims dims;
  for (size_t i = 0; i < text.size(); ++i)
    dims.push_back(Poly::parse(text[i], where + "[" + std::to_string(i) + "]"));
  return dims;
}

}  // namespace syssim
