// The dimensions of the kernel an op runs, by name (docs/graph-format.md: gemm m, n, k;
// attention b, s_q, s_kv, heads, kv_heads, head_dim, causal; others rows, dim). A few named
// values kept in name order in one flat list: every shard pass copies every op, and a copy
// is then one allocation instead of one per dimension. On disk, a JSON object.
#pragma once
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace syssim {

class KernelShape {
 public:
  using value_type = std::pair<std::string, double>;
  using const_iterator = std::vector<value_type>::const_iterator;

  KernelShape() = default;
  KernelShape(std::initializer_list<value_type> dims) {
    for (const auto& [name, value] : dims) (*this)[name] = value;
  }

  bool empty() const { return dims_.empty(); }
  size_t size() const { return dims_.size(); }
  const_iterator begin() const { return dims_.begin(); }
  const_iterator end() const { return dims_.end(); }
  const_iterator find(std::string_view name) const {
    auto it = lower_bound(name);
    return it != dims_.end() && it->first == name ? it : dims_.end();
  }
  size_t count(std::string_view name) const { return find(name) != end() ? 1 : 0; }
  // The value of `name`; std::out_of_range without it, as std::map::at.
  double at(std::string_view name) const;
  // The value of `name`, made 0 first when it is not there.
  double& operator[](std::string_view name);
  bool operator==(const KernelShape& other) const { return dims_ == other.dims_; }
  bool operator<(const KernelShape& other) const { return dims_ < other.dims_; }

 private:
  std::vector<value_type>::const_iterator lower_bound(std::string_view name) const;
  std::vector<value_type> dims_;  // by name
};

template <typename Json>
void to_json(Json& j, const KernelShape& shape) {
  j = Json::object();
  for (const auto& [name, value] : shape) j[name] = value;
}

template <typename Json>
void from_json(const Json& j, KernelShape& shape) {
  if (!j.is_object()) (void)j.template get<std::map<std::string, double>>();  // nlohmann's type_error
  shape = KernelShape();
  for (const auto& dim : j.items()) shape[dim.key()] = dim.value().template get<double>();
}

}  // namespace syssim
