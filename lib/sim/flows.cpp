#include "sim/flows.hpp"

#include <algorithm>
#include <limits>

namespace syssim::sim_detail {

void fill_rates(RankNetwork& network, std::vector<Flow>& flows) {
  for (LinkState& link : network.links) link.spare = link.capacity, link.unfrozen = 0, link.weight = 0;
  for (size_t f : network.active) {
    flows[f].frozen = false;
    const Phase& phase = (*flows[f].phases)[flows[f].phase];
    for (size_t k = 0; k < phase.links.size(); ++k) {
      LinkState& link = network.links[phase.links[k]];
      ++link.unfrozen;
      link.weight += phase.loads[k];
    }
  }
  // The rate at which a link fills up when all its flows still growing run at that rate.
  auto link_share = [](const LinkState& link) { return std::max(0.0, link.spare) / link.weight; };
  // Relative slack, so that links and caps equal up to rounding freeze in the same round.
  constexpr double kSameLevel = 1 + 1e-12;
  for (size_t left = network.active.size(); left > 0;) {
    double level = std::numeric_limits<double>::infinity();
    for (size_t f : network.active)
      if (!flows[f].frozen) level = std::min(level, flows[f].cap);
    for (const LinkState& link : network.links)
      if (link.unfrozen > 0) level = std::min(level, link_share(link));
    for (LinkState& link : network.links) link.saturated = link.unfrozen > 0 && link_share(link) <= level * kSameLevel;
    for (size_t f : network.active) {
      Flow& flow = flows[f];
      if (flow.frozen) continue;
      const Phase& phase = (*flow.phases)[flow.phase];
      bool bound = flow.cap <= level * kSameLevel || std::any_of(phase.links.begin(), phase.links.end(), [&](int64_t l) {
                     return network.links[l].saturated;
                   });
      if (!bound) continue;
      flow.frozen = true;
      flow.next_rate = std::min(flow.cap, level);
      for (size_t k = 0; k < phase.links.size(); ++k) {
        LinkState& link = network.links[phase.links[k]];
        link.spare -= phase.loads[k] * flow.next_rate;
        link.weight -= phase.loads[k];
        --link.unfrozen;
      }
      --left;
    }
  }
}

}  // namespace syssim::sim_detail
