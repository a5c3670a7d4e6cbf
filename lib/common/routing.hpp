// Where a mixture-of-experts layer's tokens go: the chance that a share of the experts holds
// one of a token's top-k (docs/parallelism.md, "The flex dispatcher"). The flex dispatcher
// sends a token once to each GPU, and across nodes once to each node, holding one of its
// experts; its traffic follows from these shares.
#pragma once

#include <array>
#include <optional>

#include "common/kernel_shape.hpp"

namespace syssim {

struct Routing {
  double experts = 0;     // num_moe_experts
  double topk = 0;        // moe_router_topk
  double groups = 0;      // moe_router_num_groups (DeepSeek's group-limited routing); 0: none
  double group_topk = 0;  // moe_router_group_topk
};

// The chance that `holding` consecutive experts (a GPU's or a node's) hold at least one of a
// token's top-k, when its experts are uniformly random among those of group_topk of the groups
// picked at random, as Megatron-Core's forced load balancing draws random router scores (with
// no groups: among all experts). A holder lies inside one group or holds whole groups.
double holding_share(const Routing& routing, double holding);

// A flex_all_to_all op's shape holds its routing under these keys (docs/graph-format.md):
// written by the shard stage, read by the network's pricing; none when a key is missing.
constexpr std::array<const char*, 4> kRoutingKeys = {"experts", "topk", "groups", "group_topk"};
KernelShape routing_shape(const Routing& routing);
std::optional<Routing> routing_in(const KernelShape& shape);

}  // namespace syssim
