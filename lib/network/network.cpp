#include "network/network.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
#include <numeric>
#include <regex>
#include <sstream>

#include "common/error.hpp"

namespace syssim {
namespace {

constexpr double kBytesPerGB = 1e9;
constexpr double kUsPerS = 1e6;

struct Link {
  double bandwidth_GBps = 0;  // per GPU, one direction, after the protocol efficiency
  double latency_us = 0;      // per step
};

std::string describe(const GroupPlacement& group) {
  return "a group of " + std::to_string(group.size) + " ranks" +
         (group.nodes() > 1 ? " over " + std::to_string(group.nodes()) + " nodes" : " in one node");
}

Link intra_node_link(const HardwareConfig& hw, const GroupPlacement& group) {
  if (hw.topology.empty())
    throw DataError("hardware " + hw.name + ": topology.levels[0] is required by " + describe(group));
  const TopologyLevel& level = hw.topology[0];
  return {level.bandwidth_GBps * level.efficiency, level.latency_us};
}

Link inter_node_link(const HardwareConfig& hw, const GroupPlacement& group) {
  if (!hw.inter_node_bandwidth_GBps)
    throw DataError("hardware " + hw.name + ": inter_node_bandwidth_GBps is required: " + describe(group) +
                    " crosses nodes (gpus_per_node=" + std::to_string(hw.gpus_per_node) + ")");
  return {*hw.inter_node_bandwidth_GBps, hw.inter_node_latency_us};
}

// A flat algorithm over the whole group runs at the pace of its slowest link.
Link slowest_link(const HardwareConfig& hw, const GroupPlacement& group) {
  return group.nodes() > 1 ? inter_node_link(hw, group) : intra_node_link(hw, group);
}

double transfer_us(double bytes, const Link& link) { return bytes / (link.bandwidth_GBps * kBytesPerGB) * kUsPerS; }

// Ring: `passes` rounds of n-1 steps, each moving M/n per rank (all-reduce is a reduce-scatter
// then an all-gather: two passes).
double ring_us(double passes, double bytes, int64_t ranks, const Link& link) {
  double n = static_cast<double>(ranks);
  return passes * ((n - 1) / n * transfer_us(bytes, link) + (n - 1) * link.latency_us);
}

// Double binary tree (NCCL): a reduce up and a broadcast down, each of depth log2(n); every
// rank receives and sends the whole message in each, so M crosses its link twice.
double tree_all_reduce_us(double bytes, const GroupPlacement& group, const Link& link) {
  double depth = std::ceil(std::log2(static_cast<double>(group.size)));
  return 2 * transfer_us(bytes, link) + 2 * depth * link.latency_us;
}

// NVLink SHARP: the switch reduces and multicasts, so a rank sends its data once and receives
// the result once; the bus bandwidth is the level's measured NVLS bus bandwidth, and the
// latency one reduce and one multicast step.
double nvls_all_reduce_us(double bytes, const GroupPlacement& group, const HardwareConfig& hw) {
  const TopologyLevel& level = hw.topology[0];
  double n = static_cast<double>(group.size);
  return 2 * (n - 1) / n * bytes / (*level.nvls_bus_bandwidth_GBps * kBytesPerGB) * kUsPerS + 2 * level.latency_us;
}

bool nvls_applies(const GroupPlacement& group, const HardwareConfig& hw) {
  return group.nodes() == 1 && !hw.topology.empty() && hw.topology[0].nvls_bus_bandwidth_GBps &&
         group.size == hw.topology[0].size;
}

// Intra-node reduce-scatter, all-reduce of the node's 1/local share between nodes (each of the
// local ranks on its own NIC, at once), intra-node all-gather.
double hierarchical_all_reduce_us(double bytes, const GroupPlacement& group, const HardwareConfig& hw) {
  Link intra = intra_node_link(hw, group), inter = inter_node_link(hw, group);
  return 2 * ring_us(1, bytes, group.ranks_per_node, intra) +
         ring_us(2, bytes / static_cast<double>(group.ranks_per_node), group.nodes(), inter);
}

std::string op_path(const ShardOp& op) { return "/shard/ops/" + std::to_string(op.id); }

// Megatron orders ranks TP fastest, then CP, then DP, so consecutive members of a group are
// this many ranks apart.
int64_t rank_stride(const ShardOp& op, const ParallelismConfig& p) {
  if (op.group == "tp") return 1;
  if (op.group == "cp") return p.tp;
  if (op.group == "dp") return p.tp * p.cp;
  throw DataError(op_path(op) + "/group: unknown collective group \"" + op.group + "\"");
}

// The pipeline stages a pp or embedding collective connects: a send_recv joins its stage with
// the virtual stage it receives from (the previous one in the forward direction, the next in
// the backward one); the embedding group is the first and last stage, the pp group all.
std::vector<int64_t> pipeline_stages(const ShardOp& op, const ParallelismConfig& p) {
  if (op.group == "embedding") return {0, p.pp - 1};
  std::vector<int64_t> stages;
  if (op.collective != "send_recv") {
    for (int64_t s = 0; s < p.pp; ++s) stages.push_back(s);
    return stages;
  }
  int64_t virtual_stage = op.chunk * p.pp + op.stage;
  int64_t peer = op.phase == "fwd" ? virtual_stage - 1 : virtual_stage + 1;
  if (peer < 0 || peer >= p.pp * p.vpp.value_or(1))
    throw DataError(op_path(op) + ": a " + op.phase + " send_recv of virtual stage " + std::to_string(virtual_stage) +
                    " has no neighbour to receive from");
  return {op.stage, peer % p.pp};
}

// Megatron's rank order ends with PP: pipeline stage s of TP/CP/DP position i is global rank
// s * tp*cp*dp + i. The stages talk within a node when, for every position, all their ranks
// are in one node.
bool stages_within_node(const std::vector<int64_t>& stages, const ParallelismConfig& p, int64_t gpus_per_node) {
  const int64_t stride = p.tp * p.cp * p.dp;
  for (int64_t i = 0; i < stride; ++i)
    for (int64_t s : stages)
      if ((s * stride + i) / gpus_per_node != (stages.front() * stride + i) / gpus_per_node) return false;
  return true;
}

// Where the members of an op's group lie. Pipeline stages in different nodes put one member
// in each node; a tp/cp/dp group of stride s puts gpus_per_node / s members in each node.
GroupPlacement placement_of(const ShardOp& op, const ParallelismConfig& p, int64_t gpus_per_node) {
  const int64_t n = op.group_size;
  if (op.group == "pp" || op.group == "embedding")
    return {n, stages_within_node(pipeline_stages(op, p), p, gpus_per_node) ? n : 1};
  const int64_t stride = rank_stride(op, p);
  if (stride * n <= gpus_per_node) return {n, n};
  return {n, std::max<int64_t>(1, std::gcd(n, gpus_per_node / stride))};
}

struct Candidate {
  std::string algorithm;
  bool applies;
  std::function<double()> time_us;
};

std::vector<Candidate> candidates(const std::string& collective, double bytes, const GroupPlacement& group,
                                  const HardwareConfig& hw) {
  auto flat = [&](std::function<double(const Link&)> f) { return [&hw, &group, f] { return f(slowest_link(hw, group)); }; };
  const int64_t n = group.size;
  if (collective == "all_reduce")
    return {{"ring", true, flat([=](const Link& l) { return ring_us(2, bytes, n, l); })},
            {"tree", true, flat([=, &group](const Link& l) { return tree_all_reduce_us(bytes, group, l); })},
            {"nvls", nvls_applies(group, hw), [=, &group, &hw] { return nvls_all_reduce_us(bytes, group, hw); }},
            {"hierarchical", group.nodes() > 1 && group.ranks_per_node > 1,
             [=, &group, &hw] { return hierarchical_all_reduce_us(bytes, group, hw); }}};
  if (collective == "all_gather" || collective == "reduce_scatter")
    return {{"ring", true, flat([=](const Link& l) { return ring_us(1, bytes, n, l); })}};
  // All-to-all: n-1 pairwise exchanges of M/n, one peer per step.
  if (collective == "alltoall")
    return {{"pairwise", true, flat([=](const Link& l) {
               return (n - 1) * (transfer_us(bytes / static_cast<double>(n), l) + l.latency_us);
             })}};
  // Broadcast: the message pipelined along a ring in small chunks; the last rank waits n-1 hops.
  if (collective == "broadcast")
    return {{"ring", true, flat([=](const Link& l) { return transfer_us(bytes, l) + (n - 1) * l.latency_us; })}};
  // Send/receive: each rank sends M to its peer and receives M, one direction of its link each.
  if (collective == "sendrecv")
    return {{"p2p", true, flat([=](const Link& l) { return transfer_us(bytes, l) + l.latency_us; })}};
  throw UsageError("collective: expected all_reduce|all_gather|reduce_scatter|alltoall|broadcast|sendrecv, got '" +
                   collective + "'");
}

}  // namespace

CollectiveTime collective_time(const std::string& collective, double bytes, const GroupPlacement& group,
                               const HardwareConfig& hw) {
  std::vector<Candidate> options = candidates(collective, bytes, group, hw);
  if (group.size < 2) return {0.0, options.front().algorithm};
  auto forced = hw.collective_algorithm.find(collective);
  if (forced != hw.collective_algorithm.end()) {
    for (const Candidate& c : options)
      if (c.algorithm == forced->second) {
        if (!c.applies)
          throw DataError("hardware " + hw.name + ": collective_algorithm." + collective + ": " + c.algorithm +
                          " does not apply to " + describe(group));
        return {c.time_us(), c.algorithm};
      }
  }
  CollectiveTime best;
  for (const Candidate& c : options) {
    if (!c.applies) continue;
    double time = c.time_us();
    if (best.algorithm.empty() || time < best.time_us) best = {time, c.algorithm};
  }
  return best;
}

// The shard section names the point-to-point exchange send_recv; nccl-tests sendrecv.
CollectiveTime shard_collective_time(const ShardOp& op, const ParallelismConfig& p, const HardwareConfig& hw) {
  const std::string collective = op.collective == "send_recv" ? "sendrecv" : op.collective;
  if (collective != "all_reduce" && collective != "all_gather" && collective != "reduce_scatter" &&
      collective != "sendrecv")
    throw DataError(op_path(op) + "/collective: unknown collective \"" + op.collective + "\"");
  if (op.group_size < 1)
    throw DataError(op_path(op) + "/group_size: expected at least 1, got " + std::to_string(op.group_size));
  if (op.group_size == 1) return {0.0, ""};
  const bool pipeline = op.group == "pp" || op.group == "embedding";
  GroupPlacement group = placement_of(op, p, hw.gpus_per_node);
  if (group.nodes() > 1 && !hw.inter_node_bandwidth_GBps)
    throw DataError("hardware " + hw.name + ": inter_node_bandwidth_GBps is required: the " + op.group +
                    (pipeline ? " collective at " + op_path(op) + " connects pipeline stages on different nodes"
                              : " group spans " + std::to_string(rank_stride(op, p) * op.group_size) +
                                    " ranks, more than gpus_per_node=" + std::to_string(hw.gpus_per_node)));
  try {
    return collective_time(collective, op.message_bytes, group, hw);
  } catch (const DataError& e) {
    throw DataError(std::string(e.what()) + ", needed by the " + op.group + " " + op.collective + " at " + op_path(op));
  }
}

double bus_bandwidth_factor(const std::string& collective, int64_t ranks) {
  double n = static_cast<double>(ranks);
  if (collective == "all_reduce") return 2 * (n - 1) / n;
  if (collective == "all_gather" || collective == "reduce_scatter" || collective == "alltoall") return (n - 1) / n;
  if (collective == "broadcast" || collective == "sendrecv") return 1;
  throw UsageError("collective: expected all_reduce|all_gather|reduce_scatter|alltoall|broadcast|sendrecv, got '" +
                   collective + "'");
}

std::vector<int64_t> parse_sizes(const std::string& value, const std::string& flag) {
  auto one = [&](const std::string& text) {
    static const std::regex size_re("([0-9]{1,9})([BKMG]?)");
    std::smatch m;
    if (!std::regex_match(text, m, size_re) || std::stoll(m[1]) == 0)
      throw UsageError(flag + ": expected a positive size like 8, 8B, 64K, 16M or 1G, got '" + value + "'");
    const std::string unit = m[2];
    int shift = unit == "K" ? 10 : unit == "M" ? 20 : unit == "G" ? 30 : 0;
    return std::stoll(m[1]) << shift;
  };
  size_t colon = value.find(':');
  if (colon == std::string::npos) return {one(value)};
  int64_t low = one(value.substr(0, colon)), high = one(value.substr(colon + 1));
  if (low > high) throw UsageError(flag + ": the first size must not exceed the second, got '" + value + "'");
  std::vector<int64_t> sizes;
  for (int64_t size = low; size <= high; size *= 2) sizes.push_back(size);
  return sizes;
}

std::string collective_report(const CollectiveRequest& request, const HardwareConfig& hw) {
  bus_bandwidth_factor(request.collective, 2);  // rejects an unknown collective first
  if (request.format != "table" && request.format != "csv" && request.format != "json")
    throw UsageError("--format: expected table, csv or json, got '" + request.format + "'");
  if (request.gpus < 2) throw UsageError("--gpus: expected at least 2, got " + std::to_string(request.gpus));
  if (request.gpus > hw.gpus_per_node && request.gpus % hw.gpus_per_node != 0)
    throw UsageError("--gpus: " + std::to_string(request.gpus) + " GPUs do not fill whole nodes of gpus_per_node=" +
                     std::to_string(hw.gpus_per_node) + " (hardware " + hw.name + ")");
  if (request.bytes.empty() == request.sweep.empty()) throw UsageError("give one of --bytes SIZE or --sweep MIN:MAX");
  std::vector<int64_t> sizes =
      request.bytes.empty() ? parse_sizes(request.sweep, "--sweep") : parse_sizes(request.bytes, "--bytes");
  GroupPlacement group{request.gpus, std::min(request.gpus, hw.gpus_per_node)};
  const double factor = bus_bandwidth_factor(request.collective, request.gpus);

  nlohmann::json rows = nlohmann::json::array();
  std::ostringstream out;
  char line[160];
  if (request.format == "table") {
    out << "# syssim collective: " << request.collective << " on " << request.gpus << " GPUs of " << hw.name << " ("
        << group.ranks_per_node << " per node, " << group.nodes() << (group.nodes() == 1 ? " node" : " nodes")
        << ")\n";
    std::snprintf(line, sizeof line, "#%13s %12s %11s %11s  %s\n", "size", "time_us", "algbw_GBps", "busbw_GBps",
                  "algorithm");
    out << line;
  } else if (request.format == "csv") {
    out << "size,time_us,algbw_GBps,busbw_GBps,algorithm\n";
  }
  for (int64_t size : sizes) {
    CollectiveTime t = collective_time(request.collective, static_cast<double>(size), group, hw);
    double algbw = static_cast<double>(size) / kBytesPerGB / (t.time_us / kUsPerS);
    double busbw = algbw * factor;
    if (request.format == "table") {
      std::snprintf(line, sizeof line, "%14lld %12.2f %11.2f %11.2f  %s\n", static_cast<long long>(size), t.time_us,
                    algbw, busbw, t.algorithm.c_str());
      out << line;
    } else if (request.format == "csv") {
      std::snprintf(line, sizeof line, "%lld,%.4f,%.4f,%.4f,%s\n", static_cast<long long>(size), t.time_us, algbw,
                    busbw, t.algorithm.c_str());
      out << line;
    } else {
      rows.push_back({{"size", size}, {"time_us", t.time_us}, {"algbw_GBps", algbw}, {"busbw_GBps", busbw},
                      {"algorithm", t.algorithm}});
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
