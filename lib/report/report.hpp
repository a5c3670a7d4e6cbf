// The simulation report (docs/syssim-report.md, docs/metrics.md): the sections of a
// simulated graph rendered as text or JSON.
#pragma once
#include <string>

#include "common/graph.hpp"

namespace syssim {

// Throughput of the simulated step, per GPU.
struct Throughput {
  double achieved_tflops = 0;  // model FLOPs per second per GPU, in TFLOP/s
  double mfu = 0;              // fraction of the dense 16-bit tensor-core peak
  double hfu = 0;
  double tokens_per_s_per_gpu = 0;  // global batch x sequence per step, per GPU
};

// Needs g.shard, g.cost and g.sim; throws DataError when the step takes no time.
Throughput throughput(const Graph& g);

// The full report; needs g.shard, g.cost, g.sim and g.mem. format: "text" or "json" (else
// UsageError), or a picture of the sim timeline: "chrome-trace" or "svg" (report/pictures.hpp).
std::string render_report(const Graph& g, const std::string& format);

// The memory fields only; needs g.shard and g.mem (g.cost adds the hardware when present).
std::string render_memory_report(const Graph& g, const std::string& format);

}  // namespace syssim
