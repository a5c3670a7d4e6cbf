// Where a mixture-of-experts layer's tokens go: the chance that a share of the experts holds
// one of a token's top-k (docs/parallelism.md, "The flex dispatcher"). The flex dispatcher
// sends a token once to each GPU, and across nodes once to each node, holding one of its
// experts; its traffic follows from these shares.
#pragma once

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

}  // namespace syssim
