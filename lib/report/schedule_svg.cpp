// The pipeline schedule as a picture: a row per pipeline rank with one box per pass of a
// micro-batch through a model chunk (its compute-stream ops merged), thin lanes below it for
// the rank's communication streams, time on x. Gaps in a row are the rank idling: bubbles.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>

#include "common/svg.hpp"
#include "report/format.hpp"
#include "report/pictures.hpp"

namespace syssim {
namespace {

// Layout, in pixels.
constexpr double kWidth = 1200;
constexpr double kLeft = 100;   // rank labels
constexpr double kRight = 24;
constexpr double kTop = 48;     // title
constexpr double kRowHeight = 26;
constexpr double kLaneHeight = 8;
constexpr double kLaneGap = 1;
constexpr double kRankGap = 14;
constexpr double kAxisHeight = 40;
constexpr double kLegendHeight = 30;
constexpr double kMinWidth = 1;  // a box shorter than a pixel is still drawn
constexpr double kMinSeparatedWidth = 4;
constexpr double kLabelSize = 11;
constexpr double kLabelCharWidth = 7;  // at kLabelSize, sans-serif digits
constexpr int kTargetTicks = 10;
constexpr double kFoldGap = 24;  // the break in the time axis of a folded step
// A whole step of more micro-batches than this is drawn folded: its fill and first steady
// cycles, then its last cycles and drain, its steady middle left out (docs/syssim-report.md).
constexpr int64_t kFoldAboveMicrobatches = 32;

const std::vector<std::string> kCommStreams = {"tp", "cp", "dp", "pp"};
const std::map<std::string, std::string> kPassColor = {
    {"forward", "#4e79a7"}, {"backward", "#59a14f"}, {"weight", "#76b7b2"}, {"step", "#9d9d9d"}};
const std::map<std::string, std::string> kGroupColor = {
    {"tp", "#f28e2b"}, {"cp", "#b07aa1"}, {"dp", "#e15759"}, {"pp", "#edc948"}, {"embedding", "#ff9da7"}};
constexpr const char* kOtherColor = "#bab0ac";
constexpr const char* kRowBackground = "#f2f2f2";
constexpr const char* kGridColor = "#d0d0d0";

std::string color_of(const std::map<std::string, std::string>& colors, const std::string& key) {
  auto it = colors.find(key);
  return it != colors.end() ? it->second : kOtherColor;
}

// `hex` ("#rrggbb") mixed with white: 0 keeps it, 1 is white.
std::string lighter(const std::string& hex, double share) {
  char out[8];
  int rgb[3];
  for (int i = 0; i < 3; ++i) {
    int channel = std::stoi(hex.substr(1 + 2 * i, 2), nullptr, 16);
    rgb[i] = static_cast<int>(std::lround(channel + (255 - channel) * share));
  }
  std::snprintf(out, sizeof out, "#%02x%02x%02x", rgb[0], rgb[1], rgb[2]);
  return out;
}

// Consecutive compute-stream instances of one schedule slot (a pass of one micro-batch
// through one chunk) with no gap of a pixel between them.
struct PassBox {
  int64_t microbatch = -1;
  int64_t chunk = 0;
  std::string pass;
  double start_ms = 0;
  double end_ms = 0;
  int64_t ops = 0;
};

// Collectives of one group on one stream that touch or lie closer than a pixel.
struct CommBox {
  std::string group;
  double start_ms = 0;
  double end_ms = 0;
  int64_t ops = 0;
};

struct RankRows {
  std::vector<PassBox> passes;
  std::map<std::string, std::vector<CommBox>> lanes;  // by communication stream
};

std::vector<RankRows> rows_of(const ShardSection& shard, const std::vector<TimelineEntry>& timeline,
                              double ms_per_pixel) {
  std::vector<std::vector<const TimelineEntry*>> by_rank(shard.parallelism.pp);
  for (const TimelineEntry& e : timeline) by_rank[e.rank].push_back(&e);
  std::vector<RankRows> rows(by_rank.size());
  for (size_t rank = 0; rank < by_rank.size(); ++rank) {
    // The slot that runs an op (shard rank_program): recomputed forward ops run in the backward
    // slot, and so do weight-gradient ops when the schedule has no weight slot for them.
    std::set<std::pair<int64_t, int64_t>> weight_slots;  // (chunk, micro-batch)
    if (rank < shard.schedule.size())
      for (const ScheduleSlot& slot : shard.schedule[rank])
        if (slot.pass == OpPass::weight) weight_slots.emplace(slot.chunk, slot.microbatch);
    auto slot_pass = [&](const ShardOp& op, int64_t microbatch) -> std::string {
      if (op.recompute || (op.pass == OpPass::weight && !weight_slots.count({op.chunk, microbatch}))) return "backward";
      return to_string(op.pass);
    };
    std::vector<const TimelineEntry*>& entries = by_rank[rank];
    std::stable_sort(entries.begin(), entries.end(),
                     [](const TimelineEntry* a, const TimelineEntry* b) { return a->start_ms < b->start_ms; });
    for (const TimelineEntry* e : entries) {
      const ShardOp& op = shard.ops[e->op];
      if (e->host()) continue;  // the picture is the GPU's
      if (e->stream == Stream::compute) {
        std::vector<PassBox>& passes = rows[rank].passes;
        std::string pass = slot_pass(op, e->microbatch);
        if (passes.empty() || passes.back().microbatch != e->microbatch || passes.back().chunk != op.chunk ||
            passes.back().pass != pass || e->start_ms > passes.back().end_ms + ms_per_pixel)
          passes.push_back(PassBox{e->microbatch, op.chunk, pass, e->start_ms, e->end_ms, 0});
        passes.back().end_ms = std::max(passes.back().end_ms, e->end_ms);
        ++passes.back().ops;
      } else {
        std::vector<CommBox>& lane = rows[rank].lanes[to_string(e->stream)];
        // A collective's group, or the stream of another op off the compute stream (a host copy's).
        const std::string group = op.kind == OpKind::collective ? to_string(op.group) : to_string(e->stream);
        if (lane.empty() || lane.back().group != group || e->start_ms > lane.back().end_ms + ms_per_pixel)
          lane.push_back(CommBox{group, e->start_ms, e->end_ms, 0});
        lane.back().end_ms = std::max(lane.back().end_ms, e->end_ms);
        ++lane.back().ops;
      }
    }
  }
  return rows;
}

// The rank's communication streams, in kCommStreams order, then any other by name.
std::vector<std::string> lane_order(const RankRows& row) {
  std::vector<std::string> lanes;
  for (const std::string& stream : kCommStreams)
    if (row.lanes.count(stream)) lanes.push_back(stream);
  for (const auto& [stream, boxes] : row.lanes)
    if (std::find(lanes.begin(), lanes.end(), stream) == lanes.end()) lanes.push_back(stream);
  return lanes;
}

// A tick spacing of 1, 2 or 5 times a power of ten giving about kTargetTicks ticks.
double tick_spacing(double span_ms) {
  double raw = span_ms / kTargetTicks;
  double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (double factor : {1.0, 2.0, 5.0})
    if (factor * magnitude >= raw) return factor * magnitude;
  return 10 * magnitude;
}

// The time axis: what is drawn, from_ms to to_ms, less the fold cut_from_ms to cut_to_ms of a
// folded step, over the plot's width (less the break's).
struct TimeAxis {
  double from_ms = 0, to_ms = 0;
  double cut_from_ms = 0, cut_to_ms = 0;
  double plot_width = 0;
  bool folded() const { return cut_to_ms > cut_from_ms; }
  double shown_ms() const { return to_ms - from_ms - (cut_to_ms - cut_from_ms); }
  double width() const { return folded() ? plot_width - kFoldGap : plot_width; }
  double x_of(double ms) const {
    if (!folded()) return kLeft + (ms - from_ms) / shown_ms() * width();
    if (ms >= cut_to_ms) return kLeft + (ms - from_ms - (cut_to_ms - cut_from_ms)) / shown_ms() * width() + kFoldGap;
    return kLeft + (std::min(ms, cut_from_ms) - from_ms) / shown_ms() * width();
  }
};

// The instances of a folded step outside the fold, those that cross it cut at its edges.
std::vector<TimelineEntry> outside_fold(const std::vector<TimelineEntry>& timeline, const TimeAxis& axis) {
  std::vector<TimelineEntry> kept;
  for (const TimelineEntry& e : timeline) {
    if (e.end_ms <= axis.cut_from_ms || e.start_ms >= axis.cut_to_ms) {
      kept.push_back(e);
      continue;
    }
    if (e.start_ms < axis.cut_from_ms) kept.push_back(e), kept.back().end_ms = axis.cut_from_ms;
    if (e.end_ms > axis.cut_to_ms) kept.push_back(e), kept.back().start_ms = axis.cut_to_ms;
  }
  return kept;
}

std::string title_of(const Graph& g, const ShardSection& shard, double span_ms) {
  std::string title = g.model ? g.model->name + " · " : "";
  title += std::string(to_string(shard.pipeline_schedule)) + " · pp " + std::to_string(shard.parallelism.pp);
  if (shard.parallelism.vpp) title += ", vpp " + std::to_string(*shard.parallelism.vpp);
  title += " · " + std::to_string(shard.num_microbatches) + " micro-batches · step " + fixed(span_ms, 2) + " ms";
  if (shard.parallelism.pp > 1) title += " · bubble " + fixed(g.sim->bubble_fraction * 100, 1) + "%";
  return title;
}

}  // namespace

std::string render_schedule_svg(const Graph& g, const TimelineWindow& window) {
  std::vector<TimelineEntry> timeline = timeline_in_window(g, window);
  const ShardSection& shard = *g.shard;
  // The time axis: the whole step from 0, or what the window's instances span.
  TimeAxis axis;
  double& from_ms = axis.from_ms;
  double& to_ms = axis.to_ms;
  if (!window.whole() && !timeline.empty()) from_ms = to_ms = timeline.front().start_ms;
  for (const TimelineEntry& e : timeline) {
    if (!window.whole()) from_ms = std::min(from_ms, e.start_ms);
    to_ms = std::max(to_ms, e.end_ms);
  }
  const double span_ms = to_ms - from_ms;
  if (span_ms <= 0)
    throw DataError(window.whole() ? "graph: /sim/timeline: the step takes no time; there is nothing to draw"
                                   : "graph: /sim/timeline: no op instance lies in the window; there is nothing to draw");
  axis.plot_width = kWidth - kLeft - kRight;
  const double plot_width = axis.plot_width;
  // A long whole step keeps at each end the time of 2 pp + 2 of its micro-batches: the fill
  // (or drain) and two cycles of the steady state.
  if (window.whole() && shard.num_microbatches > kFoldAboveMicrobatches) {
    const double kept_share =
        static_cast<double>(2 * shard.parallelism.pp + 2) / static_cast<double>(shard.num_microbatches);
    if (kept_share < 0.5) {
      axis.cut_from_ms = to_ms * kept_share;
      axis.cut_to_ms = to_ms * (1 - kept_share);
      timeline = outside_fold(timeline, axis);
    }
  }
  auto x_of = [&](double ms) { return axis.x_of(ms); };
  std::vector<RankRows> rows = rows_of(shard, timeline, axis.shown_ms() / axis.width());
  const int64_t vpp = shard.parallelism.vpp.value_or(1);

  double height = kTop + kAxisHeight + kLegendHeight;
  for (const RankRows& row : rows)
    height += kRowHeight + static_cast<double>(row.lanes.size()) * (kLaneHeight + kLaneGap) + kRankGap;
  SvgWriter svg(kWidth, height);
  std::string title = title_of(g, shard, window.whole() ? span_ms : g.sim->step_time_ms);
  if (!window.whole()) title += " · shown " + fixed(from_ms, 2) + "-" + fixed(to_ms, 2) + " ms";
  if (axis.folded()) title += " · folded " + fixed(axis.cut_from_ms, 2) + "-" + fixed(axis.cut_to_ms, 2) + " ms";
  svg.text(kLeft, 24, title, 14);

  // Grid lines first, so the boxes cover them.
  const double spacing = tick_spacing(axis.shown_ms());
  const int decimals = std::max(0, -static_cast<int>(std::floor(std::log10(spacing))));
  const double rows_bottom = height - kAxisHeight - kLegendHeight;
  std::vector<double> ticks;
  for (auto i = static_cast<int64_t>(std::ceil(from_ms / spacing - 1e-9)); i * spacing <= to_ms + span_ms * 1e-9; ++i)
    if (!axis.folded() || i * spacing <= axis.cut_from_ms || i * spacing >= axis.cut_to_ms)
      ticks.push_back(static_cast<double>(i) * spacing);
  for (double tick : ticks) svg.line(x_of(tick), kTop - 6, x_of(tick), rows_bottom, kGridColor, 0.5);

  std::set<std::string> passes_drawn, groups_drawn;
  double y = kTop;
  for (size_t rank = 0; rank < rows.size(); ++rank) {
    const RankRows& row = rows[rank];
    svg.text(kLeft - 8, y + kRowHeight / 2 + kLabelSize * 0.35, "pp rank " + std::to_string(rank), kLabelSize, "end");
    svg.rect(kLeft, y, plot_width, kRowHeight, kRowBackground);
    for (const PassBox& box : row.passes) {
      // A pixel of the row's background between boxes that touch, so that each one shows;
      // not for boxes so narrow that the row would turn to stripes.
      double x = x_of(box.start_ms), w = x_of(box.end_ms) - x;
      w = std::max(w >= kMinSeparatedWidth ? w - 1 : w, kMinWidth);
      // Later chunks of an interleaved schedule in lighter shades of their pass's color.
      double shade = vpp > 1 ? 0.45 * static_cast<double>(box.chunk) / static_cast<double>(vpp - 1) : 0;
      std::string what = box.microbatch < 0 ? box.pass
                                            : box.pass + ", micro-batch " + std::to_string(box.microbatch) +
                                                  (vpp > 1 ? ", chunk " + std::to_string(box.chunk) : "");
      svg.rect(x, y + 1, w, kRowHeight - 2, lighter(color_of(kPassColor, box.pass), shade),
               "pp rank " + std::to_string(rank) + ": " + what + ": " + fixed(box.start_ms, 3) + "-" +
                   fixed(box.end_ms, 3) + " ms, " + std::to_string(box.ops) + " ops");
      passes_drawn.insert(box.pass);
      std::string label = box.microbatch < 0 ? "" : std::to_string(box.microbatch);
      if (!label.empty() && w >= static_cast<double>(label.size()) * kLabelCharWidth + 4)
        svg.text(x + w / 2, y + kRowHeight / 2 + kLabelSize * 0.35, label, kLabelSize, "middle");
    }
    y += kRowHeight;
    for (const std::string& stream : lane_order(row)) {
      y += kLaneGap;
      svg.text(kLeft - 8, y + kLaneHeight - 1, stream, kLaneHeight, "end");
      svg.rect(kLeft, y, plot_width, kLaneHeight, kRowBackground);
      for (const CommBox& box : row.lanes.at(stream)) {
        double x = x_of(box.start_ms);
        svg.rect(x, y, std::max(x_of(box.end_ms) - x, kMinWidth), kLaneHeight, color_of(kGroupColor, box.group),
                 "pp rank " + std::to_string(rank) + ": " + box.group + " collectives: " + fixed(box.start_ms, 3) +
                     "-" + fixed(box.end_ms, 3) + " ms, " + std::to_string(box.ops) + " ops");
        groups_drawn.insert(box.group);
      }
      y += kLaneHeight;
    }
    y += kRankGap;
  }

  // The fold: a white break across the rows and the axis.
  if (axis.folded())
    svg.rect(axis.x_of(axis.cut_from_ms), kTop - 6, kFoldGap, rows_bottom - kTop + 10, "#ffffff",
             "folded: " + fixed(axis.cut_from_ms, 3) + "-" + fixed(axis.cut_to_ms, 3) + " ms of the steady state");

  // The time axis.
  svg.line(kLeft, rows_bottom, kWidth - kRight, rows_bottom, "#404040");
  for (double tick : ticks) {
    svg.line(x_of(tick), rows_bottom, x_of(tick), rows_bottom + 4, "#404040");
    svg.text(x_of(tick), rows_bottom + 16, fixed(tick, decimals), 10, "middle");
  }
  svg.text(kLeft + plot_width / 2, rows_bottom + 32, "time (ms)", 11, "middle");

  // The legend: what was drawn, passes first.
  double x = kLeft;
  const double legend_y = height - kLegendHeight + 8;
  auto legend_entry = [&](const std::string& color, const std::string& label) {
    svg.rect(x, legend_y, 12, 12, color);
    svg.text(x + 16, legend_y + 10, label, kLabelSize);
    x += 16 + static_cast<double>(label.size()) * kLabelCharWidth + 18;
  };
  for (std::string pass : {"forward", "backward", "weight", "step"})
    if (passes_drawn.count(pass)) legend_entry(kPassColor.at(pass), pass == "weight" ? "weight gradients" : pass);
  for (const std::string& pass : passes_drawn)
    if (!kPassColor.count(pass)) legend_entry(kOtherColor, pass);
  for (const std::string& group : groups_drawn) legend_entry(color_of(kGroupColor, group), group + " collectives");
  if (vpp > 1) svg.text(x, legend_y + 10, "(lighter: later model chunks)", kLabelSize);
  return svg.str();
}

}  // namespace syssim
