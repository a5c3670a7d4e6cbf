#include "sweep/plot.hpp"

#include <algorithm>
#include <cmath>

#include "common/svg.hpp"
#include "sweep/detail.hpp"

namespace syssim {
namespace {

constexpr double kRowHeight = 22;
constexpr double kBarLength = 480;
constexpr double kCharWidth = 7;  // of 12-pixel sans-serif text, roughly: sizes the label column

const char* const kBestColor = "#1f5fa8";
const char* const kOkColor = "#8db4e2";
const char* const kOomColor = "#e8a0a0";
const char* const kAxisColor = "#444444";

// "tp=2 micro_batch=1": the swept keys without their section.
std::string point_label(const SweepRow& row) {
  std::string label;
  for (const auto& [path, value] : row.inputs.items()) {
    std::string key = path.substr(path.find('.') + 1);
    label += (label.empty() ? "" : " ") + key + "=" + (value.is_string() ? value.get<std::string>() : value.dump());
  }
  return label;
}

// "tp=4 pp=2 vpp=2 cp=1 dp=1 micro_batch=1 full distopt": a searched layout in short.
std::string layout_label(const SweepRow& row) {
  std::string label;
  for (const auto& [path, value] : row.inputs.items()) {
    std::string key = path.substr(path.find('.') + 1), part;
    if (value.is_null() || value == false) continue;
    if (value == true) part = key == "distributed_optimizer" ? "distopt" : key;
    else if (key == "recompute") part = value.get<std::string>() == "none" ? "" : value.get<std::string>() + " recompute";
    else part = key + "=" + (value.is_string() ? value.get<std::string>() : value.dump());
    if (!part.empty()) label += (label.empty() ? "" : " ") + part;
  }
  return label;
}

// Axis ticks at 1, 2 or 5 times a power of ten, about five over [low, high].
std::vector<double> ticks(double low, double high) {
  double raw = (high - low) / 5;
  double power = std::pow(10.0, std::floor(std::log10(raw)));
  double step = power * (raw / power < 1.5 ? 1 : raw / power < 3.5 ? 2 : raw / power < 7.5 ? 5 : 10);
  std::vector<double> at;
  for (double t = std::ceil(low / step) * step; t <= high + step * 1e-9; t += step) at.push_back(t);
  return at;
}

std::string tick_text(double value) {
  std::string text = fixed(value, 2);
  while (text.back() == '0') text.pop_back();
  if (text.back() == '.') text.pop_back();
  return text == "-0" ? "0" : text;
}

// [low, high] widened by a tenth of its span on each side (or of the value when it is one point).
std::pair<double, double> padded_range(const std::vector<double>& values) {
  auto [low, high] = std::minmax_element(values.begin(), values.end());
  double pad = (*high > *low ? *high - *low : std::max(std::fabs(*high), 1.0)) / 10;
  return {*low - pad, *high + pad};
}

}  // namespace

std::string plot_sweep(const std::vector<SweepRow>& rows, const std::string& metric) {
  const std::vector<size_t> ranked = rank_rows(rows, metric);
  double longest_label = 0, largest = 0;
  for (const SweepRow& row : rows) {
    longest_label = std::max(longest_label, static_cast<double>(point_label(row).size()));
    if (row.status != "invalid") largest = std::max(largest, metric_value(row, metric));
  }
  const double left = 20 + longest_label * kCharWidth, top = 50;
  const double width = left + kBarLength + 260, height = top + rows.size() * kRowHeight + 50;
  SvgWriter svg(width, height);
  svg.text(10, 24, "syssim sweep: " + metric + (metric_is_maximized(metric) ? " (higher is better)" : " (lower is better)") +
                       ", " + std::to_string(ranked.size()) + " of " + std::to_string(rows.size()) + " points ok",
           14);
  for (size_t i = 0; i < rows.size(); ++i) {
    const SweepRow& row = rows[i];
    const double y = top + i * kRowHeight;
    svg.text(left - 8, y + 15, point_label(row), 12, "end");
    if (row.status == "invalid") {
      svg.text(left + 4, y + 15, "invalid: " + row.reason.substr(0, 90), 11);
      continue;
    }
    const double value = metric_value(row, metric);
    const bool best = !ranked.empty() && ranked.front() == i;
    const double length = largest > 0 ? value / largest * kBarLength : 0;
    const std::string value_text = metric_text(value, metric) + (row.status == "oom" ? " oom (" + row.reason + ")" : "") +
                                   (best ? " best" : "");
    svg.rect(left, y + 3, length, 16, best ? kBestColor : row.status == "oom" ? kOomColor : kOkColor,
             point_label(row) + ": " + metric + " " + value_text);
    svg.text(left + length + 4, y + 15, value_text, 11);
  }
  const double axis_y = top + rows.size() * kRowHeight + 4;
  svg.line(left, top, left, axis_y, kAxisColor);
  svg.line(left, axis_y, left + kBarLength, axis_y, kAxisColor);
  if (largest > 0)
    for (double t : ticks(0, largest)) {
      svg.line(left + t / largest * kBarLength, axis_y, left + t / largest * kBarLength, axis_y + 4, kAxisColor);
      svg.text(left + t / largest * kBarLength, axis_y + 17, tick_text(t), 11, "middle");
    }
  svg.text(left + kBarLength / 2, axis_y + 36, metric, 12, "middle");
  return svg.str();
}

std::string plot_search(const SearchResult& result) {
  const std::vector<SweepRow>& front = result.front;
  const double left = 80, top = 50, plot_width = 560, plot_height = 380, legend_left = left + plot_width + 40;
  const double legend_row = 15;
  // Legend columns: number, step time and memory right-aligned, then the layout, as wide as the longest.
  const double columns[] = {legend_left + 20, legend_left + 100, legend_left + 180, legend_left + 195};
  double longest_layout = std::string("layout").size();
  for (const SweepRow& row : front) longest_layout = std::max(longest_layout, static_cast<double>(layout_label(row).size()));
  SvgWriter svg(columns[3] + longest_layout * kCharWidth + 20,
                std::max(top + plot_height + 60, top + (front.size() + 1) * legend_row + 20));
  svg.text(10, 24, "syssim sweep --search: Pareto front of step time against peak memory (" +
                       std::to_string(front.size()) + " layouts; " + std::to_string(result.simulated) + " simulated of " +
                       std::to_string(result.enumerated) + ")",
           14);
  svg.line(left, top, left, top + plot_height, kAxisColor);
  svg.line(left, top + plot_height, left + plot_width, top + plot_height, kAxisColor);
  svg.text(left + plot_width / 2, top + plot_height + 45, "peak memory per GPU (GB)", 12, "middle");
  svg.text(10, top - 10, "step time (ms)", 12);
  if (front.empty()) {
    svg.text(left + plot_width / 2, top + plot_height / 2, "no layout fits", 14, "middle");
    return svg.str();
  }
  std::vector<double> memory, time;
  for (const SweepRow& row : front) memory.push_back(row.peak_memory_gb), time.push_back(row.step_time_ms);
  const auto [memory_low, memory_high] = padded_range(memory);
  const auto [time_low, time_high] = padded_range(time);
  auto x_of = [&](double gb) { return left + (gb - memory_low) / (memory_high - memory_low) * plot_width; };
  auto y_of = [&](double ms) { return top + plot_height - (ms - time_low) / (time_high - time_low) * plot_height; };
  for (double t : ticks(memory_low, memory_high)) {
    svg.line(x_of(t), top + plot_height, x_of(t), top + plot_height + 4, kAxisColor);
    svg.text(x_of(t), top + plot_height + 18, tick_text(t), 11, "middle");
  }
  for (double t : ticks(time_low, time_high)) {
    svg.line(left - 4, y_of(t), left, y_of(t), kAxisColor);
    svg.text(left - 8, y_of(t) + 4, tick_text(t), 11, "end");
  }
  // The front as a staircase: from each layout, the next one uses more memory and is faster.
  std::vector<std::pair<double, double>> stairs;
  for (size_t i = front.size(); i-- > 0;) {
    if (!stairs.empty()) stairs.push_back({x_of(front[i].peak_memory_gb), stairs.back().second});
    stairs.push_back({x_of(front[i].peak_memory_gb), y_of(front[i].step_time_ms)});
  }
  svg.polyline(stairs, kOkColor);
  // Dots numbered as the legend beside the plot lists the layouts, fastest first.
  const char* const headings[] = {"#", "step (ms)", "memory (GB)", "layout"};
  for (size_t c = 0; c < 4; ++c) svg.text(columns[c], top, headings[c], 11, c < 3 ? "end" : "start");
  for (size_t i = 0; i < front.size(); ++i) {
    const SweepRow& row = front[i];
    const std::string number = std::to_string(i + 1);
    const std::string summary = tick_text(row.step_time_ms) + " ms, " + tick_text(row.peak_memory_gb) + " GB";
    svg.circle(x_of(row.peak_memory_gb), y_of(row.step_time_ms), 4, kBestColor, point_label(row) + ": " + summary);
    svg.text(x_of(row.peak_memory_gb) + 6, y_of(row.step_time_ms) - 5, number, 10);
    const std::string cells[] = {number, fixed(row.step_time_ms, 1), fixed(row.peak_memory_gb, 2), layout_label(row)};
    for (size_t c = 0; c < 4; ++c) svg.text(columns[c], top + (i + 1) * legend_row, cells[c], 11, c < 3 ? "end" : "start");
  }
  return svg.str();
}

}  // namespace syssim
