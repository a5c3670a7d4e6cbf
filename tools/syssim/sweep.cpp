// `syssim sweep`: many layouts of one model in one process, the layout search, emitted jobs
// and their merge (docs/syssim-sweep.md).
#include <memory>

#include "common/error.hpp"
#include "common/io.hpp"
#include "subcommands.hpp"
#include "sweep_flags.hpp"
#include "tool.hpp"

namespace syssim::tool {

Subcommand add_sweep(CLI::App& app, int argc, char** argv) {
  struct Settings {
    SweepRequest request;
    SweepFlags flags;
  };
  auto settings = std::make_shared<Settings>();
  CLI::App* sweep = app.add_subcommand("sweep", "Simulate many layouts of one model (docs/syssim-sweep.md)");
  add_sweep_flags(*sweep, settings->request, settings->flags);
  return {sweep, [settings, sweep, argc, argv] {
            SweepRequest& request = settings->request;
            // The search sets these for every layout: a base job's value would be dropped unsaid.
            for (const char* axis : {"--tp", "--sp", "--cp", "--pp", "--vpp", "--ep", "--etp", "--micro-batch",
                                     "--recompute", "--distributed-optimizer"})
              if (request.search && sweep->count(axis) > 0)
                throw UsageError(std::string(axis) + ": --search chooses it for every layout; leave it out");
            if (request.search && sweep->count("--metric") > 0)
              throw UsageError("--metric applies to sweeps, not to --search (whose Pareto front is step time against memory)");
            // Every point runs at the base job's global batch, by default a run's: one
            // micro-batch per data-parallel rank of the base job (dp from --gpus). Each point's
            // dp is its own, so only the global batch is taken from the base job.
            ShardOptions base = request.options;
            derive_unset_sizes(*sweep, base);
            request.options.training.global_batch = base.training.global_batch;
            request.use_cache = !settings->flags.no_cache;
            request.plot = !settings->flags.plot.empty();
            check_outputs({{"-o", settings->flags.output}, {"--plot", settings->flags.plot}});
            request.command_line.assign(argv, argv + argc);
            SweepOutput result = sweep_command(request, terminal_progress());
            std::vector<std::pair<std::string, std::string>> outputs = {{settings->flags.output, result.text}};
            if (request.plot) outputs.emplace_back(settings->flags.plot, result.plot_svg);
            write_outputs(outputs);
          }};
}

}  // namespace syssim::tool
