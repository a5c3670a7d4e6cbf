#include "common/routing.hpp"

#include <algorithm>
#include <cmath>

namespace syssim {
namespace {

// ln C(n, j), for 0 <= j <= n.
double log_choose(double n, double j) { return std::lgamma(n + 1) - std::lgamma(j + 1) - std::lgamma(n - j + 1); }

// The chance that k picks without replacement from `pool` items all miss `held` of them:
// C(pool - held, k) / C(pool, k).
double all_miss(double pool, double held, double k) {
  if (pool - held < k) return 0;
  return std::exp(log_choose(pool - held, k) - log_choose(pool, k));
}

}  // namespace

double holding_share(const Routing& routing, double holding) {
  const bool grouped = routing.groups > 0;
  const double groups = grouped ? routing.groups : 1, picked = grouped ? routing.group_topk : 1;
  const double per_group = routing.experts / groups, pool = picked * per_group;
  if (holding <= per_group)  // inside one group: its group picked, then one of its experts
    return picked / groups * (1 - all_miss(pool, holding, routing.topk));
  // Whole groups: j of them picked (hypergeometric), then the k experts all outside their j.
  const double held_groups = std::round(holding / per_group);
  double miss = 0;
  for (double j = std::max(0.0, picked - (groups - held_groups)); j <= std::min(held_groups, picked); ++j)
    miss += std::exp(log_choose(held_groups, j) + log_choose(groups - held_groups, picked - j) - log_choose(groups, picked)) *
            all_miss(pool, j * per_group, routing.topk);
  return 1 - miss;
}

KernelShape routing_shape(const Routing& routing) {
  const auto& [experts, topk, groups, group_topk] = kRoutingKeys;
  return {{experts, routing.experts}, {topk, routing.topk}, {groups, routing.groups}, {group_topk, routing.group_topk}};
}

std::optional<Routing> routing_in(const KernelShape& shape) {
  for (const char* key : kRoutingKeys)
    if (!shape.count(key)) return std::nullopt;
  const auto& [experts, topk, groups, group_topk] = kRoutingKeys;
  return Routing{shape.at(experts), shape.at(topk), shape.at(groups), shape.at(group_topk)};
}

}  // namespace syssim
