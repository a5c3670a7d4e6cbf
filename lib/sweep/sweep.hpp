// `syssim sweep` (docs/syssim-sweep.md): many jobs of one model on one hardware, simulated in
// one process with one trace; the cartesian product of dotted config paths (--over), the search
// over every layout of N GPUs (--search), jobs for other machines (--emit-jobs) and their merge.
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cost/cost.hpp"
#include "report/band.hpp"
#include "shard/shard.hpp"

namespace syssim {

// One --over flag: a dotted config path (parallelism.tp, training.micro_batch, ...) and the
// YAML scalars it takes, in the order given.
struct SweepAxis {
  std::string path;
  std::vector<std::string> values;
};

// Parses "PATH=V1,V2,..."; UsageError naming the flag when it has no '=' or an empty value.
SweepAxis parse_sweep_axis(const std::string& flag);
// The axis of `path` over `values` (YAML scalars, as the flag's): UsageError for a path that is
// not a config key's, no value, or a value that is a list or a mapping.
SweepAxis make_sweep_axis(const std::string& path, const std::vector<std::string>& values);

// Every combination of one value per axis, the first axis varying slowest.
std::vector<std::vector<std::string>> cartesian_product(const std::vector<SweepAxis>& axes);

// Sets the config key `path` of the job to the YAML scalar `value` through the config's own
// reader of the parallelism and training mappings (parallelism_from_json, training_from_json),
// so names and types are exactly theirs. UsageError for a path that names no key; DataError
// for a value of the wrong type.
void apply_config_path(ShardOptions& options, const std::string& path, const std::string& value);
// Several, as one sweep point's (path, value) settings.
void apply_config_paths(ShardOptions& options, const std::vector<std::pair<std::string, std::string>>& settings);
// One setting of a sweep point: a config path, the YAML scalar as given, and its value.
struct ConfigSetting {
  std::string path;
  std::string text;
  nlohmann::json value;
};
// The same for several settings, in order; the error names the first value that does not fit.
void apply_config_settings(ShardOptions& options, const std::vector<ConfigSetting>& settings);

// One point of a sweep. Status: ok; oom (simulated, but its peak exceeds the GPU's memory);
// invalid (the job throws: `reason` is the one-line message; the metrics are not set).
struct SweepRow {
  nlohmann::ordered_json inputs = nlohmann::ordered_json::object();  // path -> value, in --over order
  std::string status = "ok";
  std::string reason;
  double step_time_ms = 0;
  double mfu = 0;
  double peak_memory_gb = 0;
  // The step-time band of the job's class (report/band.hpp), as in the report; none for an
  // invalid row and for rows of sweep files written before sweeps carried it.
  std::optional<StepTimeRange> step_time_band;
};

nlohmann::ordered_json to_json(const SweepRow& row);
SweepRow sweep_row_from_json(const nlohmann::ordered_json& j, const std::string& where);

// Metrics a sweep ranks by: mfu is maximized, step_time_ms and peak_memory_gb minimized.
// UsageError for any other name.
bool metric_is_maximized(const std::string& metric);
double metric_value(const SweepRow& row, const std::string& metric);

// The ok rows, best first by `metric` (ties: the earlier row first); oom and invalid rows never rank.
std::vector<size_t> rank_rows(const std::vector<SweepRow>& rows, const std::string& metric);

// Progress of a long sweep: points done of total, called after each point.
using SweepProgress = std::function<void(int64_t done, int64_t total)>;

struct SweepSettings {
  bool use_cache = true;  // each point's row in the on-disk cache (common/cache.hpp, kind "point")
  SweepProgress progress;  // called by one thread at a time, done counting up
  int64_t threads = 0;     // points simulated at once; 0: one per core
};

// Simulates every point of the cartesian product of `axes` over the base job: one trace, one
// cost estimator, points spread over settings.threads threads (the rows do not depend on it). With options.gpus set and parallelism.dp not swept, each point's dp is
// gpus / (tp*cp*pp) (an input of its row); a point where that does not divide is invalid.
std::vector<SweepRow> run_sweep(const ModelConfig& model, const HardwareConfig& hardware, const ShardOptions& base,
                                const std::vector<SweepAxis>& axes, const SweepSettings& settings = {});

// The result of `syssim sweep --search`: the Pareto front of step time against peak memory
// (fastest first) and how many layouts each stage of the search dropped.
struct SearchResult {
  std::vector<SweepRow> front;
  int64_t enumerated = 0;
  int64_t invalid = 0;           // refused by the shard stage
  int64_t pruned_by_memory = 0;  // out of memory, by the model-state bound or the memory estimate
  int64_t pruned_by_bound = 0;   // dominated by a simulated layout, by lower bounds on memory and step time
  int64_t simulated = 0;
  std::string first_refusal;     // why the shard stage refused the first refused layout
};

// Every layout of options.gpus GPUs (tp, pp, vpp, cp, dp, micro_batch, recompute, distributed
// optimizer; docs/syssim-sweep.md lists the rules) with the base job's other settings. With
// `prune` off every layout that fits is simulated (the reference the pruned search must equal).
SearchResult search_layouts(const ModelConfig& model, const HardwareConfig& hardware, const ShardOptions& base,
                            bool prune = true, const SweepSettings& settings = {});

// `syssim sweep` as the tool gives it: exactly one of an in-process sweep (model and hardware
// with axes), a search, emitting jobs or merging their files.
struct SweepRequest {
  std::string model_path;
  std::string hardware_path;
  ShardOptions options;
  std::vector<std::string> over;  // "PATH=V1,V2,..." flags
  std::string metric = "mfu";
  std::optional<int64_t> top;
  std::string format = "table";  // table | csv | json
  bool use_cache = true;
  int64_t threads = 0;  // points at once; 0: one per core
  bool search = false;
  std::string emit_jobs_dir;              // --emit-jobs DIR
  std::vector<std::string> command_line;  // the program and its arguments, which emitted jobs repeat
  std::vector<std::string> merge_files;   // --merge FILE...
  bool plot = false;                      // draw the SVG plot
};

struct SweepOutput {
  std::string text;  // the table, CSV, JSON or the emitted commands
  std::string plot_svg;
};

SweepOutput sweep_command(const SweepRequest& request, const SweepProgress& progress = {});

// The model and hardware a sweep's points ran on, by name; empty: not known.
struct SweepJobNames {
  std::string model, hardware;
};

// Renders rows (all of them, or the `top` best valid ones, best first) as table, csv or json
// (which names `job`'s model and hardware when known).
std::string render_sweep(const std::vector<SweepRow>& rows, const std::string& metric, std::optional<int64_t> top,
                         const std::string& format, const SweepJobNames& job = {});

// Joins the JSON outputs of sweeps (`--format json`) into one list of rows, in file order, and
// sets `job` to the model and hardware they name; DataError for files naming different ones.
std::vector<SweepRow> merge_sweep_files(const std::vector<std::string>& paths, SweepJobNames* job = nullptr);

// The shell commands of --emit-jobs: one single-point `syssim sweep` per point of the axes,
// writing DIR/point-NNNN.json. `command_line` is the emitting command line; its --over,
// --emit-jobs, --format, -o, --top, --metric and --plot flags are replaced.
std::string emit_sweep_jobs(const std::vector<std::string>& command_line, const std::vector<SweepAxis>& axes,
                            const std::string& dir);

}  // namespace syssim
