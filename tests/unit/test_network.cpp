// Collective pricing (lib/network): every expected time or bus bandwidth below is worked out
// by hand from the algorithm's closed form or taken from a published nccl-tests figure
// (docs/network.md).
#include <gtest/gtest.h>

#include <cmath>

#include "common/error.hpp"
#include "network/network.hpp"

namespace syssim {
namespace {

constexpr double kGiB = 1073741824.0;

HardwareConfig h100() { return load_hardware_yaml(std::string(SYSSIM_SOURCE_DIR) + "/configs/hardware/h100-sxm-80gb.yaml"); }

// nccl-tests: algbw = size / time, busbw = algbw * factor, in GB/s (1e9 B/s).
double busbw_GBps(const std::string& collective, double bytes, int64_t ranks, const CollectiveTime& t) {
  return bytes / (t.time_us * 1e3) * bus_bandwidth_factor(collective, ranks);
}

TEST(BusBandwidth, FactorsAreNcclTests) {
  // nccl-tests doc/PERFORMANCE.md.
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor("all_reduce", 8), 2.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor("all_gather", 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor("reduce_scatter", 4), 3.0 / 4);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor("alltoall", 16), 15.0 / 16);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor("broadcast", 8), 1.0);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor("sendrecv", 8), 1.0);
  EXPECT_THROW(bus_bandwidth_factor("allreduce", 8), UsageError);
}

TEST(H100, AllGatherOfOneNodeReachesTheNvlinkBusBandwidth) {
  // NCCL maintainer, nccl-tests issue 212: 370 GB/s effective of the 450 GB/s line rate.
  // The ring: 7/8 * 2^30 B / (450e9 * 0.822) s + 7 * 1.9 us.
  HardwareConfig hw = h100();
  CollectiveTime t = collective_time("all_gather", kGiB, {8, 8}, hw);
  EXPECT_EQ(t.algorithm, "ring");
  EXPECT_NEAR(t.time_us, 7.0 / 8 * kGiB / (450e9 * 0.822) * 1e6 + 7 * 1.9, 1e-6);
  EXPECT_NEAR(busbw_GBps("all_gather", kGiB, 8, t), 450 * 0.822, 0.01 * 450 * 0.822);
}

TEST(H100, AllReduceOfTheWholeNodeTakesNvlsAt480) {
  // Same issue: "On 8 GPUs, you should reach a peak busBw of ~480GB/s (algbw ~275GB/s)".
  HardwareConfig hw = h100();
  CollectiveTime t = collective_time("all_reduce", kGiB, {8, 8}, hw);
  EXPECT_EQ(t.algorithm, "nvls");
  EXPECT_NEAR(busbw_GBps("all_reduce", kGiB, 8, t), 480, 4.8);
  EXPECT_NEAR(kGiB / (t.time_us * 1e3), 275, 2.75);
  // A group smaller than the NVLink domain keeps the ring (or the tree).
  EXPECT_EQ(collective_time("all_reduce", kGiB, {4, 4}, hw).algorithm, "ring");
}

TEST(H100, RingAllReduceAcrossTwoNodesIsLimitedByTheNic) {
  // Forced flat ring over 16 ranks: every step waits for the 50 GB/s NIC (400 Gb/s
  // ConnectX-7): busbw = 50 GB/s less the 30 steps of 4 us.
  HardwareConfig hw = h100();
  hw.collective_algorithm["all_reduce"] = "ring";
  CollectiveTime t = collective_time("all_reduce", kGiB, {16, 8}, hw);
  EXPECT_EQ(t.algorithm, "ring");
  EXPECT_NEAR(t.time_us, 2 * 15.0 / 16 * kGiB / 50e9 * 1e6 + 30 * 4.0, 1e-6);
  EXPECT_NEAR(busbw_GBps("all_reduce", kGiB, 16, t), 50, 0.5);
}

TEST(H100, HierarchicalAllReduceByHand) {
  // Reduce-scatter in each node (7 steps of M/8 on NVLink), a 2-node ring all-reduce of M/8 on
  // each GPU's NIC (2 * 1/2 * M/8 at 50 GB/s, 2 steps of 4 us), all-gather in the node.
  HardwareConfig hw = h100();
  const double nvlink = 450e9 * 0.822;
  double rs_us = 7.0 / 8 * kGiB / nvlink * 1e6 + 7 * 1.9;
  double inter_us = 2 * 0.5 * (kGiB / 8) / 50e9 * 1e6 + 2 * 4.0;
  CollectiveTime t = collective_time("all_reduce", kGiB, {16, 8}, hw);
  EXPECT_EQ(t.algorithm, "hierarchical");
  EXPECT_NEAR(t.time_us, 2 * rs_us + inter_us, 1e-6);
}

TEST(Choice, TreeWinsSmallMessagesRingLargeOnes) {
  // 4 GPUs in one node: tree 2M/B + 2*log2(4) λ, ring 1.5 M/B + 6 λ. They cross where
  // 0.5 M/B = 2 λ: M = 4 λ B = 4 * 1.9e-6 s * 369.9e9 B/s = 2.81 MB.
  HardwareConfig hw = h100();
  CollectiveTime small = collective_time("all_reduce", 8, {4, 4}, hw);
  EXPECT_EQ(small.algorithm, "tree");
  EXPECT_NEAR(small.time_us, 2 * 8 / (450e9 * 0.822) * 1e6 + 4 * 1.9, 1e-9);
  EXPECT_EQ(collective_time("all_reduce", 2.7e6, {4, 4}, hw).algorithm, "tree");
  EXPECT_EQ(collective_time("all_reduce", 2.9e6, {4, 4}, hw).algorithm, "ring");
  // Across 2 nodes, 8 bytes: tree 2*log2(16) = 8 steps of 4 us = 32 us beats the hierarchical
  // 2*7*1.9 + 2*4 = 34.6 us and the ring's 30 steps.
  EXPECT_EQ(collective_time("all_reduce", 8, {16, 8}, hw).algorithm, "tree");
}

TEST(Choice, HardwareKeyForcesAnAlgorithm) {
  HardwareConfig hw = h100();
  hw.collective_algorithm["all_reduce"] = "tree";
  EXPECT_EQ(collective_time("all_reduce", kGiB, {8, 8}, hw).algorithm, "tree");
  hw.collective_algorithm["all_reduce"] = "nvls";
  try {
    collective_time("all_reduce", kGiB, {4, 4}, hw);
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
  // All-to-all: 7 pairwise steps of M/8, each with its latency.
  EXPECT_NEAR(collective_time("alltoall", kGiB, {8, 8}, hw).time_us, 7 * (kGiB / 8 / nvlink * 1e6 + 1.9), 1e-6);
  // Broadcast: M pipelined along the ring, 7 hops of latency.
  EXPECT_NEAR(collective_time("broadcast", kGiB, {8, 8}, hw).time_us, kGiB / nvlink * 1e6 + 7 * 1.9, 1e-6);
  // Send/receive across nodes: M on the NIC plus one hop.
  EXPECT_NEAR(collective_time("sendrecv", kGiB, {16, 8}, hw).time_us, kGiB / 50e9 * 1e6 + 4.0, 1e-6);
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
                .collective_algorithm.at("all_reduce"),
            "tree");
  EXPECT_TRUE(parse_hardware_yaml(base + "collective_algorithm: {all_reduce: auto}\n", "x.yaml").collective_algorithm.empty());
  EXPECT_THROW(parse_hardware_yaml(base + "collective_algorithm: {all_reduce: nvlsx}\n", "x.yaml"), DataError);
  EXPECT_THROW(parse_hardware_yaml(base + "collective_algorithm: {allreduce: ring}\n", "x.yaml"), DataError);
  EXPECT_THROW(parse_hardware_yaml(base + "collective_algorithm: {all_gather: tree}\n", "x.yaml"), DataError);
}

}  // namespace
}  // namespace syssim
