// Collective pricing (lib/network): every expected time or bus bandwidth below is worked out
// by hand from the algorithm's closed form or taken from a published nccl-tests figure
// (docs/network.md).
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "common/error.hpp"
#include "network/network.hpp"

namespace syssim {
namespace {

constexpr double kGiB = 1073741824.0;

HardwareConfig h100() { return load_hardware_yaml(std::string(SYSSIM_SOURCE_DIR) + "/configs/hardware/h100-sxm-80gb.yaml"); }

// nccl-tests: algbw = size / time, busbw = algbw * factor, in GB/s (1e9 B/s).
double busbw_GBps(NcclCollective collective, double bytes, int64_t ranks, const CollectiveTime& t) {
  return bytes / (t.time_us * 1e3) * bus_bandwidth_factor(collective, ranks);
}

TEST(BusBandwidth, FactorsAreNcclTests) {
  // nccl-tests doc/PERFORMANCE.md.
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(NcclCollective::all_reduce, 8), 2.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(NcclCollective::all_gather, 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(NcclCollective::reduce_scatter, 4), 3.0 / 4);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(NcclCollective::alltoall, 16), 15.0 / 16);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(NcclCollective::broadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(NcclCollective::sendrecv, 8), 1.0);
}

TEST(H100, AllGatherOfOneNodeReachesTheNvlinkBusBandwidth) {
  // NCCL maintainer, nccl-tests issue 212: 370 GB/s effective of the 450 GB/s line rate.
  // The ring: 7/8 * 2^30 B / (450e9 * 0.822) s + 7 * 1.9 us.
  HardwareConfig hw = h100();
  CollectiveTime t = collective_time(NcclCollective::all_gather, kGiB, GroupPlacement{8, 8, 1, {}}, hw);
  EXPECT_EQ(t.algorithm, CollectiveAlgorithm::ring);
  EXPECT_NEAR(t.time_us, 7.0 / 8 * kGiB / (450e9 * 0.822) * 1e6 + 7 * 1.9, 1e-6);
  EXPECT_NEAR(busbw_GBps(NcclCollective::all_gather, kGiB, 8, t), 450 * 0.822, 0.01 * 450 * 0.822);
}

TEST(H100, AllReduceOfTheWholeNodeTakesNvlsAt480) {
  // Same issue: "On 8 GPUs, you should reach a peak busBw of ~480GB/s (algbw ~275GB/s)".
  HardwareConfig hw = h100();
  CollectiveTime t = collective_time(NcclCollective::all_reduce, kGiB, GroupPlacement{8, 8, 1, {}}, hw);
  EXPECT_EQ(t.algorithm, CollectiveAlgorithm::nvls);
  EXPECT_NEAR(busbw_GBps(NcclCollective::all_reduce, kGiB, 8, t), 480, 4.8);
  EXPECT_NEAR(kGiB / (t.time_us * 1e3), 275, 2.75);
  // A group smaller than the NVLink domain keeps the ring (or the tree).
  EXPECT_EQ(collective_time(NcclCollective::all_reduce, kGiB, GroupPlacement{4, 4, 1, {}}, hw).algorithm, CollectiveAlgorithm::ring);
}

TEST(H100, RingAllReduceAcrossTwoNodesReachesThePublishedBusBandwidth) {
  // NCCL maintainer, nccl-tests issue 290: a ring all-reduce between DGX H100 nodes reaches
  // "46-48GB/s per NIC", 8 NICs per node: bus bandwidth 368-384 GB/s. syssim: each rank's NIC
  // carries 1/8 of the ring (2 * 15/16 * M / 8) at 50 * 0.94 = 47 GB/s, its NVLink the other 7/8
  // (7 * 47 = 329 < 369.9 GB/s: the NIC binds), plus 30 steps, as NCCL's tuning model counts
  // them (src/graph/tuning.cc): the 2 between the nodes at 4 us, the other 28 at NVLink's 1.9 us.
  HardwareConfig hw = h100();
  hw.collective_algorithm[NcclCollective::all_reduce] = CollectiveAlgorithm::ring;
  const double bytes = 8 * kGiB;
  CollectiveTime t = collective_time(NcclCollective::all_reduce, bytes, GroupPlacement{16, 8, 2, {}}, hw);
  EXPECT_EQ(t.algorithm, CollectiveAlgorithm::ring);
  EXPECT_NEAR(t.time_us, 2 * 15.0 / 16 * bytes / 8 / 47e9 * 1e6 + 2 * 4.0 + 28 * 1.9, 1e-6);
  double busbw = busbw_GBps(NcclCollective::all_reduce, bytes, 16, t);
  EXPECT_GE(busbw, 368);
  EXPECT_LE(busbw, 384);
}

TEST(H100, HierarchicalAllReduceByHand) {
  // Reduce-scatter in each node (7 steps of M/8 on NVLink), a 2-node ring all-reduce of M/8 on
  // each GPU's NIC (2 * 1/2 * M/8 at 47 GB/s, 2 steps of 4 us), all-gather in the node.
  HardwareConfig hw = h100();
  hw.collective_algorithm[NcclCollective::all_reduce] = CollectiveAlgorithm::hierarchical;
  const double nvlink = 450e9 * 0.822;
  double rs_us = 7.0 / 8 * kGiB / nvlink * 1e6 + 7 * 1.9;
  double inter_us = 2 * 0.5 * (kGiB / 8) / 47e9 * 1e6 + 2 * 4.0;
  CollectiveTime t = collective_time(NcclCollective::all_reduce, kGiB, GroupPlacement{16, 8, 2, {}}, hw);
  EXPECT_EQ(t.algorithm, CollectiveAlgorithm::hierarchical);
  EXPECT_NEAR(t.time_us, 2 * rs_us + inter_us, 1e-6);
  ASSERT_EQ(t.phases.size(), 3u);
  EXPECT_EQ(t.phases[1].links, (std::vector<int64_t>{1}));
  // Unforced, the flat ring is faster: its NVLink and NIC hops run at once.
  EXPECT_EQ(collective_time(NcclCollective::all_reduce, kGiB, GroupPlacement{16, 8, 2, {}}, h100()).algorithm, CollectiveAlgorithm::ring);
}

TEST(Choice, TreeWinsSmallMessagesBetweenNodesRingInOne) {
  // In one node NCCL's tree is a chain: 2(n-1) steps, as many as the ring's, with 2M on the
  // link where the ring has 1.5M (4 GPUs): the ring wins at every size. 8 bytes: 1.5 * 8 / B + 6 λ.
  HardwareConfig hw = h100();
  CollectiveTime small = collective_time(NcclCollective::all_reduce, 8, GroupPlacement{4, 4, 1, {}}, hw);
  EXPECT_EQ(small.algorithm, CollectiveAlgorithm::ring);
  EXPECT_NEAR(small.time_us, 1.5 * 8 / (450e9 * 0.822) * 1e6 + 6 * 1.9, 1e-9);
  // Across 2 nodes, 8 bytes (NCCL's model, src/graph/tuning.cc): the tree's chain of 7 in each
  // node and log2(2) = 1 step between them, up and down, 2 * (7 * 1.9 + 4) = 34.6 us, beats the
  // ring's 28 * 1.9 + 2 * 4 = 61.2 us; 8 nodes: 2 * (7 * 1.9 + 3 * 4) = 50.6 us.
  CollectiveTime across = collective_time(NcclCollective::all_reduce, 8, GroupPlacement{16, 8, 2, {}}, hw);
  EXPECT_EQ(across.algorithm, CollectiveAlgorithm::tree);
  EXPECT_NEAR(across.time_us, 34.6, 1e-3);
  EXPECT_NEAR(collective_time(NcclCollective::all_reduce, 8, GroupPlacement{64, 8, 8, {}}, hw).time_us, 50.6, 1e-3);
  // A gigabyte: the ring, 2 * 15/16 * M / 8 on each NIC where the tree has 2 * M / 8.
  EXPECT_EQ(collective_time(NcclCollective::all_reduce, kGiB, GroupPlacement{16, 8, 2, {}}, hw).algorithm, CollectiveAlgorithm::ring);
}

TEST(Choice, HardwareKeyForcesAnAlgorithm) {
  HardwareConfig hw = h100();
  hw.collective_algorithm[NcclCollective::all_reduce] = CollectiveAlgorithm::tree;
  EXPECT_EQ(collective_time(NcclCollective::all_reduce, kGiB, GroupPlacement{8, 8, 1, {}}, hw).algorithm, CollectiveAlgorithm::tree);
  hw.collective_algorithm[NcclCollective::all_reduce] = CollectiveAlgorithm::nvls;
  try {
    collective_time(NcclCollective::all_reduce, kGiB, GroupPlacement{4, 4, 1, {}}, hw);
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    EXPECT_STREQ(e.what(),
                 "hardware h100-sxm-80gb: collective_algorithm.all_reduce: nvls does not apply to a group of 4 ranks in "
                 "one node");
  }
}

TEST(Collectives, AllToAllBroadcastSendRecvClosedForms) {
  HardwareConfig hw = h100();
  const double nvlink = 450e9 * 0.822;
  // All-to-all: 7 pairwise steps of M/8, each with its latency, at the all-to-all's share of
  // the line rate (0.711, not the rings' 0.822).
  EXPECT_NEAR(collective_time(NcclCollective::alltoall, kGiB, GroupPlacement{8, 8, 1, {}}, hw).time_us,
              7 * (kGiB / 8 / (450e9 * 0.711) * 1e6 + 1.9), 1e-6);
  // Broadcast: M pipelined along the ring, 7 hops of latency.
  EXPECT_NEAR(collective_time(NcclCollective::broadcast, kGiB, GroupPlacement{8, 8, 1, {}}, hw).time_us, kGiB / nvlink * 1e6 + 7 * 1.9, 1e-6);
  // Send/receive across nodes: M on the NIC (47 GB/s) plus one hop.
  EXPECT_NEAR(collective_time(NcclCollective::sendrecv, kGiB, GroupPlacement{2, 1, 2, {}}, hw).time_us, kGiB / 47e9 * 1e6 + 4.0, 1e-6);
}

HardwareConfig preset(const std::string& name) {
  return load_hardware_yaml(std::string(SYSSIM_SOURCE_DIR) + "/configs/hardware/" + name + ".yaml");
}

TEST(Collectives, BusBandwidthsAreNvidiasNcclTestsFigures) {
  // NVIDIA GTC 2025 session S72583, nccl-tests bus bandwidth (GB/s). Slide 12, all-reduce: on 8
  // GPUs A100 232, H100 370 (NVLink SHARP 480), B200 700 (the b200 preset has no NVLS); on 32
  // GPUs GB200 NVL72 680, DGX H100 (NVLink 4 + 8x 400Gb) 370, DGX A100 (NVLink 3 + 8x 200Gb) 192.
  // Slide 13, alltoall: on 8 GPUs A100 210, H100 320, B200 640; on 32 GPUs DGX A100 (8x 200Gb)
  // 24, DGX H100 (8x 400Gb) 48, GB200 NVL72 640. At 4 GiB per rank the latencies take up to 0.9%
  // of the time (the 32 GPUs of the rack: 31 steps of 1.9 us), within the 1% allowed.
  const double size = 4 * kGiB;
  auto busbw = [&](NcclCollective collective, const std::string& name, int64_t gpus, bool ring = false) {
    HardwareConfig hw = preset(name);
    if (ring) hw.collective_algorithm[NcclCollective::all_reduce] = CollectiveAlgorithm::ring;
    std::vector<int64_t> ranks(static_cast<size_t>(gpus));
    std::iota(ranks.begin(), ranks.end(), int64_t{0});
    return busbw_GBps(collective, size, gpus, collective_time(collective, size, place_ranks(ranks, hw), hw));
  };
  const bool ring = true;
  EXPECT_NEAR(busbw(NcclCollective::all_reduce, "a100-sxm-80gb", 8), 232, 2.3);
  EXPECT_NEAR(busbw(NcclCollective::all_reduce, "h100-sxm-80gb", 8, ring), 370, 3.7);
  EXPECT_NEAR(busbw(NcclCollective::all_reduce, "h100-sxm-80gb", 8), 480, 4.8);
  EXPECT_NEAR(busbw(NcclCollective::all_reduce, "b200", 8), 700, 7);
  EXPECT_NEAR(busbw(NcclCollective::all_reduce, "gb200-nvl72", 32, ring), 680, 6.8);
  // Across 4 nodes of 8 GPUs the NICs bind, at the presets' 0.94 of their line rate: DGX H100
  // 370 (8 x 47 = 376 less the steps' latencies), DGX A100 192 (8 x 23.5 = 188 so).
  EXPECT_NEAR(busbw(NcclCollective::all_reduce, "h100-sxm-80gb", 32), 370, 7.4);
  EXPECT_NEAR(busbw(NcclCollective::all_reduce, "a100-sxm-80gb", 32), 192, 5.8);
  auto alltoall = [&](const std::string& name, int64_t gpus) { return busbw(NcclCollective::alltoall, name, gpus); };
  EXPECT_NEAR(alltoall("a100-sxm-80gb", 8), 210, 2.1);
  EXPECT_NEAR(alltoall("h100-sxm-80gb", 8), 320, 3.2);
  EXPECT_NEAR(alltoall("b200", 8), 640, 6.4);
  EXPECT_NEAR(alltoall("a100-sxm-80gb", 32), 24, 0.24);
  EXPECT_NEAR(alltoall("h100-sxm-80gb", 32), 48, 0.48);
  EXPECT_NEAR(alltoall("gb200-nvl72", 32), 640, 6.4);
}

TEST(Collectives, AllToAllWithoutItsOwnShareTakesTheRingsEfficiency) {
  // A level without alltoall_efficiency prices the all-to-all at its efficiency, as the rings:
  // 7 steps of M/8 at 450 x 0.822 GB/s, each with its latency.
  HardwareConfig hw = h100();
  hw.topology[0].alltoall_efficiency.reset();
  EXPECT_NEAR(collective_time(NcclCollective::alltoall, kGiB, GroupPlacement{8, 8, 1, {}}, hw).time_us,
              7 * (kGiB / 8 / (450e9 * 0.822) * 1e6 + 1.9), 1e-6);
}

TEST(Topology, NodesOfOneGpuTakeTheShorthandNetworkWithoutALevelZero) {
  // A ring reduce-scatter of 4 ranks, one per node: 3/4 of the bytes over the 50 GB/s network,
  // 3 steps of its latency (0 here).
  HardwareConfig hw;
  hw.name = "one-gpu-nodes";
  hw.peak_tflops_mm = 989, hw.peak_tflops_math = 67, hw.peak_memory_bandwidth_GBps = 3350;
  hw.gpus_per_node = 1;
  hw.inter_node_bandwidth_GBps = 50;
  const CollectiveTime t = collective_time(NcclCollective::reduce_scatter, kGiB, GroupPlacement{4, 1, 4, {}}, hw);
  EXPECT_NEAR(t.time_us, 3.0 / 4 * kGiB / 50e9 * 1e6, 1e-6);
}

TEST(Topology, LinksAreTheLevelsAfterEfficiencyAndOversubscription) {
  std::vector<Link> links = network_links(preset("h100-100gbe"));
  ASSERT_EQ(links.size(), 3u);
  EXPECT_EQ(links[0].name, "nvlink");
  EXPECT_NEAR(links[0].bandwidth_GBps, 450 * 0.822, 1e-9);
  EXPECT_EQ(links[1].name, "leaf");
  EXPECT_NEAR(links[1].bandwidth_GBps, 12.5 / 8 * 0.94, 1e-9);  // one 100 GbE NIC for 8 GPUs
  EXPECT_NEAR(links[2].bandwidth_GBps, 12.5 / 8 * 0.94 / 4, 1e-9);  // 4:1 uplinks
  // api.md's shorthand keys are one scale-out level, at the line rate.
  HardwareConfig shorthand = preset("b200");
  shorthand.topology.resize(1);
  shorthand.inter_node_bandwidth_GBps = 50;
  links = network_links(shorthand);
  ASSERT_EQ(links.size(), 2u);
  EXPECT_EQ(links[1].name, "network");
  EXPECT_DOUBLE_EQ(links[1].bandwidth_GBps, 50);
  // The B200 preset's ConnectX-7 at NCCL's 47 of 50 GB/s, as the H100's.
  EXPECT_NEAR(network_links(preset("b200"))[1].bandwidth_GBps, 50 * 0.94, 1e-9);
}

TEST(Topology, PlacementCountsNodesAndLeaves) {
  HardwareConfig hw = preset("h100-100gbe");  // 8 GPUs per node, 128 per leaf
  GroupPlacement g = place_ranks({0, 8, 16, 24}, hw);
  EXPECT_EQ(g.size, 4);
  EXPECT_EQ(g.ranks_per_node, 1);
  EXPECT_EQ(g.outer_domains, (std::vector<int64_t>{1}));
  g = place_ranks({0, 1, 128, 129}, hw);
  EXPECT_EQ(g.ranks_per_node, 2);
  EXPECT_EQ(g.nodes, 2);
  EXPECT_EQ(g.outer_domains, (std::vector<int64_t>{2}));
}

// A group that fills its nodes unevenly (tp 4, dp 3 on 8-GPU nodes: ranks 0 and 4 in the first
// node, 8 in the second) crosses the network, priced at the node holding the fewest of its
// ranks: one rank's NIC share carries the node's whole ring crossing. The ring all-gather of M:
// 2/3 M through that share, one of its two steps between nodes (4 us) and one on NVLink (1.9 us).
TEST(Topology, AGroupSpreadUnevenlyIsPricedAtItsSparsestNode) {
  HardwareConfig hw = preset("h100-100gbe");
  GroupPlacement g = place_ranks({0, 4, 8}, hw);
  EXPECT_EQ(g.size, 3);
  EXPECT_EQ(g.ranks_per_node, 1);
  EXPECT_EQ(g.nodes, 2);
  const double nic_GBps = network_links(hw)[1].bandwidth_GBps;
  CollectiveTime t = collective_time(NcclCollective::all_gather, kGiB, g, hw);
  EXPECT_NEAR(t.time_us, 2.0 / 3 * kGiB / (nic_GBps * 1e3) + 4.0 + 1.9, 1e-6);
}

// The data-parallel reduce-scatter of tp=8 (one rank per node) on 8 nodes: 7/8 of M per rank on
// its NIC share, 7 steps of 4 us.
double reduce_scatter_us(const HardwareConfig& hw, double bytes) {
  return collective_time(NcclCollective::reduce_scatter, bytes, place_ranks({0, 8, 16, 24, 32, 40, 48, 56}, hw), hw).time_us;
}

TEST(Oversubscription, ReduceScatterScalesWithTheNicAndTheUplinks) {
  const double bytes = kGiB, latency_us = 7 * 4.0;
  HardwareConfig hw = preset("h100-100gbe");
  // 8 nodes under one leaf: the NIC share binds, 1.5625 * 0.94 GB/s.
  const double nic = 12.5e9 / 8 * 0.94;
  EXPECT_NEAR(reduce_scatter_us(hw, bytes), 7.0 / 8 * bytes / nic * 1e6 + latency_us, 1e-6);
  // Half the NIC bandwidth: twice the transfer time.
  HardwareConfig slow = hw;
  slow.topology[1].bandwidth_GBps /= 2;
  slow.topology[2].bandwidth_GBps /= 2;
  EXPECT_NEAR(reduce_scatter_us(slow, bytes) - latency_us, 2 * (reduce_scatter_us(hw, bytes) - latency_us), 1e-6);
  // Leaves of 2 nodes: the ring crosses 4 leaf boundaries per 8 node hops, so the uplinks carry
  // half the NIC bytes. At 1:1 they have room; at 4:1 each GPU's uplink share is nic/4 for
  // half the bytes: the ring runs at nic/2.
  HardwareConfig small_leaves = hw;
  small_leaves.topology[1].size = 16;
  small_leaves.topology[2].oversubscription = 1;
  EXPECT_NEAR(reduce_scatter_us(small_leaves, bytes), 7.0 / 8 * bytes / nic * 1e6 + latency_us, 1e-6);
  small_leaves.topology[2].oversubscription = 4;
  EXPECT_NEAR(reduce_scatter_us(small_leaves, bytes), 7.0 / 8 * bytes / (nic / 2) * 1e6 + latency_us, 1e-6);
}

TEST(Oversubscription, AllToAllAcrossLeavesIsUplinkBound) {
  // 32 nodes, one rank each, two leaves of 16: a rank sends 31/32 of M to remote peers on its NIC,
  // 16 of those 31 peers are behind the uplinks (load 16/31) at nic/4: 0.4 nic per unit of NIC bytes.
  HardwareConfig hw = preset("h100-100gbe");
  std::vector<int64_t> ranks;
  for (int64_t node = 0; node < 32; ++node) ranks.push_back(node * 8);
  const double nic = 12.5e9 / 8 * 0.743;  // the all-to-all's share of the line rate
  CollectiveTime t = collective_time(NcclCollective::alltoall, kGiB, place_ranks(ranks, hw), hw);
  EXPECT_NEAR(t.time_us, 31.0 / 32 * kGiB / (nic / 4 * 31 / 16) * 1e6 + 31 * 4.0, 1e-6);
}

ShardOp collective_op(const std::string& collective, const std::string& group, int64_t size, int64_t stage = 0) {
  ShardOp op;
  op.kind = OpKind::collective;
  op.collective = parse_enum<Collective>(collective).value();
  op.group = parse_enum<CommGroup>(group).value();
  op.group_size = size;
  op.stage = stage;
  op.phase = OpPhase::fwd;
  op.message_bytes = kGiB;
  return op;
}

TEST(Placement, MegatronOrderDecidesWhichGroupsCrossNodes) {
  // tp=4 dp=2 pp=2 on 8-GPU nodes. Megatron's default order tp-cp-ep-dp-pp puts a DP pair 4 ranks
  // apart (one node) and the pipeline stages 8 apart (two nodes); tp-pp-dp swaps them.
  HardwareConfig hw = h100();
  ParallelismConfig p;
  p.tp = 4, p.dp = 2, p.pp = 2;
  ShardOp dp_reduce = collective_op("all_reduce", "dp", 2);
  ShardOp recv = collective_op("send_recv", "pp", 2, 1);
  EXPECT_NEAR(shard_collective_time(recv, p, hw).time_us, kGiB / 47e9 * 1e6 + 4.0, 1e-6);
  EXPECT_EQ(shard_collective_time(dp_reduce, p, hw).phases.front().links, (std::vector<int64_t>{0}));
  p.order = "tp-pp-dp";
  EXPECT_NEAR(shard_collective_time(recv, p, hw).time_us, kGiB / (450e9 * 0.822) * 1e6 + 1.9, 1e-6);
  EXPECT_EQ(shard_collective_time(dp_reduce, p, hw).phases.front().links, (std::vector<int64_t>{1}));
  p.order = "tp-dp";
  EXPECT_THROW(shard_collective_time(dp_reduce, p, hw), DataError);
}

TEST(Flex, EachTokenCrossesOnceToEachGpuAndNodeOfItsExperts) {
  // The flex dispatcher's exchange of M = 1 GiB of token rows: Qwen3-30B-A3B's routing, 128
  // experts, top 8, no groups. ep 8 on one node: a GPU holds 16 experts and gets a token with
  // chance 1 - C(112,8)/C(128,8); 7 peers over NVLink, 7 latencies.
  HardwareConfig hw = h100();
  ParallelismConfig p;
  p.ep = 8, p.dp = 8;
  ShardOp exchange = collective_op("flex_all_to_all", "ep", 8);
  exchange.shape = {{"experts", 128}, {"topk", 8}, {"groups", 0}, {"group_topk", 0}};
  auto miss = [](double pool, double held, int k) {  // C(pool - held, k) / C(pool, k)
    double c = 1;
    for (int i = 0; i < k; ++i) c *= (pool - held - i) / (pool - i);
    return c;
  };
  const double gpu = 1 - miss(128, 16, 8);
  EXPECT_NEAR(gpu, 0.667419611923, 1e-12);
  CollectiveTime one_node = shard_collective_time(exchange, p, hw);
  EXPECT_EQ(one_node.algorithm, CollectiveAlgorithm::flex);
  EXPECT_NEAR(one_node.time_us, kGiB * gpu * 7 / (450e9 * 0.822) * 1e6 + 7 * 1.9, 1e-6);
  // ep 16 over two nodes: once to the other node when it holds one of the 8 (its 64 experts),
  // on the NIC share (47 GB/s); over NVLink the node's 7 other GPUs (8 experts each) and the
  // tokens forwarded from the other node: M gpu 7 x 2. The NIC binds; 15 latencies of 4 us.
  p.ep = 16, p.dp = 16;
  exchange.group_size = 16;
  const double node = 1 - miss(128, 64, 8), gpu16 = 1 - miss(128, 8, 8);
  CollectiveTime two_nodes = shard_collective_time(exchange, p, hw);
  ASSERT_EQ(two_nodes.phases.size(), 1u);
  EXPECT_NEAR(two_nodes.phases[0].bytes, kGiB * node, 1e-3);
  EXPECT_EQ(two_nodes.phases[0].links, (std::vector<int64_t>{0, 1}));
  EXPECT_NEAR(two_nodes.phases[0].loads[0], gpu16 * 7 * 2 / node, 1e-12);
  EXPECT_NEAR(two_nodes.time_us, kGiB * node / 47e9 * 1e6 + 15 * 4.0, 1e-6);
  // NCCL's all-to-all sends 8 copies of each token, 8/16 of them to the other node.
  ShardOp nccl = collective_op("all_to_all", "ep", 16);
  nccl.message_bytes = 8 * kGiB;
  EXPECT_NEAR(shard_collective_time(nccl, p, hw).phases[0].bytes / two_nodes.phases[0].bytes, 4 / node, 1e-9);
  // DeepSeek-V3's group-limited routing (256 experts, top 8 among 4 of 8 groups), ep 64 over 8
  // nodes: a node holds one group, picked with chance 4/8, then one of the 8 among its 128.
  p.ep = 64, p.dp = 64;
  exchange.group_size = 64;
  exchange.shape = {{"experts", 256}, {"topk", 8}, {"groups", 8}, {"group_topk", 4}};
  EXPECT_NEAR(shard_collective_time(exchange, p, hw).phases[0].bytes, kGiB * 0.5 * (1 - miss(128, 32, 8)) * 7, 1e-3);
  // ep 4 in one node: a GPU holds 2 of the 8 groups, of which 0, 1 or 2 are picked with
  // chances C(6,4)/C(8,4) = 15/70, 2 C(6,3)/70 = 40/70 and C(6,2)/70 = 15/70.
  p.ep = 4, p.dp = 4;
  exchange.group_size = 4;
  const double missed = 15.0 / 70 + 40.0 / 70 * miss(128, 32, 8) + 15.0 / 70 * miss(128, 64, 8);
  EXPECT_NEAR(shard_collective_time(exchange, p, hw).phases[0].bytes, kGiB * (1 - missed) * 3, 1e-3);
  // Without its routing, or with a routing no model has, the op cannot be priced.
  exchange.shape = {};
  EXPECT_THROW(shard_collective_time(exchange, p, hw), DataError);
  exchange.shape = {{"experts", 1e9}, {"topk", 8}, {"groups", 0}, {"group_topk", 0}};
  EXPECT_THROW(shard_collective_time(exchange, p, hw), DataError);
  exchange.shape = {{"experts", 256}, {"topk", 8}, {"groups", 7}, {"group_topk", 4}};  // 7 does not divide 256
  EXPECT_THROW(shard_collective_time(exchange, p, hw), DataError);
}

TEST(Sizes, SuffixesArePowersOfTwoAndTheSweepDoubles) {
  EXPECT_EQ(parse_sizes("1G", "--bytes"), std::vector<int64_t>{1073741824});
  EXPECT_EQ(parse_sizes("8B:64", "--sweep"), (std::vector<int64_t>{8, 16, 32, 64}));
  EXPECT_EQ(parse_sizes("1K:4K", "--sweep"), (std::vector<int64_t>{1024, 2048, 4096}));
  EXPECT_EQ(parse_sizes("8B:16G", "--sweep").size(), 32u);  // 2^3 .. 2^34
  for (const char* bad : {"12X", "0", "", "1.5M", "64:8", "-8"}) EXPECT_THROW(parse_sizes(bad, "--bytes"), UsageError) << bad;
}

TEST(Report, RefusesGpusThatDoNotFillNodes) {
  CollectiveRequest request{"all_reduce", 12, "1M", "", "csv"};
  try {
    collective_report(request, h100());
    FAIL() << "expected UsageError";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "--gpus: 12 GPUs do not fill whole nodes of gpus_per_node=8 (hardware h100-sxm-80gb)");
  }
}

TEST(Config, CollectiveAlgorithmIsStrict) {
  const std::string base =
      "peak_tflops_mm: 1\npeak_tflops_math: 1\npeak_memory_bandwidth_GBps: 1\ngpus_per_node: 1\n";
  EXPECT_EQ(parse_hardware_yaml(base + "collective_algorithm: {all_reduce: tree}\n", "x.yaml")
                .collective_algorithm.at(NcclCollective::all_reduce),
            CollectiveAlgorithm::tree);
  EXPECT_TRUE(parse_hardware_yaml(base + "collective_algorithm: {all_reduce: auto}\n", "x.yaml").collective_algorithm.empty());
  EXPECT_THROW(parse_hardware_yaml(base + "collective_algorithm: {all_reduce: nvlsx}\n", "x.yaml"), DataError);
  EXPECT_THROW(parse_hardware_yaml(base + "collective_algorithm: {allreduce: ring}\n", "x.yaml"), DataError);
  EXPECT_THROW(parse_hardware_yaml(base + "collective_algorithm: {all_gather: tree}\n", "x.yaml"), DataError);
  // The graph's hardware reads the forced algorithms back, and refuses one its collective lacks.
  HardwareConfig hw = parse_hardware_yaml(base + "collective_algorithm: {all_reduce: tree, alltoall: pairwise}\n", "x.yaml");
  EXPECT_EQ(hardware_from_json(to_json(hw), "/cost/hardware").collective_algorithm, hw.collective_algorithm);
  nlohmann::json wrong = to_json(hw);
  wrong["collective_algorithm"]["alltoall"] = "ring";
  try {
    hardware_from_json(wrong, "/cost/hardware");
    ADD_FAILURE() << "a ring all-to-all was read";
  } catch (const DataError& e) {
    EXPECT_STREQ(e.what(), "graph: /cost/hardware/collective_algorithm/alltoall: expected pairwise, got \"ring\"");
  }
}

}  // namespace
}  // namespace syssim
