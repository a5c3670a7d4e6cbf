// Rows of a sweep: their JSON form, ranking by a metric, the table/CSV/JSON output and merging.
#include <algorithm>
#include <sstream>

#include "common/csv.hpp"
#include "common/error.hpp"
#include "common/io.hpp"
#include "common/json_util.hpp"
#include "common/text.hpp"
#include "sweep/detail.hpp"
#include "sweep/sweep.hpp"

namespace syssim {
namespace {

using ordered_json = nlohmann::ordered_json;

const char* const kMetrics[] = {"step_time_ms", "mfu", "peak_memory_gb"};

std::string value_text(const ordered_json& value) { return value.is_string() ? value.get<std::string>() : value.dump(); }

// The swept paths of the rows, in order of first appearance.
std::vector<std::string> input_columns(const std::vector<SweepRow>& rows) {
  std::vector<std::string> columns;
  for (const SweepRow& row : rows)
    for (const auto& [path, value] : row.inputs.items())
      if (std::find(columns.begin(), columns.end(), path) == columns.end()) columns.push_back(path);
  return columns;
}

// The row's value of a swept path; `unset` when the row has none or it is null (no vpp).
std::string input_cell(const SweepRow& row, const std::string& path, const std::string& unset) {
  return row.inputs.contains(path) && !row.inputs.at(path).is_null() ? value_text(row.inputs.at(path)) : unset;
}

std::string best_line(const std::vector<SweepRow>& rows, const std::vector<size_t>& ranked, const std::string& metric) {
  if (ranked.empty()) return "best: none (no point is ok)\n";
  const SweepRow& best = rows[ranked.front()];
  std::string text = "best:";
  for (const auto& [path, value] : best.inputs.items()) text += " " + path + "=" + value_text(value);
  return text + " (" + metric + " " + metric_text(metric_value(best, metric), metric) + ")\n";
}

// With `statuses` off (a search's front, every row ok) the status and reason columns are left out.
std::string render_table(const std::vector<SweepRow>& rows, const std::vector<std::string>& columns, bool statuses) {
  std::vector<std::string> header = columns;
  if (statuses) header.push_back("status");
  header.insert(header.end(), std::begin(kMetrics), std::end(kMetrics));
  header.push_back("step_time_band_ms");
  if (statuses) header.push_back("reason");
  std::vector<std::vector<std::string>> cells;
  for (const SweepRow& row : rows) {
    std::vector<std::string> line;
    for (const std::string& path : columns) line.push_back(input_cell(row, path, "-"));
    bool simulated = row.status != "invalid";
    if (statuses) line.push_back(row.status);
    for (const char* metric : kMetrics) line.push_back(simulated ? metric_text(metric_value(row, metric), metric) : "-");
    const std::optional<StepTimeRange>& band = row.step_time_band;
    line.push_back(band ? metric_text(band->low_ms, "step_time_ms") + "-" + metric_text(band->high_ms, "step_time_ms")
                        : "-");
    if (statuses) line.push_back(row.reason);
    cells.push_back(line);
  }
  cells.insert(cells.begin(), header);
  return aligned_columns(cells);
}

std::string render_csv(const std::vector<SweepRow>& rows, const std::vector<std::string>& columns) {
  std::ostringstream out;
  for (const std::string& path : columns) out << csv_field(path) << ",";
  out << "status,step_time_ms,mfu,peak_memory_gb,step_time_band_low_ms,step_time_band_high_ms,reason\n";
  for (const SweepRow& row : rows) {
    for (const std::string& path : columns) out << csv_field(input_cell(row, path, "")) << ",";
    out << row.status << ",";
    if (row.status == "invalid")
      out << ",,,";
    else
      for (const char* metric : kMetrics) out << ordered_json(metric_value(row, metric)).dump() << ",";
    if (row.step_time_band)
      out << ordered_json(row.step_time_band->low_ms).dump() << "," << ordered_json(row.step_time_band->high_ms).dump()
          << ",";
    else
      out << ",,";
    out << csv_field(row.reason) << "\n";
  }
  return out.str();
}

ordered_json rows_json(const std::vector<SweepRow>& rows) {
  ordered_json points = ordered_json::array();
  for (const SweepRow& row : rows) points.push_back(to_json(row));
  return points;
}

void check_format(const std::string& format) {
  if (format != "table" && format != "csv" && format != "json")
    throw UsageError("--format " + format + ": expected table, csv or json");
}

}  // namespace

std::string metric_text(double value, const std::string& metric) { return fixed(value, metric == "mfu" ? 4 : 2); }

ordered_json to_json(const SweepRow& row) {
  ordered_json j = {{"inputs", row.inputs}, {"status", row.status}};
  for (const char* metric : kMetrics)
    j[metric] = row.status == "invalid" ? ordered_json() : ordered_json(metric_value(row, metric));
  j["step_time_band_ms"] = row.step_time_band ? ordered_json::array({row.step_time_band->low_ms, row.step_time_band->high_ms})
                                              : ordered_json();
  j["reason"] = row.reason;
  return j;
}

SweepRow sweep_row_from_json(const ordered_json& j, const std::string& where) {
  auto field = [&](const char* key) -> const ordered_json& {
    if (!j.is_object() || !j.contains(key)) throw DataError(where + ": missing '" + key + "'");
    return j.at(key);
  };
  SweepRow row;
  if (!field("inputs").is_object()) throw DataError(where + "/inputs: expected an object, got " + field("inputs").dump());
  row.inputs = field("inputs");
  if (!field("status").is_string() || !field("reason").is_string())
    throw DataError(where + ": status and reason must be strings");
  row.status = field("status").get<std::string>();
  row.reason = field("reason").get<std::string>();
  if (row.status != "ok" && row.status != "oom" && row.status != "invalid")
    throw DataError(where + "/status: expected ok, oom or invalid, got \"" + row.status + "\"");
  if (row.status == "invalid") return row;
  double* slots[] = {&row.step_time_ms, &row.mfu, &row.peak_memory_gb};
  for (size_t m = 0; m < 3; ++m) {
    if (!field(kMetrics[m]).is_number())
      throw DataError(where + "/" + kMetrics[m] + ": expected a number, got " + field(kMetrics[m]).dump());
    *slots[m] = field(kMetrics[m]).get<double>();
  }
  // Absent or null in the rows of sweeps from before sweeps carried the band.
  if (j.contains("step_time_band_ms") && !j.at("step_time_band_ms").is_null()) {
    const ordered_json& band = j.at("step_time_band_ms");
    if (!band.is_array() || band.size() != 2 || !band[0].is_number() || !band[1].is_number() ||
        !(band[0].get<double>() <= band[1].get<double>()))
      throw DataError(where + "/step_time_band_ms: expected [low, high] in ms, got " + band.dump());
    row.step_time_band = StepTimeRange{band[0].get<double>(), band[1].get<double>()};
  }
  return row;
}

bool metric_is_maximized(const std::string& metric) {
  if (metric == "mfu") return true;
  if (metric == "step_time_ms" || metric == "peak_memory_gb") return false;
  throw UsageError("--metric " + metric + ": expected mfu, step_time_ms or peak_memory_gb");
}

double metric_value(const SweepRow& row, const std::string& metric) {
  if (metric == "mfu") return row.mfu;
  if (metric == "step_time_ms") return row.step_time_ms;
  if (metric == "peak_memory_gb") return row.peak_memory_gb;
  throw UsageError("--metric " + metric + ": expected mfu, step_time_ms or peak_memory_gb");
}

std::vector<size_t> rank_rows(const std::vector<SweepRow>& rows, const std::string& metric) {
  const bool maximized = metric_is_maximized(metric);
  std::vector<size_t> ranked;
  for (size_t i = 0; i < rows.size(); ++i)
    if (rows[i].status == "ok") ranked.push_back(i);
  std::stable_sort(ranked.begin(), ranked.end(), [&](size_t a, size_t b) {
    double x = metric_value(rows[a], metric), y = metric_value(rows[b], metric);
    return maximized ? x > y : x < y;
  });
  return ranked;
}

std::string render_sweep(const std::vector<SweepRow>& rows, const std::string& metric, std::optional<int64_t> top,
                         const std::string& format, const SweepJobNames& job) {
  check_format(format);
  std::vector<size_t> ranked = rank_rows(rows, metric);
  std::vector<SweepRow> shown = rows;
  if (top) {
    if (*top < 1) throw UsageError("--top " + std::to_string(*top) + ": expected at least 1");
    shown.clear();
    for (size_t i = 0; i < ranked.size() && static_cast<int64_t>(i) < *top; ++i) shown.push_back(rows[ranked[i]]);
  }
  const std::vector<std::string> columns = input_columns(rows);
  if (format == "csv") return render_csv(shown, columns);
  if (format == "json") {
    // The index of the best point among those shown: the first under --top.
    ordered_json best = ranked.empty() ? ordered_json() : ordered_json(top ? 0 : ranked.front());
    ordered_json document = ordered_json::object();
    if (!job.model.empty()) document["model"] = job.model, document["hardware"] = job.hardware;
    document["metric"] = metric;
    document["points"] = rows_json(shown);
    document["best"] = best;
    return document.dump(2) + "\n";
  }
  return render_table(shown, columns, true) + best_line(rows, ranked, metric);
}

std::string render_search(const SearchResult& result, const std::string& format) {
  check_format(format);
  const std::vector<std::string> columns = input_columns(result.front);
  if (format == "csv") return render_csv(result.front, columns);
  ordered_json counts = {{"enumerated", result.enumerated},       {"invalid", result.invalid},
                         {"pruned_by_memory", result.pruned_by_memory}, {"pruned_by_bound", result.pruned_by_bound},
                         {"simulated", result.simulated},         {"front", result.front.size()}};
  if (format == "json") return ordered_json{{"front", rows_json(result.front)}, {"counts", counts}}.dump(2) + "\n";
  std::string text = "Pareto front of step time against peak memory (fastest first)\n" +
                     render_table(result.front, columns, false) + "layouts:";
  for (const auto& [name, count] : counts.items()) text += " " + name + " " + count.dump() + ",";
  text.back() = '\n';
  // An empty front, said as the point sweeps say it (best_line), with the reason the counts give.
  if (result.front.empty()) {
    std::string why = result.invalid == result.enumerated ? "no layout is valid for this model on these GPUs"
                                                          : "no valid layout fits in the GPUs' memory";
    if (!result.first_refusal.empty()) why += "; the first layout refused: " + result.first_refusal;
    text += "front: none (" + why + ")\n";
  }
  return text;
}

std::vector<SweepRow> merge_sweep_files(const std::vector<std::string>& paths, SweepJobNames* job) {
  std::vector<SweepRow> rows;
  SweepJobNames first;
  std::string first_path;
  for (const std::string& path : paths) {
    const ordered_json document = parse_json<ordered_json>(read_input(path), path);
    if (document.is_object() && document.contains("front"))  // a front's rows are not points of one product
      throw DataError(path + ": a --search result (its \"front\") does not merge; merge sweeps' JSON outputs");
    if (!document.is_object() || !document.contains("points") || !document.at("points").is_array())
      throw DataError(path + ": expected the JSON output of syssim sweep (an object with \"points\")");
    // Points of other jobs are not points of one product (a sweep's JSON before the names: any).
    if (document.contains("model")) {
      for (const char* key : {"model", "hardware"})
        if (!document.contains(key) || !document.at(key).is_string())
          throw DataError(path + ": /" + key + ": expected the name of the sweep's " + key);
      const SweepJobNames names{document.at("model"), document.at("hardware")};
      if (first_path.empty())
        first = names, first_path = path;
      else if (names.model != first.model || names.hardware != first.hardware)
        throw DataError(path + ": a sweep of " + names.model + " on " + names.hardware + ", where " + first_path +
                        " is of " + first.model + " on " + first.hardware + ": merge the sweeps of one job");
    }
    const ordered_json& points = document.at("points");
    for (size_t i = 0; i < points.size(); ++i)
      rows.push_back(sweep_row_from_json(points[i], path + ": /points/" + std::to_string(i)));
  }
  if (job) *job = first;
  return rows;
}

}  // namespace syssim
