// `syssim sweep`: many layouts of one model in one process, the layout search, emitted jobs
// and their merge (docs/syssim-sweep.md).
#include <memory>

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
  return {sweep, [settings, argc, argv] {
            SweepRequest& request = settings->request;
            request.use_cache = !settings->flags.no_cache;
            request.plot = !settings->flags.plot.empty();
            request.command_line.assign(argv, argv + argc);
            SweepOutput result = sweep_command(request, terminal_progress());
            std::vector<std::pair<std::string, std::string>> outputs = {{settings->flags.output, result.text}};
            if (request.plot) outputs.emplace_back(settings->flags.plot, result.plot_svg);
            write_outputs(outputs);
          }};
}

}  // namespace syssim::tool
