// `syssim run` and `syssim memory`: every stage of one job in one process (docs/syssim.md).
#include <memory>

#include "common/error.hpp"
#include "common/io.hpp"
#include "common/text.hpp"
#include "default_job.hpp"
#include "driver/driver.hpp"
#include "estimator_flags.hpp"
#include "layout_flags.hpp"
#include "report_flags.hpp"
#include "subcommands.hpp"

namespace syssim::tool {

std::vector<Subcommand> add_run_and_memory(CLI::App& app) {
  struct Settings {
    RunRequest request;
    std::string model, hardware, output = "-", timeline, critical_path;
    bool fail_on_oom = false;
  };
  auto settings = std::make_shared<Settings>();
  CLI::App* run = app.add_subcommand("run", "Simulate one training step and print the report");
  CLI::App* memory = app.add_subcommand("memory", "Print the per-GPU memory only");
  for (CLI::App* command : {run, memory}) {
    command->add_option("model", settings->model,
                        "Model YAML or preset, or a Hugging Face id or config.json with --seq-length (default: llama3-8b)");
    command->add_option("--hardware", settings->hardware, "Hardware YAML or preset (default: h100-sxm-80gb)");
    command->add_option("--format", settings->request.format, "Report format")->check(CLI::IsMember({"text", "json"}));
    command->add_option("-o,--output", settings->output, "Output file, written atomically (default: standard output)");
    add_layout_flags(*command, settings->request.options);
    command->add_flag("--fail-on-oom", settings->fail_on_oom,
                      "Exit with status 3 when the job does not fit (after the report)");
    command->add_flag("--replay-allocator", settings->request.mem_options.replay_allocator,
                      "Also replay PyTorch's caching allocator for the memory it reserves (reserved_memory_gb)");
  }
  add_report_flags(*run, settings->request.report_options);
  add_estimator_flags(*run, settings->request.cost_options);
  run->add_flag("--every-microbatch", settings->request.every_microbatch,
                "Simulate every micro-batch instead of jumping over steady-state periods");
  run->add_option("--timeline", settings->timeline,
                  "Also write the simulated timeline to FILE: a Chrome trace (Perfetto, chrome://tracing), or the "
                  "pipeline's SVG where FILE ends in .svg");
  run->add_option("--critical-path", settings->critical_path,
                  "Also write the step's critical path (what the step's end waited for, by kind and module) to FILE");
  auto action = [settings](CLI::App* command, bool memory_only) {
    return [settings, command, memory_only] {
      RunRequest& request = settings->request;
      if (!settings->model.empty()) request.model_path = settings->model;
      if (!settings->hardware.empty()) request.hardware_path = settings->hardware;
      if (settings->model.empty() && settings->hardware.empty())
        apply_default_job(*command, request.options);
      else
        derive_unset_sizes(*command, request.options);
      request.memory_only = memory_only;
      request.timeline = !memory_only && !settings->timeline.empty();
      if (ends_with(settings->timeline, ".svg")) request.timeline_format = "svg";
      request.critical_path = !memory_only && !settings->critical_path.empty();
      check_outputs({{"-o", settings->output}, {"--timeline", settings->timeline},
                            {"--critical-path", settings->critical_path}});
      RunOutput result = syssim::run(request);
      std::vector<std::pair<std::string, std::string>> outputs = {{settings->output, result.report}};
      if (request.timeline) outputs.emplace_back(settings->timeline, result.timeline);
      if (request.critical_path) outputs.emplace_back(settings->critical_path, result.critical_path);
      write_outputs(outputs);
      if (settings->fail_on_oom && result.out_of_memory) throw OutOfMemory(*result.out_of_memory);
    };
  };
  return {{run, action(run, false)}, {memory, action(memory, true)}};
}

}  // namespace syssim::tool
