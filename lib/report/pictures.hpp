// Pictures of a simulated step (docs/syssim-report.md): the Chrome trace that Perfetto and
// chrome://tracing open, and the pipeline schedule as an SVG. Both draw the sim section's
// timeline, which syssim-sim keeps only when asked (--timeline).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/graph.hpp"

namespace syssim {

// The sim section's timeline, checked against the shard section; throws DataError when the
// graph has none (run syssim-sim --timeline) or when an entry names an op or rank that does not exist.
const std::vector<TimelineEntry>& need_timeline(const Graph& g);

// The part of a step the pictures draw (--timeline-microbatches, --timeline-window), so that
// a step of hundreds of micro-batches gives a picture of a few: the op instances of micro-batches
// first..last (and the step's own ops, which belong to none), and of those the ones that
// overlap start_ms..end_ms. Nothing given: the whole step.
struct TimelineWindow {
  std::optional<std::pair<int64_t, int64_t>> microbatches;  // first, last
  std::optional<std::pair<double, double>> time_ms;         // start, end
  bool whole() const { return !microbatches && !time_ms; }
};
// "FIRST:LAST" (micro-batch indices from 0) and "START:END" (ms), else UsageError naming `flag`.
std::pair<int64_t, int64_t> parse_microbatch_window(const std::string& text, const std::string& flag);
std::pair<double, double> parse_time_window(const std::string& text, const std::string& flag);

// The timeline entries in the window, in timeline order (need_timeline's checks first).
std::vector<TimelineEntry> timeline_in_window(const Graph& g, const TimelineWindow& window);

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
// With a window, its events and the memory samples over the time they span.
std::string render_chrome_trace(const Graph& g, const TimelineWindow& window = {});

// The pipeline schedule as a standalone SVG document. Needs shard, sim (timeline).
// With a window, its instances, the time axis over what they span.
std::string render_schedule_svg(const Graph& g, const TimelineWindow& window = {});

}  // namespace syssim
