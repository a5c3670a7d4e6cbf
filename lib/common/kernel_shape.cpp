#include "common/kernel_shape.hpp"

#include <algorithm>
#include <stdexcept>

namespace syssim {

std::vector<KernelShape::value_type>::const_iterator KernelShape::lower_bound(std::string_view name) const {
  return std::lower_bound(dims_.begin(), dims_.end(), name,
                          [](const value_type& dim, std::string_view key) { return dim.first < key; });
}

double KernelShape::at(std::string_view name) const {
  auto it = find(name);
  if (it == end()) throw std::out_of_range("kernel shape: no dim '" + std::string(name) + "'");
  return it->second;
}

double& KernelShape::operator[](std::string_view name) {
  auto at = dims_.begin() + (lower_bound(name) - dims_.cbegin());
  if (at == dims_.end() || at->first != name) at = dims_.insert(at, value_type(std::string(name), 0.0));
  return at->second;
}

}  // namespace syssim
