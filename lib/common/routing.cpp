#include "common/routing.hpp"

#include <algorithm>
#include <cmath>

namespace syssim {
namespace {

// The chance that k picks without replacement from `pool` items all miss `held` of them:
// C(pool - held, k) / C(pool, k).
double all_miss(double pool, double held, double k) {
  double chance = 1;
  for (double i = 0; i < k; ++i) chance *= std::max(0.0, (pool - held - i) / (pool - i));
  return chance;
}

// C(n, j) as a double.
double choose(double n, double j) {
  if (j < 0 || j > n) return 0;
  double c = 1;
  for (double i = 0; i < j; ++i) c *= (n - i) / (i + 1);
  return c;
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
  for (double j = 0; j <= std::min(held_groups, picked); ++j)
    miss += choose(held_groups, j) * choose(groups - held_groups, picked - j) / choose(groups, picked) *
            all_miss(pool, j * per_group, routing.topk);
  return 1 - miss;
}

}  // namespace syssim
