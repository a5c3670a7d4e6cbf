// The sim section's timeline as the pictures read it: checked, and the live transient buffers
// of each pipeline rank over time.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <tuple>
#include <unordered_map>
#include <nlohmann/json.hpp>

#include "report/format.hpp"
#include "report/pictures.hpp"

namespace syssim {
namespace {

// One buffer of one micro-batch (or of the step) on one rank.
struct Lifetime {
  double first_write_ms = std::numeric_limits<double>::infinity();
  double last_use_ms = -std::numeric_limits<double>::infinity();
};

struct Change {
  double time_ms;
  double activation_bytes;
  double other_bytes;
};

}  // namespace

const std::vector<TimelineEntry>& need_timeline(const Graph& g) {
  const ShardSection& shard = need_section(g.shard, "shard", "syssim-shard");
  const SimSection& sim = need_section(g.sim, "sim", "syssim-sim");
  if (!sim.timeline)
    throw DataError("graph: /sim/timeline: missing; run syssim-sim --timeline to keep the op instances' times");
  const std::vector<TimelineEntry>& timeline = *sim.timeline;
  for (size_t i = 0; i < timeline.size(); ++i) {
    const TimelineEntry& e = timeline[i];
    std::string path = "graph: /sim/timeline/" + std::to_string(i);
    if (e.op < 0 || e.op >= static_cast<int64_t>(shard.ops.size()))
      throw DataError(path + ": op " + std::to_string(e.op) + " does not exist in the shard section");
    if (e.rank < 0 || e.rank >= shard.parallelism.pp)
      throw DataError(path + ": pipeline rank " + std::to_string(e.rank) + " does not exist (pp=" +
                      std::to_string(shard.parallelism.pp) + ")");
    if (e.microbatch < -1 || e.microbatch >= shard.num_microbatches)
      throw DataError(path + ": micro-batch " + std::to_string(e.microbatch) + " does not exist");
  }
  return timeline;
}

namespace {

// "A:B" as two numbers of `parse`, A <= B, else UsageError naming the flag and the text.
template <typename T, typename Parse>
std::pair<T, T> parse_window(const std::string& text, const std::string& flag, const std::string& expected,
                             Parse parse) {
  const size_t colon = text.find(':');
  std::optional<T> first, last;
  if (colon != std::string::npos) {
    first = parse(text.substr(0, colon));
    last = parse(text.substr(colon + 1));
  }
  if (!first || !last || *first > *last)
    throw UsageError(flag + ": expected " + expected + ", got '" + text + "'");
  return {*first, *last};
}

}  // namespace

std::pair<int64_t, int64_t> parse_microbatch_window(const std::string& text, const std::string& flag) {
  return parse_window<int64_t>(text, flag, "FIRST:LAST, micro-batch indices from 0 with FIRST <= LAST",
                               [](const std::string& part) -> std::optional<int64_t> {
                                 int64_t value = 0;
                                 auto [end, error] = std::from_chars(part.data(), part.data() + part.size(), value);
                                 if (error != std::errc() || end != part.data() + part.size() || value < 0)
                                   return std::nullopt;
                                 return value;
                               });
}

std::pair<double, double> parse_time_window(const std::string& text, const std::string& flag) {
  return parse_window<double>(text, flag, "START:END in ms with 0 <= START <= END",
                              [](const std::string& part) -> std::optional<double> {
                                char* end = nullptr;
                                const double value = std::strtod(part.c_str(), &end);
                                if (part.empty() || end != part.c_str() + part.size() || !std::isfinite(value) ||
                                    value < 0)
                                  return std::nullopt;
                                return value;
                              });
}

std::vector<TimelineEntry> timeline_in_window(const Graph& g, const TimelineWindow& window) {
  const std::vector<TimelineEntry>& timeline = need_timeline(g);
  // A window past the last micro-batch would keep the step's own ops alone, looking drawn, and
  // one reaching past it would be recorded as drawing micro-batches the step has not.
  if (window.microbatches && g.shard && window.microbatches->second >= g.shard->num_microbatches)
    throw UsageError("--timeline-microbatches " + std::to_string(window.microbatches->first) + ":" +
                     std::to_string(window.microbatches->second) + ": the step has " +
                     std::to_string(g.shard->num_microbatches) + " micro-batches, 0 to " +
                     std::to_string(g.shard->num_microbatches - 1));
  // Likewise a time window that starts after the step has ended.
  if (window.time_ms && g.sim && window.time_ms->first > g.sim->step_time_ms)
    throw UsageError("--timeline-window " + nlohmann::json(window.time_ms->first).dump() + ":" +
                     nlohmann::json(window.time_ms->second).dump() + ": the step ends at " +
                     fixed(g.sim->step_time_ms, 3) + " ms");
  std::vector<TimelineEntry> kept;
  for (const TimelineEntry& e : timeline) {
    if (window.microbatches && e.microbatch >= 0 &&
        (e.microbatch < window.microbatches->first || e.microbatch > window.microbatches->second))
      continue;
    if (window.time_ms && (e.end_ms < window.time_ms->first || e.start_ms > window.time_ms->second)) continue;
    kept.push_back(e);
  }
  return kept;
}

std::vector<std::vector<MemorySample>> live_buffers(const Graph& g) {
  const std::vector<TimelineEntry>& timeline = need_timeline(g);
  const ShardSection& shard = *g.shard;
  const size_t ranks = static_cast<size_t>(shard.parallelism.pp);
  const size_t slots = static_cast<size_t>(shard.num_microbatches) + 1;  // slot 0: the step ops
  const size_t buffers = shard.buffers.size();

  std::vector<char> transient(buffers);  // by buffer id: looked up for every op instance
  for (size_t b = 0; b < buffers; ++b) transient[b] = is_transient(shard.buffers[b]);
  std::vector<std::vector<const TimelineEntry*>> entries_of(ranks);
  for (const TimelineEntry& e : timeline) entries_of[e.rank].push_back(&e);

  std::vector<std::vector<MemorySample>> samples(ranks);
  for (size_t rank = 0; rank < ranks; ++rank) {
    const std::vector<char> saved_ids = buffers_saved_for_backward(shard, static_cast<int64_t>(rank));
    std::unordered_map<size_t, Lifetime> lifetimes;  // by buffer * slots + slot
    std::vector<double> slot_start(slots, std::numeric_limits<double>::infinity());
    for (const TimelineEntry* entry : entries_of[rank]) {
      const TimelineEntry& e = *entry;
      if (e.host()) continue;  // issuing an op uses none of its buffers
      const ShardOp& op = shard.ops[e.op];
      size_t slot = static_cast<size_t>(e.microbatch + 1);
      slot_start[slot] = std::min(slot_start[slot], e.start_ms);
      for (int64_t b : op.writes)
        if (transient[b]) {
          Lifetime& life = lifetimes[b * slots + slot];
          life.first_write_ms = std::min(life.first_write_ms, e.start_ms);
        }
      for (const auto* list : {&op.reads, &op.writes})
        for (int64_t b : *list)
          if (transient[b]) {
            Lifetime& life = lifetimes[b * slots + slot];
            life.last_use_ms = std::max(life.last_use_ms, e.end_ms);
          }
    }
    std::vector<Change> changes;
    for (const auto& [key, life] : lifetimes) {
      size_t b = key / slots, slot = key % slots;
      double allocated_ms = std::isinf(life.first_write_ms) ? slot_start[slot] : life.first_write_ms;
      double bytes = shard.buffers[b].bytes;
      bool saved = saved_ids[b] != 0;
      changes.push_back(Change{allocated_ms, saved ? bytes : 0, saved ? 0 : bytes});
      changes.push_back(Change{life.last_use_ms, saved ? -bytes : 0, saved ? 0 : -bytes});
    }
    // A total order, so that the sums do not depend on the map's order.
    std::sort(changes.begin(), changes.end(), [](const Change& a, const Change& b) {
      return std::tie(a.time_ms, a.activation_bytes, a.other_bytes) < std::tie(b.time_ms, b.activation_bytes, b.other_bytes);
    });
    MemorySample live;
    samples[rank].push_back(live);
    for (const Change& change : changes) {
      live.activation_bytes += change.activation_bytes;
      live.other_bytes += change.other_bytes;
      if (change.time_ms == samples[rank].back().time_ms) {
        samples[rank].back() = MemorySample{change.time_ms, live.activation_bytes, live.other_bytes};
      } else {
        samples[rank].push_back(MemorySample{change.time_ms, live.activation_bytes, live.other_bytes});
      }
    }
  }
  return samples;
}

}  // namespace syssim
