// Pictures of a simulated step (docs/syssim-report.md): the Chrome trace that Perfetto and
// chrome://tracing open, and the pipeline schedule as an SVG. Both draw the sim section's
// timeline, which syssim-sim keeps only when asked (--timeline).
#pragma once
#include <string>
#include <vector>

#include "common/graph.hpp"

namespace syssim {

// The sim section's timeline, checked against the shard section; throws DataError when the
// graph has none (run syssim-sim --timeline) or when an entry names an op or rank that does not exist.
const std::vector<TimelineEntry>& need_timeline(const Graph& g);

// The transient buffers (activations and temporaries, as syssim-mem counts them) live on one
// pipeline rank from `time_ms` until the next sample.
struct MemorySample {
  double time_ms = 0;
  double activation_bytes = 0;  // written by a forward op and read by a backward op
  double other_bytes = 0;
};

// Per pipeline rank, a sample at 0 and at each time the live bytes change, in time order.
// syssim-mem's rule in time: a buffer exists once per micro-batch (once per step for step
// ops), from the start of the first op instance that writes it (one nobody writes: from the
// start of its micro-batch on the rank) to the end of the last one that uses it.
std::vector<std::vector<MemorySample>> live_buffers(const Graph& g);

// The Chrome Trace Event Format: a JSON object with traceEvents. Needs shard, sim (timeline).
std::string render_chrome_trace(const Graph& g);

// The pipeline schedule as a standalone SVG document. Needs shard, sim (timeline).
std::string render_schedule_svg(const Graph& g);

}  // namespace syssim
