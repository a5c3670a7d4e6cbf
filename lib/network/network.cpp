#include "network/network.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "common/error.hpp"
#include "common/routing.hpp"
#include "common/units.hpp"

namespace syssim {
namespace {


std::string describe(const GroupPlacement& group) {
  return "a group of " + std::to_string(group.size) + " ranks" +
         (group.nodes > 1 ? " over " + std::to_string(group.nodes) + " nodes" : " in one node");
}

// The levels of the hardware's network, innermost first: `topology.levels`, or level 0 and
// api.md's shorthand inter_node_bandwidth_GBps / inter_node_latency_us as one scale-out level
// spanning the whole cluster (size 0), at the bandwidth given. Nodes of one GPU need no level
// 0 (docs/configs.md): a node's own "level" then carries nothing, as no two ranks share a node.
std::vector<TopologyLevel> network_levels(const HardwareConfig& hw) {
  std::vector<TopologyLevel> levels = hw.topology;
  if (levels.empty() && hw.gpus_per_node == 1)
    levels.push_back(TopologyLevel{"gpu", 1, hw.peak_memory_bandwidth_GBps, 0.0, 1.0, 1.0, std::nullopt});
  if (levels.size() == 1 && hw.inter_node_bandwidth_GBps)
    levels.push_back(TopologyLevel{"network", 0, *hw.inter_node_bandwidth_GBps, hw.inter_node_latency_us, 1.0, 1.0,
                                   std::nullopt});
  return levels;
}

// Each level's link: the GPU's share of it (Link).
std::vector<Link> links_of(const std::vector<TopologyLevel>& levels) {
  std::vector<Link> links;
  for (size_t i = 0; i < levels.size(); ++i) {
    const TopologyLevel& level = levels[i];
    // Level 0 is a node's own NVSwitch fabric: nothing below it to oversubscribe.
    double share = i == 0 ? 1.0 : 1.0 / level.oversubscription;
    links.push_back({level.kind, static_cast<int64_t>(i), level.bandwidth_GBps * level.efficiency * share});
  }
  return links;
}

double phase_us(const Phase& phase) {
  return phase.latency_us + (phase.bytes > 0 ? phase.bytes / (phase.bandwidth_GBps * kBytesPerGB) * kUsPerS : 0.0);
}

// Where a group's traffic goes: the links it loads (level 0 for hops inside a node, levels 1..top
// for the hops between nodes) and the latency of its steps (latency_us).
struct Route {
  const HardwareConfig& hw;
  const GroupPlacement& group;
  std::vector<TopologyLevel> levels;
  std::vector<Link> links;
  size_t top = 0;  // the outermost level the group's traffic crosses (0: it stays in one node)

  Route(const HardwareConfig& hardware, const GroupPlacement& placement)
      : hw(hardware), group(placement), levels(network_levels(hardware)), links(links_of(levels)) {
    if (links.empty())
      throw DataError("hardware " + hw.label() + ": topology.levels[0] is required by " + describe(group));
    if (group.nodes > 1 && links.size() < 2)
      throw DataError("hardware " + hw.label() + ": a scale-out network (topology.levels[1] or inter_node_bandwidth_GBps) is required: " +
                      describe(group) + " crosses nodes (gpus_per_node=" + std::to_string(hw.gpus_per_node) + ")");
    while (top + 1 < links.size() && domains_below(top + 1) > 1) ++top;
  }

  // Domains of level `level - 1` the group spans (nodes for level 1).
  int64_t domains_below(size_t level) const {
    if (level == 1) return group.nodes;
    size_t index = level - 2;
    return index < group.outer_domains.size() ? group.outer_domains[index] : 1;
  }
  // NCCL's latency model (src/graph/tuning.cc, ncclTopoTuneModel): of a pattern's `steps`, the
  // `inter_node_steps` between nodes take the outermost level's latency, the others NVLink's.
  double latency_us(double steps, double inter_node_steps) const {
    return (steps - inter_node_steps) * levels[0].latency_us + inter_node_steps * levels[top].latency_us;
  }

  // A phase inside one node: `bytes` on the NVLink.
  Phase in_node(double bytes, double steps) const {
    return finish(Phase{{0}, {1.0}, bytes, 0, steps * levels[0].latency_us});
  }
  // A phase between nodes: `bytes` on the rank's NIC share, `nvlink_load` times as much on its
  // NVLink (0: none), and on each level above, the share `outer_load(level)` of the NIC bytes.
  template <typename OuterLoad>
  Phase across_nodes(double bytes, double latency_us, double nvlink_load, OuterLoad outer_load) const {
    Phase phase{{}, {}, bytes, 0, latency_us};
    if (nvlink_load > 0) phase.links.push_back(0), phase.loads.push_back(nvlink_load);
    for (size_t level = 1; level <= top; ++level) {
      double load = level == 1 ? 1.0 : outer_load(level);
      if (load > 0) phase.links.push_back(static_cast<int64_t>(level)), phase.loads.push_back(load);
    }
    return finish(phase);
  }
  // An exchange with each remote peer (node) directly: the share of its NIC bytes that level
  // `level` carries, that of the remote ranks outside the rank's domain below the level.
  double remote_outside_domain(size_t level) const {
    const double n = static_cast<double>(group.size), r = static_cast<double>(group.ranks_per_node);
    const double in_domain = n / static_cast<double>(domains_below(level));
    return (n - in_domain) / (n - r);
  }
  // A ring (or tree, or pipelined broadcast) in rank order crosses the boundary of each domain it
  // spans once, so a level above the NICs carries (domains spanned / nodes) of their bytes.
  Phase ring_across_nodes(double nic_bytes, double latency_us, double nvlink_load) const {
    return across_nodes(nic_bytes, latency_us, nvlink_load,
                        [this](size_t level) { return static_cast<double>(domains_below(level)) / group.nodes; });
  }
  // The phase as NCCL's all-to-all runs it: it reaches less of a link than the rings
  // (alltoall_efficiency against efficiency), so each of its bytes occupies the link as that
  // ratio of a ring's bytes.
  Phase at_alltoall_share(Phase phase) const {
    for (size_t k = 0; k < phase.links.size(); ++k) {
      const TopologyLevel& level = levels[phase.links[k]];
      phase.loads[k] *= level.efficiency / level.alltoall_efficiency.value_or(level.efficiency);
    }
    return finish(phase);
  }
  Phase finish(Phase phase) const {
    phase.bandwidth_GBps = std::numeric_limits<double>::infinity();
    for (size_t k = 0; k < phase.links.size(); ++k)
      phase.bandwidth_GBps = std::min(phase.bandwidth_GBps, links[phase.links[k]].bandwidth_GBps / phase.loads[k]);
    return phase;
  }
};

// Ring: `passes` rounds of n-1 steps, each moving M/n per rank (all-reduce is a reduce-scatter
// then an all-gather: two passes). Across nodes every node has one ring hop out per step; NCCL
// runs one ring per channel through every NIC, so the node's r ranks of the group share the
// crossing: each rank's NIC carries 1/r of the ring's bytes and its NVLink the other hops, r-1 times as much.
std::vector<Phase> ring(double passes, double bytes, const Route& route) {
  const double n = static_cast<double>(route.group.size), r = static_cast<double>(route.group.ranks_per_node);
  const double ring_bytes = passes * (n - 1) / n * bytes;
  if (route.group.nodes == 1) return {route.in_node(ring_bytes, passes * (n - 1))};
  const double nodes = static_cast<double>(route.group.nodes);
  return {route.ring_across_nodes(ring_bytes / r, route.latency_us(passes * (n - 1), passes * (nodes - 1)), r - 1)};
}

// Double binary tree (NCCL): a reduce up and a broadcast down; every
// rank receives and sends the whole message in each, so M crosses its link twice. Across nodes
// a chain inside each node feeds the tree between nodes (one tree per channel through every NIC).
std::vector<Phase> tree_all_reduce(double bytes, const Route& route) {
  const double r = static_cast<double>(route.group.ranks_per_node);
  // Latency as NCCL's model: up and down the chain of a node's r ranks, and log2(nodes) levels
  // of the tree between nodes (log2i: rounded down).
  const double depth = std::floor(std::log2(static_cast<double>(route.group.nodes)));
  if (route.group.nodes == 1) return {route.in_node(2 * bytes, 2 * (r - 1))};
  return {route.ring_across_nodes(2 * bytes / r, route.latency_us(2 * (r - 1 + depth), 2 * depth), r - 1)};
}

// NVLink SHARP: the switch reduces and multicasts, so a rank sends its data once and receives
// the result once, at the algorithm bandwidth the level's measured NVLS bus bandwidth implies;
// the latency is one reduce and one multicast step.
std::vector<Phase> nvls_all_reduce(double bytes, const Route& route) {
  const double n = static_cast<double>(route.group.size);
  Phase phase = route.in_node(bytes, 2);
  phase.bandwidth_GBps = std::min(phase.bandwidth_GBps, *route.levels[0].nvls_bus_bandwidth_GBps * n / (2 * (n - 1)));
  return {phase};
}

bool nvls_applies(const GroupPlacement& group, const HardwareConfig& hw) {
  return group.nodes == 1 && !hw.topology.empty() && hw.topology[0].nvls_bus_bandwidth_GBps &&
         group.size == hw.topology[0].size;
}

// Intra-node reduce-scatter, a ring all-reduce of the node's 1/r share between nodes (each of
// the r local ranks in its own ring, on its own NIC share), intra-node all-gather.
std::vector<Phase> hierarchical_all_reduce(double bytes, const Route& route) {
  const double r = static_cast<double>(route.group.ranks_per_node), nodes = static_cast<double>(route.group.nodes);
  Phase in_node = route.in_node((r - 1) / r * bytes, r - 1);
  const double ring_steps = 2 * (nodes - 1);  // all between nodes
  return {in_node, route.ring_across_nodes(2 * (nodes - 1) / nodes * bytes / r, route.latency_us(ring_steps, ring_steps), 0),
          in_node};
}

// All-to-all: n-1 pairwise exchanges of M/n, one peer per step; across nodes each rank sends
// the M/n of each remote peer through its own NIC share, and a level above carries the share of
// the remote peers outside the rank's domain below it. All at the levels' all-to-all share.
std::vector<Phase> pairwise_alltoall(double bytes, const Route& route) {
  const GroupPlacement& g = route.group;
  const double n = static_cast<double>(g.size), r = static_cast<double>(g.ranks_per_node);
  if (g.nodes == 1) return {route.at_alltoall_share(route.in_node((n - 1) / n * bytes, n - 1))};
  Phase exchange = route.across_nodes((n - r) / n * bytes, route.latency_us(n - 1, n - 1), (r - 1) / (n - r),
                                      [&](size_t level) { return route.remote_outside_domain(level); });
  return {route.at_alltoall_share(exchange)};
}

// The flex token dispatcher's exchange (DeepEP's and HybridEP's kernels) of M, one copy of the
// rank's token rows: each token goes once to each GPU of the group holding one of its experts
// (the chance of a GPU: gpu_share) and, across nodes, once over the network to each remote node
// holding one (node_share), to the GPU of the same local index there, which forwards it over
// NVLink to the node's GPUs that need it. Per rank, in one node: M gpu_share (n-1) over NVLink;
// across N nodes: M node_share (N-1) through the NIC share and M gpu_share (r-1) N over NVLink
// (the node's own GPUs and the forwarded tokens). Levels above the NICs carry the share of the
// remote nodes outside the rank's domain. One latency per peer, as the pairwise all-to-all.
std::vector<Phase> flex_alltoall(double bytes, const Routing& routing, const Route& route) {
  const GroupPlacement& g = route.group;
  const double n = static_cast<double>(g.size), r = static_cast<double>(g.ranks_per_node);
  const double nodes = static_cast<double>(g.nodes);
  const double gpu_share = holding_share(routing, routing.experts / n);
  if (g.nodes == 1) return {route.in_node(bytes * gpu_share * (n - 1), n - 1)};
  const double node_share = holding_share(routing, routing.experts / nodes);
  const double nvlink_load = gpu_share * (r - 1) * nodes / (node_share * (nodes - 1));
  return {route.across_nodes(bytes * node_share * (nodes - 1), route.latency_us(n - 1, n - 1), nvlink_load,
                             [&](size_t level) { return route.remote_outside_domain(level); })};
}

// Broadcast: the message pipelined along a ring in small chunks; the last rank waits n-1 hops.
std::vector<Phase> ring_broadcast(double bytes, const Route& route) {
  const double n = static_cast<double>(route.group.size), r = static_cast<double>(route.group.ranks_per_node);
  if (route.group.nodes == 1) return {route.in_node(bytes, n - 1)};
  const double nodes = static_cast<double>(route.group.nodes);
  return {route.ring_across_nodes(bytes / r, route.latency_us(n - 1, nodes - 1), r - 1)};
}

// Send/receive: each rank sends M to its peer and receives M, one direction of its link each.
std::vector<Phase> sendrecv(double bytes, const Route& route) {
  if (route.group.nodes == 1) return {route.in_node(bytes, 1)};
  return {route.across_nodes(bytes, route.latency_us(1, 1), 0, [](size_t) { return 1.0; })};
}

std::string op_path(const ShardOp& op) { return "/shard/ops/" + std::to_string(op.id); }

// The dimensions a tp/cp/dp-kind group varies: the data-parallel group of the gradients spans
// dp x cp (Megatron's data-parallel group with CP), Transformer Engine's amax reduction every
// rank of a pipeline stage.
std::vector<std::string> dimensions_of(const ShardOp& op, const ParallelismConfig& p) {
  // Hybrid sharding splits the data-parallel ranks into replicas of consecutive dp indices: a
  // shard group holds one replica's (with the cp ranks), the replicas' group one rank of each.
  if (p.dp_replicate > 1 && op.group == CommGroup::dp && op.group_size == p.dp_shard_group()) return {"cp", "dp_shard"};
  if (op.group == CommGroup::dpr && op.group_size == p.dp_replicate) return {"dp_replicate"};
  if (op.group == CommGroup::tp && op.group_size == p.tp) return {"tp"};
  if (op.group == CommGroup::cp && op.group_size == p.cp) return {"cp"};
  if (op.group == CommGroup::dp && op.group_size == p.dp) return {"dp"};
  if (op.group == CommGroup::dp && op.group_size == p.dp * p.cp) return {"cp", "dp"};
  if (op.group == CommGroup::dp && op.group_size == p.tp * p.cp * p.dp) return {"tp", "cp", "dp"};
  throw DataError(op_path(op) + "/group: a " + to_string(op.group) + " group of " + std::to_string(op.group_size) +
                  " ranks matches no parallel dimensions of tp=" + std::to_string(p.tp) + " cp=" + std::to_string(p.cp) +
                  " dp=" + std::to_string(p.dp));
}

// The pipeline stages a pp or embedding collective connects: a send_recv joins its stage with
// the virtual stage it receives from (the previous one in the forward direction, the next in
// the backward one); the embedding group is the first and last stage, the pp group all.
std::vector<int64_t> pipeline_stages(const ShardOp& op, const ParallelismConfig& p) {
  if (op.group == CommGroup::embedding) return {0, p.pp - 1};
  std::vector<int64_t> stages;
  if (op.collective != Collective::send_recv) {
    for (int64_t s = 0; s < p.pp; ++s) stages.push_back(s);
    return stages;
  }
  int64_t virtual_stage = op.chunk * p.pp + op.stage;
  int64_t peer = op.phase == OpPhase::fwd ? virtual_stage - 1 : virtual_stage + 1;
  if (peer < 0 || peer >= p.pp * p.vpp.value_or(1))
    throw DataError(op_path(op) + ": a " + std::string(to_string(op.phase)) + " send_recv of virtual stage " + std::to_string(virtual_stage) +
                    " has no neighbour to receive from");
  return {op.stage, peer % p.pp};
}

// The expert layers' groups (Megatron-Core's expert RankGenerator over etp, ep, expert-dp and
// pp): the expert-parallel group (its all-to-all), with the expert-TP ranks for the allgather
// dispatcher (ep group of etp x ep ranks), the expert-TP group and the expert-data-parallel one.
bool is_expert_group(const ShardOp& op) {
  return op.group == CommGroup::ep || op.group == CommGroup::etp || op.group == CommGroup::edp;
}

std::vector<std::string> expert_dimensions_of(const ShardOp& op, const ParallelismConfig& p) {
  if (op.group == CommGroup::ep && op.group_size == p.ep) return {"ep"};
  if (op.group == CommGroup::ep && op.group_size == p.ep * p.expert_tp()) return {"tp", "ep"};
  if (op.group == CommGroup::etp && op.group_size == p.expert_tp()) return {"tp"};
  if (op.group == CommGroup::edp && op.group_size == p.expert_dp()) return {"dp"};
  throw DataError(op_path(op) + "/group: a " + to_string(op.group) + " group of " + std::to_string(op.group_size) +
                  " ranks matches no expert-parallel dimensions of ep=" + std::to_string(p.ep) +
                  " etp=" + std::to_string(p.expert_tp()) + " expert-dp=" + std::to_string(p.expert_dp()));
}

// The global ranks of the op's group that holds the simulated rank of its stage: the rank with
// every other index 0, global rank = sum of index x stride in the parallelism's rank order
// (Megatron's RankGenerator; the expert generator for the expert groups, whose pp stride is
// the same: the ranks of a stage).
std::vector<int64_t> group_ranks(const ShardOp& op, const ParallelismConfig& p) {
  std::map<std::string, std::pair<int64_t, int64_t>> stride_and_size;
  int64_t stride = 1;
  const bool expert = is_expert_group(op);
  for (const auto& [name, size] : expert ? expert_rank_order(p) : rank_order(p)) {
    stride_and_size[name] = {stride, size};
    stride *= size;
  }
  // A dimension the order leaves out has size 1: only its index 0 exists.
  for (const char* name : {"tp", "cp", "ep", "dp", "pp"}) stride_and_size.try_emplace(name, stride, 1);
  // Hybrid sharding's two parts of dp: the shard group's consecutive indices, then the replicas.
  const auto [dp_stride, dp_size] = stride_and_size.at("dp");
  const int64_t shard_size = dp_size / p.dp_replicate;
  stride_and_size["dp_shard"] = {dp_stride, shard_size};
  stride_and_size["dp_replicate"] = {dp_stride * shard_size, p.dp_replicate};
  const int64_t pp_stride = stride_and_size.at("pp").first;
  if (op.group == CommGroup::pp || op.group == CommGroup::embedding) {
    std::vector<int64_t> ranks;
    for (int64_t stage : pipeline_stages(op, p)) ranks.push_back(stage * pp_stride);
    return ranks;
  }
  std::vector<int64_t> ranks = {op.stage * pp_stride};
  for (const std::string& dimension : expert ? expert_dimensions_of(op, p) : dimensions_of(op, p)) {
    auto [dim_stride, size] = stride_and_size.at(dimension);
    std::vector<int64_t> grown;
    for (int64_t rank : ranks)
      for (int64_t i = 0; i < size; ++i) grown.push_back(rank + i * dim_stride);
    ranks = std::move(grown);
  }
  std::sort(ranks.begin(), ranks.end());
  return ranks;
}

struct Candidate {
  CollectiveAlgorithm algorithm;
  bool applies;
  std::function<std::vector<Phase>()> phases;
};

// The algorithms of algorithms_of(collective), in its order.
std::vector<Candidate> candidates(NcclCollective collective, double bytes, const Route& route) {
  using A = CollectiveAlgorithm;
  const GroupPlacement& group = route.group;
  switch (collective) {
    case NcclCollective::all_reduce:
      return {{A::ring, true, [&, bytes] { return ring(2, bytes, route); }},
              {A::tree, true, [&, bytes] { return tree_all_reduce(bytes, route); }},
              {A::nvls, nvls_applies(group, route.hw), [&, bytes] { return nvls_all_reduce(bytes, route); }},
              {A::hierarchical, group.nodes > 1 && group.ranks_per_node > 1,
               [&, bytes] { return hierarchical_all_reduce(bytes, route); }}};
    case NcclCollective::all_gather:
    case NcclCollective::reduce_scatter: return {{A::ring, true, [&, bytes] { return ring(1, bytes, route); }}};
    case NcclCollective::alltoall: return {{A::pairwise, true, [&, bytes] { return pairwise_alltoall(bytes, route); }}};
    case NcclCollective::broadcast: return {{A::ring, true, [&, bytes] { return ring_broadcast(bytes, route); }}};
    case NcclCollective::sendrecv: break;
  }
  return {{A::p2p, true, [&, bytes] { return sendrecv(bytes, route); }}};
}

CollectiveTime timed(CollectiveAlgorithm algorithm, std::vector<Phase> phases) {
  CollectiveTime t{0, algorithm, std::move(phases)};
  for (const Phase& phase : t.phases) t.time_us += phase_us(phase);
  return t;
}

}  // namespace

std::vector<Link> network_links(const HardwareConfig& hw) { return links_of(network_levels(hw)); }

GroupPlacement place_ranks(const std::vector<int64_t>& ranks, const HardwareConfig& hw) {
  std::map<int64_t, int64_t> ranks_of_node;
  for (int64_t rank : ranks) ++ranks_of_node[rank / hw.gpus_per_node];
  GroupPlacement group{static_cast<int64_t>(ranks.size()), static_cast<int64_t>(ranks.size()),
                       static_cast<int64_t>(ranks_of_node.size()), {}};
  for (const auto& [node, count] : ranks_of_node) group.ranks_per_node = std::min(group.ranks_per_node, count);
  const std::vector<TopologyLevel> levels = network_levels(hw);
  for (size_t level = 1; level + 1 < levels.size(); ++level) {
    const int64_t size = levels[level].size;
    std::vector<int64_t> domains;
    for (int64_t rank : ranks) domains.push_back(size > 0 ? rank / size : 0);
    std::sort(domains.begin(), domains.end());
    group.outer_domains.push_back(std::unique(domains.begin(), domains.end()) - domains.begin());
  }
  return group;
}

CollectiveTime collective_time(NcclCollective collective, double bytes, const GroupPlacement& group,
                               const HardwareConfig& hw) {
  if (group.size < 2) return {};
  Route route(hw, group);
  std::vector<Candidate> options = candidates(collective, bytes, route);
  auto forced = hw.collective_algorithm.find(collective);
  if (forced != hw.collective_algorithm.end()) {
    for (const Candidate& c : options)
      if (c.algorithm == forced->second) {
        if (!c.applies)
          throw DataError("hardware " + hw.label() + ": collective_algorithm." + to_string(collective) + ": " +
                          to_string(c.algorithm) + " does not apply to " + describe(group));
        return timed(c.algorithm, c.phases());
      }
  }
  CollectiveTime best;
  for (const Candidate& c : options) {
    if (!c.applies) continue;
    CollectiveTime t = timed(c.algorithm, c.phases());
    if (!best.algorithm || t.time_us < best.time_us) best = std::move(t);
  }
  return best;
}

namespace {

// The shard section's collective as nccl-tests names it.
NcclCollective nccl_collective(Collective collective) {
  switch (collective) {
    case Collective::all_reduce: return NcclCollective::all_reduce;
    case Collective::all_gather: return NcclCollective::all_gather;
    case Collective::reduce_scatter: return NcclCollective::reduce_scatter;
    case Collective::all_to_all: return NcclCollective::alltoall;
    case Collective::send_recv:
    case Collective::flex_all_to_all:  // none of NCCL's: shard_collective_time prices it apart
      break;
  }
  return NcclCollective::sendrecv;
}

// The most experts a flex_all_to_all's routing may have: what bounds its pricing's loops.
constexpr double kMaxExperts = 1e6;

// The routing a flex_all_to_all op's shape gives (docs/graph-format.md).
Routing routing_of(const ShardOp& op) {
  for (const char* key : kRoutingKeys)
    if (!op.shape.count(key))
      throw DataError(op_path(op) + "/shape/" + key + ": a flex_all_to_all needs the routing (experts, topk, groups, group_topk)");
  const Routing routing = *routing_in(op.shape);
  auto whole = [](double v) { return v >= 0 && v <= kMaxExperts && v == std::floor(v); };
  if (!(whole(routing.experts) && whole(routing.topk) && routing.topk >= 1 && routing.topk <= routing.experts))
    throw DataError(op_path(op) + "/shape: expected whole 1 <= topk <= experts <= " + std::to_string(int(kMaxExperts)) +
                    ", got topk " + std::to_string(routing.topk) + " of " + std::to_string(routing.experts) + " experts");
  if (!whole(routing.groups) || !whole(routing.group_topk) ||
      (routing.groups > 0 && !(routing.group_topk >= 1 && routing.group_topk <= routing.groups &&
                               std::fmod(routing.experts, routing.groups) == 0 &&
                               routing.topk <= routing.group_topk * routing.experts / routing.groups)))
    throw DataError(op_path(op) + "/shape: group_topk " + std::to_string(routing.group_topk) + " of " +
                    std::to_string(routing.groups) + " groups of " + std::to_string(routing.experts) +
                    " experts cannot hold topk " + std::to_string(routing.topk));
  return routing;
}

}  // namespace

std::vector<int64_t> collective_ranks(const ShardOp& op, const ParallelismConfig& p) { return group_ranks(op, p); }

CollectiveTime shard_collective_time(const ShardOp& op, const ParallelismConfig& p, const HardwareConfig& hw) {
  if (op.group_size < 1)
    throw DataError(op_path(op) + "/group_size: expected at least 1, got " + std::to_string(op.group_size));
  if (op.group_size == 1) return {};
  GroupPlacement group = place_ranks(group_ranks(op, p), hw);
  try {
    if (op.collective == Collective::flex_all_to_all)
      return timed(CollectiveAlgorithm::flex, flex_alltoall(op.message_bytes, routing_of(op), Route(hw, group)));
    return collective_time(nccl_collective(op.collective), op.message_bytes, group, hw);
  } catch (const DataError& e) {
    throw DataError(std::string(e.what()) + ", needed by the " + to_string(op.group) + " " + to_string(op.collective) + " at " + op_path(op));
  }
}

double bus_bandwidth_factor(NcclCollective collective, int64_t ranks) {
  double n = static_cast<double>(ranks);
  switch (collective) {
    case NcclCollective::all_reduce: return 2 * (n - 1) / n;
    case NcclCollective::all_gather:
    case NcclCollective::reduce_scatter:
    case NcclCollective::alltoall: return (n - 1) / n;
    case NcclCollective::broadcast:
    case NcclCollective::sendrecv: break;
  }
  return 1;
}

std::vector<int64_t> parse_sizes(const std::string& value, const std::string& flag) {
  auto one = [&](const std::string& text) {
    // nccl-tests' -b/-e take the suffixes in either case (src/common.cu, parsesize).
    static const std::regex size_re("0*([0-9]+)([BKMGbkmg]?)");
    std::smatch m;
    if (!std::regex_match(text, m, size_re) || m.str(1) == "0")
      throw UsageError(flag + ": expected a positive size like 8, 8B, 64K, 16M or 1G, got '" + value + "'");
    const char unit = m.length(2) ? static_cast<char>(std::toupper(static_cast<unsigned char>(m.str(2)[0]))) : 'B';
    int shift = unit == 'K' ? 10 : unit == 'M' ? 20 : unit == 'G' ? 30 : 0;
    // Up to 19 digits fit an unsigned 64-bit number: compare with the largest size after the shift.
    const uint64_t count = m.length(1) > 19 ? std::numeric_limits<uint64_t>::max() : std::stoull(m[1]);
    if (count > static_cast<uint64_t>(std::numeric_limits<int64_t>::max() >> shift))
      throw UsageError(flag + ": " + text + " bytes do not fit in 64 bits");
    return static_cast<int64_t>(count << shift);
  };
  size_t colon = value.find(':');
  if (colon == std::string::npos) return {one(value)};
  int64_t low = one(value.substr(0, colon)), high = one(value.substr(colon + 1));
  if (low > high) throw UsageError(flag + ": the first size must not exceed the second, got '" + value + "'");
  std::vector<int64_t> sizes;
  for (int64_t size = low;; size *= 2) {
    sizes.push_back(size);
    if (size > high / 2) break;  // the next doubling passes high (or 64 bits)
  }
  return sizes;
}

std::string collective_report(const CollectiveRequest& request, const HardwareConfig& hw) {
  const std::optional<NcclCollective> collective = parse_enum<NcclCollective>(request.collective);
  if (!collective)
    throw UsageError("collective: expected all_reduce|all_gather|reduce_scatter|alltoall|broadcast|sendrecv, got '" +
                     request.collective + "'");
  if (request.format != "table" && request.format != "csv" && request.format != "json")
    throw UsageError("--format: expected table, csv or json, got '" + request.format + "'");
  if (request.gpus < 2 || request.gpus > kMaxGpus)
    throw UsageError("--gpus: expected 2 to " + std::to_string(kMaxGpus) + ", got " + std::to_string(request.gpus));
  if (request.gpus > hw.gpus_per_node && request.gpus % hw.gpus_per_node != 0)
    throw UsageError("--gpus: " + std::to_string(request.gpus) + " GPUs do not fill whole nodes of gpus_per_node=" +
                     std::to_string(hw.gpus_per_node) + " (hardware " + hw.label() + ")");
  if (request.bytes.empty() == request.sweep.empty()) throw UsageError("give one of --bytes SIZE or --sweep MIN:MAX");
  std::vector<int64_t> sizes =
      request.bytes.empty() ? parse_sizes(request.sweep, "--sweep") : parse_sizes(request.bytes, "--bytes");
  std::vector<int64_t> ranks(static_cast<size_t>(request.gpus));
  for (int64_t rank = 0; rank < request.gpus; ++rank) ranks[rank] = rank;
  const GroupPlacement group = place_ranks(ranks, hw);
  const double factor = bus_bandwidth_factor(*collective, request.gpus);

  nlohmann::json rows = nlohmann::json::array();
  std::ostringstream out;
  char line[160];
  if (request.format == "table") {
    out << "# syssim collective: " << request.collective << " on " << request.gpus << " GPUs of " << hw.name << " ("
        << group.ranks_per_node << " per node, " << group.nodes << (group.nodes == 1 ? " node" : " nodes")
        << ")\n";
    std::snprintf(line, sizeof line, "#%13s %12s %11s %11s  %s\n", "size", "time_us", "algbw_GBps", "busbw_GBps",
                  "algorithm");
    out << line;
  } else if (request.format == "csv") {
    out << "size,time_us,algbw_GBps,busbw_GBps,algorithm\n";
  }
  for (int64_t size : sizes) {
    CollectiveTime t = collective_time(*collective, static_cast<double>(size), group, hw);
    const char* algorithm = to_string(*t.algorithm);
    double algbw = static_cast<double>(size) / kBytesPerGB / (t.time_us / kUsPerS);
    double busbw = algbw * factor;
    if (request.format == "table") {
      std::snprintf(line, sizeof line, "%14lld %12.2f %11.2f %11.2f  %s\n", static_cast<long long>(size), t.time_us,
                    algbw, busbw, algorithm);
      out << line;
    } else if (request.format == "csv") {
      std::snprintf(line, sizeof line, "%lld,%.4f,%.4f,%.4f,%s\n", static_cast<long long>(size), t.time_us, algbw,
                    busbw, algorithm);
      out << line;
    } else {
      rows.push_back({{"size", size}, {"time_us", t.time_us}, {"algbw_GBps", algbw}, {"busbw_GBps", busbw},
                      {"algorithm", algorithm}});
    }
  }
  if (request.format == "json")
    out << nlohmann::json{{"collective", request.collective}, {"gpus", request.gpus}, {"hardware", hw.name},
                          {"gpus_per_node", hw.gpus_per_node}, {"rows", rows}}
                .dump(2)
        << "\n";
  return out.str();
}

}  // namespace syssim
