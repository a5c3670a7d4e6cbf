// The simulated step in the Trace Event Format (Google's "Trace Event Format" document;
// Perfetto's JSON importer reads the same): one process per pipeline rank, one thread per stream.
#include <algorithm>
#include <map>
#include <tuple>
#include <nlohmann/json.hpp>

#include "common/units.hpp"
#include "report/pictures.hpp"

namespace syssim {
namespace {

using nlohmann::json;


// Streams in the order their tracks are shown, the host issuing the ops first, as profilers
// show the CPU above the GPU; a stream not listed follows them, by name.
const std::vector<Stream> kStreamOrder = {Stream::host, Stream::compute, Stream::tp, Stream::cp, Stream::dp, Stream::pp};

// Collectives are colored by group with the trace viewer's reserved color names (a cname
// outside them is ignored): catapult-project/catapult tracing/tracing/base/color_scheme.html.
const std::map<std::string, std::string> kGroupColor = {{"tp", "thread_state_iowait"},
                                                        {"cp", "rail_animation"},
                                                        {"dp", "good"},
                                                        {"pp", "terrible"},
                                                        {"embedding", "detailed_memory_dump"}};
constexpr const char* kOtherGroupColor = "generic_work";

// Thread ids: the streams the timeline uses, in kStreamOrder first, the others by name.
std::map<std::string, int64_t> stream_tids(const std::vector<TimelineEntry>& timeline) {
  std::vector<Stream> streams;
  for (const TimelineEntry& e : timeline)
    if (std::find(streams.begin(), streams.end(), e.stream) == streams.end()) streams.push_back(e.stream);
  auto key = [](Stream stream) {
    return std::pair(std::find(kStreamOrder.begin(), kStreamOrder.end(), stream) - kStreamOrder.begin(),
                     std::string_view(to_string(stream)));
  };
  std::sort(streams.begin(), streams.end(), [&](Stream a, Stream b) { return key(a) < key(b); });
  std::map<std::string, int64_t> tids;
  for (Stream stream : streams) tids.emplace(to_string(stream), static_cast<int64_t>(tids.size()));
  return tids;
}

json metadata(const std::string& name, int64_t pid, const json& args, std::optional<int64_t> tid = std::nullopt) {
  json event = {{"name", name}, {"ph", "M"}, {"pid", pid}, {"args", args}};
  if (tid) event["tid"] = *tid;
  return event;
}

json op_event(const TimelineEntry& e, const ShardOp& op, int64_t tid) {
  json args = {{"op", op.id},
               {"microbatch", e.microbatch},
               {"chunk", op.chunk},
               {"pass", to_string(op.pass)},
               {"layer", op.layer ? json(*op.layer) : json()},
               {"module", op.module}};
  // A host row issues the op: its FLOPs and bytes are the GPU instance's, not counted twice.
  if (!e.host()) args.update({{"flops", op.flops}, {"bytes", op.bytes}});
  json event = {{"name", op.name}, {"cat", e.host() ? to_string(Stream::host) : to_string(op.kind)}, {"ph", "X"},  {"ts", e.start_ms * kUsPerMs},
                {"dur", (e.end_ms - e.start_ms) * kUsPerMs}, {"pid", e.rank}, {"tid", tid}};
  if (op.kind == OpKind::collective) {
    args.update({{"collective", to_string(op.collective)},
                 {"group", to_string(op.group)},
                 {"group_size", op.group_size},
                 {"message_bytes", op.message_bytes}});
    auto color = kGroupColor.find(to_string(op.group));
    if (!e.host()) event["cname"] = color != kGroupColor.end() ? color->second : kOtherGroupColor;
  }
  event["args"] = std::move(args);
  return event;
}

}  // namespace

std::string render_chrome_trace(const Graph& g, const TimelineWindow& window) {
  const std::vector<TimelineEntry> timeline = timeline_in_window(g, window);
  const ShardSection& shard = *g.shard;
  const std::map<std::string, int64_t> tids = stream_tids(timeline);
  std::vector<std::string> stream_of_tid(tids.size());
  for (const auto& [stream, tid] : tids) stream_of_tid[tid] = stream;
  std::vector<int64_t> tid_of(timeline.size());  // by entry: its track
  for (size_t i = 0; i < timeline.size(); ++i) tid_of[i] = tids.at(to_string(timeline[i].stream));

  json events = json::array();
  for (int64_t rank = 0; rank < shard.parallelism.pp; ++rank) {
    events.push_back(metadata("process_name", rank, {{"name", "pp rank " + std::to_string(rank)}}));
    events.push_back(metadata("process_sort_index", rank, {{"sort_index", rank}}));
    std::vector<bool> used(tids.size(), false);
    for (size_t i = 0; i < timeline.size(); ++i)
      if (timeline[i].rank == rank) used[tid_of[i]] = true;
    for (size_t tid = 0; tid < stream_of_tid.size(); ++tid)
      if (used[tid]) {
        events.push_back(metadata("thread_name", rank, {{"name", stream_of_tid[tid]}}, static_cast<int64_t>(tid)));
        events.push_back(metadata("thread_sort_index", rank, {{"sort_index", tid}}, static_cast<int64_t>(tid)));
      }
  }
  // In time order, as tools that read a trace as a stream expect; a tie by rank and track.
  std::vector<size_t> order(timeline.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto key = [&](size_t i) { return std::tuple(timeline[i].start_ms, timeline[i].rank, tid_of[i]); };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return key(a) < key(b); });
  for (size_t i : order) events.push_back(op_event(timeline[i], shard.ops[timeline[i].op], tid_of[i]));
  // The memory samples over the time the events span; with a window, from the last change
  // before it, which holds at its start.
  double from_ms = 0, to_ms = g.sim->step_time_ms;
  if (!window.whole()) {
    from_ms = to_ms = timeline.empty() ? 0 : timeline.front().start_ms;
    for (const TimelineEntry& e : timeline) {
      from_ms = std::min(from_ms, e.start_ms);
      to_ms = std::max(to_ms, e.end_ms);
    }
  }
  std::vector<std::vector<MemorySample>> memory = live_buffers(g);
  for (size_t rank = 0; rank < memory.size(); ++rank)
    for (size_t i = 0; i < memory[rank].size(); ++i) {
      const MemorySample& sample = memory[rank][i];
      const bool next_after_start = i + 1 == memory[rank].size() || memory[rank][i + 1].time_ms > from_ms;
      if (!window.whole() && (!next_after_start || sample.time_ms > to_ms)) continue;
      events.push_back({{"name", "live buffers (GB)"},
                        {"ph", "C"},
                        {"pid", rank},
                        {"ts", sample.time_ms * kUsPerMs},
                        {"args", {{"activations", sample.activation_bytes / kBytesPerGB},
                                  {"other", sample.other_bytes / kBytesPerGB}}}});
    }
  json other = {{"generator", "syssim-report --format chrome-trace"},
                {"pipeline_schedule", to_string(shard.pipeline_schedule)},
                {"num_microbatches", shard.num_microbatches},
                {"step_time_ms", g.sim->step_time_ms}};
  if (window.microbatches) other["microbatch_window"] = {window.microbatches->first, window.microbatches->second};
  if (window.time_ms) other["time_window_ms"] = {window.time_ms->first, window.time_ms->second};
  json trace = {{"traceEvents", std::move(events)},
                {"displayTimeUnit", "ms"},
                {"otherData", std::move(other)}};
  return trace.dump() + "\n";
}

}  // namespace syssim
