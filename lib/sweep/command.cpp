// `syssim sweep`: one of the sweep, the search, emitting jobs and merging, as the flags ask.
#include "common/error.hpp"
#include "sweep/detail.hpp"
#include "sweep/plot.hpp"
#include "sweep/sweep.hpp"

namespace syssim {
namespace {

std::vector<SweepAxis> axes_of(const std::vector<std::string>& flags) {
  std::vector<SweepAxis> axes;
  for (const std::string& flag : flags) {
    SweepAxis axis = parse_sweep_axis(flag);
    for (const SweepAxis& earlier : axes)
      if (earlier.path == axis.path) throw UsageError("--over " + axis.path + " is given twice");
    axes.push_back(axis);
  }
  return axes;
}

void require(bool condition, const std::string& message) {
  if (!condition) throw UsageError(message);
}

}  // namespace

SweepOutput sweep_command(const SweepRequest& r, const SweepProgress& progress) {
  const bool merge = !r.merge_files.empty(), emit = !r.emit_jobs_dir.empty();
  require(merge + emit + r.search <= 1, "--merge, --emit-jobs and --search exclude each other");
  metric_is_maximized(r.metric);  // refuses an unknown metric before any work
  SweepOutput output;
  if (merge) {
    require(r.model_path.empty() && r.hardware_path.empty() && r.over.empty(),
            "--merge joins result files: give no model, --hardware or --over");
    SweepJobNames job;
    std::vector<SweepRow> rows = merge_sweep_files(r.merge_files, &job);
    output.text = render_sweep(rows, r.metric, r.top, r.format, job);
    if (r.plot) output.plot_svg = plot_sweep(rows, r.metric);
    return output;
  }
  require(!r.model_path.empty(), "syssim sweep needs a MODEL");
  // A sweep plans for the cluster it names: unlike run and memory it takes no default hardware.
  require(!r.hardware_path.empty(), "syssim sweep needs --hardware (a preset or a hardware YAML): it compares layouts "
                                    "on the GPUs it names, with no default");
  if (emit) {
    require(!r.plot, "--plot draws results: plot the --merge of the jobs' files");
    output.text = emit_sweep_jobs(r.command_line, axes_of(r.over), r.emit_jobs_dir);
    return output;
  }
  const ModelConfig model = load_model(r.model_path, r.options.training.seq_length);
  const HardwareConfig hardware = load_hardware_yaml(r.hardware_path);
  const SweepSettings settings{r.use_cache, progress, r.threads};
  if (r.search) {
    require(r.over.empty(), "--search enumerates the layouts itself: give no --over");
    require(!r.top, "--top applies to sweeps, not to --search (which prints the whole Pareto front)");
    SearchResult result = search_layouts(model, hardware, r.options, true, settings);
    output.text = render_search(result, r.format);
    if (r.plot) output.plot_svg = plot_search(result);
    return output;
  }
  const std::vector<SweepAxis> axes = axes_of(r.over);
  require(!axes.empty(), "syssim sweep needs at least one --over PATH=V1,V2,... (or --search, or --merge)");
  std::vector<SweepRow> rows = run_sweep(model, hardware, r.options, axes, settings);
  output.text = render_sweep(rows, r.metric, r.top, r.format, {model.name, hardware.name});
  if (r.plot) output.plot_svg = plot_sweep(rows, r.metric);
  return output;
}

}  // namespace syssim
