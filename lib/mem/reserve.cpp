#include "mem/reserve.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "common/units.hpp"
#include "network/network.hpp"

namespace syssim {
namespace {

// NCCL's buffers with its default sizes (NVIDIA/nccl v2.27.7-1; docs/memory.md "Memory outside
// the allocator" cites the lines). A connection's receiving GPU holds the three protocols'
// buffers (LL 512 KiB, LL128 4,915,200 B, SIMPLE 4 MiB) and a control page, rounded up to 2 MiB
// (src/transport/p2p.cc); an NVLink sender holds its control page, rounded up likewise (H100 and
// later write, their SIMPLE buffer staying with the receiver); a network sender keeps SIMPLE and
// LL128 on the GPU (src/transport/net.cc). An NVLink SHARP buffer is 8 steps of 128 KiB per
// channel and direction for each GPU of the node (src/transport/nvls.cc); network send/recv
// shares one pool per direction of 16 chunks of 128 KiB per channel (net.cc).
constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kReceiveBytes = 10 * kMiB;
constexpr double kNvlinkSendBytes = 2 * kMiB;
constexpr double kNetworkSendBytes = 10 * kMiB;
constexpr double kNvlsBufferBytes = 1 * kMiB;
constexpr double kNetworkPoolBytesPerChannel = 16 * 128 * 1024.0;

// A communicator running ring collectives over `group`: one receive and one send per channel.
// Across nodes, per channel a node's r GPUs hold r receives, r - 1 NVLink sends and one
// network send.
double ring_bytes(const GroupPlacement& group, const HardwareConfig::NcclChannels& channels) {
  const auto r = static_cast<double>(group.ranks_per_node);
  if (group.nodes > 1)
    return static_cast<double>(channels.coll_across_nodes) * (r * kReceiveBytes + (r - 1) * kNvlinkSendBytes + kNetworkSendBytes) / r;
  double bytes = static_cast<double>(channels.coll_in_node) * (kReceiveBytes + kNvlinkSendBytes);
  if (channels.nvls > 0 && group.size > 2)  // NCCL's NVLS needs more than 2 GPUs
    bytes += static_cast<double>(channels.nvls) * 2 * kNvlsBufferBytes * r;
  return bytes;
}

// A communicator's send/recv to `nvlink_peers` GPUs of its node, and through the network pool
// when it reaches other nodes.
double p2p_bytes(int64_t nvlink_peers, bool across_nodes, const HardwareConfig::NcclChannels& channels) {
  const int64_t per_peer = across_nodes ? channels.p2p_per_peer_across_nodes : channels.p2p_per_peer_in_node;
  double bytes = static_cast<double>(nvlink_peers * per_peer) * (kReceiveBytes + kNvlinkSendBytes);
  if (across_nodes) bytes += 2 * static_cast<double>(channels.p2p_across_nodes) * kNetworkPoolBytesPerChannel;
  return bytes;
}

// The communicators of one pipeline rank: one per group and size (Megatron's process groups),
// placed once; a pipeline send_recv's peer (its neighbour) once per chunk and direction.
struct RankCommunicators {
  std::map<std::pair<CommGroup, int64_t>, const ShardOp*> rings, all_to_alls, ring_exchanges;
  std::map<std::pair<int64_t, OpPhase>, const ShardOp*> sends;

  void add(const ShardOp& op) {
    // The flex dispatcher's kernels (DeepEP's, HybridEP's) exchange through their own buffers,
    // which are not NCCL's and not counted (docs/memory.md).
    if (op.collective == Collective::flex_all_to_all) return;
    const std::pair key{op.group, op.group_size};
    if (op.collective == Collective::send_recv && op.group == CommGroup::pp) sends.try_emplace({op.chunk, op.phase}, &op);
    else if (op.collective == Collective::send_recv) ring_exchanges.try_emplace(key, &op);
    else (op.collective == Collective::all_to_all ? all_to_alls : rings).try_emplace(key, &op);
  }

  double nccl_buffer_bytes(const ParallelismConfig& p, const HardwareConfig& hw) const {
    const HardwareConfig::NcclChannels& channels = hw.nccl_channels;
    auto placed = [&](const ShardOp& op) { return place_ranks(collective_ranks(op, p), hw); };
    double bytes = 0;
    for (const auto& [key, op] : rings) bytes += ring_bytes(placed(*op), channels);
    // An all-to-all reaches every GPU of its group; context parallelism's ring exchange its two
    // neighbours.
    for (const auto& [key, op] : all_to_alls) {
      const GroupPlacement group = placed(*op);
      bytes += p2p_bytes(group.ranks_per_node - 1, group.nodes > 1, channels);
    }
    for (const auto& [key, op] : ring_exchanges) {
      const GroupPlacement group = placed(*op);
      bytes += p2p_bytes(std::min<int64_t>(2, group.ranks_per_node - 1), group.nodes > 1, channels);
    }
    // The pipeline's neighbours: an NVLink peer where both ranks share a node.
    std::set<int64_t> nvlink_peers, network_peers;
    for (const auto& [key, op] : sends) {
      const std::vector<int64_t> ranks = collective_ranks(*op, p);
      (place_ranks(ranks, hw).ranks_per_node > 1 ? nvlink_peers : network_peers).insert(ranks.back());
    }
    if (!sends.empty()) bytes += p2p_bytes(static_cast<int64_t>(nvlink_peers.size()), !network_peers.empty(), channels);
    return bytes;
  }
};

}  // namespace

std::vector<MemoryReserve> memory_reserves(const ShardSection& shard, const HardwareConfig& hw) {
  const auto ranks = static_cast<size_t>(shard.parallelism.pp);
  std::vector<MemoryReserve> reserves(ranks);
  for (MemoryReserve& reserve : reserves) reserve.cuda_context_bytes = hw.cuda_context_GB * kBytesPerGB;
  if (!hw.nccl_channels.given()) return reserves;
  std::vector<RankCommunicators> communicators(ranks);
  for (const ShardOp& op : shard.ops)
    if (op.kind == OpKind::collective && op.group_size > 1 && static_cast<size_t>(op.stage) < ranks)
      communicators[static_cast<size_t>(op.stage)].add(op);
  for (size_t rank = 0; rank < ranks; ++rank)
    reserves[rank].nccl_buffer_bytes = communicators[rank].nccl_buffer_bytes(shard.parallelism, hw);
  return reserves;
}

}  // namespace syssim
